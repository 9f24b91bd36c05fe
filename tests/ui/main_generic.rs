#[numa_rt::main]
async fn main<T: Default>() {
    let _ = T::default();
}
