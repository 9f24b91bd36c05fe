use std::error::Error;

#[numa_rt::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // `?` converts into the declared error type.
    let n: u32 = "42".parse()?;
    if n != 42 {
        return Err("early return with the declared type".into());
    }
    Ok(())
}
