//! numa_rt's scheduler (in progress).
