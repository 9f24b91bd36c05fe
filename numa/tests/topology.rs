//! Topologies on the real machine: discovery, specs and splits checked
//! against the process's actual affinity mask. Nothing here assumes more
//! than the CPUs the mask has; checks that need more say so and skip.

use numa_rt_numa::{partition_procs, sys, CpuSet, NodeId, Topology, TopologyErrorKind};

/// Says that a check was skipped here, and why: libtest captures `eprintln!`
/// and shows it only for a failed test, so this writes to the process's
/// stderr itself, where `cargo test` shows it beside the test's `ok`.
fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
}

fn allowed() -> CpuSet {
    sys::allowed_cpus().unwrap()
}

#[test]
fn discover_finds_allowed_cpus_in_nodes() {
    let t = Topology::discover().unwrap();
    let allowed = allowed();
    assert!(t.num_nodes() >= 1);
    assert!(!t.is_simulated());
    assert_eq!(t.cpus(), &allowed, "every allowed CPU is in a node");
    let mut seen = CpuSet::new();
    for (i, node) in t.nodes().iter().enumerate() {
        assert_eq!(node.id(), NodeId::from(i));
        assert!(!node.cpus().is_empty());
        assert!(node.cpus().is_subset(&allowed));
        assert!(node.cpus().is_disjoint(&seen));
        seen = seen.union(node.cpus());
        assert_eq!(node.distances().len(), t.num_nodes());
        assert_eq!(node.distances()[i], 10);
        for cpu in node.cpus().iter() {
            assert_eq!(t.node_of_cpu(cpu), Some(node.id()));
        }
    }
    // On a machine with a NUMA directory, OS ids are real node numbers.
    if std::path::Path::new("/sys/devices/system/node").exists() {
        for node in t.nodes() {
            let dir = format!("/sys/devices/system/node/node{}", node.os_id());
            assert!(std::path::Path::new(&dir).exists(), "{dir}");
        }
    }
}

#[test]
fn split_two_on_this_machine() {
    let allowed = allowed();
    if allowed.len() < 2 {
        skip(
            "split_two_on_this_machine",
            &format!(
                "split(2) needs 2 CPUs, the process may use {}",
                allowed.len()
            ),
        );
        return;
    }
    let t = Topology::split(2).unwrap();
    assert!(t.is_simulated());
    assert_eq!(t.num_nodes(), 2);
    assert_eq!(t.cpus(), &allowed);
    let (a, b) = (t.nodes()[0].cpus(), t.nodes()[1].cpus());
    assert!(a.last() < b.first(), "contiguous runs: {a} then {b}");
    assert!(a.len().abs_diff(b.len()) <= 1);
    if allowed.len() == 2 {
        let cpus: Vec<usize> = allowed.iter().collect();
        assert_eq!(a.iter().collect::<Vec<_>>(), [cpus[0]]);
        assert_eq!(b.iter().collect::<Vec<_>>(), [cpus[1]]);
    }
    // Each simulated node maps to a real memory node.
    let real = Topology::discover().unwrap();
    for node in t.nodes() {
        let first = node.cpus().first().unwrap();
        let host = real.node_of_cpu(first).unwrap();
        assert_eq!(node.os_id(), real.nodes()[host.index()].os_id());
    }
    assert_eq!(partition_procs(&t, 2), [NodeId::from(0), NodeId::from(1)]);
}

#[test]
fn split_rejects_zero_and_too_many() {
    let n = allowed().len();
    assert_eq!(
        Topology::split(0).unwrap_err().kind(),
        TopologyErrorKind::BadNodeCount
    );
    let err = Topology::split(n + 1).unwrap_err();
    assert_eq!(err.kind(), TopologyErrorKind::BadNodeCount);
    assert!(
        err.to_string().contains(&format!("split({})", n + 1)),
        "{err}"
    );
    assert_eq!(Topology::split(n).unwrap().num_nodes(), n);
    assert_eq!(Topology::split(1).unwrap().cpus(), &allowed());
}

#[test]
fn specs_against_the_real_mask() {
    let cpus: Vec<usize> = allowed().iter().collect();
    let first = cpus[0];
    // Naming fewer CPUs than allowed is honoured.
    let t = Topology::from_spec(&first.to_string()).unwrap();
    assert_eq!(t.cpus().iter().collect::<Vec<_>>(), [first]);
    // A CPU in two nodes.
    let err = Topology::from_spec(&format!("{first};{first}")).unwrap_err();
    assert_eq!(err.kind(), TopologyErrorKind::DuplicateCpu);
    assert!(
        err.to_string().contains(&format!("\"{first};{first}\"")),
        "{err}"
    );
    // A CPU this process may not use.
    let outside = cpus.last().unwrap() + 1;
    let spec = format!("{first};{outside}");
    let err = Topology::from_spec(&spec).unwrap_err();
    assert_eq!(err.kind(), TopologyErrorKind::CpuNotAllowed);
    let io: std::io::Error = err.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    assert!(io.to_string().contains(&spec), "{io}");
    // Malformed, empty node, empty spec.
    for (bad, kind) in [
        ("x".to_owned(), TopologyErrorKind::Malformed),
        (format!("{first};"), TopologyErrorKind::EmptyNode),
        (String::new(), TopologyErrorKind::EmptySpec),
    ] {
        assert_eq!(Topology::from_spec(&bad).unwrap_err().kind(), kind, "{bad}");
    }
    if cpus.len() < 2 {
        skip(
            "specs_against_the_real_mask",
            &format!("the two-node spec needs 2 CPUs, {} allowed", cpus.len()),
        );
        return;
    }
    let spec = format!("{};{}", cpus[0], cpus[1]);
    let t: Topology = spec.parse().unwrap();
    assert_eq!(t.num_nodes(), 2);
    assert_eq!(t.to_string(), spec);
}
