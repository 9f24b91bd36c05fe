#[numa_rt::test]
fn not_async() {}

fn main() {}
