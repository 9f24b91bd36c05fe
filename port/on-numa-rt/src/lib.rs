//! mini_kv on numa_rt: `../src/service.rs` after the rename `tokio` ->
//! `numa_rt` (build.rs writes it into `OUT_DIR`), so this crate, its tests
//! and its doc tests prove that the tokio service ports by that rename and
//! nothing else. See `port/README.md`.

include!(concat!(env!("OUT_DIR"), "/service.rs"));
