//! redis-rs's multiplexed connection on numa_rt against a real
//! redis-server (feature `redis`). The server is started by the test;
//! where redis-server is not installed the server tests print
//! "skipped: …" and pass.
#![cfg(feature = "redis")]

mod support;

use numa_rt::time::{Duration, Instant};
use numa_rt_util::redis::{connect, connect_with_config, Config};
use redis::AsyncCommands;
use support::Redis;

fn assert_no_tokio() {
    assert!(tokio::runtime::Handle::try_current().is_err());
}

#[numa_rt::test(max_procs = 2)]
async fn commands_round_trip_against_a_real_server() {
    assert_no_tokio();
    let Some(server) = Redis::start() else { return };
    let mut con = connect(server.url()).await.unwrap();
    con.set::<_, _, ()>("greeting", "hello").await.unwrap();
    let got: String = con.get("greeting").await.unwrap();
    assert_eq!(got, "hello");
    let missing: Option<String> = con.get("missing").await.unwrap();
    assert_eq!(missing, None);

    let (a, b): (i64, i64) = redis::pipe()
        .incr("counter", 2)
        .incr("counter", 3)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!((a, b), (2, 5));

    // A server error is an error, and the connection goes on.
    let err = con.incr::<_, _, i64>("greeting", 1).await.unwrap_err();
    assert_eq!(
        err.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
    );
    let pong: String = redis::cmd("PING").query_async(&mut con).await.unwrap();
    assert_eq!(pong, "PONG");
}

#[numa_rt::test(max_procs = 2)]
async fn many_concurrent_commands_share_one_multiplexed_connection() {
    assert_no_tokio();
    let Some(server) = Redis::start() else { return };
    let con = connect(server.url()).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..1000u32 {
        let mut con = con.clone();
        tasks.push(numa_rt::spawn(async move {
            assert_no_tokio();
            con.set::<_, _, ()>(format!("key:{i}"), i).await.unwrap();
            let _: i64 = con.incr("hits", 1).await.unwrap();
            con.get::<_, u32>(format!("key:{i}")).await.unwrap()
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap(), i as u32);
    }
    let mut con = con;
    let hits: i64 = con.get("hits").await.unwrap();
    assert_eq!(hits, 1000);
}

#[numa_rt::test]
async fn connects_over_the_unix_socket() {
    assert_no_tokio();
    let Some(server) = Redis::start() else { return };
    let url = format!("redis+unix://{}", server.socket().display());
    let mut con = connect(url.as_str()).await.unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut con).await.unwrap();
    assert_eq!(pong, "PONG");
}

/// BLPOP holds its reply for 5 s on the server; the response timeout, on
/// numa_rt's timer, fails the command long before, with redis-rs's own
/// error (an I/O error of kind TimedOut).
#[numa_rt::test]
async fn the_response_timeout_runs_on_numa_rts_timer() {
    assert_no_tokio();
    let Some(server) = Redis::start() else { return };
    let config = Config::new().set_response_timeout(Some(Duration::from_millis(100)));
    let mut con = connect_with_config(server.url(), config).await.unwrap();
    assert_eq!(con.response_timeout(), Some(Duration::from_millis(100)));
    let start = Instant::now();
    let err = redis::cmd("BLPOP")
        .arg("empty-list")
        .arg(5)
        .query_async::<Option<(String, String)>>(&mut con)
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );

    // Unbounded: the server's own 0.2 s BLPOP timeout answers nil.
    let mut other = connect(server.url()).await.unwrap();
    other.set_response_timeout(None);
    let popped: Option<(String, String)> = redis::cmd("BLPOP")
        .arg("empty-list")
        .arg(0.2)
        .query_async(&mut other)
        .await
        .unwrap();
    assert_eq!(popped, None);
}

#[numa_rt::test]
async fn a_refused_connection_is_an_error_naming_the_address() {
    assert_no_tokio();
    let port = support::free_port();
    let err = connect(format!("redis://127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    assert!(err.is_io_error(), "{err:?}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

/// A server that accepts and never answers the handshake: the connection
/// timeout, on numa_rt's (paused) clock, ends the attempt with an error.
#[numa_rt::test(start_paused = true)]
async fn the_connection_timeout_ends_a_silent_server() {
    assert_no_tokio();
    let listener = numa_rt::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = numa_rt::spawn(async move {
        let (held, _) = listener.accept().await.unwrap();
        std::future::pending::<()>().await;
        drop(held);
    });
    let start = Instant::now();
    let config = Config::new().set_connection_timeout(Some(Duration::from_secs(2)));
    let err = connect_with_config(format!("redis://127.0.0.1:{port}/"), config)
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    silent.abort();
}

#[numa_rt::test]
async fn tls_urls_are_refused_clearly() {
    assert_no_tokio();
    // redis-rs refuses the URL itself when built without TLS (as here);
    // with its TLS features on, `connect` refuses the address.
    let err = connect("rediss://127.0.0.1:1/").await.unwrap_err();
    assert_eq!(err.kind(), redis::ErrorKind::InvalidClientConfig, "{err}");
}
