#[numa_rt::main(max_procs = 2, topology = "0", max_procs = 3)]
async fn main() {}
