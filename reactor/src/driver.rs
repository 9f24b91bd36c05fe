//! Per-P driver. Placeholder: a condvar parker with the final interface; the
//! reactor issue replaces the inside with mio.

use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The runtime-wide set of per-P drivers.
#[derive(Clone)]
pub struct Reactor {
    inner: Arc<Inner>,
}

struct Inner {
    parkers: Vec<Arc<Parker>>,
}

#[derive(Default)]
struct Parker {
    notified: Mutex<bool>,
    cv: Condvar,
}

impl Reactor {
    /// Builds the drivers of `procs` processors.
    pub fn new(procs: usize) -> io::Result<Reactor> {
        let parkers = (0..procs).map(|_| Arc::new(Parker::default())).collect();
        Ok(Reactor { inner: Arc::new(Inner { parkers }) })
    }

    /// The driver of P `index`; called once per P when the runtime is built.
    pub fn driver(&self, index: usize) -> Driver {
        Driver { parker: self.inner.parkers[index].clone() }
    }

    /// Closes every driver: pending I/O fails, timers are dropped.
    pub fn shutdown(&self) {}
}

/// One P's poller and timers. Owned by whichever M holds the P.
pub struct Driver {
    parker: Arc<Parker>,
}

/// Wakes the M parked in a [`Driver`]; cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Unparker {
    parker: Arc<Parker>,
}

impl Driver {
    /// A handle that wakes this driver's [`Driver::park`].
    pub fn unparker(&self) -> Unparker {
        Unparker { parker: self.parker.clone() }
    }

    /// Blocks until unparked, an I/O event, a timer or `timeout`, firing what is ready.
    pub fn park(&mut self, timeout: Option<Duration>) {
        let mut n = self.parker.notified.lock().unwrap();
        if !*n {
            n = match timeout {
                Some(t) => self.parker.cv.wait_timeout(n, t).unwrap().0,
                None => self.parker.cv.wait(n).unwrap(),
            };
        }
        *n = false;
    }

    /// Fires ready I/O and expired timers without blocking.
    pub fn poll_now(&mut self) {}
}

impl Unparker {
    /// Wakes the M parked in the driver, or makes its next park return at once.
    pub fn unpark(&self) {
        *self.parker.notified.lock().unwrap() = true;
        self.parker.cv.notify_one();
    }
}
