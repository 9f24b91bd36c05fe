//! A TCP echo client on numa_rt: N connections, each sending M messages and
//! waiting for every echo; prints round trips per second and throughput.
//!
//! ```text
//! cargo run --release --example echo_server -- 127.0.0.1:7000 &
//! cargo run --release --example echo_client -- 127.0.0.1:7000 64 1000 512
//! ```
//!
//! Arguments: the server address (default 127.0.0.1:7000), the number of
//! connections N (default 64), the messages per connection M (default 1000)
//! and the message size in bytes (default 512).

use futures::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::TcpStream;
use numa_rt::time::Instant;

fn arg<T: std::str::FromStr>(n: usize, default: T) -> T {
    match std::env::args().nth(n) {
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("argument {n} ({s:?}) is not valid");
            std::process::exit(2)
        }),
        None => default,
    }
}

#[numa_rt::main]
async fn main() -> std::io::Result<()> {
    let addr: String = arg(1, "127.0.0.1:7000".to_string());
    let conns: usize = arg(2, 64);
    let msgs: usize = arg(3, 1000);
    let size: usize = arg(4, 512);
    println!("{conns} connections × {msgs} messages of {size} bytes to {addr}");

    let start = Instant::now();
    let clients: Vec<_> = (0..conns)
        .map(|c| {
            let addr = addr.clone();
            numa_rt::spawn(async move {
                let mut s = TcpStream::connect(addr.as_str()).await?;
                s.set_nodelay(true)?;
                let msg: Vec<u8> = (0..size).map(|i| (c + i) as u8).collect();
                let mut back = vec![0u8; size];
                for _ in 0..msgs {
                    s.write_all(&msg).await?;
                    s.read_exact(&mut back).await?;
                    if back != msg {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            "the echo differs from the message",
                        ));
                    }
                }
                s.close().await?;
                Ok::<_, std::io::Error>(msgs)
            })
        })
        .collect();
    let mut round_trips = 0usize;
    let mut failed = 0usize;
    for c in clients {
        match c.await {
            Ok(Ok(n)) => round_trips += n,
            Ok(Err(e)) => {
                failed += 1;
                eprintln!("connection: {e}");
            }
            Err(e) => {
                failed += 1;
                eprintln!("client task: {e}");
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = (round_trips * size * 2) as f64; // sent and received
    println!(
        "{round_trips} round trips in {secs:.3} s: {:.0} round trips/s, {:.1} MiB/s (both directions)",
        round_trips as f64 / secs,
        bytes / secs / (1024.0 * 1024.0)
    );
    if failed > 0 {
        eprintln!("{failed} connection(s) failed");
        std::process::exit(1);
    }
    Ok(())
}
