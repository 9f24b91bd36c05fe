//! No descriptor leaks: 10,000 connections opened and closed, and the
//! reactor itself dropped, leave /proc/self/fd where it was. Alone in its
//! own binary so no other test opens descriptors meanwhile.

mod common;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt_reactor::net::{TcpListener, TcpStream};
use numa_rt_reactor::{context, Driver, Reactor};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("procfs").count()
}

#[test]
fn ten_thousand_connections_leak_no_descriptors() {
    const TOTAL: usize = 10_000;
    const BATCH: usize = 100;
    let before = open_fds();
    {
        let reactor = Reactor::new(2).unwrap();
        let mut drivers: Vec<Driver> = (0..2).map(|i| reactor.driver(i)).collect();
        let _g = context::enter(&reactor);
        context::set_current_p(Some(0));
        common::block_on(&mut drivers[0], async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            for _ in 0..TOTAL / BATCH {
                let server = async {
                    let mut conns = Vec::with_capacity(BATCH);
                    for _ in 0..BATCH {
                        let (mut s, _) = listener.accept().await.unwrap();
                        s.write_all(b"x").await.unwrap();
                        conns.push(s);
                    }
                    conns // the server closes first: TIME_WAIT stays on its side
                };
                let clients = futures::future::join_all((0..BATCH).map(|_| async move {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    let mut b = [0u8; 1];
                    s.read_exact(&mut b).await.unwrap();
                    s
                }));
                let (conns, clients) = futures::join!(server, clients);
                drop(conns);
                drop(clients);
            }
        });
        assert_eq!(reactor.registered_sources(), 0);
    }
    assert_eq!(open_fds(), before, "descriptors leaked");
}
