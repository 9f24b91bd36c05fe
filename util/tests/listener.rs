//! net::Listener over numa_rt's TCP and Unix listeners.

use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use numa_rt_util::net::Listener;

/// Accepts one connection and echoes one byte: generic over the listener.
async fn echo_one<L: Listener>(mut listener: L) -> L::Addr
where
    L::Io: Unpin,
{
    let (mut io, peer) = listener.accept().await.unwrap();
    let mut b = [0u8];
    io.read_exact(&mut b).await.unwrap();
    io.write_all(&b).await.unwrap();
    peer
}

#[numa_rt::test]
async fn tcp() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = Listener::local_addr(&listener).unwrap();
    let server = numa_rt::spawn(echo_one(listener));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(b"x").await.unwrap();
    let mut b = [0u8];
    c.read_exact(&mut b).await.unwrap();
    assert_eq!(&b, b"x");
    assert_eq!(server.await.unwrap(), c.local_addr().unwrap());
}

#[numa_rt::test]
async fn unix() {
    let dir = std::env::temp_dir().join(format!("numa_rt_util-listener-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    let listener = UnixListener::bind(&dir).unwrap();
    let path = Listener::local_addr(&listener).unwrap();
    assert_eq!(path.as_pathname(), Some(dir.as_path()));
    let server = numa_rt::spawn(echo_one(listener));
    let mut c = UnixStream::connect(&dir).await.unwrap();
    c.write_all(b"y").await.unwrap();
    let mut b = [0u8];
    c.read_exact(&mut b).await.unwrap();
    assert_eq!(&b, b"y");
    server.await.unwrap();
    let _ = std::fs::remove_file(&dir);
}
