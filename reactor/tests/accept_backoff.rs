//! Accept under descriptor exhaustion backs off instead of spinning or
//! failing, and resumes once descriptors are free. Alone in its own binary
//! because it lowers the process's RLIMIT_NOFILE.

mod common;

use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use numa_rt_reactor::net::TcpListener;

fn set_nofile(soft: libc::rlim_t, hard: libc::rlim_t) {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: a valid rlimit struct for the call to read.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
}

fn get_nofile() -> libc::rlimit {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit struct for the call to fill.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

/// The scenario runs in a child process (this binary again, told so by
/// `CHILD`), whose standard error the test reads: the listener must say on
/// stderr that accepts fail for want of descriptors, and when they work
/// again.
#[test]
fn accept_backs_off_under_emfile_and_recovers() {
    if std::env::var_os(CHILD).is_some() {
        return exhaust_and_recover();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env(CHILD, "1")
        .args([
            "--exact",
            "accept_backs_off_under_emfile_and_recovers",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .expect("runs this test binary again");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the child failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "the child ran the test: {stdout}"
    );
    let failed = stderr
        .lines()
        .find(|l| l.starts_with("numa_rt: accept on 127.0.0.1:") && l.contains(" failed: "))
        .unwrap_or_else(|| panic!("no report of the failed accept on stderr:\n{stderr}"));
    assert!(failed.contains("retries every 10 ms"), "{failed}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("numa_rt: accept on 127.0.0.1:")
                && l.contains(" works again after ")),
        "no report of the recovery on stderr:\n{stderr}"
    );
}

/// Set in the child that runs the scenario.
const CHILD: &str = "NUMA_RT_TEST_ACCEPT_BACKOFF_CHILD";

fn exhaust_and_recover() {
    let (_r, mut d, _g) = common::setup(1);
    let listener = common::block_on(&mut d[0], TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let (wakes, waker) = common::count_waker();
    let mut cx = Context::from_waker(&waker);
    // Register the listener (nothing to accept yet) while descriptors last.
    assert!(listener.poll_accept(&mut cx).is_pending());
    let client = std::net::TcpStream::connect(addr).unwrap(); // queued in the backlog
    let saved = get_nofile();
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as libc::rlim_t;
    set_nofile(open + 8, saved.rlim_max);
    let mut fillers = Vec::new();
    for _ in 0..64 {
        match std::fs::File::open("/dev/null") {
            Ok(f) => fillers.push(f),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EMFILE));
                break;
            }
        }
    }
    assert!(fillers.len() < 64, "descriptors ran out");
    assert!(
        listener.poll_accept(&mut cx).is_pending(),
        "EMFILE backs off, not an error"
    );
    // While exhausted, a few driver turns wake the task only on the
    // back-off timer (no spinning), and the accept stays pending.
    let before = wakes.0.load(Ordering::SeqCst);
    for _ in 0..3 {
        d[0].park(Some(Duration::from_secs(1)));
        assert!(listener.poll_accept(&mut cx).is_pending());
    }
    assert!(
        wakes.0.load(Ordering::SeqCst) - before <= 3,
        "one wake per back-off period"
    );
    drop(fillers);
    set_nofile(saved.rlim_cur, saved.rlim_max);
    let mut done = false;
    for _ in 0..200 {
        if let Poll::Ready(r) = listener.poll_accept(&mut cx) {
            r.expect("accept succeeds once descriptors are free");
            done = true;
            break;
        }
        d[0].park(Some(Duration::from_secs(1)));
    }
    assert!(done, "accept resumed after the back-off");
    drop(client);
}
