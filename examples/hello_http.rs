//! Placeholder until the reactor issue lands the hyper adapter.
fn main() {}
