//! A task of a small future (40 bytes: `ping_pong`'s outer tasks; 48) stays
//! one allocation within glibc's fastbin limit (120 bytes on 64-bit), where
//! a free by another thread takes no lock. Above it, a task spawned on one thread and completed on another
//! takes the malloc arena's lock on free against the spawner's mallocs:
//! at 144 bytes `spawn_many_local` made ~5,700 `futex` calls per 10,000
//! spawns and ran 1.5x longer (see `TaskMeta` in executor/src/task/mod.rs).
//!
//! Without the `tracing` feature (which adds a span to every task).
#![cfg(all(not(feature = "tracing"), not(loom), target_pointer_width = "64"))]

use numa_rt_executor::Builder;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;

/// Counts allocations by size while `RECORDING` is set.
struct Counting;

static RECORDING: AtomicBool = AtomicBool::new(false);
const SIZES: usize = 1024;
static BY_SIZE: [AtomicUsize; SIZES] = [const { AtomicUsize::new(0) }; SIZES];

// SAFETY: forwards every call to the system allocator unchanged; the
// counting touches only atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if RECORDING.load(Relaxed) {
            BY_SIZE[layout.size().min(SIZES - 1)].fetch_add(1, Relaxed);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The largest request glibc serves from a fastbin on 64-bit targets
/// (`DEFAULT_MXFAST` = 128-byte chunks, 8 of them the chunk header).
const FASTBIN_MAX: usize = 120;

/// Spawns `TASKS` tasks of the future `make` builds (counting allocations
/// meanwhile) and returns the sizes allocated once per spawn.
fn sizes_allocated_per_spawn<F: std::future::Future<Output = ()> + Send + 'static>(
    make: impl Fn(mpsc::SyncSender<()>, Arc<AtomicUsize>) -> F,
) -> Vec<usize> {
    const TASKS: usize = 2_000;
    for c in &BY_SIZE {
        c.store(0, Relaxed);
    }
    let rt = Builder::new().max_procs(2).build().unwrap();
    let (done_tx, done_rx) = mpsc::sync_channel::<()>(1);
    let left = Arc::new(AtomicUsize::new(TASKS));
    rt.block_on(async {
        RECORDING.store(true, Relaxed);
        for _ in 0..TASKS {
            numa_rt_executor::spawn(make(done_tx.clone(), left.clone()));
        }
        RECORDING.store(false, Relaxed);
        done_rx.recv().unwrap();
    });
    // Allocated once per spawn: the task (a registry's growth is rarer).
    (0..SIZES)
        .filter(|&s| BY_SIZE[s].load(Relaxed) >= TASKS)
        .collect()
}

#[test]
fn futures_of_40_and_48_bytes_are_one_fastbin_allocation() {
    // The future of `spawn_many_local` (benches/common: a sender, an `Arc`
    // and a state byte) with one word more, and with two: 40 and 48 bytes.
    // (One test, not two: the allocation counts are global.)
    let forty = |done_tx: mpsc::SyncSender<()>, left: Arc<AtomicUsize>| {
        let word = 7u64;
        async move {
            std::hint::black_box(word);
            if left.fetch_sub(1, Relaxed) == 1 {
                done_tx.send(()).unwrap();
            }
        }
    };
    let forty_eight = |done_tx: mpsc::SyncSender<()>, left: Arc<AtomicUsize>| {
        let words = (7u64, 8u64);
        async move {
            std::hint::black_box(words);
            if left.fetch_sub(1, Relaxed) == 1 {
                done_tx.send(()).unwrap();
            }
        }
    };
    let (tx, _rx) = mpsc::sync_channel::<()>(1);
    let left = Arc::new(AtomicUsize::new(1));
    assert_eq!(
        std::mem::size_of_val(&forty(tx.clone(), left.clone())),
        40,
        "the test's first future is not the 40 bytes this test is about"
    );
    assert_eq!(
        std::mem::size_of_val(&forty_eight(tx, left)),
        48,
        "the test's second future is not the 48 bytes this test is about"
    );
    let cases = [
        (40, sizes_allocated_per_spawn(forty)),
        (48, sizes_allocated_per_spawn(forty_eight)),
    ];
    for (bytes, sizes) in cases {
        assert!(
            !sizes.is_empty(),
            "no allocation made once per spawn: the count is broken"
        );
        for size in sizes {
            assert!(
                size <= FASTBIN_MAX,
                "a task of a {bytes}-byte future takes {size} bytes, above glibc's fastbin \
                 limit ({FASTBIN_MAX}): cross-thread frees now take the arena lock"
            );
        }
    }
}
