//! The affinity system calls, for real, on spawned threads (so the test
//! harness's own threads keep their masks).

use std::thread;

use numa_rt_numa::{sys, CpuSet};

/// Says that a check was skipped here, and why: libtest captures `eprintln!`
/// and shows it only for a failed test, so this writes to the process's
/// stderr itself, where `cargo test` shows it beside the test's `ok`.
fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
}

/// Runs `f` on a fresh thread and returns its result.
fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    thread::spawn(f).join().expect("test thread panicked")
}

#[test]
fn allowed_cpus_is_the_affinity_mask() {
    let allowed = sys::allowed_cpus().unwrap();
    assert!(!allowed.is_empty());
    // Nothing in this test binary pins the harness threads.
    assert_eq!(on_thread(sys::thread_affinity).unwrap(), allowed);
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/self/status");
    assert_eq!(CpuSet::parse(line).unwrap(), allowed);
}

#[test]
fn set_thread_affinity_to_each_cpu() {
    let allowed = sys::allowed_cpus().unwrap();
    for cpu in allowed.iter() {
        let (mask, running_on, process) = on_thread(move || {
            let one: CpuSet = [cpu].into_iter().collect();
            sys::set_thread_affinity(&one).unwrap();
            (
                sys::thread_affinity().unwrap(),
                sys::current_cpu(),
                sys::allowed_cpus().unwrap(),
            )
        });
        assert_eq!(mask.iter().collect::<Vec<_>>(), [cpu]);
        // Once the call returns the thread runs only on its CPU.
        assert_eq!(running_on, Some(cpu));
        // A bound thread still sees the whole process's CPUs.
        assert_eq!(process, allowed);
    }
}

#[test]
fn set_thread_affinity_to_a_node_sized_set() {
    let allowed = sys::allowed_cpus().unwrap();
    let all = allowed.clone();
    let mask = on_thread(move || {
        sys::set_thread_affinity(&all).unwrap();
        sys::thread_affinity().unwrap()
    });
    assert_eq!(mask, sys::allowed_cpus().unwrap());
    if allowed.len() < 2 {
        skip(
            "set_thread_affinity_to_a_node_sized_set",
            &format!(
                "the two-CPU subset check needs 2 CPUs, {} allowed",
                allowed.len()
            ),
        );
        return;
    }
    let two: CpuSet = allowed.iter().take(2).collect();
    let expected = two.clone();
    let mask = on_thread(move || {
        sys::set_thread_affinity(&two).unwrap();
        sys::thread_affinity().unwrap()
    });
    assert_eq!(mask, expected);
}

#[test]
fn cpus_the_machine_lacks_are_refused() {
    // CPU 60000 exists nowhere: the kernel rejects a mask with no usable CPU.
    let nowhere: CpuSet = [60_000].into_iter().collect();
    let err = on_thread(move || sys::set_thread_affinity(&nowhere)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
    let err = sys::set_thread_affinity(&CpuSet::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn pin_to_core_binds_one_cpu() {
    let cpu = sys::allowed_cpus().unwrap().last().unwrap();
    let mask = on_thread(move || {
        assert!(sys::pin_to_core(cpu));
        sys::thread_affinity().unwrap()
    });
    assert_eq!(mask.iter().collect::<Vec<_>>(), [cpu]);
}

#[test]
fn current_cpu_is_allowed() {
    let cpu = sys::current_cpu().expect("sched_getcpu works on Linux");
    assert!(sys::allowed_cpus().unwrap().contains(cpu));
}

#[test]
fn default_max_procs_follows_mask_and_quota() {
    let mask = sys::allowed_cpus().unwrap().len();
    let procs = sys::default_max_procs();
    assert!((1..=mask).contains(&procs), "{procs} of {mask}");
    match sys::cgroup_cpu_quota() {
        Some(quota) => assert_eq!(procs, mask.min(quota.max(2))),
        None => assert_eq!(procs, mask),
    }
}
