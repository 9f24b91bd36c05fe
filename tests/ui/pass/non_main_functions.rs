#![deny(warnings)]

// `#[numa_rt::main]` on a function other than `main`: it runs the body to completion.
#[numa_rt::main(max_procs = 1)]
async fn compute() -> u64 {
    (1..=10u64).sum()
}

// A generic function is fine when it isn't `main`.
#[numa_rt::main]
async fn make<T: Default>() -> T {
    T::default()
}

// A diverging body (a server's accept loop) compiles without warnings.
#[numa_rt::main]
async fn serve_forever() {
    loop {
        std::future::ready(()).await;
    }
}

fn main() {
    assert_eq!(compute(), 55);
    assert_eq!(make::<String>(), "");
    if std::env::args().count() > 100 {
        serve_forever();
    }
}
