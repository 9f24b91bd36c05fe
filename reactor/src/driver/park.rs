//! The M's side of a driver: [`Driver::park`], the only place an idle M
//! blocks, and [`Driver::poll_now`], its non-blocking look; and the
//! unpark that wakes a park ([`Unparker::unpark`]).
//!
//! The whole park/unpark protocol — what the executor does before it calls
//! `park`, the orderings that keep a wake-up from being lost, who wakes
//! whom — is docs/architecture.md, "Idle P's and parked M's: the
//! park/unpark protocol". This file owns the reactor's steps of it: the
//! parked flag around the blocking wait (SeqCst, read under the role lock
//! by [`super::watch`], by the monitor and by paused time's auto-advance),
//! taking or keeping the watcher role, choosing what to block on (the own
//! poller when it hosts the watch, the watch epoll when it holds the role,
//! else the park epoll), acting on what woke it (a ready poller of its own
//! node, or of a node lent to it: [`super::lend`]), firing the wakers on
//! the calling thread, and the hosting score ([`HOST_AT`]).

use std::sync::atomic::Ordering;
use std::sync::TryLockError;
use std::time::{Duration, Instant};

use super::dispatch::{help, Help};
use super::watch_ops::Ops;
use super::{
    paused, Driver, NodeWatch, PState, Unparker, LEND_IN_WATCH, UNPARK_IN_WATCH, UNPARK_TAG,
    WATCH_TAG,
};
use crate::sys;

pub(super) use crate::tuning::{HOST_AT, HOST_SCORE_MAX};

/// What one wake-up of a park found.
#[derive(Default)]
struct Round {
    /// This P was unparked (its eventfd consumed).
    unparked: bool,
    /// Something was done: unparked, a poller drained, or the wait failed.
    progressed: bool,
    /// A ready poller was being drained by another M.
    contended: bool,
    /// This P's own poller had events (timers included).
    own: bool,
    /// Another P's poller was drained.
    foreign: bool,
}

impl Driver {
    /// The index of this driver's P.
    pub fn index(&self) -> usize {
        self.index
    }

    /// A handle that wakes this driver's [`Driver::park`].
    pub fn unparker(&self) -> Unparker {
        Unparker {
            shared: self.shared.clone(),
            index: self.index,
        }
    }

    /// The earliest pending timer of this P.
    pub fn next_timer(&self) -> Option<Instant> {
        self.me().timers.next_deadline()
    }

    fn me(&self) -> &PState {
        &self.shared.ps[self.index]
    }

    /// Blocks until unparked, or — while this M is its node's watcher — an
    /// I/O event or due timer on any P of the node, or `timeout`; then fires
    /// what is ready on the calling thread.
    pub fn park(&mut self, timeout: Option<Duration>) {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let shared = self.shared.clone();
        let me = &shared.ps[self.index];
        let watch = &shared.nodes[me.node];
        let mut unparked = false;
        loop {
            // Whether this M, if it holds the role as it blocks, wants its
            // own poller to host the watch (see `watch_ops`).
            let ops = Ops {
                shared: &shared,
                watch,
                host: self.host_score >= HOST_AT
                    || (self.host_score > 0 && me.hosted.load(Ordering::Relaxed)),
            };
            if shared.clock.is_paused() {
                // Paused time: if this M is the last to go idle, it moves
                // the clock to the next deadline itself instead of waiting
                // for the monitor (see `paused`). SeqCst: the store the
                // advance's checks pair with, as below.
                me.parked.store(true, Ordering::SeqCst);
                if paused::advance_if_idle(&shared, Some(self.index)) > 0 {
                    // The advance cleared the flag before it woke anything;
                    // the woken tasks are queued on this P.
                    unparked = true;
                    break;
                }
            }
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            // SeqCst (both stores and the loads in `Ops::is_parked`): an M
            // that reads `true` under the role lock knows this M is in, or
            // about to enter, its epoll_wait (see `watch`).
            me.parked.store(true, Ordering::SeqCst);
            // The holder blocks on the watch epoll itself, which holds every
            // poller of the node and, while it holds the role, its own
            // eventfd: one level (and one epoll_wait per event) less than
            // through its park epoll. Nobody takes the role from a parked
            // holder, so it holds it until this wait returns.
            let direct = watch.role.on_park(self.index, &ops);
            // Relaxed: written under the role lock, which `on_park` just
            // took; nobody else changes it while this M is the parked holder.
            let hosted = direct && me.hosted.load(Ordering::Relaxed);
            let mut own = false;
            let waited = if hosted {
                // Its own poller, which holds the watch: an event on its own
                // P costs this one wait.
                self.tags.clear();
                let r = sys::epoll_wait_events(me.io_fd, &mut self.io_buf, remaining);
                if let Ok(n @ 1..) = r {
                    let io = me.io.lock().unwrap_or_else(|e| e.into_inner());
                    me.count_drain();
                    let found = me.dispatch(&self.io_buf[..n], &mut self.wakeups);
                    drop(io);
                    if found.timer {
                        sys::drain_counter(me.timers.timerfd());
                    }
                    own = found.timer || found.io;
                    if found.watch {
                        self.tags.push(WATCH_TAG);
                    }
                }
                r.map(drop)
            } else if direct {
                sys::epoll_wait(&watch.epoll, &mut self.watch_buf, remaining, &mut self.tags)
            } else {
                sys::epoll_wait(&me.park, &mut self.buf, remaining, &mut self.tags)
            };
            me.parked.store(false, Ordering::SeqCst);
            debug_assert!(waited.is_ok(), "epoll_wait(park): {waited:?}");
            me.stats.wakeups.fetch_add(1, Ordering::Relaxed);
            if shared.is_shutdown() {
                // A hosted wait may have taken wakers out of their sources
                // already: fire them, or shutdown's pass over the sources
                // would not find them.
                self.wakeups.fire();
                break;
            }
            let mut round = Round {
                progressed: waited.is_err() || self.tags.is_empty() || own,
                own,
                ..Round::default()
            };
            let tags = std::mem::take(&mut self.tags);
            for &tag in &tags {
                self.on_tag(tag, watch, &mut round);
            }
            self.tags = tags;
            if direct {
                self.host_score = if round.foreign {
                    self.host_score.saturating_sub(2)
                } else if round.own {
                    (self.host_score + 1).min(HOST_SCORE_MAX)
                } else {
                    self.host_score
                };
            }
            unparked |= round.unparked;
            self.fire_own();
            if round.progressed || deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if round.contended {
                // Another M is draining that poller right now; its readiness
                // (level-triggered) clears within microseconds.
                std::thread::yield_now();
            }
        }
        // Unparked for new work: this M may stay busy, so the role goes to
        // a parked M if there is one. Woken by I/O: it keeps the role (see
        // `watch`).
        let ops = Ops {
            shared: &shared,
            watch,
            host: false,
        };
        if watch.role.on_leave(self.index, unparked, &ops) {
            me.stats.handoffs.fetch_add(1, Ordering::Relaxed);
        }
        shared.monitor.kick();
    }

    /// Whether this P's M held its node's watcher role a moment ago (no
    /// lock; may be stale). Its park then blocks on every poller of the
    /// node, its own included, so a non-blocking poll of its own poller just
    /// before parking would only repeat what the park does: the executor
    /// skips it (one `epoll_wait` per light-load request).
    pub fn watches(&self) -> bool {
        let me = self.me();
        self.shared.nodes[me.node].role.holder_hint(self.index)
    }

    /// Acts on one tag from a park's wait: this P's unpark (from its park
    /// epoll or, as the holder, from the watch epoll), the watch (through
    /// the park epoll: ask it which pollers are ready), or a ready poller
    /// (the holder's direct wait).
    fn on_tag(&mut self, tag: u64, watch: &NodeWatch, round: &mut Round) {
        let me = &self.shared.ps[self.index];
        if tag == UNPARK_TAG || tag == UNPARK_IN_WATCH | self.index as u64 {
            if !round.unparked {
                // Drain, then clear the flag: see `notify` for why the
                // order matters (the other one lost wake-ups for good).
                me.notified.consume(|| sys::drain_counter(&me.unpark));
            }
            round.unparked = true;
            round.progressed = true;
        } else if tag == WATCH_TAG {
            let waited = sys::epoll_wait(
                &watch.epoll,
                &mut self.watch_buf,
                Some(Duration::ZERO),
                &mut self.watch_tags,
            );
            debug_assert!(waited.is_ok(), "epoll_wait(watch): {waited:?}");
            let tags = std::mem::take(&mut self.watch_tags);
            for &t in &tags {
                // Never WATCH_TAG again: the watch epoll does not hold itself.
                self.on_tag(t, watch, round);
            }
            self.watch_tags = tags;
        } else if tag & UNPARK_IN_WATCH == 0 && tag & LEND_IN_WATCH != 0 {
            // A node lent to this one (all its M's busy, see `lend`): look
            // which of its pollers are ready, as through the own watch, and
            // help them; the woken tasks run here, on this node.
            let node = (tag & !LEND_IN_WATCH) as usize;
            let Some(lend) = self.shared.nodes.get(node).and_then(|n| n.lend.as_ref()) else {
                return;
            };
            let want = self.shared.nodes[node].procs.max(1);
            if self.lend_buf.len() < want {
                self.lend_buf
                    .resize(want, libc::epoll_event { events: 0, u64: 0 });
            }
            let waited = sys::epoll_wait(
                lend,
                &mut self.lend_buf,
                Some(Duration::ZERO),
                &mut self.lend_tags,
            );
            debug_assert!(waited.is_ok(), "epoll_wait(lend): {waited:?}");
            if self.lend_tags.is_empty() {
                // Drained by its own M since the watch reported it: look
                // again (level-triggered, the watch then blocks).
                round.contended = true;
            }
            let tags = std::mem::take(&mut self.lend_tags);
            for &p in &tags {
                // Only io pollers (P indexes) are in a lend epoll.
                self.help_p(p as usize, round);
            }
            self.lend_tags = tags;
        } else if tag & UNPARK_IN_WATCH != 0 {
            // Another P's eventfd, switched on in the watch until a moment
            // ago (the role moved under the lock since): its own M takes it.
            // Level-triggered, it may report again until then: yield rather
            // than spin on it.
            round.contended = true;
        } else {
            self.help_p(tag as usize, round);
        }
    }

    /// Drains P `p`'s io poller (its own, or one of its node's or of a node
    /// lent to it), collecting the wakers to fire on this thread.
    fn help_p(&mut self, p: usize, round: &mut Round) {
        let me = &self.shared.ps[self.index];
        let Some(other) = self.shared.ps.get(p) else {
            return;
        };
        match help(other, &mut self.wakeups, &mut self.timer_wakers) {
            Help::Drained => {
                if p != self.index {
                    me.stats.helps.fetch_add(1, Ordering::Relaxed);
                    if other.node != me.node {
                        me.stats.remote_helps.fetch_add(1, Ordering::Relaxed);
                    }
                    round.foreign = true;
                } else {
                    round.own = true;
                }
                round.progressed = true;
            }
            Help::Busy => round.contended = true,
        }
    }

    /// Fires this P's due timers and every waker collected so far.
    fn fire_own(&mut self) {
        self.shared.ps[self.index]
            .timers
            .fire_expired(&mut self.timer_wakers);
        for w in self.timer_wakers.drain(..) {
            crate::fault::wake(w, "a timer's waker");
        }
        self.wakeups.fire();
    }

    /// Fires ready I/O and due timers of this P without blocking: the P's
    /// own poller only, with a try-lock, plus its due timers (one syscall).
    /// The executor calls it every `event_interval` ticks of a busy P and
    /// when the P runs out of work (unless [`Driver::watches`]).
    pub fn poll_now(&mut self) {
        let me = &self.shared.ps[self.index];
        match me.io.try_lock() {
            Ok(io) => {
                me.drain(io, &mut self.wakeups);
            }
            Err(TryLockError::Poisoned(e)) => {
                me.drain(e.into_inner(), &mut self.wakeups);
            }
            // A helper is draining it right now.
            Err(TryLockError::WouldBlock) => {}
        }
        self.fire_own();
    }
}

impl PState {
    pub(super) fn unpark(&self) {
        // The orderings and the protocol are in `notify`.
        self.notified.unpark(|| sys::eventfd_signal(&self.unpark));
    }
}

impl Unparker {
    /// Wakes the M parked in the driver, or makes its next park return at once.
    pub fn unpark(&self) {
        self.shared.ps[self.index].unpark();
    }
}
