//! A short tour of numa_rt: spawning, pinned (!Send) tasks, blocking work,
//! timers, TCP, NUMA placement and the metrics.
//!
//! ```text
//! cargo run --release --example tour
//! NUMA_RT_TOPOLOGY="0;1" cargo run --release --example tour   # two simulated nodes
//! ```

use futures::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt::numa::{current_node, spawn_on};
use numa_rt::time::{sleep, timeout, Instant};
use std::rc::Rc;
use std::time::Duration;

#[numa_rt::main]
async fn main() -> std::io::Result<()> {
    let handle = numa_rt::Handle::current();
    let topo = handle.topology();
    println!(
        "== numa_rt: {} processor(s) on {} node(s)",
        handle.metrics().num_procs(),
        topo.nodes().len()
    );
    for n in topo.nodes() {
        println!("   {}: CPUs {}", n.id(), n.cpus());
    }

    // 1. Spawning: 10,000 tasks, each a G with its own future.
    let t0 = Instant::now();
    let handles: Vec<_> = (0..10_000u64)
        .map(|i| numa_rt::spawn(async move { i * i }))
        .collect();
    let mut sum = 0u64;
    for h in handles {
        sum += h.await.expect("task panicked");
    }
    println!(
        "== spawned and joined 10,000 tasks in {:?} (sum of squares {sum})",
        t0.elapsed()
    );

    // 2. A panicking task does not take its worker down.
    let err = numa_rt::spawn(async { panic!("on purpose") })
        .await
        .unwrap_err();
    println!("== a panicking task gave: {err}");

    // 3. spawn_local: a !Send future (Rc) pinned to this thread.
    let shared = Rc::new(std::cell::Cell::new(0));
    let locals: Vec<_> = (0..3)
        .map(|i| {
            let shared = shared.clone();
            numa_rt::spawn_local(async move {
                shared.set(shared.get() + i);
                numa_rt::task::yield_now().await;
            })
        })
        .collect();
    for h in locals {
        h.await.unwrap();
    }
    println!(
        "== spawn_local: three pinned tasks shared an Rc (total {})",
        shared.get()
    );

    // 4. Blocking work: spawn_blocking runs on threads that hold no processor.
    let digest = numa_rt::spawn_blocking(|| {
        (0..5_000_000u64).fold(0u64, |a, x| a.wrapping_mul(31).wrapping_add(x))
    })
    .await
    .unwrap();
    println!("== spawn_blocking computed {digest:#x} off the workers");

    // 5. Timers live on the processor that creates them.
    let t0 = Instant::now();
    sleep(Duration::from_millis(20)).await;
    let slept = t0.elapsed();
    let late = timeout(Duration::from_millis(10), sleep(Duration::from_secs(10))).await;
    println!(
        "== slept 20 ms (took {:?}); a 10 ms timeout on a 10 s sleep gave {:?}",
        slept,
        late.map(|_| ())
    );

    // 6. TCP: an echo server; each accepted connection is a root task, spread
    //    round-robin over the processors.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = numa_rt::spawn(async move {
        for _ in 0..4 {
            let (mut conn, _) = listener.accept().await?;
            drop(numa_rt::spawn(async move {
                let mut buf = [0u8; 64];
                let n = conn.read(&mut buf).await?;
                conn.write_all(&buf[..n]).await?;
                std::io::Result::Ok(())
            }));
        }
        std::io::Result::Ok(())
    });
    for i in 0..4 {
        let mut c = TcpStream::connect(addr).await?;
        let msg = format!("hello {i}");
        c.write_all(msg.as_bytes()).await?;
        let mut buf = vec![0u8; msg.len()];
        c.read_exact(&mut buf).await?;
        assert_eq!(buf, msg.as_bytes());
    }
    server.await.unwrap()?;
    println!("== echoed 4 TCP connections on {addr}");

    // 7. NUMA placement: a task that starts on the last node.
    let last = topo.nodes().len() - 1;
    let ran_on = spawn_on(last, async { current_node() }).await.unwrap();
    println!(
        "== spawn_on(node{last}) ran on {:?}",
        ran_on.map(|n| n.to_string())
    );

    // 8. Metrics: per processor and Go's schedtrace line.
    let m = handle.metrics();
    for p in m.procs() {
        println!(
            "   P{} node{} M{}: polled {} (runnext {}), node-queue takes {}, stolen {}, parks {}, root tasks {}",
            p.index,
            p.node,
            p.machine,
            p.tasks_polled,
            p.runnext_polls,
            p.global_queue_polls,
            p.tasks_stolen,
            p.parks,
            p.root_tasks_received
        );
    }
    println!("== {m}");
    Ok(())
}
