//! The logic behind `#[numa_rt::main]` and `#[numa_rt::test]`, on `proc_macro2` types so it can be
//! unit-tested outside a compiler invocation.
//!
//! Both entry points follow the same steps: parse the arguments into a [`Config`], check that the
//! function is one the attribute can wrap, then emit a synchronous function that builds a runtime and
//! runs the original body, an `async move` block, on it: `block_on` on the calling thread
//! (`multi_thread`), or `Runtime::run_on_worker` as a task on the one P (`current_thread`, a test's
//! default). Every problem becomes a
//! `compile_error!` spanned at the offending token; the arguments' errors are collected together so
//! one build shows all of them. Next to the errors we still emit a function with the same name, so
//! the user doesn't also get "`main` function not found" or errors about the macro's own output.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{AttrStyle, Attribute, Ident, ItemFn, ReturnType};

mod args;
use args::{parse_config, Config, Flavor};

/// The message a failed runtime construction panics with.
const BUILD_FAILED: &str = "failed to build the numa_rt runtime";

/// Which attribute is being expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `#[numa_rt::main]`.
    Main,
    /// `#[numa_rt::test]`.
    Test,
}

impl Kind {
    /// The attribute as users write it, for error messages.
    fn attr(self) -> &'static str {
        match self {
            Kind::Main => "#[numa_rt::main]",
            Kind::Test => "#[numa_rt::test]",
        }
    }
}

/// Expands `#[numa_rt::main(args)]` applied to `item`.
pub(crate) fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Kind::Main, args, item)
}

/// Expands `#[numa_rt::test(args)]` applied to `item`.
pub(crate) fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Kind::Test, args, item)
}

/// Shared driver: parse, check, emit (with the errors, if any, in front of a stand-in function).
fn expand(kind: Kind, args: TokenStream, item: TokenStream) -> TokenStream {
    let (config, arg_errors) = parse_config(args);
    let func: ItemFn = match syn::parse2(item.clone()) {
        Ok(func) => func,
        // Give the item back untouched next to the error, so the only error the user sees is ours.
        Err(parse_error) => {
            // Another kind of item gets our message; something syn can't parse, its own.
            let err = match syn::parse2::<syn::Item>(item.clone()) {
                Ok(_) => syn::Error::new_spanned(
                    &item,
                    format!("{} can only be applied to an `async fn`", kind.attr()),
                ),
                Err(_) => parse_error,
            };
            let mut errors = arg_errors;
            push_error(&mut errors, err);
            return join(
                errors.map(|e| e.to_compile_error()).unwrap_or_default(),
                item,
            );
        }
    };
    let mut errors = arg_errors;
    let shape_ok = match check_fn(kind, &func) {
        Ok(()) => true,
        Err(e) => {
            push_error(&mut errors, e);
            false
        }
    };
    let output = if shape_ok {
        // Arguments that failed to parse are left out of `config`, so this expansion type-checks
        // the body (its errors are worth seeing too) without piling up errors of our own.
        expand_fn(kind, &config, func)
    } else {
        stand_in(kind, &func)
    };
    match errors {
        Some(e) => join(e.to_compile_error(), output),
        None => output,
    }
}

/// Appends `new` to the accumulated errors.
fn push_error(errors: &mut Option<syn::Error>, new: syn::Error) {
    match errors {
        Some(e) => e.combine(new),
        None => *errors = Some(new),
    }
}

/// Concatenates two token streams.
fn join(mut a: TokenStream, b: TokenStream) -> TokenStream {
    a.extend(b);
    a
}

/// Checks that `func` is something the attribute can wrap. Every problem found is reported.
fn check_fn(kind: Kind, func: &ItemFn) -> syn::Result<()> {
    let sig = &func.sig;
    let attr = kind.attr();
    let mut errors = None;
    if sig.asyncness.is_none() {
        push_error(
            &mut errors,
            syn::Error::new_spanned(
                sig.fn_token,
                format!("the `async` keyword is missing from the function declaration: {attr} needs an `async fn`"),
            ),
        );
    }
    // tokio's rule: a `#[main]` function other than `main` may take parameters (a method taking
    // `self`); the body then runs on the calling thread (`block_on`, see `expand_fn`).
    let may_take = kind == Kind::Main && sig.ident != "main" && sig.variadic.is_none();
    if !may_take && (!sig.inputs.is_empty() || sig.variadic.is_some()) {
        let what = match kind {
            Kind::Main if sig.ident == "main" => "the `main` function".to_string(),
            _ => format!("a {attr} function"),
        };
        push_error(
            &mut errors,
            syn::Error::new_spanned(&sig.inputs, format!("{what} cannot take parameters")),
        );
    }
    let generic = !sig.generics.params.is_empty() || sig.generics.where_clause.is_some();
    if generic && (kind == Kind::Test || sig.ident == "main") {
        let what = match kind {
            Kind::Main => "the `main` function",
            Kind::Test => "a test function",
        };
        // `Generics` prints only `<...>`, so point at the `where` clause when that's all there is.
        let err = if sig.generics.params.is_empty() {
            syn::Error::new_spanned(
                &sig.generics.where_clause,
                format!("{what} cannot be generic"),
            )
        } else {
            syn::Error::new_spanned(&sig.generics, format!("{what} cannot be generic"))
        };
        push_error(&mut errors, err);
    }
    if kind == Kind::Test {
        if let Some(test_attr) = func.attrs.iter().find(|a| is_test_attr(a)) {
            push_error(
                &mut errors,
                syn::Error::new_spanned(
                    test_attr,
                    "second test attribute: #[numa_rt::test] already emits `#[test]`, remove this one",
                ),
            );
        }
    }
    match errors {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `#[test]`, or the prelude's test attribute spelled out (`#[core::prelude::v1::test]`).
fn is_test_attr(attr: &Attribute) -> bool {
    let path = attr.path();
    path.is_ident("test")
        || (path.segments.last().is_some_and(|s| s.ident == "test")
            && path.segments.iter().any(|s| s.ident == "prelude"))
}

/// The function's return type, `()` when none is written.
fn output_type(ret: &ReturnType) -> TokenStream {
    match ret {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => ty.to_token_stream(),
    }
}

/// Whether the return type can't be named inside the function: it mentions `impl` (`-> impl
/// Trait`) or `!` (unstable outside a return type). The body's output is then left to inference.
fn unnameable(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|tt| match tt {
        TokenTree::Ident(i) => i == "impl",
        TokenTree::Punct(p) => p.as_char() == '!',
        TokenTree::Group(g) => unnameable(g.stream()),
        TokenTree::Literal(_) => false,
    })
}

/// `result` (a `Result` whose error is `Display`) unwrapped, or a panic that prints `what` and the
/// error's message. `.expect(..)` would print the error's `Debug` form, which for an `io::Error`
/// built from a message is `Custom { kind: InvalidInput, error: "..." }` instead of the message.
fn unwrap_display(result: TokenStream, what: &str) -> TokenStream {
    let ok = Ident::new("__numa_rt_ok", Span::mixed_site());
    let err = Ident::new("__numa_rt_err", Span::mixed_site());
    quote! {
        match #result {
            ::core::result::Result::Ok(#ok) => #ok,
            ::core::result::Result::Err(#err) => ::core::panic!("{}: {}", #what, #err),
        }
    }
}

/// The expression that creates the runtime, per `config`.
fn runtime_expr(kind: Kind, config: &Config) -> TokenStream {
    let krate = match &config.crate_path {
        Some(path) => path.to_token_stream(),
        None => quote!(::numa_rt),
    };
    if !config.uses_builder() && kind != Kind::Test {
        return unwrap_display(quote! { #krate::Runtime::new() }, BUILD_FAILED);
    }
    let mut calls = TokenStream::new();
    // Each call carries its argument's span: if the runtime's API disagrees, the error points there.
    if config.flavor(kind) == Flavor::CurrentThread {
        let span = config
            .flavor
            .as_ref()
            .map_or_else(Span::call_site, |(key, _)| key.span());
        calls.extend(quote_spanned! {span=> .max_procs(1) });
    }
    if let Some((key, n)) = &config.max_procs {
        calls.extend(quote_spanned! {key.span()=> .max_procs(#n) });
    }
    if let Some((key, n)) = &config.worker_threads {
        calls.extend(quote_spanned! {key.span()=> .max_procs(#n) });
    }
    if let Some((key, n)) = &config.global_queue_interval {
        calls.extend(quote_spanned! {key.span()=> .global_queue_interval(#n) });
    }
    if let Some((key, spec)) = &config.topology {
        let msg = format!(
            "invalid `topology = {:?}` in the numa_rt attribute",
            spec.value()
        );
        let topology = unwrap_display(
            quote_spanned! {key.span()=> #krate::numa::Topology::from_spec(#spec) },
            &msg,
        );
        calls.extend(quote_spanned! {key.span()=> .topology(#topology) });
    }
    match &config.deadlock {
        Some((key, variant)) => calls.extend(quote_spanned! {key.span()=>
            .deadlock(#krate::DeadlockMode::#variant)
        }),
        // A test that hangs on a deadlock fails instead, with the
        // diagnostic (unless NUMA_RT_DEADLOCK says otherwise).
        None if kind == Kind::Test => calls.extend(quote! {
            .deadlock_default(#krate::DeadlockMode::Panic)
        }),
        None => {}
    }
    if let Some((key, b)) = &config.start_paused {
        calls.extend(quote_spanned! {key.span()=> .start_paused(#b) });
    }
    if let Some((key, n)) = &config.name {
        calls.extend(quote_spanned! {key.span()=> .name(#n) });
    }
    match &config.tokio_compat {
        // `enable_tokio_compat` exists only with numa_rt's `tokio-compat` feature: the facade's
        // `__tokio_compat!` calls it, or is a compile error naming the feature.
        Some((key, b)) if b.value => {
            let builder = Ident::new("builder", Span::mixed_site());
            let compat = quote_spanned! {key.span()=> #krate::__tokio_compat!(#builder); };
            let calls = if calls.is_empty() {
                TokenStream::new()
            } else {
                quote! { #builder #calls; }
            };
            let built = unwrap_display(quote! { #builder.build() }, BUILD_FAILED);
            quote! {{
                let mut #builder = #krate::Builder::new();
                #calls
                #compat
                #built
            }}
        }
        _ => unwrap_display(
            quote! { #krate::Builder::new() #calls .build() },
            BUILD_FAILED,
        ),
    }
}

/// The synchronous function that runs `func`'s body on a new runtime.
fn expand_fn(kind: Kind, config: &Config, func: ItemFn) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        mut sig,
        block,
    } = func;
    sig.asyncness = None;
    // syn keeps the body's inner attributes (`#![allow(..)]`) with the outer ones; they go back
    // inside the function.
    let (outer, inner): (Vec<_>, Vec<_>) = attrs
        .into_iter()
        .partition(|a| matches!(a.style, AttrStyle::Outer));
    let stmts = &block.stmts;
    // Mixed-site hygiene: the user's body can't see or shadow these names.
    let rt = Ident::new("rt", Span::mixed_site());
    let body = Ident::new("body", Span::mixed_site());
    let output = output_type(&sig.output);
    // Spanned at the return type, so "return type inferred to be `R` here" points at the signature.
    // (Plain user hygiene is safe: no user code is in this binding's scope; the unusual name keeps a
    // constant the user might have called `ret` from turning the pattern into a comparison.)
    let ret_span = match &sig.output {
        ReturnType::Default => Span::call_site(),
        ReturnType::Type(_, ty) => ty.span(),
    };
    let ret = Ident::new("__numa_rt_ret", ret_span);
    let typed = !unnameable(output.clone());
    let runtime = runtime_expr(kind, config);

    // The body's `?` and `return` leave the async block, so its output type must be the function's
    // return type. A `return` of that type ahead of the body (never taken) fixes it up front, for
    // inference and for errors at the user's expressions. The body's statements follow as they
    // are, its last expression the block's value: a diverging body (a server's `loop {}`) or a
    // panicking test then triggers no lint about code the user didn't write.
    let async_body = if typed {
        let fix_output = quote_spanned! {ret_span=>
            if let ::core::option::Option::Some(#ret) = ::core::option::Option::<#output>::None {
                return #ret;
            }
        };
        quote! {
            async move {
                #fix_output
                #(#stmts)*
            }
        }
    } else {
        quote! { async move #block }
    };
    // A body that uses the function's parameters (a method's `self`) is polled where they are,
    // by `block_on`: `run_on_worker` would need them `Send + 'static`.
    if config.flavor(kind) == Flavor::CurrentThread && sig.inputs.is_empty() {
        // The body is built and polled on the one worker (`Runtime::run_on_worker`), so it never
        // races its own tasks. Tests erase its type: `run_on_worker` is instantiated once per
        // output type rather than once per test.
        let make = Ident::new("make", Span::mixed_site());
        let test_attr = match kind {
            Kind::Test => quote!(#[::core::prelude::v1::test]),
            Kind::Main => TokenStream::new(),
        };
        let run = if kind == Kind::Test && typed {
            quote! {
                let #make: ::std::boxed::Box<
                    dyn ::core::ops::FnOnce() -> ::core::pin::Pin<
                        ::std::boxed::Box<dyn ::core::future::Future<Output = #output>>,
                    > + ::core::marker::Send,
                > = ::std::boxed::Box::new(move || -> ::core::pin::Pin<
                    ::std::boxed::Box<dyn ::core::future::Future<Output = #output>>,
                > { ::std::boxed::Box::pin(#async_body) });
                #rt.run_on_worker(#make)
            }
        } else {
            quote! { #rt.run_on_worker(move || #async_body) }
        };
        return quote! {
            #test_attr
            #(#outer)*
            #vis #sig {
                #(#inner)*
                let #rt = #runtime;
                #run
            }
        };
    }
    // Tests pin the body and erase its type, so `block_on` is instantiated once per output type
    // rather than once per test: many tests, less code to compile.
    let erase = if kind == Kind::Test && typed {
        quote! {
            let #body = ::core::pin::pin!(#body);
            let #body: ::core::pin::Pin<&mut dyn ::core::future::Future<Output = #output>> = #body;
        }
    } else {
        TokenStream::new()
    };
    let test_attr = match kind {
        Kind::Test => quote!(#[::core::prelude::v1::test]),
        Kind::Main => TokenStream::new(),
    };
    // The runtime is created first so that it is dropped last, after the (pinned) body.
    quote! {
        #test_attr
        #(#outer)*
        #vis #sig {
            #(#inner)*
            let #rt = #runtime;
            let #body = #async_body;
            #erase
            #rt.block_on(#body)
        }
    }
}

/// What to emit next to a function-shape error: a function of the same name that compiles
/// whatever the original looked like (no `async`, parameters, generics or body), so that the
/// error above it is the only one. Tests keep `#[test]` so it isn't reported as dead code.
fn stand_in(kind: Kind, func: &ItemFn) -> TokenStream {
    let attrs = func
        .attrs
        .iter()
        .filter(|a| matches!(a.style, AttrStyle::Outer))
        .filter(|a| !(kind == Kind::Test && is_test_attr(a)));
    let vis = &func.vis;
    let ident = &func.sig.ident;
    let test_attr = match kind {
        Kind::Test => quote!(#[::core::prelude::v1::test]),
        Kind::Main => quote!(#[allow(dead_code)]),
    };
    let msg = format!("{} could not expand this function", kind.attr());
    let span = func.sig.span();
    quote_spanned! {span=>
        #test_attr
        #(#attrs)*
        #vis fn #ident() {
            ::core::panic!(#msg)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::LitStr;

    /// Expands `#[numa_rt::main(args)]` on `item`, both given as source text.
    fn main_str(args: &str, item: &str) -> String {
        main(args.parse().unwrap(), item.parse().unwrap()).to_string()
    }

    /// Expands `#[numa_rt::test(args)]` on `item`, both given as source text.
    fn test_str(args: &str, item: &str) -> String {
        test(args.parse().unwrap(), item.parse().unwrap()).to_string()
    }

    /// The messages of the `compile_error!`s in an expansion.
    fn errors(expansion: &str) -> Vec<String> {
        let file: syn::File = syn::parse_str(expansion).expect("expansion parses as items");
        file.items
            .iter()
            .filter_map(|item| match item {
                syn::Item::Macro(m)
                    if m.mac.path.segments.last().unwrap().ident == "compile_error" =>
                {
                    Some(syn::parse2::<LitStr>(m.mac.tokens.clone()).unwrap().value())
                }
                _ => None,
            })
            .collect()
    }

    /// The messages of the errors for `args` alone, via the config parser.
    fn arg_errors(args: &str) -> Vec<String> {
        match parse_config(args.parse().unwrap()).1 {
            Some(e) => e.into_iter().map(|e| e.to_string()).collect(),
            None => vec![],
        }
    }

    /// Removes all whitespace, so expansions can be compared regardless of spacing.
    fn squash(s: &str) -> String {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    }

    #[test]
    fn accepts_every_argument() {
        let (config, errors) = parse_config(
            r#"max_procs = 4, topology = "0;1", global_queue_interval = 31, crate = "rt","#
                .parse()
                .unwrap(),
        );
        assert!(errors.is_none());
        assert_eq!(config.max_procs.unwrap().1.to_string(), "4");
        assert_eq!(config.global_queue_interval.unwrap().1.to_string(), "31");
        assert_eq!(config.topology.unwrap().1.value(), "0;1");
        assert_eq!(
            config.crate_path.unwrap().to_token_stream().to_string(),
            "rt"
        );
    }

    #[test]
    fn empty_arguments_are_fine() {
        let (config, errors) = parse_config(TokenStream::new());
        assert!(errors.is_none());
        assert!(!config.uses_builder());
        assert!(config.crate_path.is_none());
    }

    #[test]
    fn integer_suffixes_are_dropped() {
        let (config, errors) = parse_config("max_procs = 4usize".parse().unwrap());
        assert!(errors.is_none());
        assert_eq!(config.max_procs.unwrap().1.to_string(), "4");
    }

    #[test]
    fn unknown_argument() {
        assert_eq!(
            arg_errors("foo = 1"),
            ["unknown attribute `foo`: expected one of `flavor`, `worker_threads`, `max_procs`, `topology`, `global_queue_interval`, `deadlock`, `start_paused`, `tokio_compat`, `name`, `crate`"]
        );
        // Unknown and without a value: still reported as unknown.
        assert!(arg_errors("foo")[0].starts_with("unknown attribute `foo`"));
        assert_eq!(
            arg_errors("flavor"),
            ["`flavor` needs a value: write `flavor = ...`"]
        );
    }

    #[test]
    fn wrong_literal_types() {
        assert_eq!(
            arg_errors(r#"max_procs = "4""#),
            ["`max_procs` expects an integer literal, as in `max_procs = 4`"]
        );
        assert_eq!(
            arg_errors("max_procs = n"),
            ["`max_procs` expects an integer literal, as in `max_procs = 4`"]
        );
        assert_eq!(
            arg_errors("max_procs = 1.5"),
            ["`max_procs` expects an integer literal, as in `max_procs = 4`"]
        );
        assert_eq!(
            arg_errors("topology = 3"),
            ["`topology` expects a string literal, as in `topology = \"0;1\"`"]
        );
        assert_eq!(
            arg_errors("global_queue_interval = true"),
            ["`global_queue_interval` expects an integer literal, as in `global_queue_interval = 61`"]
        );
        assert_eq!(
            arg_errors("crate = numa_rt"),
            ["`crate` expects a string literal, as in `crate = \"numa_rt\"`"]
        );
    }

    #[test]
    fn out_of_range_integers() {
        assert_eq!(
            arg_errors("max_procs = 0"),
            ["`max_procs` must be at least 1"]
        );
        assert_eq!(
            arg_errors("max_procs = -1"),
            ["`max_procs` must be at least 1"]
        );
        assert_eq!(
            arg_errors("global_queue_interval = 0"),
            ["`global_queue_interval` must be at least 1"]
        );
        assert_eq!(
            arg_errors("global_queue_interval = 4294967296"),
            ["`global_queue_interval` is too large: at most 4294967295"]
        );
    }

    #[test]
    fn bad_strings() {
        assert!(arg_errors(r#"topology = "  ""#)[0].starts_with("`topology` must not be empty"));
        assert!(arg_errors(r#"crate = "not a path""#)[0].starts_with("`crate` must be a path"));
    }

    #[test]
    fn duplicate_argument() {
        assert_eq!(
            arg_errors("max_procs = 2, max_procs = 3"),
            ["duplicate attribute `max_procs`: each argument may be given only once"]
        );
        // Even when the first one was rejected.
        assert_eq!(arg_errors("max_procs = 0, max_procs = 3").len(), 2);
    }

    #[test]
    fn all_argument_errors_are_reported_together() {
        assert_eq!(arg_errors("max_procs = 0, foo = 1, topology = 3").len(), 3);
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(
            arg_errors("max_procs"),
            ["`max_procs` needs a value: write `max_procs = ...`"]
        );
        assert_eq!(
            arg_errors("max_procs(4)"),
            ["`max_procs` needs a value: write `max_procs = ...`"]
        );
        assert_eq!(
            arg_errors("max_procs = 4 topology = \"0\""),
            ["expected `,`"]
        );
        assert!(arg_errors("4")[0].starts_with("expected an argument such as `max_procs = 4`"));
    }

    #[test]
    fn default_expansion_uses_runtime_new() {
        let out = main_str("", "async fn main() { work().await; }");
        assert!(errors(&out).is_empty());
        let out = squash(&out);
        assert!(out.contains(&squash(
            r#"match ::numa_rt::Runtime::new() {
                ::core::result::Result::Ok(__numa_rt_ok) => __numa_rt_ok,
                ::core::result::Result::Err(__numa_rt_err) =>
                    ::core::panic!("{}: {}", "failed to build the numa_rt runtime", __numa_rt_err),
            }"#
        )));
        assert!(out.contains(&squash(
            "async move {
                if let ::core::option::Option::Some(__numa_rt_ret) = ::core::option::Option::<()>::None {
                    return __numa_rt_ret;
                }
                work().await;
            }"
        )));
        assert!(out.contains(&squash("rt.block_on(body)")));
        assert!(out.starts_with("fnmain(){"), "{out}");
    }

    #[test]
    fn builder_expansion() {
        let out = main_str(
            r#"max_procs = 4, global_queue_interval = 31, topology = "0;1""#,
            "async fn main() {}",
        );
        assert!(squash(&out).contains(&squash(
            r#"match ::numa_rt::Builder::new()
                .max_procs(4)
                .global_queue_interval(31)
                .topology(match ::numa_rt::numa::Topology::from_spec("0;1") {
                    ::core::result::Result::Ok(__numa_rt_ok) => __numa_rt_ok,
                    ::core::result::Result::Err(__numa_rt_err) => ::core::panic!(
                        "{}: {}",
                        "invalid `topology = \"0;1\"` in the numa_rt attribute",
                        __numa_rt_err
                    ),
                })
                .build()
            {
                ::core::result::Result::Ok(__numa_rt_ok) => __numa_rt_ok,
                ::core::result::Result::Err(__numa_rt_err) =>
                    ::core::panic!("{}: {}", "failed to build the numa_rt runtime", __numa_rt_err),
            }"#
        )));
    }

    /// A failed build panics with the error's `Display` form: `.expect(..)` would print its
    /// `Debug` form (`Custom { kind: InvalidInput, error: "NUMA_RT_MAXPROCS=..." }`).
    #[test]
    fn build_errors_print_their_message() {
        for (kind, args) in [
            ("main", ""),
            ("main", "max_procs = 2"),
            ("test", ""),
            ("main", r#"topology = "0;1""#),
            ("test", "tokio_compat"),
        ] {
            let out = if kind == "main" {
                main_str(args, "async fn main() {}")
            } else {
                test_str(args, "async fn t() {}")
            };
            let out = squash(&out);
            assert!(!out.contains(".expect("), "{kind}({args}): {out}");
            assert!(!out.contains(".unwrap("), "{kind}({args}): {out}");
            assert!(
                out.contains(&squash(
                    r#"::core::panic!("{}: {}", "failed to build the numa_rt runtime", __numa_rt_err)"#
                )),
                "{kind}({args}): {out}"
            );
        }
    }

    #[test]
    fn start_paused_expansion_and_errors() {
        let out = squash(&main_str("start_paused = true", "async fn main() {}"));
        assert!(
            out.contains("::numa_rt::Builder::new().start_paused(true).build()"),
            "{out}"
        );
        let out = squash(&test_str("start_paused = false", "async fn t() {}"));
        assert!(out.contains(".start_paused(false).build()"), "{out}");
        for bad in [
            r#"start_paused = "true""#,
            "start_paused = 1",
            "start_paused = yes",
        ] {
            assert_eq!(
                arg_errors(bad),
                ["`start_paused` expects `true` or `false`, as in `start_paused = true`"]
            );
        }
    }

    #[test]
    fn tokio_flavors() {
        // A test's default: one P, the body a task on it.
        let out = squash(&test_str("", "async fn t() {}"));
        assert!(
            out.contains("::numa_rt::Builder::new().max_procs(1)"),
            "{out}"
        );
        assert!(out.contains("rt.run_on_worker(make)"), "{out}");
        assert!(!out.contains("block_on"), "{out}");
        // Setting the number of P's keeps the body on the test thread.
        let out = squash(&test_str("max_procs = 2", "async fn t() {}"));
        assert!(out.contains("rt.block_on(body)"), "{out}");
        let out = squash(&test_str(
            r#"flavor = "multi_thread", worker_threads = 3"#,
            "async fn t() {}",
        ));
        assert!(out.contains("Builder::new().max_procs(3)"), "{out}");
        assert!(out.contains("rt.block_on(body)"), "{out}");
        let out = squash(&test_str(r#"flavor = "multi_thread""#, "async fn t() {}"));
        assert!(!out.contains("max_procs"), "{out}");
        assert!(out.contains("rt.block_on(body)"), "{out}");
        // `main` defaults to multi_thread; current_thread is asked for.
        let out = squash(&main_str("", "async fn main() {}"));
        assert!(out.contains("rt.block_on(body)"), "{out}");
        let out = squash(&main_str(
            r#"flavor = "current_thread""#,
            "async fn main() {}",
        ));
        assert!(out.contains("Builder::new().max_procs(1).build()"), "{out}");
        assert!(out.contains("rt.run_on_worker(move||asyncmove{"), "{out}");
        let out = squash(&main_str("worker_threads = 2", "async fn main() {}"));
        assert!(out.contains("Builder::new().max_procs(2).build()"), "{out}");
    }

    #[test]
    fn flavor_errors() {
        assert_eq!(
            arg_errors(r#"flavor = "remote""#),
            [r#"`flavor` is "current_thread", "multi_thread" or "local", not "remote""#]
        );
        assert_eq!(
            arg_errors(r#"flavor = "current_thread", worker_threads = 2"#),
            [r#"`worker_threads` needs `flavor = "multi_thread"`: "current_thread" runs one P"#]
        );
        assert_eq!(
            arg_errors(r#"max_procs = 2, flavor = "current_thread""#),
            [r#"`max_procs` needs `flavor = "multi_thread"`: "current_thread" runs one P"#]
        );
        assert_eq!(
            arg_errors("worker_threads = 2, max_procs = 2"),
            ["`worker_threads` and `max_procs` are the same setting (the number of P's): give one"]
        );
        assert_eq!(
            arg_errors("worker_threads = 0"),
            ["`worker_threads` must be at least 1"]
        );
        assert_eq!(
            arg_errors("flavor = current_thread"),
            ["`flavor` expects a string literal, as in `flavor = \"current_thread\"`"]
        );
    }

    #[test]
    fn tokio_compat_argument() {
        for args in ["tokio_compat", "tokio_compat = true"] {
            let out = squash(&main_str(args, "async fn main() {}"));
            assert!(
                out.contains("letmutbuilder=::numa_rt::Builder::new();::numa_rt::__tokio_compat!(builder);matchbuilder.build()"),
                "{out}"
            );
        }
        let out = squash(&test_str("tokio_compat", "async fn t() {}"));
        assert!(
            out.contains("builder.max_procs(1).deadlock_default(::numa_rt::DeadlockMode::Panic);::numa_rt::__tokio_compat!(builder);"),
            "{out}"
        );
        let out = squash(&main_str("tokio_compat = false", "async fn main() {}"));
        assert!(!out.contains("__tokio_compat"), "{out}");
        assert_eq!(
            arg_errors("tokio_compat = 1"),
            ["`tokio_compat` expects `true` or `false`, as in `tokio_compat = true`"]
        );
    }

    #[test]
    fn crate_path_override() {
        let out = squash(&main_str(r#"crate = "rt""#, "async fn main() {}"));
        assert!(out.contains("rt::Runtime::new()"));
        assert!(!out.contains("numa_rt::Runtime"));
        let out = squash(&main_str(
            r#"crate = "::my::rt", max_procs = 1"#,
            "async fn main() {}",
        ));
        assert!(
            out.contains("::my::rt::Builder::new().max_procs(1)"),
            "{out}"
        );
    }

    #[test]
    fn return_type_is_enforced() {
        let out = squash(&main_str(
            "",
            "async fn main() -> Result<(), Box<dyn std::error::Error>> { Ok(()) }",
        ));
        assert!(
            out.starts_with("fnmain()->Result<(),Box<dynstd::error::Error>>{"),
            "{out}"
        );
        assert!(
            out.contains("::core::option::Option::<Result<(),Box<dynstd::error::Error>>>::None{return__numa_rt_ret;}Ok(())}"),
            "{out}"
        );
    }

    #[test]
    fn impl_trait_return_is_left_to_inference() {
        let out = main_str("", "async fn run() -> impl std::fmt::Debug { 1 }");
        assert!(errors(&out).is_empty());
        let out = squash(&out);
        assert!(out.contains("letbody=asyncmove{1};"), "{out}");
    }

    #[test]
    fn never_return_is_left_to_inference() {
        let out = squash(&main_str("", "async fn run() -> ! { loop {} }"));
        assert!(out.contains("letbody=asyncmove{loop{}};"), "{out}");
    }

    #[test]
    fn inner_attributes_stay_inside() {
        let out = squash(&main_str(
            "",
            "async fn main() { #![allow(unused)] let x = 1; }",
        ));
        assert!(out.starts_with("fnmain(){#![allow(unused)]letrt="), "{out}");
    }

    #[test]
    fn attributes_and_visibility_are_kept() {
        let out = squash(&main_str(
            "",
            "/// Docs.\n#[inline(never)] pub async fn main() {}",
        ));
        assert!(
            out.starts_with("#[doc=\"Docs.\"]#[inline(never)]pubfnmain(){"),
            "{out}"
        );
    }

    #[test]
    fn test_expansion() {
        let out = test_str(
            "max_procs = 2",
            "#[should_panic] #[ignore] async fn t() -> Result<(), String> { Ok(()) }",
        );
        assert!(errors(&out).is_empty());
        let out = squash(&out);
        assert!(
            out.starts_with(
                "#[::core::prelude::v1::test]#[should_panic]#[ignore]fnt()->Result<(),String>{"
            ),
            "{out}"
        );
        assert!(out.contains("::numa_rt::Builder::new().max_procs(2)"));
        assert!(out.contains(&squash(
            "let body: ::core::pin::Pin<&mut dyn ::core::future::Future<Output = Result<(), String>>> = body;"
        )));
    }

    #[test]
    fn not_async() {
        let out = main_str("", "fn main() {}");
        assert_eq!(
            errors(&out),
            ["the `async` keyword is missing from the function declaration: #[numa_rt::main] needs an `async fn`"]
        );
        let out = test_str("", "fn t() {}");
        assert_eq!(
            errors(&out),
            ["the `async` keyword is missing from the function declaration: #[numa_rt::test] needs an `async fn`"]
        );
    }

    #[test]
    fn parameters() {
        assert_eq!(
            errors(&main_str("", "async fn main(x: u32) {}")),
            ["the `main` function cannot take parameters"]
        );
        // tokio's rule: only `main` itself may not (a method taking `self` may).
        assert!(errors(&main_str("", "async fn run(x: u32) {}")).is_empty());
        assert!(errors(&main_str("", "async fn f(self) {}")).is_empty());
        assert_eq!(
            errors(&test_str("", "async fn t(x: u32) {}")),
            ["a #[numa_rt::test] function cannot take parameters"]
        );
    }

    #[test]
    fn generics() {
        assert_eq!(
            errors(&main_str("", "async fn main<T>() {}")),
            ["the `main` function cannot be generic"]
        );
        assert_eq!(
            errors(&main_str("", "async fn main() where u8: Copy {}")),
            ["the `main` function cannot be generic"]
        );
        assert_eq!(
            errors(&test_str("", "async fn t<T>() {}")),
            ["a test function cannot be generic"]
        );
        // Other functions may be generic: the body just runs to completion.
        assert!(errors(&main_str(
            "",
            "async fn run<T: Default>() -> T { T::default() }"
        ))
        .is_empty());
    }

    #[test]
    fn second_test_attribute() {
        assert_eq!(
            errors(&test_str("", "#[test] async fn t() {}")),
            ["second test attribute: #[numa_rt::test] already emits `#[test]`, remove this one"]
        );
        // The stand-in doesn't repeat it.
        let out = squash(&test_str("", "#[test] async fn t() {}"));
        assert_eq!(out.matches("v1::test]").count(), 1, "{out}");
        assert!(!out.contains("#[test]fn"), "{out}");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let out = main_str("max_procs = 0, foo = 1", "fn main<T>(x: T) {}");
        assert_eq!(errors(&out).len(), 5, "{out}");
    }

    #[test]
    fn argument_errors_still_expand_the_valid_rest() {
        let out = main_str(
            "max_procs = 0, global_queue_interval = 7",
            "async fn main() {}",
        );
        assert_eq!(errors(&out), ["`max_procs` must be at least 1"]);
        let out = squash(&out);
        assert!(
            out.contains("Builder::new().global_queue_interval(7).build()"),
            "{out}"
        );
    }

    #[test]
    fn stand_in_replaces_an_unusable_function() {
        let out = main_str("", "async fn main(x: u32) -> Result<(), ()> { Ok(()) }");
        let file: syn::File = syn::parse_str(&out).unwrap();
        let func = file
            .items
            .iter()
            .find_map(|i| match i {
                syn::Item::Fn(f) => Some(f),
                _ => None,
            })
            .unwrap();
        assert_eq!(func.sig.ident, "main");
        assert!(func.sig.inputs.is_empty() && func.sig.asyncness.is_none());
    }

    #[test]
    fn not_a_function() {
        let out = main_str("", "struct S;");
        assert_eq!(
            errors(&out),
            ["#[numa_rt::main] can only be applied to an `async fn`"]
        );
        assert!(out.contains("struct S"));
    }
}
