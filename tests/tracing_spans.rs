//! The `tracing` feature: every task has a span (`runtime.spawn`, with its
//! id, kind and spawn location) that each of its polls enters, its wakers
//! report their clones, drops and wakes, and the stall report is a `warn!`
//! event. Checked with a recording `Layer` that matches spans and events the
//! way console-subscriber does (span *name* `runtime.spawn`; waker events by
//! *target* `runtime::waker`, their `task.id` field naming the task's span),
//! so what passes here is what tokio-console reads.
#![cfg(feature = "tracing")]

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::span;
use tracing_subscriber::layer::{Context as LayerCx, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A task span's fields, kept in the span's extensions.
#[derive(Clone, Debug, Default, PartialEq)]
struct TaskSpan {
    kind: String,
    task_id: u64,
    file: String,
    line: u64,
    col: u64,
}

#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.0.insert(f.name().into(), format!("{v:?}"));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.0.insert(f.name().into(), v.to_string());
    }
}

impl Fields {
    fn u64(&self, name: &str) -> u64 {
        self.0.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
    fn str(&self, name: &str) -> String {
        self.0.get(name).cloned().unwrap_or_default()
    }
}

/// Everything seen, keyed by numa_rt task id (span ids are reused by the
/// registry once a span closes; task ids never are).
#[derive(Default)]
struct Seen {
    spans: HashMap<u64, TaskSpan>,
    enters: HashMap<u64, usize>,
    exits: HashMap<u64, usize>,
    /// Events logged inside a task span: (task id, message).
    events: Vec<(u64, String)>,
    /// Waker events: (task id resolved through the span id, op).
    waker_ops: Vec<(u64, String)>,
    /// `numa_rt::sysmon` events' fields.
    stalls: Vec<HashMap<String, String>>,
}

fn seen() -> &'static Mutex<Seen> {
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();
    SEEN.get_or_init(Default::default)
}

fn lock() -> std::sync::MutexGuard<'static, Seen> {
    seen().lock().unwrap_or_else(|e| e.into_inner())
}

struct Recorder;

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, cx: LayerCx<'_, S>) {
        // console-subscriber: `("runtime.spawn", _) => spawn callsite`.
        if attrs.metadata().name() != "runtime.spawn" {
            return;
        }
        let mut f = Fields::default();
        attrs.record(&mut f);
        let t = TaskSpan {
            kind: f.str("kind"),
            task_id: f.u64("task.id"),
            file: f.str("loc.file"),
            line: f.u64("loc.line"),
            col: f.u64("loc.col"),
        };
        lock().spans.insert(t.task_id, t.clone());
        cx.span(id).unwrap().extensions_mut().insert(t);
    }

    fn on_enter(&self, id: &span::Id, cx: LayerCx<'_, S>) {
        if let Some(t) = cx.span(id).unwrap().extensions().get::<TaskSpan>() {
            *lock().enters.entry(t.task_id).or_default() += 1;
        }
    }

    fn on_exit(&self, id: &span::Id, cx: LayerCx<'_, S>) {
        if let Some(t) = cx.span(id).unwrap().extensions().get::<TaskSpan>() {
            *lock().exits.entry(t.task_id).or_default() += 1;
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, cx: LayerCx<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let meta = event.metadata();
        // console-subscriber: `(_, "runtime::waker") => waker callsite`,
        // and `task.id` is the span's id.
        if meta.target() == "runtime::waker" {
            let span = span::Id::from_u64(f.u64("task.id"));
            let task = cx
                .span(&span)
                .and_then(|s| s.extensions().get::<TaskSpan>().map(|t| t.task_id));
            let task = task.expect("a waker event names a live task span");
            lock().waker_ops.push((task, f.str("op")));
            return;
        }
        if meta.target() == "numa_rt::sysmon" {
            lock().stalls.push(f.0);
            return;
        }
        let parent = cx.event_span(event);
        if let Some(t) = parent.and_then(|s| s.extensions().get::<TaskSpan>().cloned()) {
            lock().events.push((t.task_id, f.str("message")));
        }
    }
}

fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let subscriber = tracing_subscriber::registry().with(Recorder);
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
}

fn rt() -> numa_rt::Runtime {
    install();
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

fn span_of(id: numa_rt::task::Id) -> TaskSpan {
    lock()
        .spans
        .get(&id.as_u64())
        .cloned()
        .unwrap_or_else(|| panic!("no runtime.spawn span for task {id}"))
}

fn polls_of(id: numa_rt::task::Id) -> (usize, usize) {
    let s = lock();
    let n = |m: &HashMap<u64, usize>| m.get(&id.as_u64()).copied().unwrap_or(0);
    (n(&s.enters), n(&s.exits))
}

fn events_of(id: numa_rt::task::Id) -> Vec<String> {
    let s = lock();
    let t = id.as_u64();
    s.events
        .iter()
        .filter(|e| e.0 == t)
        .map(|e| e.1.clone())
        .collect()
}

#[test]
fn a_spawned_task_logs_inside_its_span() {
    let rt = rt();
    let h = rt.spawn(async {
        numa_rt::task::yield_now().await;
        tracing::info!("hello from a task");
    });
    let line = line!() - 4;
    let id = h.id();
    rt.block_on(h).unwrap();
    let span = span_of(id);
    assert_eq!(span.kind, "task");
    assert_eq!(span.task_id, id.as_u64());
    assert_eq!((span.file.as_str(), span.line), (file!(), u64::from(line)));
    assert!(span.col > 0);
    assert_eq!(events_of(id), ["hello from a task"]);
    let (enters, exits) = polls_of(id);
    assert!(enters >= 2, "it yielded once, so two polls: {enters}");
    assert_eq!(enters, exits);
}

#[test]
fn blocking_local_and_join_set_tasks_get_spans_of_their_kind() {
    let rt = rt();
    rt.block_on(async {
        let b = numa_rt::spawn_blocking(|| tracing::info!("blocking"));
        let b_line = line!() - 1;
        let l = numa_rt::spawn_local(async { tracing::info!("local") });
        let (bid, lid) = (b.id(), l.id());
        b.await.unwrap();
        l.await.unwrap();
        let mut set = numa_rt::JoinSet::new();
        let s = set.spawn(async { tracing::info!("set") });
        let sid = s.id();
        set.join_next().await.unwrap().unwrap();

        assert_eq!(span_of(bid).kind, "blocking");
        assert_eq!(span_of(bid).line, u64::from(b_line));
        assert_eq!(events_of(bid), ["blocking"]);
        assert_eq!(span_of(lid).kind, "local");
        assert_eq!(events_of(lid), ["local"]);
        assert_eq!(span_of(sid).kind, "task");
        assert_eq!(events_of(sid), ["set"]);
        for id in [bid, lid, sid] {
            assert!(polls_of(id).0 >= 1, "task {id} was entered");
        }
    });
}

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

#[test]
fn wakers_report_clone_wake_and_drop_with_the_span_id() {
    let rt = rt();
    let h = rt.spawn(WakeTwice(0));
    let id = h.id();
    rt.block_on(h).unwrap();
    let ops: Vec<String> = lock()
        .waker_ops
        .iter()
        .filter(|o| o.0 == id.as_u64())
        .map(|o| o.1.clone())
        .collect();
    assert_eq!(
        ops,
        [
            "waker.clone",
            "waker.wake",
            "waker.clone",
            "waker.wake_by_ref",
            "waker.drop"
        ]
    );
    assert_eq!(polls_of(id), (3, 3));
}

#[test]
fn a_stall_is_a_warn_event_with_the_task_and_where_it_runs() {
    install();
    let rt = numa_rt::Builder::new()
        .max_procs(1)
        .stall_threshold(Some(Duration::from_millis(20)))
        .build()
        .unwrap();
    let h = rt.spawn(async { std::thread::sleep(Duration::from_millis(300)) });
    let line = line!() - 1;
    let id = h.id();
    rt.block_on(h).unwrap();
    let stalls = lock().stalls.clone();
    let stall = stalls
        .iter()
        .find(|s| s.get("task.id") == Some(&id.to_string()))
        .unwrap_or_else(|| panic!("no stall event for task {id}: {stalls:?}"));
    assert_eq!(stall["loc.file"], file!());
    assert_eq!(stall["loc.line"], line.to_string());
    assert_eq!(stall["p"], "0");
    assert!(stall.contains_key("m"));
    let ms: u64 = stall["elapsed_ms"].parse().unwrap();
    assert!(ms >= 20, "{ms}");
}
