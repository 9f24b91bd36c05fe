use super::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

fn cpus(list: &str) -> CpuSet {
    CpuSet::parse(list).unwrap()
}

/// A fake `/sys/devices/system/node` directory, removed on drop.
struct FakeSysfs(PathBuf);

impl FakeSysfs {
    /// `nodes` are `(os id, cpulist, distance row or None)`; `online` is
    /// written when given.
    fn new(nodes: &[(usize, &str, Option<&str>)], online: Option<&str>) -> FakeSysfs {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "numa_rt_numa_sysfs_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&root).unwrap();
        for &(id, list, row) in nodes {
            let dir = root.join(format!("node{id}"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("cpulist"), format!("{list}\n")).unwrap();
            if let Some(row) = row {
                fs::write(dir.join("distance"), format!("{row}\n")).unwrap();
            }
        }
        // Entries that are not nodes are ignored.
        fs::create_dir_all(root.join("power")).unwrap();
        fs::write(root.join("has_cpu"), "0-1\n").unwrap();
        if let Some(online) = online {
            fs::write(root.join("online"), format!("{online}\n")).unwrap();
        }
        FakeSysfs(root)
    }
}

impl Drop for FakeSysfs {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn summary(t: &Topology) -> Vec<(usize, usize, String, Vec<u32>)> {
    t.nodes()
        .iter()
        .map(|n| {
            (
                n.id().index(),
                n.os_id(),
                n.cpus().to_string(),
                n.distances().to_vec(),
            )
        })
        .collect()
}

#[test]
fn discovers_two_nodes() {
    let fake = FakeSysfs::new(
        &[(0, "0-1", Some("10 21")), (1, "2-3", Some("21 10"))],
        Some("0-1"),
    );
    let t = discover_in(&fake.0, &cpus("0-3")).unwrap();
    assert!(!t.is_simulated());
    assert_eq!(
        summary(&t),
        [
            (0, 0, "0-1".into(), vec![10, 21]),
            (1, 1, "2-3".into(), vec![21, 10])
        ]
    );
    assert_eq!(t.cpus(), &cpus("0-3"));
    assert_eq!(t.node_of_cpu(2), Some(NodeId::from(1)));
    assert_eq!(t.node_of_cpu(9), None);
    assert_eq!(t.to_string(), "0-1@10,21;2-3@21,10");
}

#[test]
fn drops_nodes_without_allowed_cpus_and_renumbers() {
    let fake = FakeSysfs::new(
        &[
            (0, "0-1", Some("10 20 30")),
            (1, "2-3", Some("20 10 25")),
            (2, "4-5", Some("30 25 10")),
        ],
        None,
    );
    let t = discover_in(&fake.0, &cpus("2-5")).unwrap();
    assert_eq!(
        summary(&t),
        [
            (0, 1, "2-3".into(), vec![10, 25]),
            (1, 2, "4-5".into(), vec![25, 10])
        ]
    );
    let t = discover_in(&fake.0, &cpus("3")).unwrap();
    assert_eq!(summary(&t), [(0, 1, "3".into(), vec![10])]);
}

#[test]
fn sparse_node_numbers_follow_the_online_list() {
    // Rows have one column per online node (0 and 2), not per number.
    let fake = FakeSysfs::new(
        &[(0, "0", Some("10 32")), (2, "1", Some("32 10"))],
        Some("0,2"),
    );
    let t = discover_in(&fake.0, &cpus("0-1")).unwrap();
    assert_eq!(
        summary(&t),
        [
            (0, 0, "0".into(), vec![10, 32]),
            (1, 2, "1".into(), vec![32, 10])
        ]
    );
}

#[test]
fn missing_distances_default_to_10_and_20() {
    let fake = FakeSysfs::new(&[(0, "0", None), (1, "1", Some("garbage"))], None);
    let t = discover_in(&fake.0, &cpus("0-1")).unwrap();
    assert_eq!(t.nodes()[0].distances(), [10, 20]);
    assert_eq!(t.nodes()[1].distances(), [20, 10]);
    assert_eq!(t.to_string(), "0;1");
}

#[test]
fn no_numa_directory_is_one_node() {
    let root = std::env::temp_dir().join("numa_rt_numa_no_such_dir/node");
    let t = discover_in(&root, &cpus("0-3")).unwrap();
    assert_eq!(summary(&t), [(0, 0, "0-3".into(), vec![10])]);
    assert!(discover_in(&root, &CpuSet::new()).is_err());
}

#[test]
fn unlisted_allowed_cpus_join_the_first_node() {
    let fake = FakeSysfs::new(&[(0, "0", None), (1, "1", None)], None);
    let t = discover_in(&fake.0, &cpus("0-2")).unwrap();
    assert_eq!(t.nodes()[0].cpus(), &cpus("0,2"));
    // No node lists an allowed CPU: one node with all of them.
    let t = discover_in(&fake.0, &cpus("5-6")).unwrap();
    assert_eq!(summary(&t), [(0, 0, "5-6".into(), vec![10])]);
}

#[test]
fn node_without_cpulist_is_an_error() {
    let fake = FakeSysfs::new(&[(0, "0", None)], None);
    fs::create_dir_all(fake.0.join("node1")).unwrap();
    let err = discover_in(&fake.0, &cpus("0")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert!(err.to_string().contains("node1/cpulist"), "{err}");
}

#[test]
fn unreadable_cpulist_is_an_error_naming_the_file() {
    let fake = FakeSysfs::new(&[(0, "0-x", None)], None);
    let err = discover_in(&fake.0, &cpus("0")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(err.to_string().contains("node0/cpulist"), "{err}");
}

#[test]
fn split_cuts_contiguous_runs() {
    let t = Topology::split_within(&cpus("0-1"), 2).unwrap();
    assert!(t.is_simulated());
    assert_eq!(
        summary(&t).into_iter().map(|s| s.2).collect::<Vec<_>>(),
        ["0", "1"]
    );
    let t = Topology::split_within(&cpus("0-4"), 2).unwrap();
    assert_eq!(t.to_string(), "0-2;3-4");
    let t = Topology::split_within(&cpus("0,2,4,6,8"), 3).unwrap();
    assert_eq!(t.to_string(), "0,2;4,6;8");
    let t = Topology::split_within(&cpus("0-7"), 1).unwrap();
    assert_eq!(t.to_string(), "0-7");
    assert_eq!(t.nodes()[0].distances(), [10]);
}

#[test]
fn split_rejects_impossible_counts() {
    let err = Topology::split_within(&cpus("0-1"), 0).unwrap_err();
    assert_eq!(err.kind(), Kind::BadNodeCount);
    assert_eq!(
        err.to_string(),
        "invalid Topology::split(0): a topology needs at least one node"
    );
    let err = Topology::split_within(&cpus("0-1"), 3).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid Topology::split(3): 2 CPUs (0-1) cannot make 3 nodes of at least one CPU each"
    );
}

#[test]
fn spec_errors_name_the_spec() {
    let err = Topology::from_spec_within("0;0", &cpus("0-1")).unwrap_err();
    assert_eq!(err.kind(), Kind::DuplicateCpu);
    assert_eq!(
        err.to_string(),
        "invalid topology spec \"0;0\": CPU 0 is in both node0 and node1"
    );
    let err: io::Error = Topology::from_spec_within("0;7", &cpus("0-1"))
        .unwrap_err()
        .into();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("\"0;7\""), "{err}");
}

#[test]
fn specs_round_trip_through_display() {
    let allowed = cpus("0-15");
    for spec in [
        "0;1",
        "0-3,8;4-7",
        "0-1@10,21;2-3@21,10",
        "5",
        "0@10,20,30;1@20,10,25;2@30,25,10",
    ] {
        let t = Topology::from_spec_within(spec, &allowed).unwrap();
        assert_eq!(t.to_string(), spec);
        assert_eq!(
            Topology::from_spec_within(&t.to_string(), &allowed).unwrap(),
            t
        );
    }
}

#[test]
fn simulated_nodes_map_to_real_memory_nodes() {
    let host = [
        HostNode {
            os_id: 0,
            cpus: cpus("0-3"),
            row: None,
        },
        HostNode {
            os_id: 1,
            cpus: cpus("4-7"),
            row: None,
        },
    ];
    assert_eq!(os_node_of(&cpus("0-1"), &host), 0);
    assert_eq!(os_node_of(&cpus("3-5"), &host), 1);
    assert_eq!(os_node_of(&cpus("2-5"), &host), 0); // tie: lowest
    assert_eq!(os_node_of(&cpus("9"), &host), 0);
    assert_eq!(os_node_of(&cpus("9"), &[]), 0);
}

#[test]
fn remote_nodes_nearest_first() {
    let spec = "0@10,20,30,20;1@20,10,20,30;2@30,20,10,20;3@20,30,20,10";
    let t = Topology::from_spec_within(spec, &cpus("0-3")).unwrap();
    let order = |from: usize| -> Vec<usize> {
        t.remote_nodes_by_distance(NodeId::from(from))
            .into_iter()
            .map(NodeId::index)
            .collect()
    };
    assert_eq!(order(0), [1, 3, 2]);
    assert_eq!(order(1), [2, 0, 3]);
    assert_eq!(order(3), [0, 2, 1]);
    assert!(order(4).is_empty());
    // Equal distances: rotate from the node after `from`.
    let t = Topology::from_spec_within("0;1;2", &cpus("0-2")).unwrap();
    let ids = |v: Vec<NodeId>| v.into_iter().map(NodeId::index).collect::<Vec<_>>();
    assert_eq!(ids(t.remote_nodes_by_distance(NodeId::from(1))), [2, 0]);
    assert_eq!(
        t.node(NodeId::from(1))
            .unwrap()
            .distance_to(NodeId::from(2)),
        Some(20)
    );
    assert_eq!(
        t.node(NodeId::from(1))
            .unwrap()
            .distance_to(NodeId::from(3)),
        None
    );
    assert!(t.node(NodeId::from(3)).is_none());
}

#[test]
fn env_values() {
    assert!(from_env_value(None).unwrap().is_none());
    assert!(from_env_value(Some("".into())).unwrap().is_none());
    assert!(from_env_value(Some(" \n".into())).unwrap().is_none());
    let err = from_env_value(Some("0;0".into())).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid NUMA_RT_TOPOLOGY=\"0;0\": "),
        "{err}"
    );
    let err = from_env_value(Some("x".into())).unwrap_err();
    assert_eq!(err.kind(), Kind::Malformed);
    assert!(err.to_string().contains("NUMA_RT_TOPOLOGY=\"x\""), "{err}");
    let first = sys::allowed_cpus().unwrap().first().unwrap();
    let t = from_env_value(Some(first.to_string().into()))
        .unwrap()
        .unwrap();
    assert!(t.is_simulated());
    assert_eq!(t.cpus().iter().collect::<Vec<_>>(), [first]);
}

#[test]
fn env_value_must_be_utf8() {
    use std::os::unix::ffi::OsStringExt;
    let err = from_env_value(Some(OsString::from_vec(vec![b'0', 0xff]))).unwrap_err();
    assert_eq!(err.kind(), Kind::Malformed);
    assert!(err.to_string().contains("NUMA_RT_TOPOLOGY"), "{err}");
}

/// On a kernel with nodes 0-1 and 2-3, a spec node with CPUs of both is
/// refused (what `NUMA_RT_TOPOLOGY` checks, issue 45); nodes within one
/// kernel node, or any spec on a one-node kernel, pass.
#[test]
fn a_spec_node_across_kernel_nodes_is_refused() {
    let host = [
        HostNode {
            os_id: 0,
            cpus: cpus("0-1"),
            row: None,
        },
        HostNode {
            os_id: 1,
            cpus: cpus("2-3"),
            row: None,
        },
    ];
    let allowed = cpus("0-3");
    let across = Topology::from_spec_within("0,2;1,3", &allowed).unwrap();
    let err = check_within_host_nodes(&across, &host).unwrap_err();
    assert_eq!(
        err,
        "node0 names CPU 0 of the kernel's node 0 and CPU 2 of the kernel's node 1; on a \
         kernel with NUMA nodes each node of the spec must lie within one of them (the \
         kernel's: node0 0-1, node1 2-3)"
    );
    for ok in ["0-1;2-3", "0;1;2-3", "3;0"] {
        let t = Topology::from_spec_within(ok, &allowed).unwrap();
        assert_eq!(check_within_host_nodes(&t, &host), Ok(()), "{ok}");
    }
    assert_eq!(check_within_host_nodes(&across, &host[..1]), Ok(()));
}
