#[numa_rt::main]
async fn main(args: Vec<String>) {
    drop(args);
}
