//! A light-load latency client for the hello-world HTTP servers
//! (`examples/hello_http.rs`, `examples/hello_http_tokio.rs`): it sends one
//! request on each of `CONNS` keep-alive connections at the same instant,
//! waits for all the answers, then leaves the server idle for `GAP_US`
//! before the next burst. Closed-loop load generators (wrk) keep every
//! connection busy, so a server that runs simultaneous requests one after
//! another on one worker and a server that spreads them over idle workers
//! look alike there whenever the client is the bottleneck; bursts into an
//! idle server show the difference as the spread between the first and the
//! last answer of a burst, and the client itself sleeps between bursts, so
//! the server has idle CPUs to spread to even on a small machine.
//!
//! ```text
//! cargo run --release --example burst_client -- PORT [CONNS [BURSTS [GAP_US]]]
//! ```
//!
//! Defaults: 4 connections, 20,000 bursts (after 500 unmeasured ones),
//! 200 µs between bursts. Prints, in µs, the percentiles of every request's
//! latency (from the burst's first write to that answer's last byte), of
//! the k-th answer of each burst in the order they completed (`first`,
//! `last`: with requests run one after another on one worker, the k-th
//! answer comes k service times after the burst began), and the burst's
//! length. Blocking `poll(2)` waits; one thread; the request is written on
//! every connection before any answer is read.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const WARMUP: usize = 500;
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

fn arg(args: &[String], i: usize, name: &str, default: u64) -> u64 {
    match args.get(i) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("burst_client: {name} must be a whole number, got {s:?}");
            std::process::exit(2)
        }),
    }
}

/// One connection's answer in progress: bytes so far, and where its body
/// ends once the header has been read.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    end: Option<usize>,
}

impl Conn {
    /// Reads what is there; true once the whole answer is in.
    fn read_some(&mut self) -> std::io::Result<bool> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.end.is_none() {
            if let Some(h) = find(&self.buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..h]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .ok_or_else(|| std::io::Error::other("answer without content-length"))?;
                self.end = Some(h + 4 + len);
            }
        }
        Ok(self.end.is_some_and(|e| self.buf.len() >= e))
    }
}

/// Ends the run with a message naming what failed (the server went away,
/// answered something that is not HTTP/1.1 with a length, ...).
fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("burst_client: {what}: {e}");
    std::process::exit(1)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port = arg(&args, 1, "PORT", 3000);
    let nconns = arg(&args, 2, "CONNS", 4).max(1) as usize;
    let bursts = arg(&args, 3, "BURSTS", 20_000) as usize;
    let gap = Duration::from_micros(arg(&args, 4, "GAP_US", 200));

    let mut conns: Vec<Conn> = (0..nconns)
        .map(|_| {
            let stream = TcpStream::connect(("127.0.0.1", port as u16)).unwrap_or_else(|e| {
                eprintln!("burst_client: cannot connect to 127.0.0.1:{port}: {e}");
                std::process::exit(1)
            });
            stream
                .set_nodelay(true)
                .unwrap_or_else(|e| fail("TCP_NODELAY", e));
            stream
                .set_nonblocking(true)
                .unwrap_or_else(|e| fail("O_NONBLOCK", e));
            Conn {
                stream,
                buf: Vec::new(),
                end: None,
            }
        })
        .collect();

    let mut each = Vec::with_capacity(bursts * nconns);
    let mut kth: Vec<Vec<f64>> = vec![Vec::with_capacity(bursts); nconns];
    let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(nconns);
    let mut done_at = vec![0.0f64; nconns];
    for b in 0..WARMUP + bursts {
        for c in conns.iter_mut() {
            c.buf.clear();
            c.end = None;
        }
        let t0 = Instant::now();
        for c in conns.iter_mut() {
            // A request this small fits any socket buffer: one write.
            match c.stream.write(REQUEST) {
                Ok(n) if n == REQUEST.len() => {}
                Ok(n) => fail("short write", format!("{n} of {} bytes", REQUEST.len())),
                Err(e) => fail("write", e),
            }
        }
        let mut pending: Vec<usize> = (0..nconns).collect();
        while !pending.is_empty() {
            pfds.clear();
            pfds.extend(pending.iter().map(|&i| libc::pollfd {
                fd: conns[i].stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }));
            // SAFETY: `pfds` is a live, correctly sized array of pollfd for
            // the duration of the call.
            let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 5_000) };
            if r == 0 {
                eprintln!("burst_client: no answer within 5 s");
                std::process::exit(1);
            }
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                fail("poll", e);
            }
            let ready: Vec<usize> = pending
                .iter()
                .zip(&pfds)
                .filter(|(_, p)| p.revents != 0)
                .map(|(&i, _)| i)
                .collect();
            for i in ready {
                if conns[i].read_some().unwrap_or_else(|e| fail("read", e)) {
                    done_at[i] = t0.elapsed().as_secs_f64() * 1e6;
                    pending.retain(|&j| j != i);
                }
            }
        }
        if b >= WARMUP {
            each.extend_from_slice(&done_at);
            let mut order = done_at.clone();
            order.sort_by(f64::total_cmp);
            for (k, t) in order.into_iter().enumerate() {
                kth[k].push(t);
            }
        }
        std::thread::sleep(gap);
    }

    each.sort_by(f64::total_cmp);
    for v in kth.iter_mut() {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "bursts={bursts} conns={nconns} gap_us={} requests={}",
        gap.as_micros(),
        each.len()
    );
    let row = |name: &str, v: &[f64]| {
        println!(
            "{name:>8} p50 {:7.1} p90 {:7.1} p99 {:7.1} mean {:7.1}",
            pct(v, 0.5),
            pct(v, 0.9),
            pct(v, 0.99),
            v.iter().sum::<f64>() / v.len() as f64
        );
    };
    row("request", &each);
    for (k, v) in kth.iter().enumerate() {
        let name = match k {
            0 => "first".to_string(),
            k if k + 1 == nconns => "last".to_string(),
            k => format!("answer{}", k + 1),
        };
        row(&name, v);
    }
}
