//! `#[numa_rt::main]` and `#[numa_rt::test]` (placeholder).
use proc_macro::TokenStream;

/// Runs `async fn main` on a numa_rt runtime.
#[proc_macro_attribute]
pub fn main(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Runs an `async fn` test on a numa_rt runtime.
#[proc_macro_attribute]
pub fn test(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
