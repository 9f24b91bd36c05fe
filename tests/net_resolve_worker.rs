//! A lookup in progress never holds a worker: on a one-processor runtime, a
//! task whose name lookup is stuck on a blocking thread does not stop
//! another task from running, and the lookup ran on a thread that is not
//! the worker.
//!
//! This file installs its own blocking hook (process-wide), so it is a test
//! binary of its own: the hook holds each resolver job until a channel says
//! go, and the go comes from a second task on the same single worker, which
//! waits (asynchronously) for the job to say it is held before it sends. If
//! resolution held the worker (a blocking wait for the job, or the job run
//! in place), that task could never send it and the job would see its wait
//! time out.

use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread::{self, ThreadId};
use std::time::Duration;

use futures::channel::oneshot;
use numa_rt::net::{set_blocking_hook, BlockingJob, TcpListener, TcpStream};

/// What a gated job saw: released by the other task (or timed out), and
/// the thread it ran on.
struct Seen {
    released: bool,
    thread: ThreadId,
}

/// The job's signal that it is held, and the channel it waits on.
type Gate = (oneshot::Sender<()>, mpsc::Receiver<()>);

static GATE: Mutex<Option<Gate>> = Mutex::new(None);
static SEEN: OnceLock<Mutex<Vec<Seen>>> = OnceLock::new();

fn seen() -> &'static Mutex<Vec<Seen>> {
    SEEN.get_or_init(|| Mutex::new(Vec::new()))
}

fn gated_hook(job: BlockingJob) -> Result<(), BlockingJob> {
    let Ok(handle) = numa_rt::Handle::try_current() else {
        return Err(job);
    };
    let gate = GATE.lock().unwrap().take();
    drop(handle.spawn_blocking(move || {
        let released = match gate {
            Some((held, go)) => {
                let _ = held.send(());
                go.recv_timeout(Duration::from_secs(20)).is_ok()
            }
            None => true,
        };
        seen().lock().unwrap().push(Seen {
            released,
            thread: thread::current().id(),
        });
        job();
    }));
    Ok(())
}

#[test]
fn a_stuck_lookup_lets_the_worker_run_other_tasks() {
    set_blocking_hook(gated_hook);
    let (go_tx, go_rx) = mpsc::channel();
    let (held_tx, held_rx) = oneshot::channel();
    *GATE.lock().unwrap() = Some((held_tx, go_rx));
    let rt = numa_rt::Builder::new().max_procs(1).build().unwrap();
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accept = numa_rt::spawn(async move { listener.accept().await.map(drop) });
        let connect = numa_rt::spawn(async move {
            let worker = thread::current().id();
            let s = TcpStream::connect(format!("localhost:{port}")).await;
            (worker, s.map(drop))
        });
        // Runs on the same (only) worker, once the lookup is held.
        let release = numa_rt::spawn(async move {
            held_rx.await.unwrap();
            go_tx.send(()).unwrap()
        });
        release.await.unwrap();
        let (worker, connected) = connect.await.unwrap();
        connected.unwrap();
        accept.await.unwrap().unwrap();
        let seen = seen().lock().unwrap();
        assert_eq!(seen.len(), 1, "one name, one resolver job");
        assert!(
            seen[0].released,
            "the job was released by a task on the worker"
        );
        assert_ne!(seen[0].thread, worker, "the lookup ran off the worker");
    });
}
