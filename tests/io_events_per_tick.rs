//! `max_io_events_per_tick` / `max_io_events_per_busy_tick`: one event per
//! look still serves every connection (events past the limit wait in the
//! kernel for the next look), and zero is refused by name.

use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};
use std::time::Duration;

fn echo_with_spinners(rt: numa_rt::runtime::Runtime) {
    // Tasks that never stop yielding: the P never waits, every look at its
    // poller is a busy one taking one event.
    for _ in 0..4 {
        rt.spawn(async {
            loop {
                numa_rt::task::yield_now().await;
            }
        });
    }
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        numa_rt::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                numa_rt::spawn(async move {
                    let mut buf = [0u8; 4];
                    while s.read_exact(&mut buf).await.is_ok() {
                        s.write_all(&buf).await.unwrap();
                    }
                });
            }
        });
        let clients: Vec<_> = (0..8)
            .map(|_| {
                numa_rt::spawn(async move {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    for _ in 0..16 {
                        s.write_all(b"ping").await.unwrap();
                        s.read_exact(&mut [0u8; 4]).await.unwrap();
                    }
                })
            })
            .collect();
        let all = async {
            for c in clients {
                c.await.unwrap();
            }
        };
        numa_rt::time::timeout(Duration::from_secs(60), all)
            .await
            .expect("the echo round trips finish");
    });
}

#[test]
fn one_event_per_busy_look_serves_every_connection() {
    echo_with_spinners(
        numa_rt::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_io_events_per_busy_tick(1)
            .build()
            .unwrap(),
    );
}

#[test]
fn one_event_per_look_serves_every_connection() {
    echo_with_spinners(
        numa_rt::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_io_events_per_tick(1)
            .build()
            .unwrap(),
    );
}

#[test]
fn zero_events_per_look_is_refused_by_name() {
    let e = numa_rt::runtime::Builder::new_multi_thread()
        .max_io_events_per_tick(0)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("max_io_events_per_tick"), "{e}");
    let e = numa_rt::runtime::Builder::new_multi_thread()
        .max_io_events_per_busy_tick(0)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("max_io_events_per_busy_tick"), "{e}");
}
