#[numa_rt::main(max_procs = 0)]
async fn main() {}
