//! The epoll side of the watcher role: [`Ops`] implements the role
//! protocol's [`WatchOps`] (its rules and loom models are
//! [`super::watch`]) on one node's real descriptors. All of it runs under
//! the node's role lock.
//!
//! **Arming.** Each P has two role entries, both registered switched off
//! (`super::setup`): its unpark eventfd in the watch epoll (on while its
//! M, holding the role, blocks on the watch epoll itself: *direct*) and
//! the watch epoll in its park epoll (on while its M, handed the role
//! while asleep, sees the watch through its park epoll: *nested*). Only an
//! entry not on yet costs an `EPOLL_CTL_MOD` ([`super::PState::armed`]).
//!
//! **Hosting.** A holder whose recent wake-ups came from its own poller
//! alone (the score in `super::park`) moves the watch into its own io
//! poller, so that its own events cost one `epoll_wait`: [`Ops::host`]
//! takes its poller out of the watch (`EPOLL_CTL_DEL`) and then the watch
//! into its poller (`EPOLL_CTL_ADD`, tagged [`WATCH_IN_IO`]); the other
//! order is a loop the kernel refuses. The invariant: only the role holder
//! hosts. Every move of the role first gives the watch back
//! ([`WatchOps::disarm`] unhosts: delete, then re-add the poller to the
//! watch), so whoever watches next sees that poller again; nobody unhosts a
//! parked holder. Adding an epoll runs the kernel's loop check under a
//! global mutex, which is why hosting changes only when the score crosses
//! its bounds or the role moves, and why the role itself moves by
//! `EPOLL_CTL_MOD` only. docs/architecture.md, "Hosting", has the
//! measurements. On a runtime with several nodes the hosting poller also
//! leaves (and rejoins) its node's lend epoll ([`super::lend`]): one
//! `epoll_ctl` more each way, so that no io poller inside an epoll holds
//! an epoll and lending can make no loop.
//!
//! [`LendEpolls`] is lending's view of the same descriptors: switching a
//! node's lend epoll on or off in another node's watch.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use super::lend::LendOps;
use super::watch::WatchOps;
use super::{NodeWatch, Shared, LEND_IN_WATCH, UNPARK_IN_WATCH, WATCH_IN_IO, WATCH_TAG};
use crate::sys;

/// The role protocol's view of one node's P's (see [`WatchOps`]).
pub(super) struct Ops<'a> {
    pub(super) shared: &'a Shared,
    pub(super) watch: &'a NodeWatch,
    /// Whether the M arming itself direct wants its P to host the watch
    /// (only `arm(me, true)` from its own park reads it).
    pub(super) host: bool,
}

/// P `p`'s unpark eventfd is switched on in the watch epoll (`PState::armed`).
pub(super) const ARMED_DIRECT: u8 = 1;
/// The watch epoll is switched on in P `p`'s park epoll (`PState::armed`).
pub(super) const ARMED_NESTED: u8 = 2;

impl Ops<'_> {
    /// Switches one of P `p`'s two role entries on or off.
    fn set(&self, p: usize, bit: u8, on: bool) -> std::io::Result<()> {
        let ps = &self.shared.ps[p];
        if bit == ARMED_DIRECT {
            sys::epoll_set_level(
                &self.watch.epoll,
                ps.unpark.as_raw_fd(),
                UNPARK_IN_WATCH | p as u64,
                on,
            )
        } else {
            sys::epoll_set_level(&ps.park, self.watch.epoll.as_raw_fd(), WATCH_TAG, on)
        }
    }
}

impl Ops<'_> {
    /// Moves the watch epoll into P `p`'s io poller: out of the watch
    /// first (the kernel refuses a loop), then in. Under the role lock, for
    /// the holder. On failure everything is as it was.
    fn host(&self, p: usize) -> std::io::Result<()> {
        let ps = &self.shared.ps[p];
        let watch = self.watch.epoll.as_raw_fd();
        sys::epoll_unnest(watch, ps.io_fd)?;
        // Out of the lend epoll too: an io poller inside an epoll never
        // holds one, so lending makes no loop (see `lend`).
        let lend = self.watch.lend.as_ref().map(|l| l.as_raw_fd());
        if let Some(lend) = lend {
            if let Err(e) = sys::epoll_unnest(lend, ps.io_fd) {
                self.rejoin(p);
                return Err(e);
            }
        }
        if let Err(e) = sys::epoll_nest(ps.io_fd, watch, WATCH_IN_IO) {
            self.rejoin(p);
            return Err(e);
        }
        // Relaxed: under the role lock (see `PState::hosted`).
        ps.hosted.store(true, Ordering::Relaxed);
        ps.stats.hostings.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Puts P `p`'s io poller back into the watch and the lend epoll (it
    /// no longer holds the watch).
    fn rejoin(&self, p: usize) -> bool {
        let ps = &self.shared.ps[p];
        if let Some(lend) = &self.watch.lend {
            match sys::epoll_nest(lend.as_raw_fd(), ps.io_fd, p as u64) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                // Only ENOMEM/ENOSPC: another node's watcher cannot see this
                // poller while its node is lent; its own node's can.
                Err(e) => eprintln!(
                    "numa_rt: P{p}'s io poller could not rejoin its node's lend epoll ({e})"
                ),
            }
        }
        match sys::epoll_nest(self.watch.epoll.as_raw_fd(), ps.io_fd, p as u64) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => true,
            Err(e) => {
                // Only ENOMEM/ENOSPC: the watcher cannot see this poller
                // until a later unhost succeeds; the monitor polls it every
                // 10 ms meanwhile (`monitor::poll_unwatched`).
                eprintln!(
                    "numa_rt: P{p}'s io poller could not rejoin its node's watch ({e}); \
                     its events are polled by the monitor until it does"
                );
                false
            }
        }
    }
}

impl WatchOps for Ops<'_> {
    fn arm(&self, p: usize, direct: bool) -> std::io::Result<()> {
        let ps = &self.shared.ps[p];
        let bit = if direct { ARMED_DIRECT } else { ARMED_NESTED };
        // Relaxed: only read and written under the role lock.
        let armed = ps.armed.load(Ordering::Relaxed);
        if armed & bit == 0 {
            let r = self.set(p, bit, true);
            debug_assert!(r.is_ok(), "arming the watch for P{p}: {r:?}");
            r?;
            ps.armed.store(armed | bit, Ordering::Relaxed);
        }
        if direct {
            // Relaxed: as above.
            let hosted = ps.hosted.load(Ordering::Relaxed);
            if self.host && !hosted {
                // Best effort: not hosting is correct, one wait slower.
                let _ = self.host(p);
            } else if !self.host && hosted {
                self.unhost(p);
            }
        }
        Ok(())
    }
    fn disarm(&self, p: usize) {
        self.unhost(p);
        let ps = &self.shared.ps[p];
        // Relaxed: as in `arm`.
        let armed = ps.armed.load(Ordering::Relaxed);
        let mut left = 0;
        for bit in [ARMED_DIRECT, ARMED_NESTED] {
            if armed & bit != 0 {
                let r = self.set(p, bit, false);
                debug_assert!(r.is_ok(), "disarming the watch for P{p}: {r:?}");
                // An entry that could not be switched off stays recorded,
                // so the next disarm tries again.
                if r.is_err() {
                    left |= bit;
                }
            }
        }
        ps.armed.store(left, Ordering::Relaxed);
    }
    fn unhost(&self, p: usize) -> bool {
        let ps = &self.shared.ps[p];
        // Relaxed: under the role lock (see `PState::hosted`).
        if !ps.hosted.load(Ordering::Relaxed) {
            return false;
        }
        let watch = self.watch.epoll.as_raw_fd();
        match sys::epoll_unnest(ps.io_fd, watch) {
            Ok(()) => {}
            // A previous attempt got this far.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => {
                debug_assert!(false, "taking the watch out of P{p}'s poller: {e}");
                return false;
            }
        }
        if self.rejoin(p) {
            // Relaxed: under the role lock (see `PState::hosted`).
            ps.hosted.store(false, Ordering::Relaxed);
            ps.stats.unhostings.fetch_add(1, Ordering::Relaxed);
            true
        } else {
            // Keep hosting rather than leave the poller in neither; `hosted`
            // stays set, so the next unhost tries again. Out of the lend
            // epoll first, if it got in: a hosting poller is in no epoll.
            if let Some(lend) = &self.watch.lend {
                let _ = sys::epoll_unnest(lend.as_raw_fd(), ps.io_fd);
            }
            let _ = sys::epoll_nest(ps.io_fd, watch, WATCH_IN_IO);
            false
        }
    }
    fn is_parked(&self, p: usize) -> bool {
        // SeqCst pairs with the stores around the owner's epoll_wait; read
        // under the role lock (see `watch`).
        self.shared.ps[p].parked.load(Ordering::SeqCst)
    }
    fn lends(&self) -> bool {
        self.watch.lend.is_some()
    }
    fn parks_holding(&self, p: usize) {
        let node = self.shared.ps[p].node;
        self.shared.lending.on_park(node, &LendEpolls(self.shared));
    }
    fn left(&self, p: usize, any_parked: bool, holder_parked: bool) {
        let node = self.shared.ps[p].node;
        let lends = LendEpolls(self.shared);
        if self
            .shared
            .lending
            .on_leave(node, any_parked, holder_parked, &lends)
        {
            self.shared.ps[p]
                .stats
                .lends
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Lending's view of the real descriptors (see [`super::lend`]).
pub(super) struct LendEpolls<'a>(pub(super) &'a Shared);

impl LendOps for LendEpolls<'_> {
    fn switch(&self, node: usize, to: usize, on: bool) -> std::io::Result<()> {
        let nodes = &self.0.nodes;
        let Some(lend) = &nodes[node].lend else {
            return Err(std::io::ErrorKind::Unsupported.into());
        };
        let r = sys::epoll_set_level(
            &nodes[to].epoll,
            lend.as_raw_fd(),
            LEND_IN_WATCH | node as u64,
            on,
        );
        debug_assert!(
            r.is_ok(),
            "switching node {node}'s lend in node {to}: {r:?}"
        );
        r
    }
    fn watched(&self, n: usize) -> bool {
        // SeqCst (both): the lender's side of the pair with a leaving
        // watcher, which clears its parked flag and then reads `borrowed`
        // (see `lend`); the holder is published SeqCst under the role lock.
        self.0.nodes[n]
            .role
            .holder_now()
            .is_some_and(|h| self.0.ps[h].parked.load(Ordering::SeqCst))
    }
}
