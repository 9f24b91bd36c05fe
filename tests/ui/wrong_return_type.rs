// The declared return type is enforced on the body's value...
#[numa_rt::main]
async fn answer() -> u32 {
    "forty-two"
}

fn main() {
    answer();
}
