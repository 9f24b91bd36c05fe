//! `Builder::enable_tokio_compat` (feature `tokio-compat`): tokio-bound
//! code inside numa_rt tasks, served by the side tokio runtime.
//!
//! CI: `cargo test -p numa_rt --features tokio-compat --test tokio_compat`.

#![cfg(feature = "tokio-compat")]

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Generous bound for "this must happen": only reached when it is broken.
const HANG: Duration = Duration::from_secs(30);

fn compat_rt(procs: usize) -> numa_rt::Runtime {
    numa_rt::Builder::new()
        .max_procs(procs)
        .enable_tokio_compat()
        .build()
        .unwrap()
}

/// A std listener on loopback that echoes one connection's bytes back.
fn std_echo_server() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = listener.accept() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// Sleeps with tokio's timer and echoes through a tokio socket: both need
/// tokio's context on the calling thread.
async fn tokio_sleep_and_echo(addr: std::net::SocketAddr) -> Vec<u8> {
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(t0.elapsed() >= Duration::from_millis(20));
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).await.unwrap();
    buf.to_vec()
}

#[test]
fn tokio_time_and_net_work_in_a_worker_task() {
    let rt = compat_rt(2);
    let addr = std_echo_server();
    let got = rt.block_on(async move {
        numa_rt::spawn(async move {
            // Polled on an M, not on the side thread.
            let name = std::thread::current().name().map(str::to_owned);
            (tokio_sleep_and_echo(addr).await, name)
        })
        .await
        .unwrap()
    });
    assert_eq!(got.0, b"ping");
    assert_eq!(got.1.as_deref(), Some("numa_rt-worker"));
}

#[test]
fn tokio_net_talks_to_a_numa_rt_listener() {
    let rt = compat_rt(2);
    rt.block_on(async {
        let listener = numa_rt::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let server = numa_rt::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let client = numa_rt::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(b"hello").await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            buf
        });
        assert_eq!(&client.await.unwrap(), b"hello");
        server.await.unwrap();
    });
}

#[test]
fn tokio_time_and_net_work_in_spawn_blocking() {
    let rt = compat_rt(1);
    let addr = std_echo_server();
    let (a, b) = rt.block_on(async move {
        numa_rt::spawn_blocking(move || {
            // tokio's own block_on, through the context the thread entered…
            let a = tokio::runtime::Handle::current().block_on(tokio_sleep_and_echo(addr));
            // …and a foreign executor polling a tokio future.
            let b = futures::executor::block_on(tokio_sleep_and_echo(addr));
            (a, b)
        })
        .await
        .unwrap()
    });
    assert_eq!(a, b"ping");
    assert_eq!(b, b"ping");
}

#[test]
fn block_on_callers_are_in_tokio_context_only_while_inside_block_on() {
    let rt = compat_rt(1);
    assert!(tokio::runtime::Handle::try_current().is_err());
    rt.block_on(async {
        tokio::time::sleep(Duration::from_millis(1)).await;
    });
    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "block_on leaves the tokio context it entered"
    );
}

#[test]
fn tokio_spawn_returns_its_result_from_the_side_thread() {
    let rt = compat_rt(2);
    let (v, name) = rt.block_on(async {
        numa_rt::spawn(async {
            tokio::spawn(async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                (6 * 7, std::thread::current().name().map(str::to_owned))
            })
            .await
            .unwrap()
        })
        .await
        .unwrap()
    });
    assert_eq!(v, 42);
    assert_eq!(name.as_deref(), Some("numa_rt-tokio"));
}

#[test]
fn without_the_switch_tokio_panics_with_no_reactor_running() {
    // The feature is on in this binary; the switch is what makes it work.
    let rt = numa_rt::Builder::new().max_procs(1).build().unwrap();
    let err = rt
        .block_on(async {
            numa_rt::spawn(async {
                tokio::time::sleep(Duration::from_millis(1)).await;
            })
            .await
        })
        .unwrap_err();
    assert!(err.is_panic());
    let payload = err.into_panic();
    let msg = numa_rt_reactor::fault::panic_message(&*payload).to_owned();
    assert!(msg.contains("no reactor running"), "{msg}");
}

#[test]
fn hooks_and_blocking_closures_see_the_tokio_context() {
    let in_cx = Arc::new(AtomicUsize::new(0));
    let i = in_cx.clone();
    let rt = numa_rt::Builder::new()
        .max_procs(1)
        .enable_tokio_compat()
        .on_thread_start(move || {
            if tokio::runtime::Handle::try_current().is_ok() {
                i.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
    let ok = rt.block_on(async {
        numa_rt::spawn_blocking(|| tokio::runtime::Handle::try_current().is_ok())
            .await
            .unwrap()
    });
    assert!(ok);
    drop(rt);
    // The M and the blocking thread.
    assert!(in_cx.load(Ordering::SeqCst) >= 2);
}

#[test]
fn block_on_inside_block_in_place_nests_the_tokio_context() {
    // The M's context, then block_on's on top of it, left in reverse
    // order (tokio panics on guards dropped out of order).
    let rt = compat_rt(2);
    let v = rt.block_on(async {
        numa_rt::spawn(async {
            let v = numa_rt::block_in_place(|| {
                numa_rt::Handle::current().block_on(async {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    7
                })
            });
            tokio::time::sleep(Duration::from_millis(1)).await;
            v
        })
        .await
        .unwrap()
    });
    assert_eq!(v, 7);
}

thread_local! {
    static ON_SIDE_THREAD: std::cell::RefCell<Option<SetOnDrop>> =
        const { std::cell::RefCell::new(None) };
}

struct SetOnDrop(Arc<AtomicBool>);
impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn the_side_runtime_and_its_thread_end_with_the_runtime() {
    let rt = compat_rt(2);
    let thread_gone = Arc::new(AtomicBool::new(false));
    let task_dropped = Arc::new(AtomicBool::new(false));
    let numa_task_dropped = Arc::new(AtomicBool::new(false));
    let addr = std_echo_server();
    let (g, t, n) = (
        thread_gone.clone(),
        task_dropped.clone(),
        numa_task_dropped.clone(),
    );
    rt.block_on(async move {
        // On the side thread: a thread-local whose destructor runs when
        // that thread exits, and a tokio task that never finishes.
        tokio::spawn(async move {
            ON_SIDE_THREAD.with(|s| *s.borrow_mut() = Some(SetOnDrop(g)));
        })
        .await
        .unwrap();
        tokio::spawn(async move {
            let _flag = SetOnDrop(t);
            std::future::pending::<()>().await;
        });
        // A numa_rt task holding a tokio socket and timer, dropped at
        // shutdown: they deregister from a driver that is still alive.
        let (tx, rx) = futures::channel::oneshot::channel();
        drop(numa_rt::spawn(async move {
            let _flag = SetOnDrop(n);
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let _sleep = tokio::time::sleep(HANG);
            tx.send(()).unwrap();
            let mut buf = [0u8; 1];
            let _ = s.read(&mut buf).await;
        }));
        rx.await.unwrap();
    });
    assert!(!thread_gone.load(Ordering::SeqCst));
    drop(rt);
    assert!(numa_task_dropped.load(Ordering::SeqCst));
    assert!(task_dropped.load(Ordering::SeqCst), "tokio's tasks dropped");
    assert!(
        thread_gone.load(Ordering::SeqCst),
        "the numa_rt-tokio thread ended before Runtime::drop returned"
    );
}

#[test]
fn reqwest_gets_from_a_local_hyper_server() {
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper_util::rt::TokioIo;

    let rt = compat_rt(2);
    let body = rt.block_on(async {
        // The server: hyper over a tokio listener, in numa_rt tasks.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        numa_rt::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                numa_rt::spawn(async move {
                    let service = hyper::service::service_fn(|req| async move {
                        let reply = format!("hello from {}", req.uri().path());
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            Bytes::from(reply),
                        )))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        // The client: reqwest, in another numa_rt task.
        numa_rt::spawn(async move {
            let client = reqwest::Client::builder()
                .no_proxy()
                .timeout(HANG)
                .build()
                .unwrap();
            let mut bodies = Vec::new();
            for _ in 0..3 {
                let res = client
                    .get(format!("http://{addr}/compat"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 200);
                bodies.push(res.text().await.unwrap());
            }
            bodies
        })
        .await
        .unwrap()
    });
    assert_eq!(body, vec!["hello from /compat"; 3]);
}

/// `#[numa_rt::test(tokio_compat)]` switches the side runtime on: tokio's
/// timer works in the body, on the test's default one P.
#[numa_rt::test(tokio_compat)]
async fn the_test_attribute_switches_compat_on() {
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(tokio::spawn(async { 6 * 7 }).await.unwrap(), 42);
}

/// The same for `main`-style multi-threaded runtimes.
#[numa_rt::test(flavor = "multi_thread", worker_threads = 2, tokio_compat = true)]
async fn the_attribute_with_other_arguments() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

fn panic_text(e: numa_rt::JoinError) -> String {
    let p = e.into_panic();
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Issue 24: `tokio::time::pause()` paused the side runtime's clock, which
/// then auto-advanced whenever the side thread was idle, blind to numa_rt's
/// tasks (a ported test hung). Now it fails at once, and so does
/// `advance`; numa_rt's own paused clock is the one to use.
#[test]
fn tokio_time_pause_and_advance_fail_at_once() {
    let rt = compat_rt(2);
    let (pause, advance) = rt.block_on(async {
        let pause = numa_rt::spawn(async { tokio::time::pause() }).await;
        let advance = numa_rt::spawn(tokio::time::advance(Duration::from_secs(1))).await;
        (pause, advance)
    });
    let msg = panic_text(pause.expect_err("tokio::time::pause() must fail"));
    assert!(msg.contains("current_thread"), "{msg}");
    let msg = panic_text(advance.expect_err("tokio::time::advance() must fail"));
    assert!(msg.contains("not frozen"), "{msg}");
    // numa_rt's paused clock works in the same runtime.
    rt.block_on(async {
        numa_rt::time::pause();
        let t0 = numa_rt::time::now();
        numa_rt::time::advance(Duration::from_secs(5)).await;
        assert!(numa_rt::time::now() - t0 >= Duration::from_secs(5));
        numa_rt::time::resume();
    });
}

/// `Builder::tokio_compat_workers(3)`: three `tokio::spawn`ed futures that
/// each block until all three are running at once get through, on three
/// threads (with one worker they would wait out the bound and fail).
#[test]
fn tokio_compat_workers_run_spawned_futures_in_parallel() {
    let rt = numa_rt::Builder::new()
        .max_procs(2)
        .enable_tokio_compat()
        .tokio_compat_workers(3)
        .build()
        .unwrap();
    let arrived = Arc::new(AtomicUsize::new(0));
    let results = rt.block_on(async {
        let mut hs = Vec::new();
        for _ in 0..3 {
            let arrived = arrived.clone();
            hs.push(tokio::spawn(async move {
                arrived.fetch_add(1, Ordering::SeqCst);
                let t0 = Instant::now();
                // Blocks this worker on purpose; bounded.
                while arrived.load(Ordering::SeqCst) < 3 && t0.elapsed() < Duration::from_secs(10) {
                    std::thread::yield_now();
                }
                (
                    arrived.load(Ordering::SeqCst),
                    std::thread::current().id(),
                    std::thread::current().name().map(str::to_owned),
                )
            }));
        }
        let mut out = Vec::new();
        for h in hs {
            out.push(h.await.unwrap());
        }
        out
    });
    let threads: std::collections::HashSet<_> = results.iter().map(|r| r.1).collect();
    assert_eq!(threads.len(), 3, "{results:?}");
    for (n, _, name) in &results {
        assert_eq!(*n, 3);
        assert_eq!(name.as_deref(), Some("numa_rt-tokio"));
    }
}

#[test]
fn tokio_compat_workers_zero_is_refused_by_name() {
    let e = numa_rt::Builder::new()
        .enable_tokio_compat()
        .tokio_compat_workers(0)
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("Builder::tokio_compat_workers"),
        "{e}"
    );
}

/// On the multi-thread side runtime, tokio's `block_in_place` called from a
/// numa_rt task runs the closure in place (it is not a tokio worker, so
/// there is nothing to hand off); numa_rt's `block_in_place` is the one
/// that hands the P to another thread.
#[test]
fn tokio_block_in_place_runs_the_closure_in_place() {
    let rt = compat_rt(2);
    let v =
        rt.block_on(async { numa_rt::spawn(async { tokio::task::block_in_place(|| 5) }).await });
    assert_eq!(v.unwrap(), 5);
}
