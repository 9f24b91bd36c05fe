//! The task dump: what every live task is doing ([`Handle::dump`](crate::Handle::dump)).

use super::Id;
use std::fmt;
use std::panic::Location;
use std::time::Duration;

/// A snapshot of a runtime's live tasks, read without stopping it: each
/// task's fields are read one at a time, so a task that runs while the dump
/// is taken may show a state one step old.
///
/// `Display` prints one line per task, oldest poll first:
/// `task 17 idle 1503 ms since last poll, spawned at src/main.rs:10:5`.
///
/// A `Send` task that has not yet returned `Pending` once (queued since its
/// spawn, or in its first poll) is counted but not listed: the runtime
/// keeps a list entry only for tasks that have waited once, which saves
/// every task that finishes in its first poll the entry's lock. (A task
/// stuck in its first poll is still named, with its spawn location, by the
/// stall report.)
#[derive(Clone, Debug, Default)]
pub struct TaskDump {
    pub(crate) tasks: Vec<TaskInfo>,
    /// Live `Send` tasks not yet past their first poll, not in `tasks`.
    pub(crate) unpolled: usize,
}

/// One live task in a [`TaskDump`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TaskInfo {
    /// The task's id ([`JoinHandle::id`](crate::JoinHandle::id), `task::id()`).
    pub id: Id,
    /// Where it was spawned.
    pub location: &'static Location<'static>,
    /// What it is doing.
    pub state: TaskState,
    /// Time since its last poll began, to within the busy stretch it ran
    /// in (`None`: never polled yet).
    pub since_last_poll: Option<Duration>,
    /// Spawned with `spawn_local`: pinned to one thread.
    pub pinned: bool,
    /// The batch it belongs to: the group of tasks that wake each other
    /// which the scheduler keeps together (docs/architecture.md,
    /// "Batches"). `None`: in no batch, or its link decayed (not polled for
    /// 100 ms). Tasks with the same number are in one batch.
    pub batch: Option<u16>,
}

/// What a task in a [`TaskDump`] is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskState {
    /// Being polled on this processor now.
    Running {
        /// The P.
        proc: usize,
    },
    /// Woken and waiting in a run queue for its next poll.
    Scheduled,
    /// Waiting for a wake-up (I/O, a timer, a channel, another task).
    Idle,
}

impl TaskDump {
    /// The tasks, longest-unpolled first.
    pub fn tasks(&self) -> &[TaskInfo] {
        &self.tasks
    }

    /// The live batches (groups of tasks that wake each other, see
    /// [`TaskInfo::batch`]) and how many of the dump's tasks each holds,
    /// largest first.
    pub fn batch_sizes(&self) -> Vec<(u16, usize)> {
        let mut sizes: Vec<(u16, usize)> = Vec::new();
        let mut ids: Vec<u16> = self.tasks.iter().filter_map(|t| t.batch).collect();
        ids.sort_unstable();
        for id in ids {
            match sizes.last_mut() {
                Some((b, n)) if *b == id => *n += 1,
                _ => sizes.push((id, 1)),
            }
        }
        sizes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        sizes
    }

    /// The number of live tasks: those listed, and those not polled yet.
    pub fn len(&self) -> usize {
        self.tasks.len() + self.unpolled
    }

    /// Whether no task is alive.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Live `Send` tasks not yet past their first poll (queued since their
    /// spawn, or in that poll): counted in [`TaskDump::len`], not listed in
    /// [`TaskDump::tasks`].
    pub fn not_yet_polled(&self) -> usize {
        self.unpolled
    }

    /// Spawn locations with their task counts, most tasks first (at most
    /// `max` of them).
    pub fn locations(&self, max: usize) -> Vec<(&'static Location<'static>, usize)> {
        let mut counts: Vec<(&'static Location<'static>, usize)> = Vec::new();
        for t in &self.tasks {
            match counts.iter_mut().find(|(l, _)| *l == t.location) {
                Some((_, n)) => *n += 1,
                None => counts.push((t.location, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        counts.truncate(max);
        counts
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskState::Running { proc } => write!(f, "running on P{proc}"),
            TaskState::Scheduled => f.write_str("scheduled"),
            TaskState::Idle => f.write_str("idle"),
        }
    }
}

impl fmt::Display for TaskInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {} {}", self.id, self.state)?;
        match self.since_last_poll {
            Some(d) => write!(f, " {} ms since last poll", d.as_millis())?,
            None => f.write_str(" never polled")?,
        }
        if self.pinned {
            f.write_str(" (pinned)")?;
        }
        if let Some(b) = self.batch {
            write!(f, " batch {b}")?;
        }
        write!(f, ", spawned at {}", self.location)
    }
}

impl fmt::Display for TaskDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} live task(s)", self.len())?;
        for t in &self.tasks {
            writeln!(f, "  {t}")?;
        }
        if self.unpolled != 0 {
            writeln!(
                f,
                "  and {} not listed: spawned, not yet past their first poll",
                self.unpolled
            )?;
        }
        Ok(())
    }
}
