//! `NUMA_RT_TOPOLOGY`. One test function, because it changes the process's
//! environment (each integration test file is its own process).

use numa_rt_numa::{sys, Topology, TopologyErrorKind, ENV_VAR};

#[test]
fn numa_rt_topology_variable() {
    assert_eq!(ENV_VAR, "NUMA_RT_TOPOLOGY");
    let first = sys::allowed_cpus().unwrap().first().unwrap();

    std::env::remove_var(ENV_VAR);
    assert!(Topology::from_env().unwrap().is_none());
    std::env::set_var(ENV_VAR, "");
    assert!(Topology::from_env().unwrap().is_none());

    std::env::set_var(ENV_VAR, first.to_string());
    let t = Topology::from_env().unwrap().unwrap();
    assert!(t.is_simulated());
    assert_eq!(t.to_string(), first.to_string());
    assert_eq!(Topology::from_env_or_discover().unwrap(), t);

    let twice = format!("{first};{first}");
    std::env::set_var(ENV_VAR, &twice);
    let err = Topology::from_env().unwrap_err();
    assert_eq!(err.kind(), TopologyErrorKind::DuplicateCpu);
    assert_eq!(
        err.to_string(),
        format!("invalid NUMA_RT_TOPOLOGY={twice:?}: CPU {first} is in both node0 and node1")
    );
    let err = Topology::from_env_or_discover().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        err.to_string()
            .contains(&format!("NUMA_RT_TOPOLOGY={twice:?}")),
        "{err}"
    );

    std::env::set_var(ENV_VAR, "nonsense");
    let err = Topology::from_env().unwrap_err();
    assert!(
        err.to_string().contains("NUMA_RT_TOPOLOGY=\"nonsense\""),
        "{err}"
    );

    std::env::remove_var(ENV_VAR);
    assert!(!Topology::from_env_or_discover().unwrap().is_simulated());
}
