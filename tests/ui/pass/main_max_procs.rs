#[numa_rt::main(max_procs = 2)]
async fn main() {
    let answer = numa_rt::spawn(async { 6 * 7 }).await.unwrap();
    assert_eq!(answer, 42);
}
