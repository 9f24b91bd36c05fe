//! mini_kv's tests on tokio: `port/tests/service_tests.rs` as it is.

include!("../../tests/service_tests.rs");
