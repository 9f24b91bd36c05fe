#[numa_rt::test]
#[test]
async fn twice() {}

fn main() {}
