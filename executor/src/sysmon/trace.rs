//! The schedtrace lines and the task dump.

use crate::metrics::RuntimeMetrics;
use crate::scheduler::Shared;
use crate::task::{TaskDump, TaskInfo, TaskState};
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Go's `SCHED` line for this runtime, one line per node, and with
/// `detail` one line per P.
pub(crate) fn schedtrace(shared: &Arc<Shared>, detail: bool) -> String {
    let m = RuntimeMetrics {
        shared: shared.clone(),
    };
    let ms = shared.started.elapsed().as_millis();
    let pooled: usize = shared
        .nodes
        .iter()
        .map(|n| {
            n.idle_machines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len()
        })
        .sum();
    let mut out = String::new();
    let _ = write!(
        out,
        "SCHED {ms}ms: gomaxprocs={} idleprocs={} threads={} spinningthreads={} idlethreads={} \
         blockingthreads={} runqueue={} [",
        m.num_procs(),
        m.idle_procs(),
        m.num_machines() + m.blocking_threads() + 1,
        m.spinning_machines(),
        m.idle_procs() + pooled,
        m.blocking_threads(),
        m.global_queue_depth(),
    );
    for (i, p) in shared.procs.iter().enumerate() {
        let _ = write!(out, "{}{}", if i > 0 { " " } else { "" }, p.steal.len());
    }
    out.push_str("]\n");
    for n in 0..m.num_nodes() {
        let node = m.node(n);
        let procs = match (node.procs.first(), node.procs.last()) {
            (Some(a), Some(b)) => format!("{a}-{b}"),
            _ => "none".into(),
        };
        let watcher = node.watcher.map_or("none".into(), |p| format!("P{p}"));
        let _ = writeln!(
            out,
            "  node={n} procs={procs} idleprocs={} spinningthreads={} runqueue={} watcher={watcher} \
             busy={}ms polls={} steals={} migrated={} remotesteals={} parks={} unparks={} spurious={} \
             unparklat={}us",
            node.idle_procs,
            node.spinning_machines,
            node.queue_depth,
            node.busy_duration.as_millis(),
            node.tasks_polled,
            node.tasks_stolen,
            node.migrated_polls,
            node.remote_steals,
            node.parks,
            node.unparks,
            node.spurious_wakeups,
            // The mean over the run so far (0 before the first timed wake-up).
            node.unpark_latency_sum
                .as_micros()
                .checked_div(u128::from(node.unpark_latency_count))
                .unwrap_or(0),
        );
    }
    if detail {
        // The policy's view, at one clock reading for the whole trace.
        let now_ms = crate::task::epoch_ms(std::time::Instant::now());
        let policy = shared.policy.describe();
        for (i, p) in shared.procs.iter().enumerate() {
            let pm = m.proc(i);
            let status = if p.in_task.load(Relaxed) {
                "intask"
            } else if p.running.load(Relaxed) {
                "running"
            } else {
                "idle"
            };
            let (sources, timers) = shared.reactor.proc_sources_and_timers(i);
            let curtask = if p.in_task.load(Relaxed) {
                p.current_task.load(Relaxed).to_string()
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "  P{i}: node={} status={status} m=M{} runqsize={} runnext={} inbox={} timers={timers} \
                 sources={sources} curtask={curtask} polls={} stolen={} migrated={} \
                 batchwakes={} batchjoins={} batchq={} batchqueued={} batchpolls={} batchsplits={} \
                 batchhubs={} batchkeeps={} batchspreads={} batchhomes={} busy={}ms",
                p.node,
                pm.machine,
                pm.local_queue_depth,
                u8::from(p.steal.has_runnext()),
                pm.inbox_depth,
                pm.tasks_polled,
                pm.tasks_stolen,
                pm.migrated_polls,
                pm.batch_wakes,
                pm.batch_joins,
                policy.bq_len(p.policy()),
                pm.batch_queued,
                pm.batch_polls,
                pm.batch_splits,
                pm.batch_hub_polls,
                pm.batch_keeps,
                pm.batch_spreads,
                pm.batch_hub_homes,
                pm.busy_duration.as_millis(),
            );
        }
        let tasks = dump(shared);
        let _ = writeln!(out, "  tasks: {} live", tasks.len());
        let batches = tasks.batch_sizes();
        if !batches.is_empty() {
            let shown: Vec<String> = batches
                .iter()
                .take(8)
                .map(|&(b, n)| {
                    let hub = policy.batch_label(b, now_ms);
                    format!("{b}:{n}{hub}")
                })
                .collect();
            let _ = writeln!(
                out,
                "  batches: {} live, {} tasks in them; largest (batch:tasks, (hub,<mode>): a hub's) {}",
                batches.len(),
                batches.iter().map(|(_, n)| n).sum::<usize>(),
                shown.join(" ")
            );
        }
        for t in tasks.tasks().iter().take(20) {
            let _ = writeln!(out, "    {t}");
        }
        for (n, node) in shared.nodes.iter().enumerate() {
            for mach in node
                .idle_machines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                let _ = writeln!(out, "  M{}: node={n} p=none (pooled, no P)", mach.id);
            }
        }
    }
    out
}

/// The live tasks of the runtime, `Send` and pinned (`Handle::dump`).
pub(crate) fn dump(shared: &Shared) -> TaskDump {
    let now = crate::task::epoch_ms(Instant::now());
    let policy = shared.policy.describe();
    // The task each P is polling now.
    let running: Vec<(u64, usize)> = shared
        .procs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.in_task.load(Relaxed))
        .map(|(i, p)| (p.current_task.load(Relaxed), i))
        .collect();
    let mut tasks = Vec::new();
    let mut add = |meta: &crate::task::TaskMeta, location, pinned: bool| {
        // Read before the finished check below: a task finished (its future
        // dropped) but not yet out of the registry (the harness removes the
        // entry right after) is not live, and its flags no longer hold a
        // batch or a P, so a dump that listed it showed a task in no batch
        // that had been in one (a test saw it under load). Both read the
        // same atomic, so if the later load finds it unfinished, the
        // earlier one read its flags before they were cleared.
        let batch = policy.task_batch(meta, now).map(|b| b.get());
        if meta.is_finished() {
            return;
        }
        let state = match running.iter().find(|(id, _)| *id == meta.id.as_u64()) {
            Some(&(_, proc)) => TaskState::Running { proc },
            None if meta.is_scheduled() => TaskState::Scheduled,
            None => TaskState::Idle,
        };
        tasks.push(TaskInfo {
            id: meta.id,
            location,
            state,
            since_last_poll: meta
                .last_poll_ms()
                .map(|t| Duration::from_millis(u64::from(now.saturating_sub(t)))),
            pinned,
            batch,
        });
    };
    shared.tasks.for_each(|m, l| add(m, l, false));
    let locals: Vec<_> = shared
        .local_registries
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(|w| w.upgrade())
        .collect();
    for reg in locals {
        reg.for_each(|m, l| add(m, l, true));
    }
    // Longest-unpolled first; never-polled tasks after those polled.
    tasks.sort_by_key(|t| std::cmp::Reverse(t.since_last_poll));
    TaskDump {
        tasks,
        unpolled: shared.tasks.unpolled(),
    }
}
