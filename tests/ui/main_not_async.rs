#[numa_rt::main]
fn main() {}
