// A tokio habit: the message names numa_rt's equivalent.
#[numa_rt::main(worker_threads = 2)]
async fn main() {}
