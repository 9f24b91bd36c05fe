//! Bad builder values and environment variables are clear errors.
//! Environment variables are process-wide: all env cases run in one test.

use numa_rt_executor::Builder;
use std::io::ErrorKind;

fn err_of(b: &mut Builder) -> std::io::Error {
    b.build().map(drop).expect_err("build must fail")
}

#[test]
fn bad_builder_values() {
    let e = err_of(Builder::new().max_procs(0));
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("max_procs"), "{e}");
    let e = err_of(Builder::new().global_queue_interval(0));
    assert!(e.to_string().contains("global_queue_interval"), "{e}");
    let e = err_of(Builder::new().event_interval(0));
    assert!(e.to_string().contains("event_interval"), "{e}");
    let e = err_of(Builder::new().max_blocking_threads(0));
    assert!(e.to_string().contains("max_blocking_threads"), "{e}");
}

#[test]
fn env_vars() {
    // SAFETY-free in edition 2021; this is the only test in this binary
    // that touches the environment, so nothing reads it concurrently.
    std::env::set_var("NUMA_RT_MAXPROCS", "abc");
    let e = err_of(&mut Builder::new());
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("NUMA_RT_MAXPROCS") && e.to_string().contains("abc"),
        "{e}"
    );
    std::env::set_var("NUMA_RT_MAXPROCS", "0");
    let e = err_of(&mut Builder::new());
    assert!(e.to_string().contains("NUMA_RT_MAXPROCS"), "{e}");
    // The builder overrides the variable.
    let rt = Builder::new().max_procs(1).build().unwrap();
    assert_eq!(rt.metrics().num_procs(), 1);
    drop(rt);
    std::env::set_var("NUMA_RT_MAXPROCS", "3");
    let rt = Builder::new().build().unwrap();
    assert_eq!(rt.metrics().num_procs(), 3);
    drop(rt);
    std::env::remove_var("NUMA_RT_MAXPROCS");

    std::env::set_var("NUMA_RT_TOPOLOGY", "0;0");
    let e = err_of(&mut Builder::new());
    assert!(e.to_string().contains("NUMA_RT_TOPOLOGY"), "{e}");
    std::env::set_var("NUMA_RT_TOPOLOGY", "zz");
    let e = err_of(&mut Builder::new());
    assert!(e.to_string().contains("NUMA_RT_TOPOLOGY"), "{e}");
    std::env::remove_var("NUMA_RT_TOPOLOGY");
}

/// `Builder::topology` gets the affinity check `NUMA_RT_TOPOLOGY` makes: a
/// CPU outside the process's mask is refused by build(), not found at run
/// time by a failing `sched_setaffinity`.
#[test]
fn a_topology_with_cpus_outside_the_affinity_mask() {
    let allowed = numa_rt_numa::sys::allowed_cpus().unwrap();
    let outside = allowed.iter().max().unwrap() + 1;
    let first = allowed.iter().next().unwrap();
    let everything = numa_rt_numa::CpuSet::parse(&format!("0-{outside}")).unwrap();
    let spec = format!("{first};{outside}");
    let t = numa_rt_numa::Topology::from_spec_within(&spec, &everything).unwrap();
    let e = err_of(Builder::new().max_procs(2).topology(t));
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let msg = e.to_string();
    assert!(
        msg.contains("Builder::topology")
            && msg.contains(&format!("node1 names CPU {outside}"))
            && msg.contains("may not use"),
        "{msg}"
    );
    // The same wording as the spec check (NUMA_RT_TOPOLOGY's).
    let spec_err = numa_rt_numa::Topology::from_spec(&spec).unwrap_err();
    assert_eq!(
        spec_err.kind(),
        numa_rt_numa::TopologyErrorKind::CpuNotAllowed
    );
    let detail = |s: &str| s.split_once(": ").map(|(_, d)| d.to_owned()).unwrap();
    assert_eq!(detail(&msg), detail(&spec_err.to_string()));
}

/// An OS refusal names the setting behind it.
#[test]
fn a_stack_size_the_os_refuses_names_the_setting() {
    let e = err_of(Builder::new().max_procs(2).thread_stack_size(usize::MAX));
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("thread_stack_size({})", usize::MAX)),
        "{msg}"
    );
}
