//! Watch numa_rt's tasks in tokio-console.
//!
//! ```text
//! RUSTFLAGS="--cfg console_without_tokio_unstable" \
//!     cargo run --example console --features console
//! # in another terminal (cargo install --locked tokio-console):
//! tokio-console
//! ```
//!
//! `console_subscriber::init()` starts console's gRPC server (on
//! 127.0.0.1:6669) on a thread of its own with a small tokio runtime of its
//! own; numa_rt's tasks run on numa_rt. It also installs a fmt layer
//! (`RUST_LOG`-style filter in `RUST_LOG`, default `error`).
//!
//! Every numa_rt task shows up with its id, its kind (task, local,
//! blocking) and where it was spawned; polls, busy and idle time and
//! wakes are counted. numa_rt's timers and sockets are not instrumented as
//! console *resources* (its Resources view stays empty).

use std::time::Duration;

#[numa_rt::main(max_procs = 2)]
async fn main() {
    console_subscriber::init();

    // A ticker: mostly idle, woken by its timer.
    numa_rt::spawn(async {
        loop {
            numa_rt::time::sleep(Duration::from_millis(100)).await;
        }
    });

    // A worker that hogs its processor now and then (console's "long poll"
    // warning; numa_rt's sysmon reports it as a stall too).
    numa_rt::spawn(async {
        loop {
            std::thread::sleep(Duration::from_millis(30));
            numa_rt::time::sleep(Duration::from_secs(1)).await;
        }
    });

    // Blocking work, spawned again and again.
    numa_rt::spawn(async {
        loop {
            numa_rt::spawn_blocking(|| std::thread::sleep(Duration::from_millis(50)))
                .await
                .unwrap();
            numa_rt::time::sleep(Duration::from_millis(500)).await;
        }
    });

    // Short-lived tasks, a batch a second.
    loop {
        let mut set = numa_rt::JoinSet::new();
        for i in 0..10u64 {
            set.spawn(async move {
                numa_rt::time::sleep(Duration::from_millis(10 * i)).await;
                i
            });
        }
        while set.join_next().await.is_some() {}
        numa_rt::time::sleep(Duration::from_secs(1)).await;
    }
}
