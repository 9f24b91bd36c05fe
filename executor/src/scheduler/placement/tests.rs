//! The policy's decisions, one rule at a time, on its own state.

use super::*;
use crate::task::{spawn_untracked, Anchor, Runnable, BATCH_SHIFT};
use std::sync::atomic::AtomicUsize;

fn task() -> (Runnable, crate::task::JoinHandle<()>) {
    spawn_untracked(async {}, |_| {})
}

#[test]
fn placement_parses_and_names_what_is_wrong() {
    assert_eq!("numa".parse::<Placement>(), Ok(Placement::numa()));
    assert_eq!("go".parse::<Placement>(), Ok(Placement::go()));
    assert_eq!(
        " numa , -keep ".parse::<Placement>(),
        Ok(Placement::numa().without(Rule::Keep))
    );
    let p: Placement = "go,+roots,+batches".parse().unwrap();
    assert!(p.has(Rule::Roots) && p.has(Rule::Batches) && !p.has(Rule::Keep));
    // Display reads back.
    for p in [Placement::numa(), Placement::go(), p] {
        assert_eq!(p.to_string().parse::<Placement>(), Ok(p), "{p}");
    }
    let e = "fast".parse::<Placement>().unwrap_err();
    assert!(
        e.contains("NUMA_RT_PLACEMENT=\"fast\"") && e.contains("`numa` or `go`"),
        "{e}"
    );
    let e = "numa,keep".parse::<Placement>().unwrap_err();
    assert!(e.contains("\"keep\" is not `+rule` or `-rule`"), "{e}");
    let e = "numa,-kep".parse::<Placement>().unwrap_err();
    assert!(
        e.contains("no rule \"kep\"") && e.contains("hub_home"),
        "{e}"
    );
    assert!("".parse::<Placement>().is_err());
}

#[test]
fn a_running_p_reserves_a_short_ring_unless_it_shared_its_batch_out() {
    let policy = Policy::new(Placement::numa());
    let (hints, running, m) = (
        Hints::default(),
        RunningBatch::default(),
        ProcCounters::new(None),
    );
    let p = PolicyP::new(&hints, &running, &m);
    let mut st = PolicyCore::new();
    // A fresh P runs polls estimated at the floor (250 ns).
    let reserved = (RESERVE_NS / MIN_TASK_NS) as u32;
    assert_eq!(policy.rules().reserve(true, p), reserved);
    share_out(&hints);
    assert_eq!(
        policy.rules().reserve(true, p),
        0,
        "split batch work is for thieves"
    );
    policy.owner_next(&mut st, p, Turn::RingDry);
    assert_eq!(policy.rules().reserve(true, p), reserved);
    assert_eq!(policy.rules().reserve(false, p), 0, "nobody runs the P");
    m.unbroken_busy.store(true, Relaxed);
    assert_eq!(
        policy.rules().reserve(true, p),
        0,
        "a ring that never runs dry"
    );
    m.unbroken_busy.store(false, Relaxed);
    // sysmon's mark lasts for the poll it names.
    m.polls.incr();
    assert_eq!(policy.long_poll(p, m.polls.get(), None), None, "too soon");
    assert_eq!(policy.long_poll(p, m.polls.get(), Some(true)), Some(true));
    assert_eq!(
        policy.long_poll(p, m.polls.get(), Some(true)),
        Some(false),
        "offered once per poll"
    );
    assert_eq!(policy.rules().reserve(true, p), 0, "the poll runs long");
    m.polls.incr();
    assert_eq!(
        policy.rules().reserve(true, p),
        reserved,
        "the mark ends with its poll"
    );
    // Go placement reserves nothing, and sysmon never offers.
    let go = Policy::new(Placement::go());
    let (h, r) = (Hints::default(), RunningBatch::default());
    let one = Victim {
        ring: 1,
        runnext: false,
        held: true,
        p: PolicyP::new(&h, &r, &m),
    };
    assert_eq!(go.look(one, false), Look::Stealable { reserve: 0 });
    assert_eq!(
        go.long_poll(PolicyP::new(&h, &r, &m), 9, Some(true)),
        Some(false)
    );
}

/// The wake rules wake a thief only for work beyond the reserve.
#[test]
fn a_thief_is_woken_only_for_work_beyond_the_reserve() {
    let policy = Policy::new(Placement::numa());
    let (hints, running, m, owner) = (
        Hints::default(),
        RunningBatch::default(),
        ProcCounters::new(None),
        PolicyCore::new(),
    );
    let p = PolicyP::new(&hints, &running, &m);
    // Polls of ~10 µs: the M reaches two queued tasks within the reserve.
    m.record_busy(RESERVE_NS / 2, 1);
    assert_eq!(policy.rules().reserve(true, p), 2);
    assert!(
        !policy.worth_waking(&owner, p, 3, 1),
        "two left, both reserved"
    );
    assert!(policy.worth_waking(&owner, p, 3, 0));
    assert!(
        policy.worth_waking(&owner, p, 4, 1),
        "a third beyond the reserve"
    );
    share_out(&hints);
    assert!(
        policy.worth_waking(&owner, p, 2, 1),
        "shared-out work is for thieves"
    );
    let go = Policy::new(Placement::go());
    let fresh = Hints::default();
    let p = PolicyP::new(&fresh, &running, &m);
    assert!(
        go.worth_waking(&owner, p, 2, 1),
        "Go: any task beyond the next"
    );
    assert!(!go.worth_waking(&owner, p, 1, 1));
}

/// A thief's look: a ring beyond the reserve is stealable, `runnext` alone is
/// taken on the last pass unless a kept batch runs beside it, a batch queue
/// alone is the owner's (and asked to split).
#[test]
fn a_kept_batchs_runnext_is_kept_unless_the_poll_runs_long() {
    use hub_mode::At;
    let policy = Policy::new(Placement::numa());
    let (hints, m, running) = (
        Hints::default(),
        ProcCounters::new(None),
        RunningBatch::default(),
    );
    let look = |ring, runnext, ask| {
        let v = Victim {
            ring,
            runnext,
            held: true,
            p: PolicyP::new(&hints, &running, &m),
        };
        policy.look(v, ask)
    };
    assert_eq!(look(0, false, true), Look::Nothing);
    assert_eq!(look(0, true, true), Look::Runnext, "no batch queue");
    let reserved = (RESERVE_NS / MIN_TASK_NS) as usize;
    // Whom to wake and whether to park: the owner's M reaches `reserved` soon.
    assert_eq!(look(reserved, false, false), Look::OwnerOnly);
    let beyond = Look::Stealable {
        reserve: reserved as u32,
    };
    assert_eq!(look(reserved + 1, false, false), beyond);
    // A thief that steals now takes half of any ring, as in Go.
    assert_eq!(look(1, false, true), Look::Stealable { reserve: 0 });
    hints.bq_len.store(1, Relaxed);
    assert_eq!(
        look(0, true, false),
        Look::OwnerOnly,
        "beside a batch queue"
    );
    assert!(!hints.split.load(Relaxed), "a look that does not ask");
    assert_eq!(look(0, false, true), Look::OwnerOnly, "a batch queue alone");
    assert!(hints.split.load(Relaxed), "asked to split");
    m.polls.incr();
    mark_long(&hints, m.polls.get());
    assert_eq!(look(0, true, false), Look::Runnext, "the poll runs long");
    m.polls.incr();
    assert_eq!(
        look(0, true, false),
        Look::OwnerOnly,
        "the mark ends with its poll"
    );
    hints.bq_len.store(0, Relaxed);
    // No batch queue, but a member of a hub's batch in the poll: kept
    // while the batch is (a new hub's batch is measured kept).
    let bits = 5 << BATCH_SHIFT;
    running.0.store(bits, Relaxed);
    assert_eq!(look(0, true, false), Look::Runnext, "not a hub's batch");
    let at = At {
        now_ms: || 1_000,
        busy: || 0,
    };
    policy.rules().hub_modes.claim(bits, 0x1000, || 0, &at);
    assert_eq!(
        look(0, true, false),
        Look::OwnerOnly,
        "a kept hub's batch runs"
    );
    running.0.store(0, Relaxed);
    assert_eq!(look(0, true, false), Look::Runnext, "no batch runs");
}

/// With batches off, a wake learns nothing and a displaced task goes to
/// the ring, whatever its batch; on, a member of a kept hub's batch waits
/// in the batch queue and one of a spread batch goes to the ring shared out.
#[test]
fn a_displaced_member_goes_where_its_batch_is_run() {
    use hub_mode::At;
    let m = ProcCounters::new(None);
    let (hints, running) = (Hints::default(), RunningBatch::default());
    let p = PolicyP::new(&hints, &running, &m);
    let (t, _h) = task();
    let bits = t.metadata().batch_bits();
    assert_eq!(bits, 0);
    t.metadata()
        .set_batch(crate::task::batch_id_for(t.metadata().id));
    let bits = t.metadata().batch_bits();
    // `wakee` woken by `waker` into a `runnext` that holds `t`: where `t`
    // goes.
    let (waker, _w) = task();
    let (wakee, _we) = task();
    let mut st = PolicyCore::new();
    let wake = |policy: &Policy, st: &mut PolicyCore, t: Runnable, edge: bool| {
        let (wakee, _) = task();
        let mut t = Some(t);
        policy.route(Woken {
            task: wakee,
            st,
            p,
            waker: edge.then(|| waker.metadata()),
            clock_ms: 0,
            busy: || 0,
            runnext: |_| t.take(),
        })
    };
    // Go: to the ring, nothing learnt, nothing shared out.
    let go = Policy::new(Placement::go());
    let t = match wake(&go, &mut st, t, true) {
        WakeTo::Ring(t) => t,
        _ => panic!("to the ring"),
    };
    assert!(waker.metadata().batch().is_none(), "nothing learnt");
    assert!(!hints.shared_out.load(Relaxed));
    // numa: the waker joins `t`'s batch by waking a member of it; `t`, a
    // member displaced, the batch not a kept hub's: the ring, shared out.
    let numa = Policy::new(Placement::numa());
    assert_eq!(
        numa.begin_poll(&mut st, p, waker.metadata(), 0, None, |_| None),
        Poll::Here
    );
    assert_eq!(
        batch::learn_edge(waker.metadata(), t.metadata(), 0, &m),
        bits,
        "the waker joins the wakee's batch"
    );
    let t = {
        let mut t = Some(t);
        let to = numa.route(Woken {
            task: wakee,
            st: &mut st,
            p,
            waker: Some(waker.metadata()),
            clock_ms: 0,
            busy: || 0,
            runnext: |_| t.take(),
        });
        match to {
            WakeTo::Ring(t) => t,
            _ => panic!("spread"),
        }
    };
    assert!(hints.shared_out.load(Relaxed));
    // A kept hub's batch: the batch queue, which the owner runs next.
    numa.rules().hubs.mark(bits, 0);
    let at = At {
        now_ms: || 0,
        busy: || 0,
    };
    numa.rules().hub_modes.claim(bits, 0x1000, || 0, &at);
    assert!(matches!(wake(&numa, &mut st, t, true), WakeTo::Kept));
    assert_eq!(numa.describe().bq_len(p), 1);
    assert!(numa.describe().queued(p));
    match numa.owner_next(&mut st, p, Turn::Pick { ring_empty: true }) {
        Next::Run(t) => drop(t),
        _ => panic!("the batch queue's task runs next"),
    }
    assert_eq!(numa.describe().bq_len(p), 0);
    // Nothing displaced: `runnext`.
    let (w, _wh) = task();
    let to = numa.route(Woken {
        task: w,
        st: &mut st,
        p,
        waker: None,
        clock_ms: 0,
        busy: || 0,
        runnext: |_| None,
    });
    assert!(matches!(to, WakeTo::Runnext));
}

#[test]
fn roots_go_round_robin_past_the_acceptor_and_near_tasks_to_their_anchor() {
    let numa = Policy::new(Placement::numa());
    let go = Policy::new(Placement::go());
    let (t, _h) = task();
    let meta = t.metadata();
    let root = |p: &Policy, here: Option<usize>, cursor: usize| {
        p.route(NewTask {
            meta,
            how: Spawned::Root,
            active: 4,
            here: || here,
            next_root: &AtomicUsize::new(cursor),
        })
    };
    assert_eq!(
        root(&numa, Some(1), 6),
        Route::Root(2),
        "6 % 4 is the acceptor"
    );
    assert_eq!(root(&numa, Some(1), 7), Route::Root(3));
    assert_eq!(root(&numa, None, 5), Route::Root(1), "block_on accepting");
    assert_eq!(root(&go, Some(1), 7), Route::Wake, "the rule is off");

    let batch = crate::task::batch_id_for(meta.id);
    let near = |p: &Policy, last_p: Option<usize>, here: Option<usize>| {
        p.route(NewTask {
            meta,
            how: Spawned::Near(Anchor { last_p, batch }),
            active: 4,
            here: || here,
            next_root: &AtomicUsize::new(0),
        })
    };
    assert_eq!(near(&numa, Some(3), Some(0)), Route::Near(3));
    assert_eq!(meta.batch(), Some(batch), "joins the anchor's batch");
    assert_eq!(near(&numa, Some(3), Some(3)), Route::Wake, "already here");
    assert_eq!(near(&numa, Some(5), Some(0)), Route::Wake, "a retired P");
    assert_eq!(near(&numa, None, Some(0)), Route::Wake, "never ran");
    assert_eq!(
        near(&go, Some(3), None),
        Route::Near(3),
        "asked for: every rule off too"
    );
}

/// The no-op type answers every verb exactly as the rules do with every
/// rule off, over the states the mechanism can hand it (a fresh P's
/// policy state: with no rule on, nothing ever writes it).
#[test]
fn go_answers_every_verb_as_the_rules_with_none_on() {
    let go = Policy::new(Placement::go());
    assert!(
        matches!(go, Policy::Go(_)),
        "go placement is the no-op type"
    );
    let off = Policy::Rules(Rules::new(Placement::go()));
    let (hints, running, m) = (
        Hints::default(),
        RunningBatch::default(),
        ProcCounters::new(None),
    );
    let p = PolicyP::new(&hints, &running, &m);
    // (2) look.
    for ring in [0, 1, 2, 7] {
        for runnext in [false, true] {
            for held in [false, true] {
                for ask in [false, true] {
                    let v = || Victim {
                        ring,
                        runnext,
                        held,
                        p,
                    };
                    assert_eq!(
                        go.look(v(), ask),
                        off.look(v(), ask),
                        "look: ring {ring}, runnext {runnext}, held {held}, ask {ask}"
                    );
                }
            }
        }
    }
    // (4) worth_waking, even with a mean poll time that would reserve.
    m.record_busy(RESERVE_NS / 4, 1);
    let st = PolicyCore::new();
    for queued in 0..5 {
        for next in 0..3 {
            assert_eq!(
                go.worth_waking(&st, p, queued, next),
                off.worth_waking(&st, p, queued, next),
                "worth_waking({queued}, {next})"
            );
        }
    }
    // (3) owner_next.
    let mut st = PolicyCore::new();
    for turn in [
        Turn::Pick { ring_empty: true },
        Turn::Pick { ring_empty: false },
        Turn::Tick { idle_p: true },
        Turn::Tick { idle_p: false },
        Turn::RingRan,
        Turn::RingDry,
    ] {
        assert!(matches!(go.owner_next(&mut st, p, turn), Next::Ring));
        assert!(matches!(off.owner_next(&mut st, p, turn), Next::Ring));
    }
    // (5, 6) a poll begins here, and neither writes the poll's state.
    let (t, _h) = task();
    t.metadata()
        .set_batch(crate::task::batch_id_for(t.metadata().id));
    let bits = t.metadata().batch_bits();
    for home in [None, Some(1)] {
        for policy in [&go, &off] {
            let mut st = PolicyCore::new();
            assert_eq!(
                policy.begin_poll(&mut st, p, t.metadata(), bits, home, |_| Some(p)),
                Poll::Here
            );
            assert_eq!((st.running, running.get()), (0, 0));
            policy.end_poll(&st, p, bits, || 0);
        }
    }
    assert_eq!(m.batch_hub_homes.get(), 0);
    // (7) long_poll.
    for long in [None, Some(false), Some(true)] {
        assert_eq!(go.long_poll(p, 3, long), off.long_poll(p, 3, long));
    }
    // (8) describe.
    let (dg, doff) = (go.describe(), off.describe());
    assert_eq!(dg.rules(), doff.rules());
    assert_eq!(dg.bq_len(p), doff.bq_len(p));
    assert_eq!(dg.queued(p), doff.queued(p));
    let b = (bits >> BATCH_SHIFT) as u16;
    assert_eq!(dg.batch_label(b, 0), doff.batch_label(b, 0));
    assert_eq!(
        dg.task_batch(t.metadata(), 0),
        doff.task_batch(t.metadata(), 0)
    );
    // (1) route: new tasks ...
    let (n, _nh) = task();
    let meta = n.metadata();
    for here in [None, Some(0), Some(3)] {
        for cursor in [0, 5, 6] {
            let root = |policy: &Policy| {
                policy.route(NewTask {
                    meta,
                    how: Spawned::Root,
                    active: 4,
                    here: || here,
                    next_root: &AtomicUsize::new(cursor),
                })
            };
            assert_eq!(root(&go), root(&off), "root, here {here:?}");
        }
        for last_p in [None, Some(0), Some(3), Some(5)] {
            let batch = crate::task::batch_id_for(meta.id);
            let near = |policy: &Policy| {
                policy.route(NewTask {
                    meta,
                    how: Spawned::Near(Anchor { last_p, batch }),
                    active: 4,
                    here: || here,
                    next_root: &AtomicUsize::new(0),
                })
            };
            assert_eq!(near(&go), near(&off), "near {last_p:?}, here {here:?}");
        }
    }
    // ... and woken ones, with a wake edge or none, displacing or not.
    let (waker, _w) = task();
    for edge in [false, true] {
        for displaces in [false, true] {
            let wake = |policy: &Policy| {
                let (wakee, _) = task();
                let mut old = displaces.then(|| task().0);
                let mut st = PolicyCore::new();
                match policy.route(Woken {
                    task: wakee,
                    st: &mut st,
                    p,
                    waker: edge.then(|| waker.metadata()),
                    clock_ms: 0,
                    busy: || 0,
                    runnext: |_| old.take(),
                }) {
                    WakeTo::Runnext => "runnext",
                    WakeTo::Ring(_) => "ring",
                    WakeTo::Kept => "kept",
                }
            };
            assert_eq!(wake(&go), wake(&off), "edge {edge}, displaces {displaces}");
        }
    }
    assert!(waker.metadata().batch().is_none(), "nothing learnt");
    assert!(!hints.shared_out.load(Relaxed) && hints.bq_len.load(Relaxed) == 0);
}
