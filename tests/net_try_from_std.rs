//! tokio's `TryFrom<std::...>` conversions for its sockets: each is
//! `from_std`, so a converted socket works as one made by numa_rt.

use std::io::Write;
use std::time::Duration;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};
use numa_rt::time::timeout;

/// Fails the test (instead of hanging it) if a lost wake-up stalls it.
const GUARD: Duration = Duration::from_secs(60);

#[numa_rt::test(max_procs = 2)]
async fn std_tcp_sockets_convert_with_try_from() {
    timeout(GUARD, async {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listener = TcpListener::try_from(std_listener).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut server = server;
        client.write_all(b"ping").unwrap();
        let mut buf = [0; 4];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");

        // And a std stream into a numa_rt one.
        let mut stream: TcpStream = client.try_into().unwrap();
        server.write_all(b"pong").await.unwrap();
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    })
    .await
    .unwrap();
}

#[numa_rt::test(max_procs = 2)]
async fn std_udp_and_unix_sockets_convert_with_try_from() {
    timeout(GUARD, async {
        let a = UdpSocket::try_from(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        b.send_to(b"dgram", a.local_addr().unwrap()).unwrap();
        let mut buf = [0; 8];
        let (n, from) = a.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"dgram"[..], b.local_addr().unwrap()));

        let (x, y) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let x = UnixDatagram::try_from(x).unwrap();
        y.send(b"unix").unwrap();
        let n = x.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"unix");

        let dir = std::env::temp_dir().join(format!("numa_rt-try-from-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let listener =
            UnixListener::try_from(std::os::unix::net::UnixListener::bind(&dir).unwrap()).unwrap();
        let mut client = std::os::unix::net::UnixStream::connect(&dir).unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let _ = std::fs::remove_file(&dir);
        client.write_all(b"hi").unwrap();
        let mut server = server;
        let mut two = [0; 2];
        server.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"hi");
        let mut stream = UnixStream::try_from(client).unwrap();
        server.write_all(b"yo").await.unwrap();
        stream.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"yo");
        let mut rest = Vec::new();
        drop(server);
        stream.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
    })
    .await
    .unwrap();
}
