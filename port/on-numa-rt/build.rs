//! Applies the port to mini_kv's shared source: every `tokio` becomes
//! `numa_rt`, and nothing else changes. The result goes to `OUT_DIR`, where
//! `src/lib.rs` and `tests/service_tests.rs` `include!` it.
//!
//! The rename is `sed 's/tokio/numa_rt/g'`, with one guard: an occurrence
//! with a letter or digit right beside it (`Tokio` is not one: the match is
//! case-sensitive; `tokios`, `mytokio` would be) stops the build, since
//! there a blind rename could change a word that is not the crate's name.
//! An underscore or any other character beside it is a separator, so
//! `tokio::spawn`, `#[tokio::test]` and the crate's own name
//! `port_on_tokio` (which the same rename makes `port_on_numa_rt`, this
//! package's name) are renamed.

use std::path::Path;
use std::{env, fs};

const FILES: [(&str, &str); 2] = [
    ("../src/service.rs", "service.rs"),
    ("../tests/service_tests.rs", "service_tests.rs"),
];

fn main() {
    let manifest_dir = env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let out_dir = env::var_os("OUT_DIR").expect("OUT_DIR");
    for (src, dst) in FILES {
        let src = Path::new(&manifest_dir).join(src);
        println!("cargo::rerun-if-changed={}", src.display());
        let text =
            fs::read_to_string(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
        let renamed = rename(&text).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        fs::write(Path::new(&out_dir).join(dst), renamed).expect("writing OUT_DIR");
    }
}

/// `text` with every `tokio` replaced by `numa_rt`; an error if one of them
/// has a letter or digit beside it.
fn rename(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    for (at, word) in text.match_indices("tokio") {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + word.len()).copied();
        if before.is_some_and(|b| b.is_ascii_alphanumeric())
            || after.is_some_and(|b| b.is_ascii_alphanumeric())
        {
            let line = text[..at].lines().count().max(1);
            return Err(format!("line {line}: `tokio` inside a longer word"));
        }
    }
    Ok(text.replace("tokio", "numa_rt"))
}
