//! tokio-console sees numa_rt's tasks: console-subscriber's own `ConsoleLayer`
//! (not a model of it) records a numa_rt task's spawn, its polls and its
//! waker operations.
//!
//! The layer writes what it matched to a recording file (its
//! `recording_path` option, the format `tokio-console` replays), which this
//! test reads back. console-subscriber panics when built without
//! `--cfg tokio_unstable` or `--cfg console_without_tokio_unstable` (the
//! latter is its switch for runtimes other than tokio), so this test runs
//! only under
//! `RUSTFLAGS="--cfg console_without_tokio_unstable" cargo test --features console --test console`
//! (.ci/run does, in its own target directory) and is ignored otherwise.
#![cfg(feature = "console")]

use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tracing_subscriber::layer::SubscriberExt;

/// Clones its waker and wakes the clone (by value) on its first poll,
/// wakes by reference on the second, and is ready on the third.
struct WakeTwice(u8);

impl Future for WakeTwice {
    type Output = ();
    // Cloning to wake by value is the point: it is a clone and a wake.
    #[allow(clippy::waker_clone_wake)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0 += 1;
        match self.0 {
            1 => cx.waker().clone().wake(),
            2 => {
                let w = cx.waker().clone();
                w.wake_by_ref();
                drop(w);
            }
            _ => return Poll::Ready(()),
        }
        Poll::Pending
    }
}

/// The recording's events about span `span`, as (kind, value) pairs.
fn events_of(lines: &[Value], span: u64) -> Vec<(String, Value)> {
    lines
        .iter()
        .filter_map(|l| l.as_object()?.iter().next())
        .filter(|(_, v)| v["id"] == span)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
#[cfg_attr(
    not(any(tokio_unstable, console_without_tokio_unstable)),
    ignore = "needs RUSTFLAGS=\"--cfg console_without_tokio_unstable\" (console-subscriber refuses to start without it)"
)]
fn console_subscriber_records_spawn_polls_and_waker_ops() {
    let path = std::env::temp_dir().join(format!("numa_rt-console-{}.json", std::process::id()));
    let (layer, server) = console_subscriber::ConsoleLayer::builder()
        .recording_path(&path)
        .build();
    // The server is never served, but it must live: the layer hands each
    // task's stats to it, and keeps stats (and so records polls and waker
    // operations) only while that channel is open.
    let _server = server;
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();

    let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();
    let h = rt.spawn(WakeTwice(0));
    let id = h.id().as_u64();
    rt.block_on(h).unwrap();

    // The layer's writer thread flushes after each batch; wait for ours.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (span, events) = loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        // The spawn the layer matched whose `task.id` field is our task.
        let spawn = lines.iter().filter_map(|l| l.get("Spawn")).find(|s| {
            s["fields"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["name"] == "task.id" && f["value"] == id)
        });
        if let Some(s) = spawn {
            let span = s["id"].as_u64().unwrap();
            let events = events_of(&lines, span);
            if events.iter().filter(|e| e.0 == "Exit").count() == 3 {
                break (s.clone(), events);
            }
        }
        assert!(
            Instant::now() < deadline,
            "the recording never showed task {id}: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_file(&path);

    // Fields: `kind` and `task.id` kept as fields (tokio-console's columns);
    // `loc.*` taken out of them, because console read them as the location.
    let fields: Vec<(String, Value)> = span["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f["value"].clone()))
        .collect();
    assert!(
        fields.contains(&("kind".into(), "task".into())),
        "{fields:?}"
    );
    assert!(
        fields.iter().all(|f| !f.0.starts_with("loc.")),
        "{fields:?}"
    );

    // Three polls, each an Enter and an Exit; the waker operations between
    // them, seen as self-wakes (woken inside the task's own span).
    let seq: Vec<String> = events
        .iter()
        .filter(|(k, _)| k != "Spawn" && k != "Close")
        .map(|(k, v)| match k.as_str() {
            "Waker" => format!("Waker {}", v["op"]),
            k => k.to_string(),
        })
        .collect();
    assert_eq!(
        seq,
        [
            "Enter",
            "Waker \"Clone\"",
            "Waker {\"Wake\":{\"self_wake\":true}}",
            "Exit",
            "Enter",
            "Waker \"Clone\"",
            "Waker {\"WakeByRef\":{\"self_wake\":true}}",
            "Waker \"Drop\"",
            "Exit",
            "Enter",
            "Exit",
        ],
    );
}
