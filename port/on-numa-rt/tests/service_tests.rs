//! mini_kv's tests on numa_rt: `port/tests/service_tests.rs` after the
//! rename `tokio` -> `numa_rt` (see build.rs).

include!(concat!(env!("OUT_DIR"), "/service_tests.rs"));
