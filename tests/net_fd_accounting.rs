//! No descriptor leaks through the real runtime: 10,000 connect / accept /
//! close cycles on a 2-P runtime leave /proc/self/fd where it was, and
//! dropping a runtime closes its own descriptors. In its own binary (and
//! serialised) so no other test opens descriptors meanwhile.

use std::sync::Mutex;
use std::time::Duration;

use futures::io::AsyncReadExt;
use numa_rt::net::{TcpListener, TcpStream};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("procfs").count()
}

/// The process's open descriptors, less sysmon's `schedstat` files: sysmon
/// opens one per P the first time it suspects a stall there and keeps it
/// (bounded by the P count, closed with the runtime), so on a loaded
/// machine, where polls get preempted, a run could end with two more than
/// it began with ("descriptors grew from 17 to 19", 2 of 2 runs beside two
/// busy loops) without any connection leaking. Dropping the runtime closes
/// them: the other test counts every descriptor.
fn open_fds_but_schedstat() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("procfs")
        .filter_map(Result::ok)
        .filter(|e| {
            std::fs::read_link(e.path())
                .map(|t| !t.to_string_lossy().ends_with("/schedstat"))
                .unwrap_or(true)
        })
        .count()
}

/// Connections, `CLIENTS` client tasks at a time; the server closes first
/// (its side keeps the TIME_WAIT, so the client's ephemeral ports are not
/// used up when several copies of the test run at once).
async fn cycles(total: usize) {
    const CLIENTS: usize = 16;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = numa_rt::spawn(async move {
        for _ in 0..total {
            let (s, _) = listener.accept().await.unwrap();
            // A task per connection, which just closes it.
            numa_rt::spawn(async move { drop(s) });
        }
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let n = total / CLIENTS + usize::from(c < total % CLIENTS);
            numa_rt::spawn(async move {
                for _ in 0..n {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    let mut buf = [0u8; 1];
                    assert_eq!(s.read(&mut buf).await.unwrap(), 0, "the server closed it");
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    server.await.unwrap();
}

/// The two tests count the process's descriptors: never at the same time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn ten_thousand_connections_leak_no_descriptors() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();
    rt.block_on(async {
        numa_rt::time::timeout(Duration::from_secs(300), async {
            // Warm up: threads, pollers and lazily created state.
            cycles(100).await;
            let before = open_fds_but_schedstat();
            cycles(10_000).await;
            let after = open_fds_but_schedstat();
            assert!(
                after <= before,
                "descriptors grew from {before} to {after} over 10,000 connections"
            );
        })
        .await
        .expect("10,000 connections did not finish (a lost wake-up?)");
    });
}

/// Dropping the runtime closes every descriptor it opened (per P: the io
/// epoll, the park epoll, the unpark eventfd, the timerfd...) before `drop`
/// returns.
#[test]
fn dropping_the_runtime_closes_its_descriptors() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for round in 0..20 {
        let before = open_fds();
        let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();
        rt.block_on(cycles(100));
        drop(rt);
        let after = open_fds();
        assert!(
            after <= before,
            "round {round}: descriptors grew from {before} to {after} after dropping the runtime"
        );
    }
}
