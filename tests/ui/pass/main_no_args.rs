use std::sync::atomic::{AtomicBool, Ordering};

static RAN: AtomicBool = AtomicBool::new(false);

#[numa_rt::main]
async fn main() {
    async { RAN.store(true, Ordering::SeqCst) }.await;
    assert!(RAN.load(Ordering::SeqCst));
}
