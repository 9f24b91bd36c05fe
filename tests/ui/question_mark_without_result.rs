// ...and on `?`: it needs a `Result`-returning function, as without the macro.
#[numa_rt::main]
async fn main() {
    let text = std::fs::read_to_string("Cargo.toml")?;
    drop(text);
}
