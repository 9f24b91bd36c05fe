//! UdpFramed over numa_rt's UdpSocket, on loopback.

use bytes::{BufMut, BytesMut};
use futures::{SinkExt, StreamExt};
use numa_rt::net::UdpSocket;
use numa_rt_util::codec::{Decoder, Encoder, LinesCodec};
use numa_rt_util::udp::UdpFramed;
use std::io;
use std::sync::Arc;

/// Whole datagrams as frames.
struct Datagrams;

impl Decoder for Datagrams {
    type Item = Vec<u8>;
    type Error = io::Error;
    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Vec<u8>>> {
        Ok((!buf.is_empty()).then(|| buf.split().to_vec()))
    }
}

impl Encoder<&[u8]> for Datagrams {
    type Error = io::Error;
    fn encode(&mut self, data: &[u8], buf: &mut BytesMut) -> io::Result<()> {
        buf.put_slice(data);
        Ok(())
    }
}

#[numa_rt::test]
async fn datagrams_both_ways() {
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let mut a = UdpFramed::new(a, Datagrams);
    let mut b = UdpFramed::new(b, Datagrams);

    a.send((&b"ping"[..], b_addr)).await.unwrap();
    let (frame, from) = b.next().await.unwrap().unwrap();
    assert_eq!((frame.as_slice(), from), (&b"ping"[..], a_addr));

    b.send((&b"pong"[..], a_addr)).await.unwrap();
    let (frame, from) = a.next().await.unwrap().unwrap();
    assert_eq!((frame.as_slice(), from), (&b"pong"[..], b_addr));

    // An empty datagram is sent, and decodes to no frame.
    a.send((&b""[..], b_addr)).await.unwrap();
    a.send((&b"after"[..], b_addr)).await.unwrap();
    let (frame, _) = b.next().await.unwrap().unwrap();
    assert_eq!(frame, b"after");
    assert!(b.read_buffer().is_empty());
}

#[numa_rt::test]
async fn several_frames_in_one_datagram() {
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b_addr = b.local_addr().unwrap();
    let mut a = UdpFramed::new(a, Datagrams);
    let mut b = UdpFramed::new(b, LinesCodec::new());
    a.send((&b"one\ntwo\nthree"[..], b_addr)).await.unwrap();
    let mut lines = Vec::new();
    for _ in 0..3 {
        lines.push(b.next().await.unwrap().unwrap().0);
    }
    assert_eq!(lines, ["one", "two", "three"]);
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_socket_two_framed_halves() {
    let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = sock.local_addr().unwrap();
    let mut rx = UdpFramed::new(sock.clone(), LinesCodec::new());
    let mut tx = UdpFramed::new(sock, LinesCodec::new());
    let sender = numa_rt::spawn(async move {
        for i in 0..5 {
            tx.send((format!("line {i}"), addr)).await.unwrap();
        }
        tx
    });
    for i in 0..5 {
        let (line, from) = rx.next().await.unwrap().unwrap();
        assert_eq!((line, from), (format!("line {i}"), addr));
    }
    let tx = sender.await.unwrap();
    assert!(Arc::ptr_eq(tx.get_ref(), rx.get_ref()));
}
