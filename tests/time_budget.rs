//! The cooperative budget through the real runtime: on a single P, a task
//! looping forever over an always-ready numa_rt resource must not starve a
//! timer of another task on the same P.
//!
//! Each loop stops when the timer task sets a flag, and is bounded by a large
//! iteration cap, so a starved timer is a clean assertion failure, not a
//! hang. Nothing about durations is asserted.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{UdpSocket, UnixStream};
use numa_rt::time::sleep;

/// Runs `spin` (a loop that returns how many iterations it made before it
/// saw the flag, or `None` at its cap) next to a task that sleeps 10 ms and
/// then sets the flag, on a 1-P runtime.
fn timer_is_not_starved_by<F, Fut>(what: &str, spin: F)
where
    F: FnOnce(Arc<AtomicBool>) -> Fut,
    Fut: Future<Output = Option<u64>> + Send + 'static,
{
    let rt = numa_rt::Builder::new().max_procs(1).build().unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let timer = rt.spawn(async move {
        sleep(Duration::from_millis(10)).await;
        f.store(true, Ordering::SeqCst);
    });
    let looper = rt.spawn(spin(flag.clone()));
    let iterations = rt.block_on(looper).unwrap();
    rt.block_on(timer).unwrap();
    println!("{what}: the timer fired after {iterations:?} iterations of the always-ready loop");
    assert!(
        iterations.is_some(),
        "{what}: the always-ready loop reached its cap: it starved the timer on its P"
    );
}

#[test]
fn a_zero_sleep_loop_does_not_starve_a_timer() {
    timer_is_not_starved_by("sleep(ZERO)", |flag| async move {
        for i in 0..20_000_000u64 {
            if flag.load(Ordering::SeqCst) {
                return Some(i);
            }
            sleep(Duration::ZERO).await;
        }
        None
    });
}

#[test]
fn an_always_readable_unix_stream_does_not_starve_a_timer() {
    timer_is_not_starved_by("UnixStream ping", |flag| async move {
        // Both ends in this task: every write and every read is ready at once.
        let (mut a, mut b) = UnixStream::pair().unwrap();
        // One byte in flight, passed round: a read and a write per
        // iteration, both always ready. (Pre-filling the stream and writing
        // back one byte at a time would fill the send buffer with one-byte
        // buffers and legitimately block the write.)
        a.write_all(&[1u8]).await.unwrap();
        let mut byte = [0u8; 1];
        for i in 0..2_000_000u64 {
            if flag.load(Ordering::SeqCst) {
                return Some(i);
            }
            b.read_exact(&mut byte).await.unwrap();
            a.write_all(&byte).await.unwrap();
        }
        None
    });
}

#[test]
fn an_always_ready_udp_socket_does_not_starve_a_timer() {
    timer_is_not_starved_by("UdpSocket to itself", |flag| async move {
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        s.connect(s.local_addr().unwrap()).await.unwrap();
        for _ in 0..64 {
            s.send(b"x").await.unwrap(); // always a datagram waiting
        }
        let mut buf = [0u8; 8];
        for i in 0..2_000_000u64 {
            if flag.load(Ordering::SeqCst) {
                return Some(i);
            }
            assert_eq!(s.recv(&mut buf).await.unwrap(), 1);
            s.send(b"x").await.unwrap();
        }
        None
    });
}
