//! Building: the settings checked, the environment read, the threads started.

use super::{Builder, MAXPROCS_ENV};
use crate::config::{self, Config, DeadlockMode};
use crate::runtime::{Handle, Runtime};
use crate::scheduler::placement::{Placement, PLACEMENT_ENV};
use crate::scheduler::Shared;
use numa_rt_numa::Topology;
use std::io;
use std::sync::Arc;
use std::time::Duration;

impl Builder {
    /// Builds a [`LocalRuntime`](crate::LocalRuntime): this builder's
    /// runtime (one P from `new_current_thread`) whose `block_on` thread
    /// also runs `!Send` tasks (tokio's `build_local`).
    ///
    /// # Errors
    /// As [`Builder::build`].
    pub fn build_local(
        &mut self,
        _options: crate::LocalOptions,
    ) -> io::Result<crate::LocalRuntime> {
        Ok(crate::LocalRuntime::from_runtime(self.build()?))
    }

    /// Builds the runtime; its threads start at once.
    ///
    /// Errors (`InvalidInput`) name what was wrong: `max_procs(0)`, a zero
    /// interval or blocking-thread cap, an invalid `NUMA_RT_MAXPROCS`,
    /// `NUMA_RT_TOPOLOGY` or sysmon variable (`NUMA_RT_STALL_MS`,
    /// `NUMA_RT_RETAKE_MS`, …), a [`topology`](Builder::topology) naming CPUs
    /// this process may not use. Errors from the OS name the setting or
    /// limit behind them: a `thread_stack_size` the OS refuses, more
    /// threads than it allows, more descriptors than `RLIMIT_NOFILE`
    /// allows (each processor needs
    /// [`FDS_PER_PROC`](numa_rt_reactor::FDS_PER_PROC)). A failed build
    /// leaves no thread behind.
    pub fn build(&mut self) -> io::Result<Runtime> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        if self.max_procs == Some(0) {
            return Err(invalid(
                "Builder::max_procs must be at least 1, got 0".into(),
            ));
        }
        if self.global_queue_interval == 0 {
            return Err(invalid(
                "Builder::global_queue_interval must be at least 1, got 0".into(),
            ));
        }
        if self.event_interval == 0 {
            return Err(invalid(
                "Builder::event_interval must be at least 1, got 0".into(),
            ));
        }
        if self.io_events_per_tick == 0 {
            return Err(invalid(
                "Builder::max_io_events_per_tick must be at least 1, got 0".into(),
            ));
        }
        if self.io_events_per_busy_tick == Some(0) {
            return Err(invalid(
                "Builder::max_io_events_per_busy_tick must be at least 1, got 0".into(),
            ));
        }
        #[cfg(feature = "tokio-compat")]
        if self.tokio_compat_workers == 0 {
            return Err(invalid(
                "Builder::tokio_compat_workers must be at least 1, got 0".into(),
            ));
        }
        if self.max_blocking_threads == 0 {
            return Err(invalid(
                "Builder::max_blocking_threads must be at least 1, got 0".into(),
            ));
        }
        if let Some(h) = &self.poll_histogram {
            h.check().map_err(invalid)?;
        }
        if let Some(t) = &self.schedtrace {
            if t.every < Duration::from_millis(1) {
                return Err(invalid(format!(
                    "Builder::schedtrace: the period must be at least 1 ms, got {:?}",
                    t.every
                )));
            }
        }
        let stall_threshold = match self.stall_threshold {
            Some(t) => t,
            None => config::env(config::STALL_ENV, config::parse_stall)?
                .unwrap_or(Some(Duration::from_millis(10))),
        };
        let retake_threshold = match self.retake_threshold {
            Some(t) => t,
            None => config::env(config::RETAKE_ENV, config::parse_retake)?
                .unwrap_or(Some(Duration::from_millis(10))),
        };
        let placement = match self.placement {
            Some(p) => p,
            None => config::env(PLACEMENT_ENV, |v| v.parse::<Placement>())?.unwrap_or_default(),
        };
        let schedtrace = match self.schedtrace {
            Some(t) => Some(t),
            None => config::env(config::SCHEDTRACE_ENV, config::parse_schedtrace)?,
        };
        let deadlock = match self.deadlock {
            Some(d) => d,
            None => config::env(config::DEADLOCK_ENV, config::parse_deadlock)?
                .or(self.deadlock_default)
                .unwrap_or_else(DeadlockMode::default_for_build),
        };
        // The default (no max_procs, no NUMA_RT_MAXPROCS) follows the CPU
        // quota: sysmon re-reads it and retires the P's above it.
        let (max_procs, procs_source) = match self.max_procs {
            Some(n) => (n, None),
            None => match maxprocs_from_env()? {
                Some(n) => (n, None),
                None => {
                    let source: config::ProcsSource = match &self.procs_source {
                        Some(f) => f.clone(),
                        None => Arc::new(numa_rt_numa::sys::default_max_procs),
                    };
                    (source().max(1), Some(source))
                }
            },
        };
        let topology = match &self.topology {
            // The same check NUMA_RT_TOPOLOGY's spec gets: M's are bound to
            // their node's CPUs, and a CPU outside the affinity mask would
            // make that binding fail at run time.
            Some(t) => {
                t.check_allowed("Builder::topology")
                    .map_err(io::Error::from)?;
                t.clone()
            }
            None => match Topology::from_env().map_err(io::Error::from)? {
                Some(t) => t,
                None => Topology::discover()?,
            },
        };
        // Random per process (Vyukov: several processes must not all start
        // on node 0): where outside work goes first, and which node gets the
        // odd P when P's do not divide evenly.
        let start = numa_rt_numa::random_start_node(topology.nodes().len());
        let node_of_p: Vec<usize> = numa_rt_numa::partition_procs_from(&topology, max_procs, start)
            .into_iter()
            .map(usize::from)
            .collect();
        let start_node = usize::from(start);
        let flavor = if max_procs == 1 && procs_source.is_none() {
            crate::RuntimeFlavor::CurrentThread
        } else {
            crate::RuntimeFlavor::MultiThread
        };
        let config = Config {
            thread_name: self.thread_name.clone(),
            thread_stack_size: self.thread_stack_size,
            max_blocking_threads: self.max_blocking_threads,
            blocking_keep_alive: self.blocking_keep_alive,
            global_queue_interval: crate::config::Every::new(self.global_queue_interval),
            event_interval: crate::config::Every::new(self.event_interval),
            io_events: numa_rt_reactor::EventsPerTick {
                waiting: self.io_events_per_tick,
                busy: self
                    .io_events_per_busy_tick
                    .unwrap_or(self.io_events_per_tick),
            },
            on_thread_start: self.on_thread_start.clone(),
            on_thread_stop: self.on_thread_stop.clone(),
            on_thread_park: self.on_thread_park.clone(),
            on_thread_unpark: self.on_thread_unpark.clone(),
            id: crate::runtime::Id::next(),
            name: self.name.clone(),
            pin_cores: self.pin_cores,
            poll_histogram: self.poll_histogram,
            stall_threshold,
            retake_threshold,
            procs_source,
            schedtrace,
            deadlock,
            start_paused: self.start_paused,
            placement,
            // One P that never changes (`new_current_thread`, `max_procs(1)`,
            // the tests' default) runs tasks one at a time, as tokio's
            // current-thread runtime does; the P count a CPU-quota source
            // follows may grow, so that one is multi-thread even at 1.
            flavor,
            #[cfg(feature = "tokio-compat")]
            tokio_compat: self.tokio_compat,
            #[cfg(feature = "tokio-compat")]
            tokio_compat_workers: self.tokio_compat_workers,
        };
        let shared = Shared::build(config, topology, node_of_p, start_node, |shared| {
            Arc::new(crate::sysmon::Sysmon::new(shared))
        })?;
        crate::blocking::resolve_names_on_blocking_pool();
        Ok(Runtime::from_handle(Handle { shared }))
    }
}

impl Runtime {
    /// A runtime with default settings (see [`Builder::new`]).
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }
}

/// Reads `NUMA_RT_MAXPROCS`: unset or empty is `None`; anything but a whole
/// number ≥ 1 is an error naming the variable and the value.
fn maxprocs_from_env() -> io::Result<Option<usize>> {
    let Some(v) = std::env::var_os(MAXPROCS_ENV) else {
        return Ok(None);
    };
    let s = v.to_string_lossy();
    let t = s.trim();
    if t.is_empty() {
        return Ok(None);
    }
    match t.parse::<usize>() {
        Ok(0) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{MAXPROCS_ENV}={s:?} is invalid: the number of processors must be at least 1"),
        )),
        Ok(n) => Ok(Some(n)),
        Err(e) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{MAXPROCS_ENV}={s:?} is invalid: expected a whole number of processors ({e})"),
        )),
    }
}
