//! A TCP echo server on numa_rt: one task per connection.
//!
//! ```text
//! cargo run --release --example echo_server -- 127.0.0.1:7000
//! cargo run --release --example echo_client -- 127.0.0.1:7000 64 1000
//! ```
//!
//! The address is the first argument (default 127.0.0.1:7000). Every
//! connection task is spawned right after `accept`, so numa_rt hands it to
//! the next processor round-robin; `Ctrl-C` prints nothing fancy, but the
//! per-processor metrics are printed every 10 s while connections come in.

use futures::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt::time::Instant;
use std::time::Duration;

async fn echo(mut stream: TcpStream) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            // The client closed its side: close ours too.
            stream.close().await?;
            return Ok(total);
        }
        stream.write_all(&buf[..n]).await?;
        total += n as u64;
    }
}

#[numa_rt::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7000".to_string());
    let listener = TcpListener::bind(addr.as_str()).await?;
    println!("echo server listening on {}", listener.local_addr()?);
    let handle = numa_rt::Handle::current();
    let mut last_report = Instant::now();
    let mut accepted = 0u64;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // EMFILE and friends: the listener already backs off.
                eprintln!("accept: {e}");
                continue;
            }
        };
        stream.set_nodelay(true)?;
        accepted += 1;
        numa_rt::spawn(async move {
            if let Err(e) = echo(stream).await {
                eprintln!("{peer}: {e}");
            }
        });
        if last_report.elapsed() >= Duration::from_secs(10) {
            last_report = Instant::now();
            println!("{accepted} connections accepted");
            for p in handle.metrics().procs() {
                println!(
                    "  P{} (node {}): {} tasks polled, {} connection tasks received",
                    p.index, p.node, p.tasks_polled, p.root_tasks_received
                );
            }
        }
    }
}
