// mini_kv's tests, written against tokio. Shared like ../src/service.rs:
// port/on-tokio includes this file as it is, port/on-numa-rt after the rename
// `tokio` -> `numa_rt`. No test sleeps to synchronise or asserts on wall
// time; the ones about time run on a paused clock.

use std::io::{Cursor, Read, Write};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use port_on_tokio::{
    BufferedClient, Client, Command, Config, Connection, DbDropGuard, Frame, FrameError, Server,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Barrier};
use tokio::task::JoinSet;
use tokio::time::{self, Duration, Instant};

/// A running server: its address, its store, its reports, and the switch
/// that stops it.
struct Running {
    addr: std::net::SocketAddr,
    db: port_on_tokio::Db,
    reports: tokio::sync::watch::Receiver<port_on_tokio::Report>,
    stop: oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<port_on_tokio::Result<()>>,
}

impl Running {
    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.serving.await.unwrap().unwrap();
    }
}

async fn start(config: Config) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server::new(listener, config);
    let (stop, stopped) = oneshot::channel::<()>();
    Running {
        addr: server.local_addr().unwrap(),
        db: server.db(),
        reports: server.reports(),
        stop,
        serving: tokio::spawn(server.run(async {
            let _ = stopped.await;
        })),
    }
}

#[test]
fn frames_parse_in_pieces_and_reject_garbage() {
    let whole = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n:-7\r\n";
    for cut in 0..whole.len() {
        let mut src = Cursor::new(&whole[..cut]);
        assert_eq!(
            Frame::parse(&mut src),
            Err(FrameError::Incomplete),
            "cut {cut}"
        );
    }
    let mut src = Cursor::new(&whole[..]);
    assert_eq!(
        Frame::parse(&mut src).unwrap(),
        Frame::Array(vec![
            Frame::Bulk("SET".into()),
            Frame::Bulk("k".into()),
            Frame::Integer(-7),
        ])
    );
    assert!(matches!(
        Frame::parse(&mut Cursor::new(&b"?\r\n"[..])),
        Err(FrameError::Invalid(_))
    ));
    assert!(matches!(
        Frame::parse(&mut Cursor::new(&b"$x\r\n"[..])),
        Err(FrameError::Invalid(_))
    ));
}

#[test]
fn commands_round_trip_through_frames() {
    let commands = [
        Command::Ping(None),
        Command::Ping(Some("hi".into())),
        Command::Get("k".into()),
        Command::Set {
            key: "k".into(),
            value: Bytes::from_static(b"\x00binary\r\n"),
            expire: Some(Duration::from_millis(1500)),
        },
        Command::Del(vec!["a".into(), "b".into()]),
        Command::Pttl("k".into()),
    ];
    for command in commands {
        assert_eq!(
            Command::from_frame(command.clone().into_frame()).unwrap(),
            command
        );
    }
    let unknown = Frame::Array(vec![Frame::Bulk("FLY".into())]);
    assert!(Command::from_frame(unknown)
        .unwrap_err()
        .to_string()
        .contains("unknown command"));
}

/// The connection's framing over an in-memory pipe: a frame written in
/// three pieces with `write_all` is read back whole.
#[tokio::test]
async fn connection_reads_frames_written_in_pieces() {
    let (client, mut server_side) = tokio::io::duplex(64);
    let mut conn = Connection::new(client);
    let writer = tokio::spawn(async move {
        for piece in [&b"*2\r\n$4\r\nPI"[..], b"NG\r\n$2", b"\r\nhi\r\n+OK\r\n"] {
            server_side.write_all(piece).await.unwrap();
            tokio::task::yield_now().await;
        }
        server_side
    });
    let first = conn.read_frame().await.unwrap().unwrap();
    assert_eq!(
        Command::from_frame(first).unwrap(),
        Command::Ping(Some("hi".into()))
    );
    assert_eq!(
        conn.read_frame().await.unwrap(),
        Some(Frame::Simple("OK".into()))
    );
    drop(writer.await.unwrap());
    assert_eq!(conn.read_frame().await.unwrap(), None);
}

#[tokio::test]
async fn ping_set_get_del_over_tcp() {
    let server = start(Config::default()).await;
    let mut client = Client::connect(server.addr).await.unwrap();
    assert_eq!(client.ping(None).await.unwrap(), "PONG");
    assert_eq!(client.ping(Some("echo".into())).await.unwrap(), "echo");
    assert_eq!(client.get("k").await.unwrap(), None);
    client.set("k", "v1".into()).await.unwrap();
    client.set("k", "v2".into()).await.unwrap();
    assert_eq!(client.get("k").await.unwrap().as_deref(), Some(&b"v2"[..]));
    assert_eq!(client.pttl("k").await.unwrap(), -1);
    assert_eq!(client.del(&["k", "missing"]).await.unwrap(), 1);
    assert_eq!(client.pttl("k").await.unwrap(), -2);
    let err = client.request(Command::Del(vec![])).await.unwrap_err();
    assert!(
        err.to_string().contains("wrong number of arguments"),
        "{err}"
    );
    client.close().await.unwrap();
    server.stop().await;
}

/// The trap this port once fell into: the store stamps expiries with
/// `tokio::time::Instant::now()`, which must read the paused clock.
///
/// The clock is paused only around the jump: paused across the requests,
/// it would jump to the server's idle timeout whenever every task sat
/// waiting for a loopback reply not yet delivered (1 run in 100 beside two
/// busy loops); real I/O must not race paused time.
#[tokio::test]
async fn keys_expire_on_the_paused_clock() {
    let server = start(Config::default()).await;
    let mut client = Client::connect(server.addr).await.unwrap();
    client
        .set_expires("session", "abc".into(), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        client.get("session").await.unwrap().as_deref(),
        Some(&b"abc"[..])
    );
    let pttl = client.pttl("session").await.unwrap();
    assert!((1..=10_000).contains(&pttl), "{pttl}");

    time::pause();
    time::advance(Duration::from_secs(11)).await;
    time::resume();
    assert_eq!(client.get("session").await.unwrap(), None);
    assert_eq!(client.pttl("session").await.unwrap(), -2);
    server.stop().await;
}

/// With the store alone, the paused clock makes the remaining time exact.
#[tokio::test(start_paused = true)]
async fn pttl_counts_down_with_advance() {
    let guard = DbDropGuard::new();
    let db = guard.db();
    db.set("k".into(), "v".into(), Some(Duration::from_secs(10)));
    assert_eq!(db.pttl("k"), 10_000);
    time::advance(Duration::from_millis(4_250)).await;
    assert_eq!(db.pttl("k"), 5_750);
    time::advance(Duration::from_millis(5_750)).await;
    assert_eq!(db.get("k"), None);
    assert_eq!(db.pttl("k"), -2);
}

/// The background task removes expired keys by itself: nothing but the
/// paused clock's auto-advance moves time here.
#[tokio::test(start_paused = true)]
async fn the_purge_task_removes_expired_keys() {
    let guard = DbDropGuard::new();
    let db = guard.db();
    let mut purged = db.purged();
    let start = Instant::now();
    db.set("late".into(), "1".into(), Some(Duration::from_secs(60)));
    db.set("never".into(), "2".into(), None);
    // Sooner than the purge task's current deadline: Notify wakes it.
    db.set("soon".into(), "3".into(), Some(Duration::from_secs(5)));
    assert_eq!(db.len(), 3);

    purged.wait_for(|&n| n >= 1).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(5));
    assert_eq!(db.get("soon"), None);
    assert_eq!(db.len(), 2);

    purged.wait_for(|&n| n >= 2).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(60));
    assert_eq!(db.len(), 1);
    assert_eq!(db.get("never").as_deref(), Some(&b"2"[..]));
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_closed() {
    let config = Config {
        idle_timeout: Duration::from_secs(30),
        ..Config::default()
    };
    let server = start(config).await;
    let socket = TcpStream::connect(server.addr).await.unwrap();
    let mut conn = Connection::new(socket);
    let start = Instant::now();
    let reply = conn.read_frame().await.unwrap();
    assert_eq!(reply, Some(Frame::Error("ERR idle timeout".into())));
    assert!(start.elapsed() >= Duration::from_secs(30));
    assert_eq!(conn.read_frame().await.unwrap(), None);
    server.stop().await;
}

/// `max_connections = 1`: a second client waits in the backlog until the
/// first leaves. On the real clock: the check that the second is still
/// waiting holds however long it waits (the permit is held), and a paused
/// clock would race the requests against the idle timeout.
#[tokio::test]
async fn the_semaphore_limits_connections() {
    let config = Config {
        max_connections: 1,
        ..Config::default()
    };
    let server = start(config).await;
    let mut first = Client::connect(server.addr).await.unwrap();
    assert_eq!(first.ping(None).await.unwrap(), "PONG");

    let mut second = Client::connect(server.addr).await.unwrap();
    let mut waiting = tokio::spawn(async move {
        let pong = second.ping(None).await.unwrap();
        (second, pong)
    });
    let still_waiting = time::timeout(Duration::from_millis(200), &mut waiting).await;
    assert!(still_waiting.is_err(), "the second client was served early");

    first.close().await.unwrap();
    let (second, pong) = waiting.await.unwrap();
    assert_eq!(pong, "PONG");
    second.close().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn shutdown_ends_open_connections_and_run() {
    let server = start(Config::default()).await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        let mut client = Client::connect(server.addr).await.unwrap();
        client.ping(None).await.unwrap();
        clients.push(client);
    }
    server.stop().await;
    for mut client in clients {
        let err = client.ping(None).await.unwrap_err();
        assert!(!err.to_string().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_at_once_on_two_workers() {
    let server = start(Config::default()).await;
    let barrier = Arc::new(Barrier::new(16));
    let mut set = JoinSet::new();
    for i in 0..16 {
        let (addr, barrier) = (server.addr, barrier.clone());
        set.spawn(async move {
            let mut client = Client::connect(addr).await.unwrap();
            barrier.wait().await; // every client connected before any writes
            for j in 0..20 {
                let key = format!("k{i}-{j}");
                client
                    .set(&key, Bytes::from(format!("{i}*{j}")))
                    .await
                    .unwrap();
            }
            let mut sum = 0;
            for j in 0..20 {
                let value = client.get(&format!("k{i}-{j}")).await.unwrap().unwrap();
                sum += (value == format!("{i}*{j}").as_bytes()) as u32;
            }
            sum
        });
    }
    let mut total = 0;
    while let Some(res) = set.join_next().await {
        total += res.unwrap();
    }
    assert_eq!(total, 16 * 20);
    assert_eq!(server.db.len(), 16 * 20);
    server.stop().await;
}

/// Many tasks share one connection through an mpsc channel, replies come
/// back on oneshots; `join!` and `try_join!` drive several at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffered_client_shared_by_tasks() {
    let server = start(Config::default()).await;
    let client = BufferedClient::buffer(Client::connect(server.addr).await.unwrap());
    let (a, b) = (client.clone(), client.clone());
    let (ra, rb) = tokio::join!(a.set("a", "1".into()), b.set("b", "2".into()));
    ra.unwrap();
    rb.unwrap();
    let (va, vb) = tokio::try_join!(client.get("a"), client.get("b")).unwrap();
    assert_eq!(
        (va.as_deref(), vb.as_deref()),
        (Some(&b"1"[..]), Some(&b"2"[..]))
    );

    let mut set = JoinSet::new();
    for i in 0..10 {
        let client = client.clone();
        set.spawn(async move { client.set(&format!("n{i}"), "x".into()).await });
    }
    for res in set.join_all().await {
        res.unwrap();
    }
    assert_eq!(server.db.len(), 12);
    drop((client, a, b));
    server.stop().await;
}

/// A plain blocking client on the blocking pool speaks raw RESP to the
/// server: the protocol is what the async client thinks it is.
#[tokio::test]
async fn a_blocking_std_client_in_spawn_blocking() {
    let server = start(Config::default()).await;
    server.db.set("k".into(), "hello".into(), None);
    let addr = server.addr;
    let reply = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n")
            .unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        reply
    })
    .await
    .unwrap();
    assert_eq!(reply, "$5\r\nhello\r\n+PONG\r\n");
    server.stop().await;
}

/// Garbage gets an error reply, then the server closes the connection.
#[tokio::test]
async fn a_protocol_error_is_answered_then_closed() {
    let server = start(Config::default()).await;
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    socket.write_all(b"hello\r\n").await.unwrap();
    let mut reply = BytesMut::with_capacity(64);
    while socket.read_buf(&mut reply).await.unwrap() != 0 {}
    let reply = String::from_utf8(reply.to_vec()).unwrap();
    assert!(reply.starts_with("-ERR protocol error"), "{reply}");
    assert!(reply.ends_with("\r\n"), "{reply}");
    server.stop().await;
}

/// The report task ticks on an `interval`; in paused time each tick comes
/// as soon as everything else is idle.
#[tokio::test(start_paused = true)]
async fn reports_come_every_period() {
    let config = Config {
        report_every: Duration::from_secs(10),
        ..Config::default()
    };
    let mut server = start(config).await;
    let start = Instant::now();
    let mut client = Client::connect(server.addr).await.unwrap();
    client.set("a", "1".into()).await.unwrap();
    client.get("a").await.unwrap();
    let report = *server
        .reports
        .wait_for(|r| r.commands == 2 && r.ticks >= 3)
        .await
        .unwrap();
    assert_eq!((report.accepted, report.open), (1, 1));
    assert!(start.elapsed() >= Duration::from_secs(30));
    drop(client);
    let report = *server.reports.wait_for(|r| r.open == 0).await.unwrap();
    assert_eq!(report.accepted, 1);
    server.stop().await;
}

/// `select!` between a reply and a deadline: the reply wins while the
/// server is up, the deadline once the server stops answering.
///
/// The first race runs on the real clock with a deadline no loopback
/// reply misses: on a paused clock the deadline would win whenever every
/// task sat idle waiting for the reply (the clock jumps then), a race real
/// I/O loses now and then. Only the second, whose reply never comes, runs
/// on the paused clock.
#[tokio::test]
async fn select_a_reply_against_a_deadline() {
    let server = start(Config::default()).await;
    let mut client = Client::connect(server.addr).await.unwrap();
    let deadline = time::sleep(Duration::from_secs(60));
    tokio::pin!(deadline);
    tokio::select! {
        pong = client.ping(None) => assert_eq!(pong.unwrap(), "PONG"),
        _ = &mut deadline => panic!("no reply before the deadline"),
    }

    // A listener that accepts and never answers.
    let mute = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut silent = Client::connect(mute.local_addr().unwrap()).await.unwrap();
    let (_held, _) = mute.accept().await.unwrap();
    time::pause();
    deadline
        .as_mut()
        .reset(Instant::now() + Duration::from_secs(1));
    let answered = tokio::select! {
        _ = silent.ping(None) => true,
        _ = &mut deadline => false,
    };
    assert!(!answered);
    time::resume();
    server.stop().await;
}

/// A plain `#[test]` that builds its own runtime, as a `main` would.
#[test]
fn a_hand_built_runtime_serves_and_stops() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let got = rt.block_on(async {
        let server = start(Config::default()).await;
        let handle = tokio::runtime::Handle::current();
        let addr = server.addr;
        let got = handle
            .spawn(async move {
                let mut client = Client::connect(addr).await.unwrap();
                client.set("k", "v".into()).await.unwrap();
                client.get("k").await.unwrap()
            })
            .await
            .unwrap();
        server.stop().await;
        got
    });
    assert_eq!(got.as_deref(), Some(&b"v"[..]));
}

/// `run` binds before it waits for ctrl-c: an address in use is an error
/// at once (ctrl-c itself is not triggered in tests).
#[tokio::test]
async fn run_reports_a_bind_error() {
    let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    assert!(port_on_tokio::run(&addr).await.is_err());
}
