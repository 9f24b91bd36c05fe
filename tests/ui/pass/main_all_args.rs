// Every argument at once, with the crate under another name.
extern crate numa_rt as rt;

#[rt::main(
    crate = "rt",
    max_procs = 2,
    global_queue_interval = 31,
    topology = "0;1"
)]
async fn main() {
    assert_eq!(rt::spawn(async { 1 }).await.unwrap(), 1);
}
