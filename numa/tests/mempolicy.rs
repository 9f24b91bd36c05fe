//! Memory-policy system calls, for real. They may be refused (containers
//! without CAP_SYS_NICE get EPERM); the contract is an `io::Error`, never a
//! panic, and a policy that sticks when the call succeeds.

use std::io;
use std::thread;

use numa_rt_numa::sys::{self, MemoryPolicy};
use numa_rt_numa::{NodeId, Topology};

/// Says why a check is skipped when the system refuses the call. libtest
/// captures `eprintln!` and shows it only for a failed test, so this writes
/// to the process's stderr itself, where `cargo test` shows it.
fn refused(what: &str, err: &io::Error) {
    use std::io::Write;
    let _ = writeln!(
        io::stderr(),
        "skipped: the check of {what}: the system refused it ({err})"
    );
}

#[test]
fn prefer_node_zero_succeeds_or_errors() {
    let os_id = Topology::discover().unwrap().nodes()[0].os_id();
    thread::spawn(move || {
        match sys::set_preferred_node(os_id) {
            Ok(()) => match sys::memory_policy() {
                Ok(policy) => assert_eq!(policy, MemoryPolicy::Preferred(os_id)),
                Err(e) => refused("get_mempolicy", &e),
            },
            Err(e) => refused("set_mempolicy(MPOL_PREFERRED)", &e),
        }
        // The executor's call shape: a NodeId converts too.
        let _ = sys::set_preferred_node(NodeId::from(0));
        match sys::set_local_alloc() {
            Ok(()) => assert_eq!(sys::memory_policy().ok(), Some(MemoryPolicy::Local)),
            Err(e) => refused("set_mempolicy(MPOL_LOCAL)", &e),
        }
        match sys::reset_memory_policy() {
            Ok(()) => assert_eq!(sys::memory_policy().ok(), Some(MemoryPolicy::Default)),
            Err(e) => refused("set_mempolicy(MPOL_DEFAULT)", &e),
        }
    })
    .join()
    .unwrap();
}

#[test]
fn a_node_the_machine_lacks_is_an_error() {
    let t = Topology::discover().unwrap();
    let missing = t.nodes().iter().map(|n| n.os_id()).max().unwrap() + 1000;
    thread::spawn(move || {
        let err = sys::set_preferred_node(missing).unwrap_err();
        assert!(
            matches!(
                err.raw_os_error(),
                Some(libc::EINVAL | libc::EPERM | libc::ENOSYS)
            ),
            "{err}"
        );
    })
    .join()
    .unwrap();
}

#[test]
fn buffers_can_be_placed_on_a_node() {
    let os_id = Topology::discover().unwrap().nodes()[0].os_id();
    let page = 4096 * 16;
    let mut buf = vec![0u8; 8 * page];
    if let Err(e) = sys::set_buffer_node(&buf, os_id) {
        refused("mbind", &e);
        return;
    }
    // Touch every page so it is really allocated, under the new policy.
    for i in (0..buf.len()).step_by(4096) {
        buf[i] = 1;
    }
    match sys::memory_node_of(&buf[buf.len() / 2]) {
        Ok(node) => assert_eq!(node, os_id),
        Err(e) => refused("get_mempolicy(MPOL_F_ADDR)", &e),
    }
    // Too small to hold a whole page: nothing to do, and no error.
    sys::set_buffer_node(&[0u8; 16], os_id).unwrap();
    assert!(sys::set_buffer_node(&buf, usize::MAX).is_err());
}
