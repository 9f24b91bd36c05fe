//! The graceful-shutdown pattern services copy from tokio's docs: an accept
//! loop whose connection tasks a TaskTracker counts, stopped by a
//! CancellationToken (standing in for ctrl-c); shutdown closes the tracker,
//! cancels, and waits for every connection to finish its reply.

use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt_util::sync::CancellationToken;
use numa_rt_util::task::TaskTracker;

async fn serve(listener: TcpListener, tracker: TaskTracker, shutdown: CancellationToken) {
    loop {
        let (mut socket, _) = numa_rt::select! {
            res = listener.accept() => res.unwrap(),
            _ = shutdown.cancelled() => break,
        };
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            let mut buf = [0u8; 64];
            loop {
                let n = numa_rt::select! {
                    n = socket.read(&mut buf) => n.unwrap(),
                    // Finish the current request, then say goodbye.
                    _ = shutdown.cancelled() => {
                        socket.write_all(b"bye\n").await.unwrap();
                        return;
                    }
                };
                if n == 0 {
                    return;
                }
                socket.write_all(&buf[..n]).await.unwrap();
            }
        });
    }
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_then_stops_cleanly() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tracker = TaskTracker::new();
    let shutdown = CancellationToken::new();
    let server = numa_rt::spawn(serve(listener, tracker.clone(), shutdown.clone()));

    let mut clients = Vec::new();
    for i in 0..8u8 {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(&[b'a' + i]).await.unwrap();
        let mut echo = [0u8; 1];
        c.read_exact(&mut echo).await.unwrap();
        assert_eq!(echo[0], b'a' + i);
        clients.push(c);
    }
    assert_eq!(tracker.len(), 8);

    // "ctrl-c": stop accepting, tell the connections, wait for them.
    shutdown.cancel();
    server.await.unwrap();
    tracker.close();
    tracker.wait().await;
    assert!(tracker.is_empty());

    for mut c in clients {
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"bye\n");
    }
}
