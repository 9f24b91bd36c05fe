//! `#[numa_rt::main]` and `#[numa_rt::test]`: run an `async fn` to completion on a numa_rt runtime.
//!
//! Use these through the facade (`numa_rt::main`, `numa_rt::test`); this crate is an implementation
//! detail of numa_rt and its paths default to `::numa_rt`.
//!
//! # `#[numa_rt::main]`
//!
//! ```ignore
//! #[numa_rt::main]
//! async fn main() {
//!     let answer = numa_rt::spawn(async { 6 * 7 }).await.unwrap();
//!     println!("{answer}");
//! }
//! ```
//!
//! expands to (roughly; this is the `multi_thread` flavor, `main`'s default)
//!
//! ```ignore
//! fn main() {
//!     // A build error panics with its message (`Display`), e.g. "failed to build the numa_rt
//!     // runtime: NUMA_RT_MAXPROCS=\"abc\" is invalid: ...".
//!     let rt = match ::numa_rt::Runtime::new() {
//!         Ok(rt) => rt,
//!         Err(e) => panic!("{}: {}", "failed to build the numa_rt runtime", e),
//!     };
//!     let body = async move {
//!         // Never taken: fixes the block's output type to the declared return type.
//!         if let Some(__numa_rt_ret) = None::<()> {
//!             return __numa_rt_ret;
//!         }
//!         /* the original body's statements */
//!     };
//!     rt.block_on(body)
//! }
//! ```
//!
//! The body stays an `async move` block whose output is the function's declared return type, so
//! `?`, `return` and type errors behave as in the original function and point at your code:
//!
//! ```ignore
//! #[numa_rt::main(max_procs = 4)]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let config = std::fs::read_to_string("config.toml")?;
//!     println!("{config}");
//!     Ok(())
//! }
//! ```
//!
//! # `#[numa_rt::test]`
//!
//! Emits a `#[test]` function that builds its own runtime; other attributes such as
//! `#[should_panic]` or `#[ignore]` are kept.
//!
//! A test's default is tokio's: the `current_thread` flavor, one P with the body a task on it
//! (`Runtime::run_on_worker`), so the body never runs at the same time as the tasks it spawns and
//! paused-time tests are deterministic. A test that sets the number of P's (`max_procs`,
//! `worker_threads`) or asks for `flavor = "multi_thread"` gets that many P's (by default the CPU
//! quota) with the body polled by `block_on` on the test thread.
//!
//! ```ignore
//! #[numa_rt::test(max_procs = 2)]
//! async fn spawns() {
//!     assert_eq!(numa_rt::spawn(async { 1 }).await.unwrap(), 1);
//! }
//!
//! #[numa_rt::test]
//! #[should_panic(expected = "boom")]
//! async fn panics() {
//!     panic!("boom");
//! }
//! ```
//!
//! # Arguments
//!
//! Both attributes take the same comma-separated `key = literal` arguments, each at most once:
//!
//! | argument | value | becomes |
//! | --- | --- | --- |
//! | `flavor` | `"current_thread"` or `"multi_thread"` | one P and the body a task on it (`max_procs(1)`, `Runtime::run_on_worker`), or `block_on` beside the P's |
//! | `worker_threads` | integer literal ≥ 1 | tokio's name for `max_procs` |
//! | `max_procs` | integer literal ≥ 1 | `Builder::max_procs(n)` |
//! | `global_queue_interval` | integer literal ≥ 1 | `Builder::global_queue_interval(n)` |
//! | `topology` | non-empty string literal | `Builder::topology(numa::Topology::from_spec(s).expect(..))` |
//! | `start_paused` | `true` or `false` | `Builder::start_paused(b)`: paused test time (`numa_rt::time::pause`) |
//! | `tokio_compat` | alone, or `true` / `false` | `Builder::enable_tokio_compat()`; a compile error naming the feature without numa_rt's `tokio-compat` |
//! | `crate` | string literal holding a path | the path used instead of `::numa_rt` |
//!
//! `worker_threads` or `max_procs` with `flavor = "current_thread"`, and both together, are errors.
//! With no arguments (or only `crate`) `main`'s runtime is `Runtime::new()`; otherwise it is
//! `Builder::new()`, the calls above, then `.build()`.
//!
//! ```ignore
//! extern crate numa_rt as rt;
//!
//! #[rt::main(crate = "rt", max_procs = 2, global_queue_interval = 31, topology = "0;1")]
//! async fn main() {}
//! ```
//!
//! A bad argument (unknown or repeated key, wrong literal type, a zero count) or a function the
//! attribute can't wrap (not `async`, has parameters, a generic `main` or test, a second `#[test]`)
//! is a compile error pointing at the offending token.

#![warn(missing_docs)]

mod entry;

use proc_macro::TokenStream;

/// Runs an `async fn` (normally `main`) to completion on a new numa_rt runtime.
///
/// The function must be `async` and take no parameters; `main` must not be generic. See the crate
/// docs for the accepted arguments.
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    entry::main(args.into(), item.into()).into()
}

/// Marks an `async fn` as a test that runs on its own new numa_rt runtime.
///
/// Emits `#[::core::prelude::v1::test]`, so don't add `#[test]` yourself. The function must be
/// `async`, non-generic and take no parameters. See the crate docs for the accepted arguments.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    entry::test(args.into(), item.into()).into()
}
