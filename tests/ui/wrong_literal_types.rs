#[numa_rt::main(max_procs = 1.5)]
async fn a() {}

#[numa_rt::main(max_procs = -1)]
async fn b() {}

#[numa_rt::main(global_queue_interval = "61")]
async fn c() {}

#[numa_rt::main(topology = 2)]
async fn d() {}

#[numa_rt::main(crate = numa_rt)]
async fn e() {}

#[numa_rt::main(global_queue_interval = 0)]
async fn f() {}

#[numa_rt::main(topology = "")]
async fn g() {}

#[numa_rt::main(crate = "not a path")]
async fn h() {}

fn main() {
    a();
    b();
    c();
    d();
    e();
    f();
    g();
    h();
}
