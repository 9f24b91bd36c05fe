//! What `Builder::build()` costs at 2, 64, 512 and 1,024 processors, and
//! dropping the runtime again (issue 13: machines with 384–512 hardware
//! threads exist; `build()` must stay linear in the P count).
//!
//! - `build/build/<procs>`: `build()` alone: the reactor (five descriptors
//!   per P, see `FDS_PER_PROC`), the processors, and one M thread per P
//!   started (their first look for work overlaps the measurement, as it
//!   does in an application). The runtime is dropped outside the timing.
//! - `build/build_and_drop/<procs>`: the whole life of an idle runtime.
//!
//! Before the idle layer was rewritten, each idle P's park epoll nested
//! every other P's poller: 500 P's took 6.8 s to build and 1,000 failed
//! (kernel nesting limits). Measured after it (2026-11-23, the 2-CPU
//! development machine, noisy): docs/performance.md, "Building a runtime".
//!
//! ```text
//! cargo bench --bench build -- --warm-up-time 1 --measurement-time 5
//! ```

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::time::{Duration, Instant};

const PROCS: [usize; 4] = [2, 64, 512, 1024];

/// Raises the soft descriptor limit to what 1,024 P's need, if the hard
/// limit allows (no privilege needed).
fn raise_nofile() {
    let need = (1024 * numa_rt_reactor::FDS_PER_PROC + 256) as libc::rlim_t;
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit for both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < need {
            r.rlim_cur = need.min(r.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn build(procs: usize) -> numa_rt::Runtime {
    numa_rt::Builder::new()
        .max_procs(procs)
        // Small stacks: 1,024 threads of 2 MiB reserve 2 GiB of address
        // space (not memory); the size does not change the build's cost.
        .thread_stack_size(256 * 1024)
        .build()
        .unwrap_or_else(|e| panic!("build at {procs} P's: {e}"))
}

fn bench_build(c: &mut Criterion) {
    raise_nofile();
    let mut g = c.benchmark_group("build");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for procs in PROCS {
        g.bench_with_input(BenchmarkId::new("build", procs), &procs, |b, &procs| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    let rt = build(procs);
                    total += t.elapsed();
                    drop(rt);
                }
                total
            })
        });
        g.bench_with_input(
            BenchmarkId::new("build_and_drop", procs),
            &procs,
            |b, &procs| b.iter(|| drop(build(procs))),
        );
    }
    g.finish();
}

criterion_group!(benches, bench_build);
criterion_main!(benches);
