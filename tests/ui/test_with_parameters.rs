#[numa_rt::test]
async fn with_parameter(n: u32) {
    assert_eq!(n, 1);
}

fn main() {}
