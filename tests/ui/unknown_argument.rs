#[numa_rt::main(foo = 1)]
async fn main() {}
