//! numa_rt's streams under tokio's I/O traits (issue 24): tokio's io-util
//! (re-exported as `numa_rt::io`) and a tokio-ecosystem adapter
//! (hyper-util's `TokioIo`) take them as they are.

use bytes::BytesMut;
use numa_rt::io::{
    copy_bidirectional, split, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt,
    BufReader, BufWriter, ReadBuf,
};
use numa_rt::net::{TcpListener, TcpStream, UnixStream};
use std::mem::MaybeUninit;

/// A connected loopback pair.
async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    (c, s)
}

fn assert_tokio_io<T: AsyncRead + AsyncWrite + Unpin + Send>() {}

#[test]
fn the_streams_and_their_halves_implement_tokios_traits() {
    assert_tokio_io::<TcpStream>();
    assert_tokio_io::<UnixStream>();
    fn read<T: AsyncRead>() {}
    fn write<T: AsyncWrite>() {}
    read::<numa_rt::net::tcp::OwnedReadHalf>();
    write::<numa_rt::net::tcp::OwnedWriteHalf>();
    read::<numa_rt::net::tcp::ReadHalf<'static>>();
    write::<numa_rt::net::tcp::WriteHalf<'static>>();
    read::<&'static TcpStream>();
    write::<&'static TcpStream>();
}

/// `read_buf` into a `BytesMut` (spare capacity, never initialised), the
/// fixed-width integers, `read_exact`, and `shutdown` reaching the peer as
/// end-of-file.
#[numa_rt::test]
async fn read_buf_integers_exact_and_shutdown() {
    let (mut c, mut s) = pair().await;
    let writer = numa_rt::spawn(async move {
        c.write_u8(7).await.unwrap();
        c.write_u32(0xdead_beef).await.unwrap();
        c.write_i64_le(-5).await.unwrap();
        c.write_all(b"tail of the message").await.unwrap();
        c.flush().await.unwrap();
        c.shutdown().await.unwrap();
        c
    });
    assert_eq!(s.read_u8().await.unwrap(), 7);
    assert_eq!(s.read_u32().await.unwrap(), 0xdead_beef);
    assert_eq!(s.read_i64_le().await.unwrap(), -5);
    let mut head = [0u8; 4];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"tail");
    let mut buf = BytesMut::with_capacity(4);
    loop {
        if buf.len() == buf.capacity() {
            buf.reserve(64);
        }
        if s.read_buf(&mut buf).await.unwrap() == 0 {
            break; // the writer's shutdown
        }
    }
    assert_eq!(&buf[..], b" of the message");
    drop(writer.await.unwrap());
}

/// A read into uninitialised memory fills exactly what arrived and marks
/// only that as initialised.
#[numa_rt::test]
async fn poll_read_fills_uninitialised_memory() {
    let (mut c, mut s) = pair().await;
    c.write_all(b"abc").await.unwrap();
    let mut mem = [MaybeUninit::<u8>::uninit(); 16];
    let mut rb = ReadBuf::uninit(&mut mem);
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut s).poll_read(cx, &mut rb))
        .await
        .unwrap();
    // One write of 3 bytes: a read may see fewer, never more.
    assert!(!rb.filled().is_empty() && rb.filled().len() <= 3);
    assert_eq!(rb.filled(), &b"abc"[..rb.filled().len()]);
    assert_eq!(rb.initialized().len(), rb.filled().len());
}

/// `BufWriter`/`BufReader` over split halves: a line protocol.
#[numa_rt::test]
async fn buffered_halves_speak_lines() {
    let (c, s) = pair().await;
    let server = numa_rt::spawn(async move {
        let (rd, wr) = s.into_split();
        let mut lines = BufReader::new(rd).lines();
        let mut out = BufWriter::new(wr);
        while let Some(line) = lines.next_line().await.unwrap() {
            out.write_all(format!("{}\n", line.len()).as_bytes())
                .await
                .unwrap();
        }
        out.shutdown().await.unwrap(); // flushes, then shuts down
    });
    let (rd, mut wr) = split(c);
    for word in ["a", "bb", "ccc"] {
        wr.write_all(word.as_bytes()).await.unwrap();
        wr.write_all(b"\n").await.unwrap();
    }
    wr.shutdown().await.unwrap();
    let mut reply = String::new();
    BufReader::new(rd).read_to_string(&mut reply).await.unwrap();
    assert_eq!(reply, "1\n2\n3\n");
    server.await.unwrap();
}

/// `copy_bidirectional` as a proxy between two connections.
#[numa_rt::test(max_procs = 2)]
async fn copy_bidirectional_proxies() {
    let (mut client, mut proxy_in) = pair().await;
    let (mut proxy_out, mut backend) = pair().await;
    let proxy =
        numa_rt::spawn(async move { copy_bidirectional(&mut proxy_in, &mut proxy_out).await });
    let echo = numa_rt::spawn(async move {
        let mut buf = Vec::new();
        backend.read_to_end(&mut buf).await.unwrap();
        backend.write_all(&buf).await.unwrap();
        backend.shutdown().await.unwrap();
        buf.len()
    });
    let msg = vec![0x5a_u8; 200_000];
    client.write_all(&msg).await.unwrap();
    client.shutdown().await.unwrap();
    let mut back = Vec::new();
    client.read_to_end(&mut back).await.unwrap();
    assert_eq!(back, msg);
    assert_eq!(echo.await.unwrap(), msg.len());
    let (up, down) = proxy.await.unwrap().unwrap();
    assert_eq!((up, down), (msg.len() as u64, msg.len() as u64));
}

/// hyper-util's `TokioIo` (what hyper's tokio users write) wraps a numa_rt
/// stream directly: an HTTP/1 exchange over it.
#[numa_rt::test(max_procs = 2)]
async fn hyper_util_tokio_io_takes_the_stream() {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use hyper_util::rt::TokioIo;

    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    numa_rt::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let svc = hyper::service::service_fn(|_req| async {
            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from("hi"))))
        });
        hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(s), svc)
            .await
            .unwrap();
    });
    let s = TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .unwrap();
    numa_rt::spawn(conn);
    let req = hyper::Request::get("/")
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"hi");
}
