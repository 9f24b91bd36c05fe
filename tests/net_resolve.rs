//! Name resolution through the runtime: `lookup_host`, and every
//! constructor that takes a name (`TcpStream::connect`, `TcpListener::bind`,
//! `UdpSocket::{bind, connect, send_to}`), resolved off the workers.
//!
//! Every test body runs under a generous `timeout`, so a lookup that never
//! completes fails instead of hanging.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{lookup_host, TcpListener, TcpStream, UdpSocket};
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

#[test]
fn localhost_resolves_to_loopback_with_the_port() {
    rt().block_on(async {
        let addrs: Vec<SocketAddr> = timeout(GUARD, lookup_host("localhost:4242"))
            .await
            .unwrap()
            .unwrap()
            .collect();
        assert!(!addrs.is_empty());
        for a in &addrs {
            assert!(a.ip().is_loopback(), "{a}");
            assert_eq!(a.port(), 4242);
        }
        // The (host, port) form agrees.
        let pair: Vec<SocketAddr> = lookup_host(("localhost", 4242)).await.unwrap().collect();
        assert_eq!(pair, addrs);
    });
}

#[test]
fn ip_literals_come_back_unchanged() {
    rt().block_on(async {
        let got: Vec<SocketAddr> = lookup_host("127.0.0.1:9").await.unwrap().collect();
        assert_eq!(got, ["127.0.0.1:9".parse::<SocketAddr>().unwrap()]);
        let got: Vec<SocketAddr> = lookup_host("[::1]:9").await.unwrap().collect();
        assert_eq!(got, ["[::1]:9".parse::<SocketAddr>().unwrap()]);
        let got: Vec<SocketAddr> = lookup_host((Ipv4Addr::LOCALHOST, 9))
            .await
            .unwrap()
            .collect();
        assert_eq!(got, ["127.0.0.1:9".parse::<SocketAddr>().unwrap()]);
    });
}

#[test]
fn connect_by_name_reaches_a_loopback_listener() {
    rt().block_on(async {
        timeout(GUARD, async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = numa_rt::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                s.write_all(b"hi").await.unwrap();
            });
            // "localhost" may list ::1 first: connect tries each address.
            let mut c = TcpStream::connect(format!("localhost:{port}"))
                .await
                .unwrap();
            let mut buf = [0; 2];
            c.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"hi");
            server.await.unwrap();
        })
        .await
        .unwrap();
    });
}

#[test]
fn bind_by_name_listens_on_loopback() {
    rt().block_on(async {
        let l = TcpListener::bind("localhost:0").await.unwrap();
        assert!(l.local_addr().unwrap().ip().is_loopback());
        let u = UdpSocket::bind("localhost:0").await.unwrap();
        assert!(u.local_addr().unwrap().ip().is_loopback());
    });
}

#[test]
fn udp_connect_and_send_to_take_names() {
    rt().block_on(async {
        timeout(GUARD, async {
            let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let pa = a.local_addr().unwrap().port();
            let pb = b.local_addr().unwrap().port();
            // localhost may list ::1 first, which a v4 socket cannot
            // connect to: connect tries each address in turn.
            b.connect(("localhost", pa)).await.unwrap();
            let n = b.send(b"one").await.unwrap();
            assert_eq!(n, 3);
            let mut buf = [0; 8];
            let (n, from) = a.recv_from(&mut buf).await.unwrap();
            assert_eq!((&buf[..n], from.port()), (&b"one"[..], pb));
            // send_to picks the address of the socket's family.
            a.send_to(b"two", format!("localhost:{pb}")).await.unwrap();
            let n = b.recv(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"two");
        })
        .await
        .unwrap();
    });
}

#[test]
fn an_unknown_name_fails_with_an_error_naming_it() {
    rt().block_on(async {
        let name = "no-such-host.numa-rt.invalid";
        let e = match timeout(GUARD, TcpStream::connect(format!("{name}:80")))
            .await
            .unwrap()
        {
            Ok(s) => panic!("connected to {:?}", s.peer_addr()),
            Err(e) => e,
        };
        assert!(e.to_string().contains(name), "{e}");
        let e = match lookup_host(format!("{name}:80")).await {
            Ok(a) => panic!("resolved to {:?}", a.collect::<Vec<_>>()),
            Err(e) => e,
        };
        assert!(e.to_string().contains(name), "{e}");
    });
}

#[test]
fn malformed_addresses_are_rejected_without_a_lookup() {
    rt().block_on(async {
        for bad in ["localhost", "localhost:http", "localhost:99999", ":80"] {
            let e = match TcpStream::connect(bad).await {
                Ok(_) => panic!("{bad} connected"),
                Err(e) => e,
            };
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad}: {e}");
            assert!(e.to_string().contains(bad), "{bad}: {e}");
        }
    });
}
