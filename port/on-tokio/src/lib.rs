//! mini_kv on tokio: `../src/service.rs` as it is (the reference for the
//! port proof; `port_on_numa_rt` builds the same text after the rename
//! `tokio` -> `numa_rt`). See `port/README.md`.

include!("../../src/service.rs");
