//! tokio-util's codecs, re-exported, over numa_rt's TCP streams.

use futures::{SinkExt, StreamExt};
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt_util::codec::{Framed, LengthDelimitedCodec, LinesCodec};

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn length_delimited_frames_over_tcp() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = numa_rt::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        let mut framed = Framed::new(s, LengthDelimitedCodec::new());
        while let Some(frame) = framed.next().await {
            let mut frame = frame.unwrap();
            frame.reverse();
            framed.send(frame.freeze()).await.unwrap();
        }
    });
    let mut client = Framed::new(
        TcpStream::connect(addr).await.unwrap(),
        LengthDelimitedCodec::new(),
    );
    for msg in [&b"abc"[..], b"", &[7u8; 100_000]] {
        client
            .send(bytes::Bytes::copy_from_slice(msg))
            .await
            .unwrap();
        let back = client.next().await.unwrap().unwrap();
        let mut expect = msg.to_vec();
        expect.reverse();
        assert_eq!(&back[..], &expect[..]);
    }
    drop(client);
    server.await.unwrap();
}

#[numa_rt::test]
async fn lines_over_a_duplex() {
    let (a, b) = numa_rt::io::duplex(16);
    let mut a = Framed::new(a, LinesCodec::new());
    let mut b = Framed::new(b, LinesCodec::new());
    let line = "a fairly long line, longer than the pipe";
    // The send completes only as the other end reads: both at once.
    let (sent, got) = numa_rt::join!(a.send(line), b.next());
    sent.unwrap();
    assert_eq!(got.unwrap().unwrap(), line);
}
