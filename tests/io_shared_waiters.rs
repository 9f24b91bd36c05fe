//! Many tasks waiting on one source are all woken, as tokio's are: 50 tasks
//! awaiting `accept` on one shared listener all get a connection, and
//! several tasks awaiting `readable()` on one `AsyncFd` all see the event.
//!
//! Each waiter counts itself once its wait has returned `Pending` (so its
//! waker is stored) before the event is made; nothing sleeps, and every
//! body runs under a generous `timeout`.

use std::fs::File;
use std::future::Future;
use std::io::{self, Write};
use std::os::fd::FromRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use numa_rt::io::AsyncFd;
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

/// Polls `inner`, counting in `waiting` the first time it returns `Pending`.
struct CountFirstPending<F> {
    inner: Pin<Box<F>>,
    waiting: Arc<AtomicUsize>,
    counted: bool,
}

impl<F: Future> Future for CountFirstPending<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let r = self.inner.as_mut().poll(cx);
        if r.is_pending() && !self.counted {
            self.counted = true;
            self.waiting.fetch_add(1, SeqCst);
        }
        r
    }
}

fn count_first_pending<F: Future>(waiting: &Arc<AtomicUsize>, f: F) -> CountFirstPending<F> {
    CountFirstPending {
        inner: Box::pin(f),
        waiting: waiting.clone(),
        counted: false,
    }
}

async fn until_waiting(waiting: &AtomicUsize, n: usize) {
    while waiting.load(SeqCst) < n {
        numa_rt::task::yield_now().await;
    }
}

#[test]
fn every_task_accepting_on_a_shared_listener_gets_a_connection() {
    const N: usize = 50;
    rt().block_on(async {
        timeout(GUARD, async {
            let listener = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
            let addr = listener.local_addr().unwrap();
            let waiting = Arc::new(AtomicUsize::new(0));
            let acceptors: Vec<_> = (0..N)
                .map(|_| {
                    let l = listener.clone();
                    numa_rt::spawn(count_first_pending(&waiting, async move {
                        l.accept().await.map(drop)
                    }))
                })
                .collect();
            until_waiting(&waiting, N).await;
            let mut clients = Vec::new();
            for _ in 0..N {
                clients.push(TcpStream::connect(addr).await.unwrap());
            }
            for a in acceptors {
                a.await.unwrap().unwrap();
            }
        })
        .await
        .expect("every accept completes");
    });
}

#[test]
fn every_task_awaiting_readable_on_a_shared_async_fd_is_woken() {
    const N: usize = 8;
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", io::Error::last_os_error());
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by us.
    let (r, mut w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    rt().block_on(async {
        timeout(GUARD, async {
            let fd = Arc::new(AsyncFd::new(r).unwrap());
            // A new `AsyncFd` is not readable until the poller says so (an
            // empty pipe: not before the write below); readiness that is
            // there is cleared by a read that gives `WouldBlock`.
            for _ in 0..1000 {
                if futures::poll!(std::pin::pin!(fd.readable())).is_pending() {
                    break;
                }
                let mut guard = fd.readable().await.unwrap();
                let read = guard.try_io(|f| io::Read::read(&mut f.get_ref(), &mut [0; 1]));
                assert!(read.is_err(), "nothing was written yet");
            }
            let waiting = Arc::new(AtomicUsize::new(0));
            let readers: Vec<_> = (0..N)
                .map(|_| {
                    let fd = fd.clone();
                    numa_rt::spawn(count_first_pending(&waiting, async move {
                        fd.readable().await.map(drop)
                    }))
                })
                .collect();
            until_waiting(&waiting, N).await;
            w.write_all(b"x").unwrap();
            for r in readers {
                r.await.unwrap().unwrap();
            }
        })
        .await
        .expect("every readable() completes");
    });
}
