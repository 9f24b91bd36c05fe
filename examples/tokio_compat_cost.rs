//! What `Builder::enable_tokio_compat` costs: round trips through tokio's
//! side runtime next to the same round trips on numa_rt's own paths.
//!
//! ```text
//! cargo run --release --features tokio-compat --example tokio_compat_cost [iterations] [workers]
//! ```
//!
//! `workers` is `Builder::tokio_compat_workers` (default 1).
//!
//! - TCP echo: a numa_rt task writes one byte to an echo task (numa_rt
//!   listener) and reads it back, with a numa_rt `TcpStream` (served by the
//!   P's poller) or a tokio `TcpStream` (served by the side thread's driver,
//!   which wakes the numa_rt task).
//! - spawn + join: `numa_rt::spawn(async {}).await` against
//!   `tokio::spawn(async {}).await` (the future runs on a side worker).
//! - parallel tokio::spawn: 8 `tokio::spawn`ed futures of ~1 ms of CPU
//!   each, all awaited: the wall time of the batch shows how many side
//!   workers run at once.
//!
//! Prints the median and 99th percentile of each, in microseconds.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("iterations: a whole number"))
        .unwrap_or(5000);
    let workers: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().expect("workers: a whole number"))
        .unwrap_or(1);
    println!("tokio_compat_workers = {workers}");
    let rt = numa_rt::Builder::new()
        .max_procs(2)
        .enable_tokio_compat()
        .tokio_compat_workers(workers)
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = numa_rt::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        numa_rt::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                s.set_nodelay(true).unwrap();
                numa_rt::spawn(async move {
                    let mut b = [0u8; 1];
                    while s.read_exact(&mut b).await.is_ok() {
                        if s.write_all(&b).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });

        let own = numa_rt::spawn(async move {
            let mut s = numa_rt::net::TcpStream::connect(addr).await.unwrap();
            s.set_nodelay(true).unwrap();
            let mut b = [0u8; 1];
            let mut t = Vec::with_capacity(n);
            for _ in 0..n {
                let t0 = Instant::now();
                s.write_all(&b).await.unwrap();
                s.read_exact(&mut b).await.unwrap();
                t.push(t0.elapsed());
            }
            t
        })
        .await
        .unwrap();
        report("TCP echo, numa_rt TcpStream", own);

        let tok = numa_rt::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.set_nodelay(true).unwrap();
            let mut b = [0u8; 1];
            let mut t = Vec::with_capacity(n);
            for _ in 0..n {
                let t0 = Instant::now();
                s.write_all(&b).await.unwrap();
                s.read_exact(&mut b).await.unwrap();
                t.push(t0.elapsed());
            }
            t
        })
        .await
        .unwrap();
        report("TCP echo, tokio TcpStream (side runtime)", tok);

        let own = numa_rt::spawn(async move {
            let mut t = Vec::with_capacity(n);
            for _ in 0..n {
                let t0 = Instant::now();
                numa_rt::spawn(async {}).await.unwrap();
                t.push(t0.elapsed());
            }
            t
        })
        .await
        .unwrap();
        report("spawn + join, numa_rt::spawn", own);

        let tok = numa_rt::spawn(async move {
            let mut t = Vec::with_capacity(n);
            for _ in 0..n {
                let t0 = Instant::now();
                tokio::spawn(async {}).await.unwrap();
                t.push(t0.elapsed());
            }
            t
        })
        .await
        .unwrap();
        report("spawn + join, tokio::spawn (side runtime)", tok);

        let rounds = (n / 50).max(10);
        let par = numa_rt::spawn(async move {
            let mut t = Vec::with_capacity(rounds);
            for _ in 0..rounds {
                let t0 = Instant::now();
                let hs: Vec<_> = (0..8)
                    .map(|_| tokio::spawn(async { spin(Duration::from_millis(1)) }))
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
                t.push(t0.elapsed());
            }
            t
        })
        .await
        .unwrap();
        report("8 x 1 ms CPU, tokio::spawn (side runtime)", par);
    });
}

/// Burns `d` of CPU time on this thread (a busy loop on the clock).
fn spin(d: Duration) {
    let t0 = Instant::now();
    let mut x = 0u64;
    while t0.elapsed() < d {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

fn report(what: &str, mut t: Vec<Duration>) {
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{what:<45} median {:>7.1} us   p99 {:>7.1} us   ({} round trips)",
        us(t[t.len() / 2]),
        us(t[t.len() * 99 / 100]),
        t.len()
    );
}
