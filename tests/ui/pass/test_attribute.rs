// Built without `--test`, the tests are compiled out; this checks the attribute's output parses and
// its arguments are accepted. tests/macros.rs runs tests like these for real.
#[numa_rt::test]
async fn plain() {}

#[numa_rt::test(max_procs = 2)]
#[should_panic(expected = "boom")]
async fn panics() {
    panic!("boom");
}

#[numa_rt::test]
#[ignore]
async fn returns_result() -> Result<(), String> {
    Ok(())
}

fn main() {}
