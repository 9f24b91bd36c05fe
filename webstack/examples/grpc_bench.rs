//! tonic's greeter on two runtimes, and a load client, for
//! `benches/axum_wrk.py --grpc`:
//!
//! ```text
//! grpc_bench server numa_rt PORT    # numa_rt::serve(listener, Routes)
//! grpc_bench server tokio PORT      # tonic::transport::Server on tokio
//! grpc_bench load PORT CONNECTIONS CONCURRENCY SECONDS
//! ```
//!
//! Both servers get `WORKERS` workers (default: the CPUs this process may
//! use). The load client is a one-thread tokio runtime running tonic's own
//! client, as `wrk -t1` is one thread: CONCURRENCY tasks call `SayHello` in
//! a loop over CONNECTIONS HTTP/2 connections, and it prints
//! `calls=N seconds=S p50_us=A p99_us=B`.

use std::time::{Duration, Instant};

use numa_rt_webstack::greeter::greeter_client::GreeterClient;
use numa_rt_webstack::greeter::greeter_server::GreeterServer;
use numa_rt_webstack::greeter::HelloRequest;
use numa_rt_webstack::MyGreeter;

fn workers() -> usize {
    match std::env::var("WORKERS") {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("WORKERS={v:?} is not a number");
            std::process::exit(2)
        }),
        Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        eprintln!("grpc_bench: argument {i} ({what}) missing or not a number");
        std::process::exit(2)
    })
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match (
        args.first().map(String::as_str),
        args.get(1).map(String::as_str),
    ) {
        (Some("server"), Some("numa_rt")) => {
            let port: u16 = arg(&args, 2, "port");
            numa_rt::Builder::new()
                .max_procs(workers())
                .build()?
                .block_on(async move {
                    let listener = numa_rt::net::TcpListener::bind(("127.0.0.1", port)).await?;
                    let routes = tonic::service::Routes::new(GreeterServer::new(MyGreeter));
                    numa_rt::serve(listener, routes).await?;
                    Ok(())
                })
        }
        (Some("server"), Some("tokio")) => {
            let port: u16 = arg(&args, 2, "port");
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers())
                .enable_all()
                .build()?
                .block_on(async move {
                    tonic::transport::Server::builder()
                        .add_service(GreeterServer::new(MyGreeter))
                        .serve(([127, 0, 0, 1], port).into())
                        .await?;
                    Ok(())
                })
        }
        (Some("load"), _) => {
            let port: u16 = arg(&args, 1, "port");
            let connections: usize = arg(&args, 2, "connections");
            let concurrency: usize = arg(&args, 3, "concurrency");
            let seconds: u64 = arg(&args, 4, "seconds");
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(load(port, connections.max(1), concurrency.max(1), seconds))
        }
        _ => {
            eprintln!(
                "usage: grpc_bench server numa_rt|tokio PORT | load PORT CONNS CONCURRENCY SECONDS"
            );
            std::process::exit(2)
        }
    }
}

async fn load(
    port: u16,
    connections: usize,
    concurrency: usize,
    seconds: u64,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut channels = Vec::new();
    for _ in 0..connections {
        channels.push(
            tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))?
                .connect()
                .await?,
        );
    }
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for i in 0..concurrency {
        let mut client = GreeterClient::new(channels[i % connections].clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies_us = Vec::new();
            while Instant::now() < end {
                let t = Instant::now();
                let reply = client
                    .say_hello(HelloRequest {
                        name: "bench".into(),
                        delay_ms: 0,
                    })
                    .await;
                if reply.is_err() {
                    return Err(format!("call failed: {reply:?}"));
                }
                latencies_us.push(t.elapsed().as_micros() as u64);
            }
            Ok(latencies_us)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)));
    println!(
        "calls={} seconds={elapsed:.3} p50_us={} p99_us={}",
        all.len(),
        pct(0.50).copied().unwrap_or(0),
        pct(0.99).copied().unwrap_or(0)
    );
    Ok(())
}
