//! Helpers shared by the behaviour tests: futures that count their drops.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Generous bound for "this must happen": only reached when the behaviour is broken.
pub const HANG: Duration = Duration::from_secs(30);

pub fn rt(procs: usize) -> numa_rt_executor::Runtime {
    numa_rt_executor::Builder::new()
        .max_procs(procs)
        .build()
        .expect("runtime builds")
}

/// Increments its counter when dropped.
pub struct DropCount(pub Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Never completes; counts its drop.
pub struct Forever(pub DropCount);
impl Future for Forever {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

/// The message of a caught panic payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}
