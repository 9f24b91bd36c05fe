//! Big processor counts: machines with 384–512 hardware threads exist, and
//! `build()` must stay linear in the P count (the bench `benches/build.rs`
//! measures it); errors from OS limits name the limit.

mod common;
use common::HANG;
use numa_rt_executor::Builder;
use std::sync::mpsc;

/// The descriptors a runtime of `procs` P's needs, plus slack for the test
/// harness and the runtime's other descriptors.
fn fds_needed(procs: usize) -> libc::rlim_t {
    (procs * numa_rt_reactor::FDS_PER_PROC + 64) as libc::rlim_t
}

fn nofile() -> (libc::rlim_t, libc::rlim_t) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    (r.rlim_cur, r.rlim_max)
}

fn set_nofile(soft: libc::rlim_t, hard: libc::rlim_t) -> bool {
    let r = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `r` is a valid rlimit.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) == 0 }
}

/// 1,024 P's build, run work and shut down (it failed with a bare EINVAL
/// after 18 s when each park epoll nested every poller). Bounded: the whole
/// round trip runs on a helper thread and must finish within `HANG`.
#[test]
fn a_runtime_of_1024_procs_builds_runs_and_stops() {
    const PROCS: usize = 1024;
    let (soft, hard) = nofile();
    if soft < fds_needed(PROCS) {
        // Raising the soft limit up to the hard one needs no privilege.
        if hard < fds_needed(PROCS) || !set_nofile(fds_needed(PROCS), hard) {
            common::skip(
                "a_runtime_of_1024_procs_builds_runs_and_stops",
                &format!(
                    "RLIMIT_NOFILE ({soft}/{hard}) is below the {} descriptors 1024 P's need",
                    fds_needed(PROCS)
                ),
            );
            return;
        }
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = Builder::new()
            .max_procs(PROCS)
            .thread_stack_size(256 * 1024)
            .build()
            .map_err(|e| e.to_string());
        let rt = match rt {
            Ok(rt) => rt,
            Err(e) => return tx.send(Err(e)).unwrap(),
        };
        let procs = rt.metrics().num_procs();
        // Work from outside lands on the node queue and is picked up.
        let sum: u64 = rt.block_on(async {
            let hs: Vec<_> = (0..64u64)
                .map(|i| numa_rt_executor::spawn(async move { i }))
                .collect();
            let mut s = 0;
            for h in hs {
                s += h.await.unwrap();
            }
            s
        });
        drop(rt);
        tx.send(Ok((procs, sum))).unwrap();
    });
    let (procs, sum) = rx
        .recv_timeout(HANG)
        .expect("a 1024-P runtime built, ran and stopped within HANG")
        .unwrap_or_else(|e| panic!("build at 1024 P's failed: {e}"));
    assert_eq!(procs, PROCS);
    assert_eq!(sum, (0..64).sum::<u64>());
}

const CHILD_ENV: &str = "NUMA_RT_BIG_PROCS_CHILD";

/// More P's than RLIMIT_NOFILE allows descriptors for: the error names the
/// limit and how many descriptors are needed. In a child process: the limit
/// is process-wide.
#[test]
fn too_few_descriptors_names_rlimit_nofile() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let (_, hard) = nofile();
        assert!(set_nofile(48, hard), "lowering RLIMIT_NOFILE");
        let e = Builder::new()
            .max_procs(64)
            .build()
            .map(drop)
            .expect_err("64 P's cannot fit in 48 descriptors");
        println!("ERROR: {e}");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "too_few_descriptors_names_rlimit_nofile",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("ERROR: "))
        .unwrap_or_else(|| panic!("no error line in {stdout}"));
    assert!(
        line.contains("RLIMIT_NOFILE allows 48") && line.contains("64 processors need"),
        "{line}"
    );
}
