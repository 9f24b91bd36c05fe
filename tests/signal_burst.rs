//! A burst of different signals at once: every one reaches its listener,
//! and the handler never nests (nested, one frame per signal on a thread's
//! small alternate stack overflowed it: SIGSEGV). In a binary of its own:
//! it takes every real-time signal of the process.

use numa_rt::signal::unix::{signal, SignalKind};
use std::time::Duration;

/// SIGRTMIN..=SIGRTMIN+27 (28 signals: some emulators have no more).
fn realtime() -> std::ops::RangeInclusive<libc::c_int> {
    libc::SIGRTMIN()..=libc::SIGRTMAX().min(libc::SIGRTMIN() + 27)
}

#[test]
fn bursts_of_real_time_signals_are_all_received() {
    let rt = numa_rt::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut listeners: Vec<_> = realtime()
            .map(|s| signal(SignalKind::from_raw(s)).expect("a real-time signal"))
            .collect();
        for round in 0..20 {
            for s in realtime() {
                // SAFETY: kill(2) with this process's id and a signal whose
                // handler numa_rt installed above.
                assert_eq!(unsafe { libc::kill(libc::getpid(), s) }, 0);
            }
            for (l, s) in listeners.iter_mut().zip(realtime()) {
                let got = numa_rt::time::timeout(Duration::from_secs(60), l.recv()).await;
                assert_eq!(got, Ok(Some(())), "signal {s} in round {round}");
            }
        }
    });
}
