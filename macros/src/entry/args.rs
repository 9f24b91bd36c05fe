//! The attributes' arguments: `key = value` pairs parsed into a [`Config`],
//! each value checked where it is read, every problem a spanned error.

use super::{push_error, Kind};
use proc_macro2::{Literal, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Lit, LitStr, Path, Token, UnOp};

/// The argument names both attributes accept, in the order the error message lists them.
pub(super) const KNOWN_ARGS: &[&str] = &[
    "flavor",
    "worker_threads",
    "max_procs",
    "topology",
    "global_queue_interval",
    "deadlock",
    "start_paused",
    "tokio_compat",
    "name",
    "crate",
];

/// One `key = value` argument as written, before its value is checked.
pub(super) struct Arg {
    key: Ident,
    value: Expr,
}

impl Parse for Arg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        // `parse_any` so that the keyword `crate` is accepted as a key.
        if !input.peek(Ident::peek_any) {
            return Err(input.error(
                "expected an argument such as `max_procs = 4`; \
                 the arguments are `flavor`, `worker_threads`, `max_procs`, `topology`, \
                 `global_queue_interval`, `deadlock`, `start_paused`, `tokio_compat` and `crate`",
            ));
        }
        let key = input.call(Ident::parse_any)?;
        if !input.peek(Token![=]) && key == "tokio_compat" {
            // A bare flag: `tokio_compat` is `tokio_compat = true`.
            let value = syn::parse_quote_spanned!(key.span()=> true);
            return Ok(Arg { key, value });
        }
        if !input.peek(Token![=]) {
            let name = key.unraw().to_string();
            return Err(if KNOWN_ARGS.contains(&name.as_str()) {
                syn::Error::new_spanned(
                    &key,
                    format!("`{name}` needs a value: write `{name} = ...`"),
                )
            } else {
                unknown_arg(&key)
            });
        }
        input.parse::<Token![=]>()?;
        let value = input.parse()?;
        Ok(Arg { key, value })
    }
}

/// The error for an argument name we don't know.
pub(super) fn unknown_arg(key: &Ident) -> syn::Error {
    let name = key.unraw().to_string();
    let list = KNOWN_ARGS
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    syn::Error::new_spanned(
        key,
        format!("unknown attribute `{name}`: expected one of {list}"),
    )
}

/// The checked arguments. Each field holds the key as written (its span is used for the
/// generated call, so a mismatch with the runtime's API points at the argument) and the value.
#[derive(Default)]
pub(super) struct Config {
    /// `crate = "path"`: where the runtime lives, instead of `::numa_rt`.
    pub(super) crate_path: Option<Path>,
    /// `flavor = "current_thread" | "multi_thread" | "local"` (tokio's; `local` is
    /// `current_thread`, whose body may already hold `!Send` values and spawn pinned tasks).
    pub(super) flavor: Option<(Ident, Flavor)>,
    /// `name = "..."`: the runtime's name (`Builder::name`).
    pub(super) name: Option<(Ident, LitStr)>,
    /// `worker_threads = N` (tokio's name): `Builder::max_procs(N)`.
    pub(super) worker_threads: Option<(Ident, Literal)>,
    /// `tokio_compat` or `tokio_compat = true | false`: the side tokio
    /// runtime (`Builder::enable_tokio_compat`).
    pub(super) tokio_compat: Option<(Ident, syn::LitBool)>,
    /// `max_procs = N`.
    pub(super) max_procs: Option<(Ident, Literal)>,
    /// `global_queue_interval = N`.
    pub(super) global_queue_interval: Option<(Ident, Literal)>,
    /// `topology = "spec"`.
    pub(super) topology: Option<(Ident, LitStr)>,
    /// `deadlock = "warn" | "panic" | "off"`: the deadlock diagnostic
    /// (tests default to `panic`).
    pub(super) deadlock: Option<(Ident, Ident)>,
    /// `start_paused = true | false`: the runtime's clock starts paused
    /// (`numa_rt::time::pause`).
    pub(super) start_paused: Option<(Ident, syn::LitBool)>,
}

/// How the body runs (tokio's runtime flavors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flavor {
    /// One P, the body a task on it (`Runtime::run_on_worker`): it never runs at the same time as
    /// the tasks it spawns. `#[numa_rt::test]`'s default.
    CurrentThread,
    /// `max_procs` P's (by default the CPU quota), the body polled by `block_on` on the calling
    /// thread. `#[numa_rt::main]`'s default, and a test's when it sets the number of P's.
    MultiThread,
}

impl Config {
    /// The flavor: as given, else `current_thread` for a test that does not set the number of P's
    /// (tokio's default for tests), else `multi_thread`.
    pub(super) fn flavor(&self, kind: Kind) -> Flavor {
        match &self.flavor {
            Some((_, f)) => *f,
            None if kind == Kind::Test
                && self.max_procs.is_none()
                && self.worker_threads.is_none() =>
            {
                Flavor::CurrentThread
            }
            None => Flavor::MultiThread,
        }
    }

    /// Whether any runtime setting (as opposed to `crate`) was given, i.e. whether the runtime is
    /// built with `Builder` rather than `Runtime::new()`.
    pub(super) fn uses_builder(&self) -> bool {
        self.flavor.is_some()
            || self.worker_threads.is_some()
            || self.tokio_compat.is_some()
            || self.max_procs.is_some()
            || self.global_queue_interval.is_some()
            || self.topology.is_some()
            || self.deadlock.is_some()
            || self.start_paused.is_some()
            || self.name.is_some()
    }
}

/// Parses and checks the attribute's arguments. Returns the arguments that are valid together with
/// the errors for the others (a syntax error stops parsing, so then the config is empty).
pub(super) fn parse_config(args: TokenStream) -> (Config, Option<syn::Error>) {
    let mut config = Config::default();
    let parsed = match Punctuated::<Arg, Token![,]>::parse_terminated.parse2(args) {
        Ok(parsed) => parsed,
        Err(e) => return (config, Some(e)),
    };
    let mut seen: Vec<String> = Vec::new();
    let mut errors = None;
    for arg in parsed {
        if let Err(e) = apply_arg(&mut config, &mut seen, arg) {
            push_error(&mut errors, e);
        }
    }
    if let Err(e) = check_combination(&mut config) {
        push_error(&mut errors, e);
    }
    (config, errors)
}

/// The arguments that contradict each other; the later one is dropped from `config`.
pub(super) fn check_combination(config: &mut Config) -> syn::Result<()> {
    let mut errors = None;
    if let (Some(_), Some((key, _))) = (&config.max_procs, &config.worker_threads) {
        push_error(
            &mut errors,
            syn::Error::new_spanned(
                key,
                "`worker_threads` and `max_procs` are the same setting (the number of P's): give one",
            ),
        );
        config.worker_threads = None;
    }
    if let Some((_, Flavor::CurrentThread)) = &config.flavor {
        for (key, _) in [config.max_procs.take(), config.worker_threads.take()]
            .into_iter()
            .flatten()
        {
            push_error(
                &mut errors,
                syn::Error::new_spanned(
                    &key,
                    format!(
                        "`{key}` needs `flavor = \"multi_thread\"`: \"current_thread\" runs one P"
                    ),
                ),
            );
        }
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Checks one argument and records it in `config`.
pub(super) fn apply_arg(config: &mut Config, seen: &mut Vec<String>, arg: Arg) -> syn::Result<()> {
    let name = arg.key.unraw().to_string();
    if !KNOWN_ARGS.contains(&name.as_str()) {
        return Err(unknown_arg(&arg.key));
    }
    if seen.contains(&name) {
        return Err(syn::Error::new_spanned(
            &arg.key,
            format!("duplicate attribute `{name}`: each argument may be given only once"),
        ));
    }
    seen.push(name.clone());
    match name.as_str() {
        "flavor" => {
            let lit = string_lit(&name, &arg.value, "\"current_thread\"")?;
            let flavor = match lit.value().as_str() {
                // tokio's local runtime runs everything on one thread and lets the body spawn
                // `!Send` tasks: numa_rt's current-thread body is already a pinned task on the
                // one P, where `spawn_local` works and everything runs on the P's thread.
                "current_thread" | "local" => Flavor::CurrentThread,
                "multi_thread" => Flavor::MultiThread,
                other => {
                    return Err(syn::Error::new_spanned(
                        &lit,
                        format!(
                            "`flavor` is \"current_thread\", \"multi_thread\" or \"local\", \
                             not {other:?}"
                        ),
                    ))
                }
            };
            config.flavor = Some((arg.key, flavor));
        }
        "worker_threads" => {
            let n = positive_int(&name, &arg.value, "4", usize::MAX as u64)?;
            config.worker_threads = Some((arg.key, n));
        }
        "tokio_compat" => {
            config.tokio_compat = Some((arg.key, bool_lit(&name, &arg.value)?));
        }
        "max_procs" => {
            let n = positive_int(&name, &arg.value, "4", usize::MAX as u64)?;
            config.max_procs = Some((arg.key, n));
        }
        "global_queue_interval" => {
            let n = positive_int(&name, &arg.value, "61", u32::MAX.into())?;
            config.global_queue_interval = Some((arg.key, n));
        }
        "topology" => {
            let lit = string_lit(&name, &arg.value, "\"0;1\"")?;
            if lit.value().trim().is_empty() {
                return Err(syn::Error::new_spanned(
                    &lit,
                    "`topology` must not be empty: give NUMA nodes separated by `;`, \
                     each a CPU list, as in `topology = \"0-3;4-7\"`",
                ));
            }
            config.topology = Some((arg.key, lit));
        }
        "deadlock" => {
            let lit = string_lit(&name, &arg.value, "\"warn\"")?;
            let variant = match lit.value().as_str() {
                "warn" => "Warn",
                "panic" => "Panic",
                "off" => "Off",
                other => {
                    return Err(syn::Error::new_spanned(
                        &lit,
                        format!("`deadlock` is \"warn\", \"panic\" or \"off\", not {other:?}"),
                    ))
                }
            };
            config.deadlock = Some((arg.key, Ident::new(variant, lit.span())));
        }
        "start_paused" => {
            config.start_paused = Some((arg.key, bool_lit(&name, &arg.value)?));
        }
        "name" => {
            let lit = string_lit(&name, &arg.value, "\"my-service\"")?;
            config.name = Some((arg.key, lit));
        }
        "crate" => {
            let lit = string_lit(&name, &arg.value, "\"numa_rt\"")?;
            let path = lit.parse::<Path>().map_err(|_| {
                syn::Error::new_spanned(
                    &lit,
                    format!(
                        "`crate` must be a path such as \"numa_rt\" or \"::my::rt\", not {:?}",
                        lit.value()
                    ),
                )
            })?;
            config.crate_path = Some(path);
        }
        _ => unreachable!("every name in KNOWN_ARGS is handled"),
    }
    Ok(())
}

/// Looks through the invisible groups `macro_rules!` puts around `$x:expr` fragments.
pub(super) fn strip_groups(mut value: &Expr) -> &Expr {
    while let Expr::Group(g) = value {
        value = &g.expr;
    }
    value
}

/// `value` as an integer literal in `1..=max`, re-emitted unsuffixed with the literal's span (so
/// `4usize` and `4` both work, whatever integer type the builder takes).
pub(super) fn positive_int(
    name: &str,
    value: &Expr,
    example: &str,
    max: u64,
) -> syn::Result<Literal> {
    let value = strip_groups(value);
    let too_small = || syn::Error::new_spanned(value, format!("`{name}` must be at least 1"));
    match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(int), ..
        }) => {
            let n = int
                .base10_parse::<u64>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| {
                    syn::Error::new_spanned(int, format!("`{name}` is too large: at most {max}"))
                })?;
            if n == 0 {
                return Err(too_small());
            }
            let mut lit = Literal::u64_unsuffixed(n);
            lit.set_span(int.span());
            Ok(lit)
        }
        // `-1`: a literal, just not an allowed one.
        Expr::Unary(u)
            if matches!(u.op, UnOp::Neg(_))
                && matches!(
                    strip_groups(&u.expr),
                    Expr::Lit(syn::ExprLit {
                        lit: Lit::Int(_),
                        ..
                    })
                ) =>
        {
            Err(too_small())
        }
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`{name}` expects an integer literal, as in `{name} = {example}`"),
        )),
    }
}

/// `value` as `true` or `false`.
pub(super) fn bool_lit(name: &str, value: &Expr) -> syn::Result<syn::LitBool> {
    match strip_groups(value) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(b.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{name}` expects `true` or `false`, as in `{name} = true`"),
        )),
    }
}

/// `value` as a string literal.
pub(super) fn string_lit(name: &str, value: &Expr, example: &str) -> syn::Result<LitStr> {
    match strip_groups(value) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{name}` expects a string literal, as in `{name} = {example}`"),
        )),
    }
}
