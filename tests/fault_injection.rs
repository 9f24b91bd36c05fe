//! Fault injection: user code that panics where the runtime itself calls it
//! (a waker fired by a timer or a socket, a builder hook, a waker's `Drop`
//! run at shutdown), and every kind of waiter at shutdown.
//!
//! After each fault the runtime must still serve: a TCP echo on 127.0.0.1
//! answers every connection and tasks spawned from a plain thread run
//! ([`assert_serves`]); and the runtime must stop when dropped. Each fault
//! runs in a child process (this test binary re-run on one test, see
//! [`in_child`]): a regression that aborts or hangs fails that one test,
//! with the child's output, instead of taking the whole binary down. The
//! parent also checks the child's stderr for the runtime's report line.
//!
//! Before these were contained, a panicking timer or I/O waker unwound
//! through the M that fired it: the thread died holding its P, so with one
//! P nothing ran again; a panicking `on_thread_start` did the same to every
//! M, and `block_on` never returned.

use std::future::Future;
use std::io::{Read, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use futures::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt::time::{sleep, SHUTDOWN_MESSAGE};
use numa_rt::{Builder, Runtime};

/// Generous bound for "this must happen": only reached when it is broken.
const HANG: Duration = Duration::from_secs(30);
/// How long a child process may run.
const CHILD_LIMIT: Duration = Duration::from_secs(90);
/// Names the test a child process runs.
const CHILD_ENV: &str = "NUMA_RT_FAULT_CASE";
/// Echo connections and outside spawns per [`assert_serves`].
const ROUNDS: usize = 20;

// ----------------------------------------------------------------- harness

/// In the child (the environment names `name`): runs `body` and returns
/// `None`. In the parent: re-runs this binary on test `name` alone, fails if
/// it fails or outlives [`CHILD_LIMIT`], and returns its stderr.
fn in_child(name: &str, body: impl FnOnce()) -> Option<String> {
    if std::env::var(CHILD_ENV).as_deref() == Ok(name) {
        body();
        return None;
    }
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(CHILD_LIMIT) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill takes no pointers; `pid` is our own child,
            // not yet reaped (the waiting thread has not returned).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            let out = rx.recv().unwrap().unwrap();
            panic!(
                "{name}: the child hung for {CHILD_LIMIT:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{name}: the child failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "{name}: the child did not run the test\nstdout:\n{stdout}"
    );
    Some(stderr)
}

/// The runtime still works: every one of `ROUNDS` TCP echo connections is
/// answered, and `ROUNDS` tasks spawned from a plain thread all run.
fn assert_serves(rt: &Runtime) {
    // Spawns from outside (a plain thread, through a handle).
    let (tx, rx) = mpsc::channel();
    let h = rt.handle().clone();
    std::thread::spawn(move || {
        for i in 0..ROUNDS {
            let tx = tx.clone();
            drop(h.spawn(async move { tx.send(i).unwrap() }));
        }
    });
    let mut seen = [false; ROUNDS];
    for _ in 0..ROUNDS {
        let i = rx
            .recv_timeout(HANG)
            .expect("a task spawned from outside ran");
        seen[i] = true;
    }
    assert!(seen.iter().all(|&s| s));

    // A TCP echo server, and a client per round from this thread.
    let listener = rt.block_on(async { TcpListener::bind("127.0.0.1:0").await.unwrap() });
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(async move {
        for _ in 0..ROUNDS {
            let (mut conn, _) = listener.accept().await.unwrap();
            drop(numa_rt::spawn(async move {
                let mut buf = [0u8; 64];
                loop {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if conn.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            }));
        }
    });
    for i in 0..ROUNDS {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(HANG)).unwrap();
        let msg = format!("ping {i}");
        c.write_all(msg.as_bytes()).unwrap();
        let mut back = vec![0u8; msg.len()];
        c.read_exact(&mut back)
            .unwrap_or_else(|e| panic!("echo round {i} got no answer: {e}"));
        assert_eq!(back, msg.as_bytes());
    }
    let (done_tx, done_rx) = mpsc::channel();
    let h = rt.handle().clone();
    std::thread::spawn(move || {
        let _ = done_tx.send(h.block_on(server).is_ok());
    });
    assert!(done_rx.recv_timeout(HANG).expect("the accept loop ended"));
}

/// A waker that reports its `wake` on a channel, then panics.
struct PanicOnWake(Mutex<mpsc::Sender<()>>);

impl Wake for PanicOnWake {
    fn wake(self: Arc<Self>) {
        let _ = self.0.lock().unwrap().send(());
        panic!("injected: a waker that panics");
    }
}

fn panic_on_wake() -> (Waker, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    (Waker::from(Arc::new(PanicOnWake(Mutex::new(tx)))), rx)
}

/// A waker whose data panics when dropped (counting its drops first).
struct PanicOnDrop(Arc<AtomicUsize>);

impl Wake for PanicOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("injected: a waker whose Drop panics");
    }
}

fn one_proc() -> Runtime {
    // One P: a worker that died would take the whole runtime with it.
    Builder::new().max_procs(1).build().unwrap()
}

/// Registers a timer with `waker` on the runtime (first polled inside a
/// task, so on the task's P) and returns it, still pending.
fn timer_with_waker(rt: &Runtime, waker: Waker, after: Duration) -> numa_rt::time::Sleep {
    rt.block_on(rt.spawn(async move {
        // Retry if the thread was descheduled past the deadline before the
        // first poll (then the timer completes without registering).
        for _ in 0..100 {
            let mut s = sleep(after);
            if Pin::new(&mut s)
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
            {
                return s;
            }
        }
        panic!("a {after:?} timer never stayed pending");
    }))
    .unwrap()
}

// ------------------------------------------------------- panicking wakers

#[test]
fn a_timer_waker_that_panics() {
    let Some(stderr) = in_child("a_timer_waker_that_panics", || {
        let rt = one_proc();
        let (waker, fired) = panic_on_wake();
        let timer = timer_with_waker(&rt, waker, Duration::from_millis(20));
        fired
            .recv_timeout(HANG)
            .expect("the driver fired the timer's waker");
        assert_serves(&rt);
        drop(timer);
        drop(rt);
    }) else {
        return;
    };
    assert!(
        stderr.contains("numa_rt: a timer's waker panicked in wake()"),
        "{stderr}"
    );
}

#[test]
fn an_io_waker_that_panics() {
    let Some(stderr) = in_child("an_io_waker_that_panics", || {
        let rt = one_proc();
        let (waker, fired) = panic_on_wake();
        let (client, mut server) = rt
            .block_on(rt.spawn(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let mut client = TcpStream::connect(addr).await.unwrap();
                let (server, _) = listener.accept().await.unwrap();
                // The client waits to read, with the panicking waker.
                let mut buf = [0u8; 8];
                let polled =
                    Pin::new(&mut client).poll_read(&mut Context::from_waker(&waker), &mut buf);
                assert!(polled.is_pending(), "nothing was written yet");
                (client, server)
            }))
            .unwrap();
        // Readiness on the client's P fires the waker.
        rt.block_on(server.write_all(b"x")).unwrap();
        fired
            .recv_timeout(HANG)
            .expect("the driver fired the socket's waker");
        assert_serves(&rt);
        drop((client, server));
        drop(rt);
    }) else {
        return;
    };
    assert!(
        stderr.contains("numa_rt: an I/O source's waker panicked in wake()"),
        "{stderr}"
    );
}

// JoinHandle polled with a panicking waker: added with the task harness's
// containment (issue 13, item 2, the JoinHandle part).

// ---------------------------------------------------------- builder hooks

#[test]
fn an_on_thread_start_hook_that_panics() {
    let Some(stderr) = in_child("an_on_thread_start_hook_that_panics", || {
        let rt = Builder::new()
            .max_procs(2)
            .on_thread_start(|| panic!("injected: on_thread_start"))
            .build()
            .expect("build() succeeds: the hook's panic is reported, not returned");
        assert_serves(&rt);
        // Blocking threads run the hooks too, contained the same way.
        assert_eq!(rt.block_on(rt.spawn_blocking(|| 7)).unwrap(), 7);
        drop(rt);
    }) else {
        return;
    };
    assert!(
        stderr.contains("numa_rt: the on_thread_start hook panicked"),
        "{stderr}"
    );
}

#[test]
fn an_on_thread_stop_hook_that_panics() {
    let Some(stderr) = in_child("an_on_thread_stop_hook_that_panics", || {
        let rt = Builder::new()
            .max_procs(2)
            .on_thread_stop(|| panic!("injected: on_thread_stop"))
            .build()
            .unwrap();
        assert_serves(&rt);
        assert_eq!(rt.block_on(rt.spawn_blocking(|| 7)).unwrap(), 7);
        // Shutdown waits for every M: a hook that killed one would not hang
        // it, but must not abort either.
        drop(rt);
        // And the process can go on building runtimes.
        assert_serves(&one_proc());
    }) else {
        return;
    };
    assert!(
        stderr.contains("numa_rt: the on_thread_stop hook panicked"),
        "{stderr}"
    );
}

#[test]
fn a_thread_name_fn_that_panics() {
    let Some(stderr) = in_child("a_thread_name_fn_that_panics", || {
        let rt = Builder::new()
            .max_procs(2)
            .thread_name_fn(|| panic!("injected: thread_name_fn"))
            .build()
            .unwrap();
        assert_serves(&rt);
        // Blocking threads are named by the same function.
        let got =
            rt.block_on(rt.spawn_blocking(|| std::thread::current().name().map(str::to_owned)));
        assert_eq!(got.unwrap().as_deref(), Some("numa_rt-worker"));
        drop(rt);
    }) else {
        return;
    };
    assert!(
        stderr.contains("numa_rt: the thread_name_fn hook panicked"),
        "{stderr}"
    );
}

// --------------------------------------------------- faults at shutdown

/// A waker whose `Drop` panics, still held by a pending timer and a pending
/// read when the runtime shuts down: shutdown wakes (and so drops) both, on
/// the thread dropping the runtime; both panics are contained and the drop
/// completes.
#[test]
fn a_waker_drop_that_panics_at_shutdown() {
    let Some(stderr) = in_child("a_waker_drop_that_panics_at_shutdown", || {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = one_proc();
        let w = Waker::from(Arc::new(PanicOnDrop(drops.clone())));
        let timer = timer_with_waker(&rt, w, Duration::from_secs(3600));
        let w = Waker::from(Arc::new(PanicOnDrop(drops.clone())));
        let sockets = rt
            .block_on(rt.spawn(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let mut client = TcpStream::connect(addr).await.unwrap();
                let (server, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 8];
                assert!(Pin::new(&mut client)
                    .poll_read(&mut Context::from_waker(&w), &mut buf)
                    .is_pending());
                drop(w);
                (client, server)
            }))
            .unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 0, "both wakers are stored");
        assert_serves(&rt);
        drop(rt);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            2,
            "shutdown woke, and so dropped, both stored wakers"
        );
        drop((timer, sockets));
        assert_serves(&one_proc());
    }) else {
        return;
    };
    assert!(
        stderr.contains("numa_rt: a timer's waker panicked in wake()")
            && stderr.contains("numa_rt: an I/O source's waker panicked in wake()"),
        "{stderr}"
    );
}

// Task destructors that panic (on abort, at shutdown, an unawaited output):
// added with the task harness's containment (issue 13, item 1).

// ----------------------------------------- every kind of waiter at shutdown

/// Runs `f` on a new thread; returns what it returned or the message it
/// panicked with, failing the test if it does not end within `HANG`.
fn on_thread<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> mpsc::Receiver<Result<R, String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        });
        let _ = tx.send(r);
    });
    rx
}

/// Reports its first `Pending` ("the waiter is registered") on a channel.
struct SignalPending<F> {
    inner: Pin<Box<F>>,
    tx: Option<mpsc::Sender<()>>,
}

impl<F: Future> Future for SignalPending<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let r = self.inner.as_mut().poll(cx);
        if r.is_pending() {
            if let Some(tx) = self.tx.take() {
                let _ = tx.send(());
            }
        }
        r
    }
}

fn signal_pending<F: Future>(f: F) -> (SignalPending<F>, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    (
        SignalPending {
            inner: Box::pin(f),
            tx: Some(tx),
        },
        rx,
    )
}

/// A timer used after its runtime is gone fails fast with a clear message
/// (it used to hang: the timer could never fire).
#[test]
fn a_timer_after_shutdown_panics_at_once() {
    let rt = one_proc();
    let h = rt.handle().clone();
    drop(rt);
    let started = Instant::now();
    // A deadline no slow machine passes before the first poll: a sleep
    // first polled after its deadline is ready at once without asking the
    // timers (a 10 ms sleep did so once in the 4-node guest), which is
    // no hang either.
    let r = on_thread(move || h.block_on(sleep(Duration::from_secs(3600))))
        .recv_timeout(HANG)
        .expect("block_on(sleep) after shutdown returned");
    assert_eq!(r.unwrap_err(), SHUTDOWN_MESSAGE);
    // Not a timing assertion on the runtime: a hang would be 30 s.
    assert!(started.elapsed() < HANG);
}

/// Foreign threads blocked on a timer of the runtime — in `Handle::block_on`
/// and in another executor — are woken when it is dropped, and get the same
/// message.
#[test]
fn foreign_timer_waiters_are_woken_at_shutdown() {
    let rt = Builder::new().max_procs(2).build().unwrap();
    let h = rt.handle().clone();
    let (fut, registered) = signal_pending(sleep(Duration::from_secs(3600)));
    let in_block_on = on_thread(move || h.block_on(fut));
    registered
        .recv_timeout(HANG)
        .expect("the block_on waiter registered");

    let h = rt.handle().clone();
    let (fut, registered) = signal_pending(numa_rt::time::timeout(
        Duration::from_secs(3600),
        std::future::pending::<()>(),
    ));
    let elsewhere = on_thread(move || {
        let _enter = h.enter();
        futures::executor::block_on(fut)
    });
    registered
        .recv_timeout(HANG)
        .expect("the foreign executor's waiter registered");

    drop(rt);
    let r = in_block_on
        .recv_timeout(HANG)
        .expect("the Handle::block_on waiter was woken");
    assert_eq!(r.unwrap_err(), SHUTDOWN_MESSAGE);
    let r = elsewhere
        .recv_timeout(HANG)
        .expect("the foreign executor's waiter was woken");
    assert_eq!(r.unwrap_err(), SHUTDOWN_MESSAGE);
}

/// A foreign thread awaiting the handle of a task that never finishes gets
/// `JoinError::Cancelled` when the runtime is dropped.
#[test]
fn foreign_join_waiters_are_woken_at_shutdown() {
    let rt = one_proc();
    let task = rt.spawn(std::future::pending::<()>());
    let (fut, registered) = signal_pending(task);
    let waiter = on_thread(move || futures::executor::block_on(fut).map_err(|e| e.is_cancelled()));
    registered
        .recv_timeout(HANG)
        .expect("the join waiter registered");
    drop(rt);
    let r = waiter
        .recv_timeout(HANG)
        .expect("the join waiter was woken");
    assert_eq!(r.unwrap(), Err(true), "the task was cancelled");
}
