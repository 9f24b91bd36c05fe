//! Several tasks accepting on one listener while descriptors have run out
//! all resume after the back-off, not only the last one to poll it (the
//! back-off timer holds one waker). Alone in its own binary because it
//! lowers the process's RLIMIT_NOFILE.
//!
//! The test is its own executor: it polls a future only after its waker
//! was woken, so a waiter nobody wakes stays pending and fails the test.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use numa_rt_reactor::net::TcpListener;

fn set_nofile(soft: libc::rlim_t, hard: libc::rlim_t) {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: a valid rlimit struct for the call to read.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
}

fn get_nofile() -> libc::rlimit {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit struct for the call to fill.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

type Accept<'a> = Pin<Box<dyn Future<Output = std::io::Result<()>> + 'a>>;

/// One acceptor: its future, its waker's wake count, and the count it was
/// last polled at.
struct Acceptor<'a> {
    fut: Option<Accept<'a>>,
    wakes: Arc<common::CountWaker>,
    waker: Waker,
    seen: usize,
}

impl Acceptor<'_> {
    /// Polls the future if it was woken since its last poll (or `force`).
    fn run(&mut self, force: bool) {
        let now = self.wakes.0.load(Ordering::SeqCst);
        let Some(fut) = self.fut.as_mut() else { return };
        if !force && now == self.seen {
            return;
        }
        self.seen = now;
        if let Poll::Ready(r) = common::poll_once(fut, &self.waker) {
            r.expect("accept succeeds once descriptors are free");
            self.fut = None;
        }
    }
}

impl Acceptor<'_> {
    fn woken(&self) -> bool {
        self.fut.is_some() && self.wakes.0.load(Ordering::SeqCst) != self.seen
    }
}

/// One driver turn: waits for an event unless a woken acceptor is due a
/// poll (then only looks).
fn park(d: &mut numa_rt_reactor::Driver, acceptors: &[Acceptor<'_>]) {
    let wait = if acceptors.iter().any(Acceptor::woken) {
        Duration::ZERO
    } else {
        Duration::from_secs(1)
    };
    d.park(Some(wait));
}

#[test]
fn every_acceptor_resumes_after_the_back_off() {
    let (_r, mut d, _g) = common::setup(1);
    let listener = common::block_on(&mut d[0], TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut acceptors: Vec<Acceptor<'_>> = (0..2)
        .map(|_| {
            let (wakes, waker) = common::count_waker();
            let fut: Accept<'_> = Box::pin(async { listener.accept().await.map(drop) });
            Acceptor {
                fut: Some(fut),
                wakes,
                waker,
                seen: 0,
            }
        })
        .collect();
    // Register the listener (nothing to accept yet) while descriptors last.
    for a in &mut acceptors {
        a.run(true);
        assert!(a.fut.is_some(), "nothing to accept yet");
    }
    let clients: Vec<_> = (0..2)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let saved = get_nofile();
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as libc::rlim_t;
    set_nofile(open + 8, saved.rlim_max);
    let mut fillers = Vec::new();
    for _ in 0..64 {
        match std::fs::File::open("/dev/null") {
            Ok(f) => fillers.push(f),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EMFILE));
                break;
            }
        }
    }
    assert!(fillers.len() < 64, "descriptors ran out");
    // Both poll the back-off (each was woken by the connections' event).
    for _ in 0..3 {
        park(&mut d[0], &acceptors);
        for a in &mut acceptors {
            a.run(false);
        }
    }
    assert!(
        acceptors.iter().all(|a| a.fut.is_some()),
        "nothing accepted while descriptors are out"
    );
    drop(fillers);
    set_nofile(saved.rlim_cur, saved.rlim_max);
    for _ in 0..200 {
        if acceptors.iter().all(|a| a.fut.is_none()) {
            break;
        }
        park(&mut d[0], &acceptors);
        for a in &mut acceptors {
            a.run(false);
        }
    }
    let left = acceptors.iter().filter(|a| a.fut.is_some()).count();
    assert_eq!(left, 0, "every acceptor resumed after the back-off");
    drop(clients);
}
