#[numa_rt::main(max_procs = "4")]
async fn main() {}
