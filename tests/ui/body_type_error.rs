// Errors in the body point at the user's code, not at the macro.
#[numa_rt::main]
async fn main() {
    let n: u32 = "four";
    drop(n);
}
