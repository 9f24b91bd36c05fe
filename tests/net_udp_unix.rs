//! UDP and Unix-domain sockets through the real runtime (`numa_rt::net`).
//! Every test body runs under a generous `timeout` so a lost wake-up fails
//! instead of hanging; nothing sleeps to synchronise.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{UdpSocket, UnixDatagram, UnixListener, UnixStream};
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

/// A fresh socket path, removed when dropped.
struct TempPath(PathBuf);

impl TempPath {
    fn new(name: &str) -> TempPath {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("numa_rt_it_{}_{name}_{n}.sock", std::process::id()));
        let _ = std::fs::remove_file(&p);
        TempPath(p)
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// 100 request/reply round trips between two UDP sockets (send_to /
/// recv_from), then 100 more in connected mode (send / recv), with the
/// echoing side in its own task.
#[numa_rt::test(max_procs = 2)]
async fn udp_round_trips() {
    const ROUNDS: usize = 100;
    timeout(GUARD, async {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let server_addr = server.local_addr().unwrap();
        let echo = numa_rt::spawn(async move {
            let mut buf = [0u8; 2048];
            for _ in 0..2 * ROUNDS {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                assert_eq!(server.send_to(&buf[..n], from).await.unwrap(), n);
            }
        });
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut buf = [0u8; 2048];
        for i in 0..ROUNDS {
            let msg = format!("datagram {i}").repeat(1 + i % 20);
            assert_eq!(
                client.send_to(msg.as_bytes(), server_addr).await.unwrap(),
                msg.len()
            );
            let (n, from) = client.recv_from(&mut buf).await.unwrap();
            assert_eq!(from, server_addr);
            assert_eq!(&buf[..n], msg.as_bytes());
        }
        client.connect(server_addr).await.unwrap();
        assert_eq!(client.peer_addr().unwrap(), server_addr);
        for i in 0..ROUNDS {
            let msg = [i as u8; 512];
            assert_eq!(client.send(&msg).await.unwrap(), msg.len());
            let n = client.recv(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], &msg[..]);
        }
        echo.await.unwrap();
    })
    .await
    .expect("UDP test stalled");
}

/// Many UDP clients at once against one echoing socket.
#[numa_rt::test(max_procs = 2)]
async fn udp_many_clients() {
    const CLIENTS: usize = 32;
    const ROUNDS: usize = 20;
    timeout(GUARD, async {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        let echo = numa_rt::spawn(async move {
            let mut buf = [0u8; 64];
            for _ in 0..CLIENTS * ROUNDS {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                server.send_to(&buf[..n], from).await.unwrap();
            }
        });
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                numa_rt::spawn(async move {
                    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                    s.connect(addr).await.unwrap();
                    let mut buf = [0u8; 64];
                    for r in 0..ROUNDS {
                        let msg = [c as u8, r as u8];
                        s.send(&msg).await.unwrap();
                        let n = s.recv(&mut buf).await.unwrap();
                        assert_eq!(&buf[..n], &msg);
                    }
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        echo.await.unwrap();
    })
    .await
    .expect("UDP clients stalled");
}

/// A Unix listener with an echo task per connection, 20 concurrent clients.
#[numa_rt::test(max_procs = 2)]
async fn unix_stream_listener_echo() {
    const CONNS: usize = 20;
    let path = TempPath::new("stream");
    timeout(GUARD, async {
        let listener = UnixListener::bind(&path.0).unwrap();
        assert_eq!(
            listener.local_addr().unwrap().as_pathname(),
            Some(path.0.as_path())
        );
        let server = numa_rt::spawn(async move {
            let mut handlers = Vec::new();
            for _ in 0..CONNS {
                let (s, _) = listener.accept().await.unwrap();
                handlers.push(numa_rt::spawn(async move {
                    let (mut r, mut w) = s.into_split();
                    futures::io::copy(&mut r, &mut w).await.unwrap()
                }));
            }
            let mut total = 0;
            for h in handlers {
                total += h.await.unwrap();
            }
            total
        });
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                let p = path.0.clone();
                numa_rt::spawn(async move {
                    let mut s = UnixStream::connect(&p).await.unwrap();
                    assert_eq!(s.peer_addr().unwrap().as_pathname(), Some(p.as_path()));
                    let msg: Vec<u8> = (0..10_000).map(|j| (i * 7 + j) as u8).collect();
                    s.write_all(&msg).await.unwrap();
                    s.close().await.unwrap(); // half-close: the echo ends
                    let mut back = Vec::new();
                    s.read_to_end(&mut back).await.unwrap();
                    assert_eq!(back, msg);
                    msg.len() as u64
                })
            })
            .collect();
        let mut sent = 0;
        for c in clients {
            sent += c.await.unwrap();
        }
        assert_eq!(server.await.unwrap(), sent);
    })
    .await
    .expect("Unix stream test stalled");
}

/// `UnixStream::pair`: each end in its own task, ping-pong, then the peer
/// drops and the waiting reader sees end-of-file.
#[numa_rt::test(max_procs = 2)]
async fn unix_stream_pair_ping_pong_then_eof() {
    timeout(GUARD, async {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let pong = numa_rt::spawn(async move {
            let mut buf = [0u8; 4];
            for i in 0..200u32 {
                b.read_exact(&mut buf).await.unwrap();
                assert_eq!(u32::from_le_bytes(buf), i);
                b.write_all(&(i + 1).to_le_bytes()).await.unwrap();
            }
            // b drops here, with nothing unread: a reads end-of-file.
        });
        let mut buf = [0u8; 4];
        for i in 0..200u32 {
            a.write_all(&i.to_le_bytes()).await.unwrap();
            a.read_exact(&mut buf).await.unwrap();
            assert_eq!(u32::from_le_bytes(buf), i + 1);
        }
        pong.await.unwrap();
        assert_eq!(a.read(&mut buf).await.unwrap(), 0);
    })
    .await
    .expect("Unix pair test stalled");
}

/// Unix datagrams: a connected pair, and bound sockets with send_to /
/// recv_from (the sender's address comes back).
#[numa_rt::test(max_procs = 2)]
async fn unix_datagrams() {
    timeout(GUARD, async {
        let (a, b) = UnixDatagram::pair().unwrap();
        let echo = numa_rt::spawn(async move {
            let mut buf = [0u8; 256];
            for _ in 0..100 {
                let n = b.recv(&mut buf).await.unwrap();
                b.send(&buf[..n]).await.unwrap();
            }
        });
        let mut buf = [0u8; 256];
        for i in 0..100usize {
            let msg = vec![i as u8; 1 + i];
            assert_eq!(a.send(&msg).await.unwrap(), msg.len());
            let n = a.recv(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], &msg[..], "datagram boundaries are kept");
        }
        echo.await.unwrap();

        let (pa, pb) = (TempPath::new("dgram_a"), TempPath::new("dgram_b"));
        let sa = UnixDatagram::bind(&pa.0).unwrap();
        let sb = UnixDatagram::bind(&pb.0).unwrap();
        let to_a = pa.0.clone();
        let echo = numa_rt::spawn(async move {
            let mut buf = [0u8; 64];
            for _ in 0..50 {
                let (n, from) = sb.recv_from(&mut buf).await.unwrap();
                assert_eq!(from.as_pathname(), Some(to_a.as_path()));
                sb.send_to(&buf[..n], from.as_pathname().unwrap())
                    .await
                    .unwrap();
            }
        });
        for i in 0..50u8 {
            sa.send_to(&[i, i, i], &pb.0).await.unwrap();
            let (n, from) = sa.recv_from(&mut buf).await.unwrap();
            assert_eq!(from.as_pathname(), Some(pb.0.as_path()));
            assert_eq!(&buf[..n], &[i, i, i]);
        }
        echo.await.unwrap();
    })
    .await
    .expect("Unix datagram test stalled");
}
