// tokio's arguments are accepted, and checked as tokio checks them: one P
// cannot have two worker threads.
#[numa_rt::main(flavor = "current_thread", worker_threads = 2)]
async fn main() {}
