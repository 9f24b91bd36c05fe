#[numa_rt::main]
struct Main;

fn main() {}
