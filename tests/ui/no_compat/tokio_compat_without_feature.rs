// Without numa_rt's `tokio-compat` feature the error names the feature.
#[numa_rt::main(tokio_compat)]
async fn main() {}
