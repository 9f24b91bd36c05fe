// tokio's spellings build and run: a port renames `tokio` to `numa_rt`.
#[numa_rt::test(flavor = "current_thread")]
async fn current_thread() {
    // !Send across an await: the body is built and polled on the one worker.
    let rc = std::rc::Rc::new(1);
    numa_rt::task::yield_now().await;
    assert_eq!(*rc, 1);
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread() {}

#[numa_rt::test(start_paused = true)]
async fn paused() -> Result<(), Box<dyn std::error::Error>> {
    numa_rt::time::sleep(numa_rt::time::Duration::from_secs(60)).await;
    Ok(())
}

#[numa_rt::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let start = numa_rt::time::Instant::now();
    numa_rt::time::sleep(numa_rt::time::Duration::from_secs(3600)).await;
    assert!(start.elapsed() >= numa_rt::time::Duration::from_secs(3600));
}
