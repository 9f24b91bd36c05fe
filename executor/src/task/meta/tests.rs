//! `TaskMeta`'s words: flags, last P, batch id, slot and location.

use super::*;
#[cfg(not(feature = "tracing"))]
use crate::task::harness::Harness;
use crate::task::{batch_id_for, BatchId, BATCH_BITS};

#[test]
fn abort_and_finish_flags() {
    let meta = TaskMeta::new(Kind::Task, Location::caller());
    assert!(!meta.is_aborted() && !meta.is_finished());
    assert!(meta.set_aborted());
    assert!(!meta.set_aborted(), "a second abort has nothing to do");
    assert!(meta.is_aborted());
    meta.set_finished();
    assert!(meta.is_finished());
    assert!(!meta.set_aborted(), "nothing to abort once finished");
}

/// `polled_last_on` tells a first poll, a poll on the same P and a
/// migration (with the P it came from) apart, and records nothing.
#[test]
fn polled_last_on_names_the_p_a_task_comes_from() {
    let meta = TaskMeta::new(Kind::Task, Location::caller());
    assert_eq!(meta.polled_last_on(2), Err(None), "never polled");
    meta.record_ran_on(2);
    assert_eq!(meta.polled_last_on(2), Ok(()));
    assert_eq!(meta.polled_last_on(0), Err(Some(2)));
    assert_eq!(meta.polled_last_on(0), Err(Some(2)), "it only looks");
    meta.record_ran_on(0);
    assert_eq!(meta.polled_last_on(0), Ok(()));
    assert_eq!(meta.polled_last_on(65_534), Err(Some(0)));
    assert_eq!(meta.polled_last_on(1 << 20), Err(None), "no tag for it");
}

/// The last P lives beside the flags: recording it neither loses nor
/// fakes an abort, and an index too large for the bits is not recorded.
#[test]
fn last_p_beside_the_flags() {
    let meta = TaskMeta::new(Kind::Task, Location::caller());
    meta.record_ran_on(3);
    assert_eq!(meta.last_p(), Some(3));
    meta.record_ran_on(0);
    assert_eq!(meta.last_p(), Some(0));
    assert!(!meta.is_aborted(), "the P bits are not the abort flag");
    assert!(meta.set_aborted(), "an abort with P bits set still counts");
    meta.record_ran_on(65_534);
    assert_eq!(meta.last_p(), Some(65_534));
    assert!(meta.is_aborted(), "recording a P keeps the abort flag");
    meta.record_ran_on(1 << 20);
    assert_eq!(
        meta.last_p(),
        Some(65_534),
        "an index too large is not recorded"
    );
    meta.record_ran_on(1);
    assert_eq!(meta.last_p(), Some(1));
}

/// The batch id lives between the flags and the last P: setting it
/// keeps both, recording a P keeps it, and a finished task has none.
#[test]
fn batch_beside_the_flags_and_the_last_p() {
    let meta = TaskMeta::new(Kind::Task, Location::caller());
    assert_eq!(meta.batch(), None);
    assert_eq!(meta.last_p(), None);
    meta.record_ran_on(5);
    assert!(meta.set_aborted());
    let b = batch_id_for(meta.id);
    meta.set_batch(b);
    assert_eq!(meta.batch(), Some(b));
    assert_eq!(meta.last_p(), Some(5));
    assert!(meta.is_aborted());
    meta.record_ran_on(7);
    assert_eq!(meta.batch(), Some(b), "a move keeps the batch");
    let top = BatchId::new((1 << BATCH_BITS) - 1).unwrap();
    meta.set_batch(top);
    assert_eq!(meta.batch(), Some(top));
    assert_eq!(meta.last_p(), Some(7), "the widest id stays in its bits");
    meta.set_finished();
    meta.set_batch(b);
    assert_eq!(meta.batch(), None, "a finished task joins nothing");
}

/// Without the `tracing` feature; with it, `TaskMeta` also holds the span.
/// See `TaskMeta` for why these sizes matter.
#[test]
#[cfg(not(feature = "tracing"))]
fn meta_is_seven_u32_and_the_harness_adds_one_word() {
    let word = std::mem::size_of::<usize>();
    assert_eq!(std::mem::size_of::<TaskMeta>(), 28);
    assert_eq!(std::mem::align_of::<TaskMeta>(), 4);
    assert_eq!(
        std::mem::size_of::<Harness<std::future::Pending<()>>>(),
        word
    );
    assert_eq!(
        std::mem::size_of::<Harness<std::future::Ready<u64>>>(),
        word + std::mem::size_of::<std::future::Ready<u64>>()
    );
}

#[test]
fn slot_and_scheduled_bit_share_a_word() {
    let mut meta = TaskMeta::new(Kind::Task, Location::caller());
    meta.set_slot(registry::MAX_INDEX as u32);
    assert!(!meta.is_scheduled());
    meta.note_scheduled();
    assert!(meta.is_scheduled());
    assert_eq!(meta.slot(), Some(registry::MAX_INDEX as u32));
    meta.note_polled(7);
    assert!(!meta.is_scheduled());
    assert_eq!(meta.slot(), Some(registry::MAX_INDEX as u32));
    assert_eq!(meta.last_poll_ms(), Some(7));
}

#[test]
fn an_unregistered_task_keeps_its_location_until_its_entry() {
    let here = Location::caller();
    let mut meta = TaskMeta::new(Kind::Task, here);
    meta.set_unregistered(here);
    let registry = Registry::new(1);
    meta.registry = RegistryRef::new(&registry);
    assert_eq!(meta.slot(), None);
    assert!(std::ptr::eq(meta.location().unwrap(), here));
    meta.note_scheduled();
    assert!(std::ptr::eq(meta.location().unwrap(), here));
    meta.set_registered(5);
    assert!(meta.is_scheduled());
    assert_eq!(meta.slot(), Some(5));
    // The entry's count, held by the task until its metadata drops.
    assert_eq!(Arc::strong_count(&registry), 2);
    drop(meta);
    assert_eq!(Arc::strong_count(&registry), 1);
}

#[test]
fn locations_compress_exactly_or_not_at_all() {
    // Every location the compiler emits here, and std's.
    let mine: [&'static Location<'static>; 2] = [Location::caller(), Location::caller()];
    let std_one = std::panic::Location::caller();
    for l in mine.into_iter().chain([std_one]) {
        let bits = compress_location(l);
        assert_ne!(bits, FAR_LOCATION);
        assert!(std::ptr::eq(expand_location(bits).unwrap(), l));
    }
    assert_eq!(expand_location(FAR_LOCATION), None);
}
