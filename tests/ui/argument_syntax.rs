#[numa_rt::main(max_procs)]
async fn a() {}

#[numa_rt::main(max_procs(4))]
async fn b() {}

#[numa_rt::main(max_procs = 4 global_queue_interval = 8)]
async fn c() {}

fn main() {
    a();
    b();
    c();
}
