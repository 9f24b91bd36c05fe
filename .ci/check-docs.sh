#!/usr/bin/env bash
# Checks that the user docs link only to what is there, name only APIs that
# exist, and call missing only what is missing.
#
# 0. Every relative link in README.md and docs/ (the notes too) reaches a
#    file, and its `#anchor` a heading of that file (GitHub's anchors: lower
#    case; ASCII letters, digits, `-` and `_` kept; spaces as `-`).
# 1. Every `numa_rt::…` and `numa_rt_util::…` path written in README.md,
#    docs/guide.md or docs/web.md (in prose, tables or code) must resolve: an item, module,
#    macro or `{group}`/`*` import is `use`d; a `Type::method` (or an
#    associated constant) is named as a value in a function.
# 2. A line there that says something is "not provided" (or "is missing",
#    "are missing", "does not exist") about a `tokio::…` or `tokio_util::…`
#    path must be true: the renamed path (`numa_rt::…`, `numa_rt_util::…`)
#    must not resolve.
#
# For 1 and 2 it writes one small crate into target/docs-check/ (numa_rt
# with every feature, and numa_rt_util), one module per path, with the
# workspace's Cargo.lock and target dir (so nothing new is downloaded and
# the workspace's dependencies are reused), runs `cargo check` on it and
# reads the errors back to the doc lines. Names after the word "target"
# (tracing targets such as `numa_rt::sysmon`) are not paths.
# Run from anywhere: `bash .ci/check-docs.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
docs=(README.md docs/guide.md docs/web.md)
crate=target/docs-check
mkdir -p "$crate/src"

# 0. Links.
slugs() {
  awk '/^#+ / { sub(/^#+ +/, ""); s = tolower($0); gsub(/[^a-z0-9 _-]/, "", s); gsub(/ /, "-", s); print s }' "$1"
}
links_bad=0
for f in README.md docs/*.md docs/notes/*.md; do
  dir=$(dirname "$f")
  while IFS=: read -r line target; do
    case $target in http://* | https://* | mailto:*) continue ;; esac
    path=${target%%#*}
    anchor=
    case $target in *#*) anchor=${target#*#} ;; esac
    file=$f
    [ -n "$path" ] && file=$dir/$path
    if [ ! -e "$file" ]; then
      echo "$f:$line: the link to $target reaches no file ($file)"
      links_bad=1
    elif [ -n "$anchor" ] && ! slugs "$file" | grep -qxF -- "$anchor"; then
      echo "$f:$line: the link to $target names no heading of $file"
      links_bad=1
    fi
  done < <({ grep -noE '\]\([^) ]+\)' "$f" || true; } | sed -E 's/^([0-9]+):\]\((.*)\)$/\1:\2/')
done
if [ "$links_bad" != 0 ]; then
  echo "check-docs: broken links (above)" >&2
  exit 1
fi

# 1 and 2. One path (optionally with `{a, b}`, `*` or a macro's `!`) per match.
path_re='(numa_rt|numa_rt_util|tokio|tokio_util)(::[A-Za-z_][A-Za-z0-9_]*)*(::\{[A-Za-z0-9_, ]*\}|::\*)?!?'
claim_re='not provided|not yet provided|is missing|are missing|does not exist'

# "kind<TAB>file:line<TAB>path": kind is `has` (must resolve) or `lacks`.
list=$crate/paths.tsv
: >"$list"
for f in "${docs[@]}"; do
  { grep -noE "(target \`)?$path_re" "$f" || true; } | while IFS= read -r m; do
    line=${m%%:*}
    p=${m#*:}
    case $p in target*) continue ;; esac
    case $p in numa_rt::* | numa_rt_util::*) printf 'has\t%s:%s\t%s\n' "$f" "$line" "$p" ;; esac
  done >>"$list"
  { grep -niE "$claim_re" "$f" || true; } | while IFS= read -r l; do
    line=${l%%:*}
    printf '%s\n' "${l#*:}" | { grep -oE "\`$path_re" || true; } | sed 's/^`//' | while IFS= read -r p; do
      case $p in
        tokio_util::*) printf 'lacks\t%s:%s\t%s\n' "$f" "$line" "numa_rt_util::${p#tokio_util::}" ;;
        tokio::*) printf 'lacks\t%s:%s\t%s\n' "$f" "$line" "numa_rt::${p#tokio::}" ;;
      esac
    done
  done >>"$list"
done

# One module per path: its line number in lib.rs maps an error back.
awk -F'\t' '
  BEGIN {
    print "#![allow(unused_imports, dead_code, non_snake_case, clippy::all)]"
  }
  {
    p = $3
    sub(/!$/, "", p)
    n = split(p, seg, "::")
    last = seg[n]; prev = seg[n - 1]
    value = (n >= 3 && prev ~ /^[A-Z]/ && last !~ /^[A-Z][a-z]/ && last !~ /[{*]/)
    if (value) body = "fn f() { let _ = " p "; }"
    else body = "use " p ";"
    printf "mod m%d { %s } // %s %s %s\n", NR, body, $1, $2, $3
  }' "$list" >"$crate/src/lib.rs"

# Every feature of numa_rt and numa_rt_util but `default`, so that a path
# behind one resolves.
features_of() {
  awk '/^\[features\]/ { f = 1; next } /^\[/ { f = 0 }
    f && /^[A-Za-z0-9_-]+ *=/ { sub(/ *=.*/, ""); if ($0 != "default") printf "%s\"%s\"", (n++ ? ", " : ""), $0 }' "$1"
}
features=$(features_of Cargo.toml)
util_features=$(features_of util/Cargo.toml)
cat >"$crate/Cargo.toml" <<EOF
[package]
name = "numa_rt_docs_check"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "src/lib.rs"

[dependencies]
numa_rt = { path = "$root", features = [$features] }
numa_rt_util = { path = "$root/util", features = [$util_features] }

[workspace]
EOF
cp Cargo.lock "$crate/Cargo.lock"

out=$crate/check.log
set +e
CARGO_TARGET_DIR="$root/target" cargo check --quiet --message-format=short \
  --manifest-path "$crate/Cargo.toml" >"$out" 2>&1
set -e
# A dependency that failed to build, or cargo itself, is not a doc error.
if grep -E '^error' "$out" | grep -vqE '^error: (could not compile `numa_rt_docs_check`|aborting)'; then
  cat "$out"
  echo "check-docs: cargo failed outside the generated paths" >&2
  exit 1
fi

# Errors by line of lib.rs: inference errors (E0282, E0283, E0284, E0790) mean
# the value path resolved and only its generic types are open.
bad=0
awk -v out="$out" '
  BEGIN {
    while ((getline l < out) > 0) {
      if (match(l, /src\/lib\.rs:[0-9]+:[0-9]+: error(\[E[0-9]+\])?/)) {
        s = substr(l, RSTART, RLENGTH)
        split(s, a, ":")
        code = s; sub(/.*error/, "", code); gsub(/[\[\]]/, "", code)
        infer = (code == "E0282" || code == "E0283" || code == "E0284" || code == "E0790")
        if (!infer) resolved_not[a[2]] = 1
        err[a[2]] = 1
        msg[a[2]] = msg[a[2]] "\n      " l
      }
    }
  }
  NR > 1 {
    rest = substr($0, index($0, " // ") + 4)
    kind = substr(rest, 1, index(rest, " ") - 1); rest = substr(rest, index(rest, " ") + 1)
    where = substr(rest, 1, index(rest, " ") - 1); path = substr(rest, index(rest, " ") + 1)
    if (kind == "has" && (NR in resolved_not)) {
      printf "%s: `%s` does not exist%s\n", where, path, msg[NR]; bad = 1
    }
    if (kind == "lacks" && !(NR in err)) {
      printf "%s: said to be missing, but `%s` exists\n", where, path; bad = 1
    }
  }
  END { exit bad }' "$crate/src/lib.rs" || bad=1

checked=$(wc -l <"$list")
if [ "$bad" != 0 ]; then
  echo "check-docs: the docs name APIs wrongly (above); generated crate: $crate" >&2
  exit 1
fi
echo "check-docs: $checked path(s) in ${docs[*]} checked"
