//! sysmon: stall reports, schedtrace and the deadlock diagnostic.
//!
//! What sysmon prints goes to stderr, so those cases run in a child process
//! (this test binary re-run with `SYSMON_CHILD` naming the scenario) and the
//! parent reads its output.

mod common;
use common::panic_message;
use futures::channel::oneshot;
use numa_rt_executor::{spawn, Builder, DeadlockMode, Placement};
use std::time::Duration;

const CHILD: &str = "SYSMON_CHILD";

/// Runs this binary's test `name` in a child with `env`; returns (success, stderr).
fn child(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, name);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the test binary re-runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Held by the tests whose children pin threads to the first CPU of the
/// mask: run together, each would skew the others' CPU shares.
static ONE_CPU: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`ONE_CPU`] (a test that failed while holding it poisons it; the
/// others go on).
fn one_cpu() -> std::sync::MutexGuard<'static, ()> {
    ONE_CPU.lock().unwrap_or_else(|e| e.into_inner())
}

fn is_child(name: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(name)
}

#[test]
fn a_task_that_blocks_its_thread_is_reported_once() {
    const NAME: &str = "a_task_that_blocks_its_thread_is_reported_once";
    if is_child(NAME) {
        let rt = Builder::new()
            .max_procs(1)
            .stall_threshold(Some(Duration::from_millis(20)))
            .build()
            .unwrap();
        rt.block_on(async {
            let h = spawn(async {
                // Blocks the only worker far past the threshold.
                std::thread::sleep(Duration::from_millis(400));
            });
            let _ = h.await;
        });
        return;
    }
    let (ok, err) = child(NAME, &[]);
    assert!(ok, "child failed:\n{err}");
    let reports: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("without yielding"))
        .collect();
    assert_eq!(reports.len(), 1, "one report per task and stall:\n{err}");
    assert!(reports[0].starts_with("numa_rt: task "), "{err}");
    assert!(reports[0].contains("on P0"), "{err}");
    assert!(
        reports[0].contains(&format!("spawned at {}:", file!())),
        "{err}"
    );
}

#[test]
fn schedtrace_prints_go_lines_with_nodes_and_procs() {
    const NAME: &str = "schedtrace_prints_go_lines_with_nodes_and_procs";
    if is_child(NAME) {
        let rt = Builder::new().max_procs(2).build().unwrap();
        rt.block_on(async {
            // Work for the trace to show, over several trace periods.
            let t0 = std::time::Instant::now();
            while t0.elapsed() < Duration::from_millis(300) {
                let hs: Vec<_> = (0..8).map(|_| spawn(async {})).collect();
                for h in hs {
                    h.await.unwrap();
                }
            }
        });
        // The layout the trace must show: which node holds which P's (one
        // node with both on most machines; one P each on a 2-node kernel,
        // where the random start node decides which P goes where).
        let m = rt.metrics();
        for n in 0..m.num_nodes() {
            let procs = m.node(n).procs;
            eprintln!(
                "LAYOUT {n} {}",
                procs
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
        return;
    }
    let (ok, err) = child(NAME, &[("NUMA_RT_SCHEDTRACE", "20,detail")]);
    assert!(ok, "child failed:\n{err}");
    let sched: Vec<&str> = err.lines().filter(|l| l.starts_with("SCHED ")).collect();
    assert!(!sched.is_empty(), "no SCHED line:\n{err}");
    let line = sched[0];
    for field in [
        "gomaxprocs=2",
        "idleprocs=",
        "threads=",
        "spinningthreads=",
        "idlethreads=",
        "runqueue=",
    ] {
        assert!(line.contains(field), "{field} missing in {line:?}");
    }
    // `SCHED <ms>ms: ... [a b]`: one run-queue length per P.
    let ms = line["SCHED ".len()..].split("ms:").next().unwrap();
    ms.parse::<u64>()
        .unwrap_or_else(|_| panic!("bad time in {line:?}"));
    let queues = line.rsplit('[').next().unwrap().trim_end_matches(']');
    assert_eq!(queues.split(' ').count(), 2, "{line:?}");
    // One `node=` line per node, with its P range, and one line per P that
    // names its node, as the child's runtime laid them out.
    let layout: Vec<(usize, Vec<usize>)> = err
        .lines()
        .filter_map(|l| l.strip_prefix("LAYOUT "))
        .map(|l| {
            let (n, procs) = l.split_once(' ').unwrap_or((l, ""));
            let procs = procs.split(',').filter(|p| !p.is_empty());
            (
                n.parse().unwrap(),
                procs.map(|p| p.parse().unwrap()).collect(),
            )
        })
        .collect();
    assert!(!layout.is_empty(), "the child printed no layout:\n{err}");
    let placed: usize = layout.iter().map(|(_, ps)| ps.len()).sum();
    assert_eq!(placed, 2, "{layout:?}");
    for (n, procs) in &layout {
        let range = match (procs.first(), procs.last()) {
            (Some(a), Some(b)) => format!("{a}-{b}"),
            _ => "none".into(),
        };
        let want = format!("  node={n} procs={range} ");
        assert!(
            err.lines().any(|l| l.starts_with(&want)),
            "{want:?} missing:\n{err}"
        );
        for p in procs {
            let want = format!("  P{p}: node={n} status=");
            assert!(
                err.lines().any(|l| l.starts_with(&want)),
                "{want:?} missing:\n{err}"
            );
        }
    }
}

/// The schedtrace shows a hub: its polls per P (`batchhubs=`) and its batch
/// marked `(hub,<mode>)` in the `batches:` line (docs/architecture.md, "Batches").
#[test]
fn schedtrace_marks_a_hubs_batch() {
    const NAME: &str = "schedtrace_marks_a_hubs_batch";
    if is_child(NAME) {
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        use std::sync::Arc;
        const WORKERS: u64 = 6;
        // Batches are a placement rule: on here whatever NUMA_RT_PLACEMENT says.
        let rt = Builder::new()
            .max_procs(1)
            .placement(Placement::numa())
            .build()
            .unwrap();
        let gate = Arc::new(common::Hub::default());
        // The last round, once the hub has run for a few trace periods.
        let last = Arc::new(AtomicU64::new(u64::MAX));
        rt.block_on(async {
            for _ in 0..WORKERS {
                let (gate, last) = (gate.clone(), last.clone());
                spawn(async move {
                    let mut r = 1;
                    while r <= last.load(SeqCst) {
                        gate.wait_round(r).await;
                        gate.check_in(r, WORKERS);
                        r += 1;
                    }
                });
            }
            let (gate, last) = (gate.clone(), last.clone());
            spawn(async move {
                let t0 = std::time::Instant::now();
                let mut r = 0;
                while t0.elapsed() < Duration::from_millis(300) {
                    r += 1;
                    gate.release(r);
                    gate.wait_checked_in(r, WORKERS).await;
                }
                // The workers stop after the next release.
                last.store(r + 1, SeqCst);
                gate.release(r + 1);
            })
            .await
            .unwrap();
        });
        return;
    }
    let (ok, err) = child(NAME, &[("NUMA_RT_SCHEDTRACE", "20,detail")]);
    assert!(ok, "child failed:\n{err}");
    assert!(
        err.lines()
            .filter(|l| l.starts_with("  P0: "))
            .any(|l| !l.contains(" batchhubs=0 ") && l.contains(" batchhubs=")),
        "no hub poll counted:\n{err}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("  batches: ") && l.contains("(hub")),
        "no batch marked as a hub's:\n{err}"
    );
}

#[test]
fn bad_sysmon_variables_are_named() {
    const NAME: &str = "bad_sysmon_variables_are_named";
    if is_child(NAME) {
        let err = Builder::new().max_procs(1).build().unwrap_err();
        eprintln!("ERROR: {err}");
        return;
    }
    for (var, value) in [
        ("NUMA_RT_SCHEDTRACE", "often"),
        ("NUMA_RT_DEADLOCK", "loud"),
        ("NUMA_RT_STALL_MS", "10ms"),
        ("NUMA_RT_RETAKE_MS", "soon"),
    ] {
        let (ok, err) = child(NAME, &[(var, value)]);
        assert!(ok, "child failed:\n{err}");
        let line = err.lines().find(|l| l.starts_with("ERROR: ")).unwrap_or("");
        assert!(
            line.contains(var) && line.contains(value),
            "{var}={value}: {err}"
        );
    }
}

#[test]
fn a_block_on_nobody_can_wake_panics_in_panic_mode() {
    let rt = Builder::new()
        .max_procs(2)
        .deadlock(DeadlockMode::Panic)
        .build()
        .unwrap();
    // A sender kept alive but never used: nothing can ever complete rx.
    let (_tx, rx) = oneshot::channel::<()>();
    let idle = spawn_idle_tasks(&rt);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(rx)));
    let msg = panic_message(&*r.expect_err("block_on must panic"));
    assert!(
        msg.contains("all tasks are asleep - possible deadlock"),
        "{msg}"
    );
    assert!(msg.contains("3 live task(s)"), "{msg}");
    // The spawn location of the three sleepers, counted once.
    assert!(msg.contains(&format!("{}:", file!())), "{msg}");
    assert!(msg.contains("(3 task(s))"), "{msg}");
    drop(idle);
    // The runtime still works afterwards.
    assert_eq!(rt.block_on(async { spawn(async { 5 }).await.unwrap() }), 5);
}

/// Three tasks that wait forever on channels whose senders the caller keeps.
fn spawn_idle_tasks(rt: &numa_rt_executor::Runtime) -> Vec<oneshot::Sender<()>> {
    (0..3)
        .map(|_| {
            let (tx, rx) = oneshot::channel::<()>();
            rt.spawn(async move {
                let _ = rx.await;
            });
            tx
        })
        .collect()
}

#[test]
fn warn_mode_reports_a_long_sleep_once_and_not_a_short_one() {
    const NAME: &str = "warn_mode_reports_a_long_sleep_once_and_not_a_short_one";
    if is_child(NAME) {
        let wait: u64 = std::env::var("FOREIGN_MS").unwrap().parse().unwrap();
        let rt = Builder::new()
            .max_procs(2)
            .deadlock(DeadlockMode::Warn)
            .build()
            .unwrap();
        let (tx, rx) = oneshot::channel::<u32>();
        // A foreign thread holds the sender: the diagnostic cannot know it
        // will send (the scenario, not synchronisation).
        let foreign = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(wait));
            let _ = tx.send(9);
        });
        assert_eq!(rt.block_on(rx).unwrap(), 9);
        foreign.join().unwrap();
        return;
    }
    let (ok, err) = child(NAME, &[("FOREIGN_MS", "3000")]);
    assert!(ok, "child failed:\n{err}");
    let n = err
        .matches("all tasks are asleep - possible deadlock")
        .count();
    assert_eq!(n, 1, "a 3 s silence is reported once:\n{err}");
    let (ok, err) = child(NAME, &[("FOREIGN_MS", "200")]);
    assert!(ok, "child failed:\n{err}");
    assert!(
        !err.contains("possible deadlock"),
        "a 200 ms wait is within the grace period:\n{err}"
    );
}

#[test]
fn a_pending_timer_is_not_a_deadlock() {
    let rt = Builder::new()
        .max_procs(1)
        .deadlock(DeadlockMode::Panic)
        .build()
        .unwrap();
    // Everything idle for 1.5 s, but a timer will wake the task.
    rt.block_on(async {
        spawn(numa_rt_reactor::time::sleep(Duration::from_millis(1500)))
            .await
            .unwrap();
    });
}

/// Go's sysmon polls the network when nobody has for 10 ms. Here the only
/// M is stuck in a poll (retake off, so it keeps its P), so nobody drains
/// the P's poller: the monitor does, and the timer's task reaches the
/// node queue while the blocker still spins.
#[test]
fn sysmon_polls_a_poller_nobody_watches() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    let rt = Builder::new()
        .max_procs(1)
        .retake_threshold(None)
        .stall_threshold(None)
        .build()
        .unwrap();
    let armed = Arc::new(AtomicBool::new(false));
    let a2 = armed.clone();
    let saw = rt.block_on(async move {
        // Runs first (FIFO from the node queue): its timer goes to P0.
        let sleeper = spawn(async move {
            a2.store(true, SeqCst);
            numa_rt_reactor::time::sleep(Duration::from_millis(5)).await;
        });
        let blocker = spawn(async move {
            assert!(armed.load(SeqCst), "the sleeper ran first");
            let m = numa_rt_executor::Handle::current().metrics();
            let t0 = std::time::Instant::now();
            // Blocks P0's only M until the timer's task is queued.
            while m.global_queue_depth() == 0 {
                if t0.elapsed() > common::HANG {
                    return false;
                }
                std::hint::spin_loop();
            }
            true
        });
        let saw = blocker.await.unwrap();
        sleeper.await.unwrap();
        saw
    });
    assert!(saw, "nobody polled the stuck P's timer");
}

/// One P on a paused clock with retake after 10 ms and no stall reports;
/// `None` (and a SKIPPED line naming `test`) where retake is unavailable.
fn paused_with_retake(test: &str) -> Option<numa_rt_executor::Runtime> {
    let rt = Builder::new()
        .max_procs(1)
        .start_paused(true)
        .retake_threshold(Some(Duration::from_millis(10)))
        .stall_threshold(None)
        .build()
        .unwrap();
    if let Some(why) = rt.metrics().retake_unavailable() {
        eprintln!("sysmon::{test}: SKIPPED: retake is off ({why})");
        return None;
    }
    Some(rt)
}

/// A poll whose P sysmon retook goes on without a P: the P it left is idle
/// with empty queues, yet the poll may still wake anything, so a paused
/// clock must not auto-advance while it runs (as while a `block_in_place`
/// closure runs). The blocker queues a task behind itself (the work that
/// makes sysmon retake its P), sees the retake, and gives a wrong advance
/// up to 2 s of real time to fire the waiter's 1 s (virtual) timeout before
/// it sends what the waiter waits for. Checked to fail without the count:
/// the timeout fired (issue 45: the delay queue's earlier insert, 1 of 9
/// runs in the 4-node guest, where a starved vCPU made a poll outlast
/// the retake threshold).
#[test]
fn a_retaken_poll_holds_the_paused_clock() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    let Some(rt) = paused_with_retake("a_retaken_poll_holds_the_paused_clock") else {
        return;
    };
    let (tx, rx) = oneshot::channel::<()>();
    let armed = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    let (a2, t2) = (armed.clone(), timed_out.clone());
    let got = rt.block_on(async move {
        // Runs first (FIFO from the node queue): its timer goes to P0.
        // SeqCst throughout: each flag is a one-way signal between the two
        // tasks (the store pairs with the other task's load); nothing else
        // is published through them.
        let waiter = spawn(async move {
            a2.store(true, SeqCst);
            let r = numa_rt_reactor::time::timeout(Duration::from_secs(1), rx).await;
            t2.store(r.is_err(), SeqCst);
            r.is_ok()
        });
        let blocker = spawn(async move {
            assert!(armed.load(SeqCst), "the waiter ran first");
            let m = numa_rt_executor::Handle::current().metrics();
            // Work behind this poll: what sysmon retakes the P for
            // (detached: it runs on the P's new M).
            drop(spawn(async {}));
            let t0 = std::time::Instant::now();
            while m.proc(0).retakes == 0 {
                assert!(t0.elapsed() < common::HANG, "sysmon did not retake P0");
                std::hint::spin_loop();
            }
            let t1 = std::time::Instant::now();
            while !timed_out.load(SeqCst) && t1.elapsed() < Duration::from_secs(2) {
                std::thread::yield_now();
            }
            let _ = tx.send(());
        });
        blocker.await.unwrap();
        waiter.await.unwrap()
    });
    assert!(
        got,
        "the paused clock jumped to the waiter's 1 s timeout while a retaken poll still ran"
    );
}

/// A paused clock's timer is due by the paused clock, not by real time:
/// a poll that holds the only P for 200 ms of real time, past a 50 ms
/// (virtual) sleep nobody advanced to, has nothing waiting behind it, so
/// its P is not retaken. When retake compared virtual deadlines with the
/// real now it was (issue 45: the echo test's 1 s timeout, passed by real
/// time after 92 rounds in the 4-node guest, made a slow poll's P retaken
/// and the clock jump past a ready reply).
#[test]
fn a_paused_timer_is_not_due_by_real_time() {
    let Some(rt) = paused_with_retake("a_paused_timer_is_not_due_by_real_time") else {
        return;
    };
    rt.block_on(async {
        // The sleeper's timer is registered (its first poll has run) before
        // the blocker is spawned: the timer must be P0's only other work.
        // Spawned back to back, the sleeper could still sit in P0's ring
        // behind the blocker on a slow machine (the 2-node guest, once),
        // and that queued task is work a retake rightly serves.
        let (registered_tx, registered_rx) = oneshot::channel();
        let sleeper = spawn(async move {
            let mut sleep = std::pin::pin!(numa_rt_reactor::time::sleep(Duration::from_millis(50)));
            assert!(futures::poll!(sleep.as_mut()).is_pending());
            registered_tx.send(()).unwrap();
            sleep.await
        });
        registered_rx.await.unwrap();
        let blocker = spawn(async {
            let t0 = std::time::Instant::now();
            // Holds P0 (a poll that blocks its thread is the subject here).
            while t0.elapsed() < Duration::from_millis(200) {
                std::hint::spin_loop();
            }
        });
        blocker.await.unwrap();
        sleeper.await.unwrap();
    });
    assert_eq!(
        rt.metrics().proc(0).retakes,
        0,
        "P0 was retaken for a virtual timer that real time had passed"
    );
}

/// A poll that takes long only because its thread gets no CPU (the M runs
/// at `SCHED_IDLE` on the CPU where a normal thread spins, as a thread of a
/// container throttled by its CPU quota would wait) is not blamed on its
/// task: the task itself needs 8 ms of CPU. Checked to fail (one "without
/// yielding" report) when sysmon blames every long poll.
#[test]
fn a_poll_starved_of_cpu_is_not_reported_as_blocking() {
    const NAME: &str = "a_poll_starved_of_cpu_is_not_reported_as_blocking";
    if is_child(NAME) {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        use std::sync::Arc;
        let cpu = numa_rt_numa::sys::thread_affinity()
            .expect("the affinity mask")
            .first()
            .expect("a CPU");
        let one: numa_rt_numa::CpuSet = [cpu].into_iter().collect();
        let stop = Arc::new(AtomicBool::new(false));
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
        let hog = {
            let (stop, one) = (stop.clone(), one.clone());
            std::thread::spawn(move || {
                numa_rt_numa::sys::set_thread_affinity(&one).expect("pin the hog");
                pinned_tx.send(()).unwrap();
                while !stop.load(Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        pinned_rx.recv().unwrap();
        let rt = Builder::new()
            .max_procs(1)
            .stall_threshold(Some(Duration::from_millis(20)))
            .retake_threshold(None)
            .on_thread_start(move || {
                numa_rt_numa::sys::set_thread_affinity(&one).expect("pin the M");
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: this thread, a valid policy and parameter.
                let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
                assert_eq!(rc, 0, "sched_setscheduler(SCHED_IDLE)");
            })
            .build()
            .unwrap();
        let wall = rt.block_on(async {
            spawn(async {
                let t0 = std::time::Instant::now();
                let tid = numa_rt_numa::sys::gettid();
                let cpu = || numa_rt_numa::sys::thread_cpu_time(tid).expect("own CPU clock");
                let cpu0 = cpu();
                while cpu() - cpu0 < Duration::from_millis(8) {
                    std::hint::spin_loop();
                }
                t0.elapsed()
            })
            .await
            .unwrap()
        });
        stop.store(true, Relaxed);
        hog.join().unwrap();
        eprintln!("starved poll: {} ms", wall.as_millis());
        return;
    }
    // The scenario must really starve the poll well past the 20 ms
    // threshold (else this test would check nothing). It usually takes
    // 2-6 s, but the SCHED_IDLE thread sometimes gets far more than its
    // weight (seen on a busy 2-CPU machine: 93 and 98 ms, and once 36 ms
    // three times in a row): twice the threshold will do.
    pinned_child(NAME, &[], "starved poll", 40, |err| {
        assert!(
            !err.contains("without yielding"),
            "a starved poll was blamed on its task:\n{err}"
        );
    });
}

/// Runs the child test `name` with `env` (one at a time: [`ONE_CPU`])
/// until the poll it prints as `<label>: <ms> ms` lasts at least
/// `at_least_ms`, three times at most: the kernel does not always share
/// the CPU as the scenario asks. `check` judges every attempt's stderr.
fn pinned_child(
    name: &str,
    env: &[(&str, &str)],
    label: &str,
    at_least_ms: u64,
    check: impl Fn(&str),
) {
    let prefix = format!("{label}: ");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (ok, err) = {
            let _cpu = one_cpu();
            child(name, env)
        };
        assert!(ok, "child failed:\n{err}");
        let wall: u64 = err
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.strip_suffix(" ms")?.parse().ok())
            .unwrap_or_else(|| panic!("no duration in:\n{err}"));
        check(&err);
        if wall >= at_least_ms {
            return;
        }
        assert!(
            attempts < 3,
            "{label} lasted {wall} ms, under {at_least_ms} ms, in {attempts} attempts: \
             the scenario did not happen:\n{err}"
        );
    }
}

/// A task that spins until it has used `TASK_CPU_MS` of CPU, on a
/// one-P runtime (stall threshold `STALL_MS`, retake off) whose M shares
/// its CPU with `HOGS` normal threads that spin there: the M is preempted
/// mid-poll and gets about 1 / (HOGS + 1) of the CPU. Prints the poll's
/// wall time.
fn shared_cpu_child() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    let var = |k: &str| -> u64 { std::env::var(k).unwrap().parse().unwrap() };
    let (hogs, task_cpu, stall) = (var("HOGS"), var("TASK_CPU_MS"), var("STALL_MS"));
    let cpu = numa_rt_numa::sys::thread_affinity()
        .expect("the affinity mask")
        .first()
        .expect("a CPU");
    let one: numa_rt_numa::CpuSet = [cpu].into_iter().collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
    let hogs: Vec<_> = (0..hogs)
        .map(|_| {
            let (stop, one, pinned) = (stop.clone(), one.clone(), pinned_tx.clone());
            std::thread::spawn(move || {
                numa_rt_numa::sys::set_thread_affinity(&one).expect("pin the hog");
                pinned.send(()).unwrap();
                while !stop.load(Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    for _ in &hogs {
        pinned_rx.recv().unwrap();
    }
    let rt = Builder::new()
        .max_procs(1)
        .stall_threshold(Some(Duration::from_millis(stall)))
        .retake_threshold(None)
        .on_thread_start(move || {
            numa_rt_numa::sys::set_thread_affinity(&one).expect("pin the M");
        })
        .build()
        .unwrap();
    let wall = rt.block_on(async move {
        spawn(async move {
            let t0 = std::time::Instant::now();
            let tid = numa_rt_numa::sys::gettid();
            let cpu = || numa_rt_numa::sys::thread_cpu_time(tid).expect("own CPU clock");
            let cpu0 = cpu();
            // Short bursts of CPU, each ended by a look at the clock; the
            // hogs preempt the thread between (and inside) them.
            while cpu() - cpu0 < Duration::from_millis(task_cpu) {
                for _ in 0..100 {
                    std::hint::spin_loop();
                }
            }
            t0.elapsed()
        })
        .await
        .unwrap()
    });
    stop.store(true, Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    eprintln!("shared poll: {} ms", wall.as_millis());
}

/// The soak's case: an M preempted mid-poll by busy threads on its CPU,
/// getting about a third of it (two normal threads spin there), with more
/// than the fifth the CPU-share rule took for starvation. The task needs
/// 40 ms of CPU, under the 60 ms threshold; its poll lasts ~120 ms or
/// more. The time it held its thread (wall time less the time runnable but
/// waiting for a CPU, from `schedstat`) stays under the threshold: not
/// reported. Checked to fail (one "without yielding" report) with the
/// CPU-share rule alone.
#[test]
fn a_poll_preempted_by_busy_threads_on_its_cpu_is_not_reported() {
    const NAME: &str = "a_poll_preempted_by_busy_threads_on_its_cpu_is_not_reported";
    if is_child(NAME) {
        return shared_cpu_child();
    }
    // The poll must really outlast the threshold by far (else this test
    // checks nothing): at a third of the CPU it takes ~120 ms.
    let env = [("HOGS", "2"), ("TASK_CPU_MS", "40"), ("STALL_MS", "60")];
    pinned_child(NAME, &env, "shared poll", 90, |err| {
        assert!(
            !err.contains("without yielding"),
            "a preempted poll was blamed on its task:\n{err}"
        );
    });
}

/// The other side: a task that spins for 150 ms of CPU on a CPU shared
/// with one busy thread holds its thread for far more than the 60 ms
/// threshold, though it waits for the CPU half the time: reported, once.
#[test]
fn a_poll_that_spins_on_a_shared_cpu_is_reported() {
    const NAME: &str = "a_poll_that_spins_on_a_shared_cpu_is_reported";
    if is_child(NAME) {
        return shared_cpu_child();
    }
    let env = [("HOGS", "1"), ("TASK_CPU_MS", "150"), ("STALL_MS", "60")];
    pinned_child(NAME, &env, "shared poll", 150, |err| {
        let reports = err.matches("without yielding").count();
        assert_eq!(reports, 1, "one report per task and stall:\n{err}");
    });
}
