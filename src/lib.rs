//! numa_rt: a NUMA-aware async runtime with Go's G/P/M scheduler (in progress).
pub use numa_rt_macros::{main, test};
