//! A `timeout` around a future that is always ready — a loop reading
//! `io::empty()` or `io::repeat` — still fires, as on tokio: those readers
//! take a unit of the cooperative budget per read, so the loop returns
//! `Pending` once the budget is spent and `Timeout` checks its deadline.
//!
//! The loops run on their own thread, which the test waits for with a
//! generous bound: a loop that never yields would otherwise hang the test
//! instead of failing it. Nothing sleeps.

use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::time;

const GUARD: Duration = Duration::from_secs(60);

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

/// Runs `body` in `block_on` on its own thread, waiting at most [`GUARD`].
fn on_own_thread<F: Future<Output = ()> + 'static>(body: fn() -> F) {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        rt().block_on(body());
        let _ = done.send(());
    });
    finished
        .recv_timeout(GUARD)
        .expect("the timeout fired despite an always-ready inner future");
}

#[test]
fn a_timeout_fires_around_a_loop_reading_io_empty() {
    on_own_thread(|| async {
        let r = time::timeout(Duration::from_millis(1), async {
            let mut buf = [0u8; 1];
            loop {
                let _ = numa_rt::io::empty().read(&mut buf).await;
            }
        })
        .await;
        assert!(r.is_err());
    });
}

#[test]
fn a_timeout_fires_around_a_loop_reading_io_repeat() {
    on_own_thread(|| async {
        let r = time::timeout(Duration::from_millis(1), async {
            let mut src = numa_rt::io::repeat(7);
            let mut buf = [0u8; 16];
            loop {
                let n = src.read(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], &[7; 16][..n]);
            }
        })
        .await;
        assert!(r.is_err());
    });
}

#[test]
fn a_timeout_fires_around_a_loop_writing_to_io_sink() {
    on_own_thread(|| async {
        let r = time::timeout(Duration::from_millis(1), async {
            let mut sink = numa_rt::io::sink();
            loop {
                sink.write_all(b"discarded").await.unwrap();
            }
        })
        .await;
        assert!(r.is_err());
    });
}
