//! The topology spec language of [`Topology::from_spec`](crate::Topology::from_spec)
//! and `NUMA_RT_TOPOLOGY`.
//!
//! ```text
//! spec      = node *( ";" node )
//! node      = cpulist [ "@" distances ]
//! distances = number *( "," number )
//! ```
//!
//! A `cpulist` is a Linux cpulist (`0-3,8`, see [`CpuSet::parse`]). The
//! optional `@` row of node *i* gives its distance to every node, in order:
//! 10 to itself (Linux's `LOCAL_DISTANCE`), 11..=255 to the others. Either
//! every node has a row or none does; without rows local is 10 and remote 20.
//! Whitespace around any item is ignored.

use crate::error::TopologyErrorKind as Kind;
use crate::CpuSet;

/// Distance from a node to itself (Linux's `LOCAL_DISTANCE`).
pub const LOCAL_DISTANCE: u32 = 10;
/// Distance between two different nodes when a spec gives none (Linux's
/// `REMOTE_DISTANCE`, what a two-socket machine usually reports).
pub const REMOTE_DISTANCE: u32 = 20;
/// The largest distance: ACPI SLIT entries are bytes.
const MAX_DISTANCE: u32 = 255;

/// A spec that parsed and passed every check.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Spec {
    /// Each node's CPUs, in spec order; non-empty, disjoint and allowed.
    pub(crate) nodes: Vec<CpuSet>,
    /// The full distance matrix (given or default), row `i` for node `i`.
    pub(crate) distances: Vec<Vec<u32>>,
}

/// A spec problem: its kind and a message naming the node and CPUs.
pub(crate) type SpecError = (Kind, String);

/// "CPU 3" or "CPUs 3-5,8", for messages.
pub(crate) fn cpus_phrase(cpus: &CpuSet) -> String {
    if cpus.len() == 1 {
        format!("CPU {cpus}")
    } else {
        format!("CPUs {cpus}")
    }
}

/// "node1 names CPU 7, which this process may not use (its CPUs are 0-1)".
pub(crate) fn not_allowed_detail(node: usize, outside: &CpuSet, allowed: &CpuSet) -> String {
    format!(
        "node{node} names {}, which this process may not use (its CPUs are {})",
        cpus_phrase(outside),
        if allowed.is_empty() {
            "unknown".to_owned()
        } else {
            allowed.to_string()
        },
    )
}

/// Parses and checks `spec` against the CPUs the process may use.
pub(crate) fn parse(spec: &str, allowed: &CpuSet) -> Result<Spec, SpecError> {
    if spec.trim().is_empty() {
        return Err((
            Kind::EmptySpec,
            "the spec is empty; expected nodes separated by ';', each a cpulist such as \"0-3,8\""
                .to_owned(),
        ));
    }
    let mut nodes: Vec<CpuSet> = Vec::new();
    let mut rows: Vec<Option<Vec<u32>>> = Vec::new();
    for (i, text) in spec.split(';').enumerate() {
        let (list, row) = match text.split_once('@') {
            Some((list, row)) => (list, Some(row)),
            None => (text, None),
        };
        if row.is_some_and(|r| r.contains('@')) {
            return Err((Kind::Malformed, format!("node{i} has more than one '@'")));
        }
        if list.trim().is_empty() {
            return Err((
                Kind::EmptyNode,
                format!("node{i} is empty; every node needs at least one CPU"),
            ));
        }
        let cpus = CpuSet::parse(list).map_err(|e| (Kind::Malformed, format!("node{i}: {e}")))?;
        let outside = cpus.difference(allowed);
        if !outside.is_empty() {
            return Err((
                Kind::CpuNotAllowed,
                not_allowed_detail(i, &outside, allowed),
            ));
        }
        for (j, earlier) in nodes.iter().enumerate() {
            let shared = cpus.intersection(earlier);
            if !shared.is_empty() {
                return Err((
                    Kind::DuplicateCpu,
                    format!(
                        "{} {} in both node{j} and node{i}",
                        cpus_phrase(&shared),
                        if shared.len() == 1 { "is" } else { "are" }
                    ),
                ));
            }
        }
        nodes.push(cpus);
        rows.push(row.map(|r| parse_row(i, r)).transpose()?);
    }
    let distances = distance_matrix(rows)?;
    Ok(Spec { nodes, distances })
}

/// Parses node `i`'s distance row, `10,20,...`.
fn parse_row(i: usize, row: &str) -> Result<Vec<u32>, SpecError> {
    row.split(',')
        .map(|d| {
            let d = d.trim();
            d.parse::<u32>().map_err(|_| {
                (
                    Kind::BadDistances,
                    format!("node{i}: distance `{d}` is not a number"),
                )
            })
        })
        .collect()
}

/// Checks the rows (all or none, square, 10 on the diagonal, 11..=255
/// elsewhere) and fills in the default matrix when none are given.
fn distance_matrix(rows: Vec<Option<Vec<u32>>>) -> Result<Vec<Vec<u32>>, SpecError> {
    let n = rows.len();
    if rows.iter().all(Option::is_none) {
        return Ok(default_distances(n));
    }
    let mut matrix = Vec::with_capacity(n);
    for (i, row) in rows.into_iter().enumerate() {
        let row = row.ok_or_else(|| {
            (
                Kind::BadDistances,
                format!("node{i} has no distances; give every node an '@' row or none"),
            )
        })?;
        if row.len() != n {
            return Err((
                Kind::BadDistances,
                format!(
                    "node{i} has {} distance{}, expected {n} (one per node)",
                    row.len(),
                    if row.len() == 1 { "" } else { "s" }
                ),
            ));
        }
        for (j, &d) in row.iter().enumerate() {
            if i == j && d != LOCAL_DISTANCE {
                return Err((
                    Kind::BadDistances,
                    format!("node{i}'s distance to itself is {d}, expected {LOCAL_DISTANCE}"),
                ));
            }
            if i != j && !(LOCAL_DISTANCE + 1..=MAX_DISTANCE).contains(&d) {
                return Err((
                    Kind::BadDistances,
                    format!(
                        "the distance from node{i} to node{j} is {d}; remote distances must be \
                         {}..={MAX_DISTANCE} ({LOCAL_DISTANCE} is local)",
                        LOCAL_DISTANCE + 1
                    ),
                ));
            }
        }
        matrix.push(row);
    }
    Ok(matrix)
}

/// 10 on the diagonal, 20 elsewhere.
pub(crate) fn default_distances(n: usize) -> Vec<Vec<u32>> {
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if i == j {
                        LOCAL_DISTANCE
                    } else {
                        REMOTE_DISTANCE
                    }
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(list: &str) -> CpuSet {
        CpuSet::parse(list).unwrap()
    }

    /// The checks of a 2-CPU machine, like the one the tests run on.
    fn two() -> CpuSet {
        cpus("0-1")
    }

    fn kind(spec: &str, allowed: &CpuSet) -> Kind {
        parse(spec, allowed).unwrap_err().0
    }

    #[test]
    fn one_cpu_per_node() {
        let s = parse("0;1", &two()).unwrap();
        assert_eq!(s.nodes, [cpus("0"), cpus("1")]);
        assert_eq!(s.distances, [[10, 20], [20, 10]]);
    }

    #[test]
    fn fewer_cpus_than_allowed_is_honoured() {
        let s = parse("0", &two()).unwrap();
        assert_eq!(s.nodes, [cpus("0")]);
        assert_eq!(s.distances, [[10]]);
    }

    #[test]
    fn larger_specs() {
        let allowed = cpus("0-15");
        let s = parse(" 0-3,8 ; 4-7 ;9-15:2/3", &allowed).unwrap();
        assert_eq!(s.nodes, [cpus("0-3,8"), cpus("4-7"), cpus("9-10,12-13,15")]);
        assert_eq!(s.distances.len(), 3);
    }

    #[test]
    fn explicit_distances() {
        let allowed = cpus("0-3");
        let s = parse("0-1@10,21;2-3@ 21 , 10 ", &allowed).unwrap();
        assert_eq!(s.distances, [[10, 21], [21, 10]]);
        // Asymmetric tables exist in real firmware and are accepted.
        let s = parse("0@10,30;1@20,10", &allowed).unwrap();
        assert_eq!(s.distances, [[10, 30], [20, 10]]);
        let s = parse("0@10", &allowed).unwrap();
        assert_eq!(s.distances, [[10]]);
    }

    #[test]
    fn rejects_bad_specs() {
        let two = two();
        assert_eq!(kind("0;0", &two), Kind::DuplicateCpu);
        assert_eq!(kind("0-1;1", &two), Kind::DuplicateCpu);
        assert_eq!(kind("0-1;", &two), Kind::EmptyNode);
        assert_eq!(kind(";0", &two), Kind::EmptyNode);
        assert_eq!(kind("0;;1", &two), Kind::EmptyNode);
        assert_eq!(kind("0; @10", &two), Kind::EmptyNode);
        assert_eq!(kind("x", &two), Kind::Malformed);
        assert_eq!(kind("0;1-", &two), Kind::Malformed);
        assert_eq!(kind("0@10@10", &two), Kind::Malformed);
        assert_eq!(kind("0;7", &two), Kind::CpuNotAllowed);
        assert_eq!(kind("", &two), Kind::EmptySpec);
        assert_eq!(kind("  ", &two), Kind::EmptySpec);
    }

    #[test]
    fn rejects_bad_distances() {
        let two = two();
        for bad in [
            "0@10,20;1",          // missing row
            "0;1@20,10",          // missing row
            "0@10;1@10",          // short rows
            "0@10,20,30;1@20,10", // long row
            "0@11,20;1@20,10",    // diagonal not 10
            "0@10,10;1@10,10",    // remote as near as local
            "0@10,256;1@20,10",   // beyond a SLIT byte
            "0@10,x;1@20,10",     // not a number
            "0@;1@",              // empty rows
        ] {
            assert_eq!(kind(bad, &two), Kind::BadDistances, "{bad}");
        }
    }

    #[test]
    fn messages_name_the_problem() {
        let two = two();
        let msg = |spec| parse(spec, &two).unwrap_err().1;
        assert_eq!(msg("0;0"), "CPU 0 is in both node0 and node1");
        assert_eq!(msg("0-1;0-1"), "CPUs 0-1 are in both node0 and node1");
        assert_eq!(
            msg("0-1;"),
            "node1 is empty; every node needs at least one CPU"
        );
        assert_eq!(
            msg("0;7"),
            "node1 names CPU 7, which this process may not use (its CPUs are 0-1)"
        );
        assert_eq!(
            msg("0;5-9"),
            "node1 names CPUs 5-9, which this process may not use (its CPUs are 0-1)"
        );
        assert_eq!(
            msg("x"),
            "node0: invalid cpulist \"x\": `x` is not a CPU number"
        );
        assert_eq!(
            msg("0@10;1@20,10"),
            "node0 has 1 distance, expected 2 (one per node)"
        );
    }
}
