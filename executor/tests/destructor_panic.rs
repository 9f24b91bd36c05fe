//! A panic in a task's destructor (its future's, its output's) never aborts
//! the process: reported as `JoinError::Panic` where a handle receives it,
//! as one stderr line naming the task where none does.
//!
//! async-task aborts the process on such a panic, so each case runs in a
//! child process (this binary re-executed with `CASE_ENV` set): the parent
//! asserts that the child exited 0 and printed what it should. Every child
//! checks that the runtime still runs spawns after the panic.

mod common;
use common::HANG;
use numa_rt_executor::task::JoinSet;
use numa_rt_executor::Runtime;
use std::sync::mpsc;

const CASE_ENV: &str = "NUMA_RT_TEST_DESTRUCTOR_PANIC_CASE";

/// Panics when dropped.
struct PanicOnDrop(&'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("{}", self.0);
    }
}

/// Runs `case` in a child process; returns its stderr.
fn run_child(case: &str) -> String {
    common::run_child(CASE_ENV, case)
}

fn rt() -> Runtime {
    common::rt(2)
}

/// The runtime still runs tasks, spawned from outside and from a task.
fn still_runs(rt: &Runtime) {
    let h = rt.spawn(async { numa_rt_executor::spawn(async { 40 }).await.unwrap() + 2 });
    assert_eq!(rt.block_on(h).unwrap(), 42);
}

/// Spawns a task that holds a `PanicOnDrop` and never finishes; returns once
/// it has been polled.
fn spawn_doomed(rt: &Runtime, msg: &'static str) -> numa_rt_executor::JoinHandle<()> {
    let (tx, rx) = mpsc::channel();
    let guard = PanicOnDrop(msg);
    let h = rt.spawn(async move {
        let _guard = guard;
        tx.send(()).unwrap();
        std::future::pending::<()>().await
    });
    rx.recv_timeout(HANG).expect("task started");
    h
}

#[test]
fn child() {
    let Ok(case) = std::env::var(CASE_ENV) else {
        return;
    };
    match case.as_str() {
        "abort_with_handle" => {
            let rt = rt();
            let h = spawn_doomed(&rt, "drop boom on abort");
            let id = h.id();
            h.abort();
            let err = rt.block_on(h).unwrap_err();
            assert!(err.is_panic(), "{err}");
            assert_eq!(err.id(), id);
            assert_eq!(
                common::panic_message(&*err.into_panic()),
                "drop boom on abort"
            );
            still_runs(&rt);
        }
        "abort_without_handle" => {
            let rt = rt();
            let h = spawn_doomed(&rt, "drop boom, nobody waits");
            let ah = h.abort_handle();
            eprintln!("aborted task id: {}", ah.id());
            drop(h);
            ah.abort();
            let deadline = std::time::Instant::now() + HANG;
            while !ah.is_finished() {
                assert!(std::time::Instant::now() < deadline, "never dropped");
                std::thread::yield_now();
            }
            still_runs(&rt);
            drop(rt); // every worker done: the report is written
        }
        "shutdown" => {
            let rt = rt();
            let h = spawn_doomed(&rt, "drop boom at shutdown");
            eprintln!("pending task id: {}", h.id());
            let local_id = rt.block_on(async {
                let guard = PanicOnDrop("local drop boom when block_on returns");
                let h = numa_rt_executor::spawn_local(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await
                });
                numa_rt_executor::task::yield_now().await;
                h.id()
            });
            eprintln!("local task id: {local_id}");
            still_runs(&rt);
            drop(rt);
            let err = Runtime::new().unwrap().block_on(h).unwrap_err();
            assert!(err.is_cancelled(), "{err}");
            still_runs(&rt_again());
        }
        "output_unawaited" => {
            let rt = rt();
            // Finished, then its handle dropped unawaited.
            let h = rt.spawn(async { PanicOnDrop("output boom, handle dropped") });
            let deadline = std::time::Instant::now() + HANG;
            while !h.is_finished() {
                assert!(std::time::Instant::now() < deadline, "never finished");
                std::thread::yield_now();
            }
            eprintln!("finished task id: {}", h.id());
            drop(h);
            // Handle dropped first: async-task drops the output itself.
            let (tx, rx) = futures::channel::oneshot::channel::<()>();
            let h = rt.spawn(async move {
                let _ = rx.await;
                PanicOnDrop("output boom, detached")
            });
            eprintln!("detached task id: {}", h.id());
            drop(h);
            tx.send(()).unwrap();
            still_runs(&rt);
            drop(rt);
        }
        "completed_then_destructor_panics" => {
            let rt = rt();
            let guard = PanicOnDrop("drop boom after completion");
            let h = rt.spawn(async move {
                let _guard = guard;
                5
            });
            let err = rt.block_on(h).unwrap_err();
            assert!(err.is_panic(), "{err}");
            still_runs(&rt);
        }
        "poll_and_destructor_panic" => {
            let rt = rt();
            // A future whose poll panics and whose field then panics when
            // the harness drops it. (A guard local to an `async` block would
            // be dropped while the poll's panic unwinds: Rust aborts the
            // process on that, in any runtime.)
            struct PanicsTwice(#[allow(dead_code)] PanicOnDrop);
            impl std::future::Future for PanicsTwice {
                type Output = ();
                fn poll(
                    self: std::pin::Pin<&mut Self>,
                    _: &mut std::task::Context<'_>,
                ) -> std::task::Poll<()> {
                    panic!("poll boom")
                }
            }
            let h = rt.spawn(PanicsTwice(PanicOnDrop("drop boom after a poll panic")));
            let err = rt.block_on(h).unwrap_err();
            assert_eq!(common::panic_message(&*err.into_panic()), "poll boom");
            still_runs(&rt);
        }
        "joinset_drop" => {
            let rt = rt();
            let aborts = rt.block_on(async {
                let mut set = JoinSet::new();
                let mut aborts = Vec::new();
                let (tx, rx) = futures::channel::mpsc::unbounded();
                for _ in 0..3 {
                    let (guard, tx) = (PanicOnDrop("drop boom in a set"), tx.clone());
                    aborts.push(set.spawn(async move {
                        let _guard = guard;
                        tx.unbounded_send(()).unwrap();
                        std::future::pending::<()>().await
                    }));
                }
                futures::StreamExt::collect::<Vec<_>>(futures::StreamExt::take(rx, 3)).await;
                // With a handle: abort_all then join_next reports each.
                let mut set2 = JoinSet::new();
                let guard = PanicOnDrop("drop boom in set2");
                set2.spawn(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await
                });
                numa_rt_executor::task::yield_now().await;
                set2.abort_all();
                let err = set2.join_next().await.unwrap().unwrap_err();
                assert!(err.is_panic(), "{err}");
                drop(set);
                aborts
            });
            // Dropped by the abort, not by the shutdown below.
            let deadline = std::time::Instant::now() + HANG;
            while !aborts.iter().all(|a| a.is_finished()) {
                assert!(std::time::Instant::now() < deadline, "never dropped");
                std::thread::yield_now();
            }
            still_runs(&rt);
            drop(rt);
        }
        "local_abort" => {
            let rt = rt();
            rt.block_on(async {
                let guard = PanicOnDrop("local drop boom on abort");
                let h = numa_rt_executor::spawn_local(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await
                });
                numa_rt_executor::task::yield_now().await;
                h.abort();
                assert!(h.await.unwrap_err().is_panic());
            });
            still_runs(&rt);
        }
        other => panic!("unknown case {other}"),
    }
}

fn rt_again() -> Runtime {
    rt()
}

/// The id the child printed after `prefix`.
fn printed_id(stderr: &str, prefix: &str) -> String {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line:\n{stderr}"));
    line.trim().to_string()
}

#[test]
fn abort_reports_a_panicking_destructor_as_join_error_panic() {
    run_child("abort_with_handle");
}

#[test]
fn abort_without_a_handle_reports_the_panic_on_stderr() {
    let stderr = run_child("abort_without_handle");
    let id = printed_id(&stderr, "aborted task id: ");
    assert!(
        stderr.contains(&format!(
            "numa_rt: task {id} was aborted and its future panicked while being dropped"
        )),
        "{stderr}"
    );
}

#[test]
fn shutdown_contains_a_panicking_destructor_and_names_the_task() {
    let stderr = run_child("shutdown");
    for prefix in ["pending task id: ", "local task id: "] {
        let id = printed_id(&stderr, prefix);
        assert!(
            stderr.contains(&format!("numa_rt: task {id} (spawned at ")),
            "no report for `{prefix}{id}`:\n{stderr}"
        );
    }
    assert!(stderr.contains("destructor_panic.rs"), "{stderr}");
}

#[test]
fn an_unawaited_output_with_a_panicking_destructor_is_contained() {
    let stderr = run_child("output_unawaited");
    for prefix in ["finished task id: ", "detached task id: "] {
        let id = printed_id(&stderr, prefix);
        assert!(
            stderr.contains(&format!(
                "numa_rt: task {id} finished, nobody awaited its JoinHandle, and dropping its output panicked"
            )),
            "no report for `{prefix}{id}`:\n{stderr}"
        );
    }
}

#[test]
fn a_destructor_panic_after_completion_is_a_join_error() {
    run_child("completed_then_destructor_panics");
}

#[test]
fn a_poll_panic_wins_over_a_destructor_panic() {
    run_child("poll_and_destructor_panic");
}

#[test]
fn a_dropped_join_set_contains_panicking_destructors() {
    let stderr = run_child("joinset_drop");
    let reports = stderr
        .lines()
        .filter(|l| l.contains("was aborted and its future panicked while being dropped"))
        .count();
    assert_eq!(reports, 3, "{stderr}");
}

#[test]
fn a_local_task_aborted_with_a_panicking_destructor() {
    run_child("local_abort");
}
