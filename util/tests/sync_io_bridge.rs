//! SyncIoBridge (std I/O over numa_rt's async I/O) and read_exact_arc.

use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt_util::io::{read_exact_arc, SyncIoBridge};
use std::io::{BufRead, Read, Write};

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn std_io_over_a_tcp_stream_on_a_blocking_thread() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = numa_rt::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut line = Vec::new();
        let mut byte = [0u8];
        while byte[0] != b'\n' {
            s.read_exact(&mut byte).await.unwrap();
            line.push(byte[0]);
        }
        s.write_all(&line.to_ascii_uppercase()).await.unwrap();
        s.shutdown().await.unwrap();
    });
    let stream = TcpStream::connect(addr).await.unwrap();
    let reply = numa_rt::spawn_blocking(move || {
        let mut bridge = SyncIoBridge::new(stream);
        bridge.write_all(b"hello\n").unwrap();
        bridge.flush().unwrap();
        let mut reply = String::new();
        bridge.read_to_string(&mut reply).unwrap();
        reply
    })
    .await
    .unwrap();
    assert_eq!(reply, "HELLO\n");
    server.await.unwrap();
}

#[test]
fn buf_read_with_an_explicit_handle() {
    let rt = numa_rt::Runtime::new().unwrap();
    let reader = numa_rt::io::BufReader::new(&b"one\ntwo\n"[..]);
    let bridge = SyncIoBridge::new_with_handle(reader, rt.handle().clone());
    let lines: Vec<String> = bridge.lines().map(Result::unwrap).collect();
    assert_eq!(lines, ["one", "two"]);
}

#[test]
#[should_panic]
fn new_outside_a_runtime_panics() {
    let _ = SyncIoBridge::new(numa_rt::io::empty());
}

#[numa_rt::test]
async fn read_exact_arc_reads_exactly() {
    let (mut w, r) = numa_rt::io::duplex(4);
    numa_rt::spawn(async move { w.write_all(b"0123456789").await.unwrap() });
    let mut r = r;
    let bytes = read_exact_arc(&mut r, 8).await.unwrap();
    assert_eq!(&bytes[..], b"01234567");
    let short = read_exact_arc(r, 8).await.unwrap_err();
    assert_eq!(short.kind(), std::io::ErrorKind::UnexpectedEof);
    assert_eq!(&read_exact_arc(&b""[..], 0).await.unwrap()[..], b"");
}
