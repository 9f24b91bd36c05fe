//! The poll-time histogram's shape: which poll durations fall in which bucket.
//!
//! Off by default. With [`Builder::poll_time_histogram`](crate::Builder::poll_time_histogram)
//! every task poll is timed (two clock reads) and counted in one bucket of its
//! processor's histogram; the buckets are plain single-writer counters, read
//! without stopping anyone. The shapes are tokio's: equal-width buckets, or
//! buckets that double in width (fine resolution for fast polls, a few wide
//! buckets for the slow ones an operator hunts).

use std::ops::Range;
use std::time::Duration;

/// How poll durations are bucketed. The last bucket is open-ended: it counts
/// every poll longer than the others cover.
///
/// ```
/// use numa_rt_executor::HistogramConfig;
/// use std::time::Duration;
///
/// // [0, 100µs), [100µs, 200µs), … [900µs, ∞)
/// let linear = HistogramConfig::linear(Duration::from_micros(100), 10);
/// assert_eq!(linear.bucket_range(1), Duration::from_micros(100)..Duration::from_micros(200));
///
/// // [0, 1µs), [1µs, 2µs), [2µs, 4µs), … [16.4ms, ∞)
/// let log = HistogramConfig::log(Duration::from_micros(1), 16);
/// assert_eq!(log.bucket_range(2), Duration::from_micros(2)..Duration::from_micros(4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistogramConfig {
    scale: Scale,
    /// Linear: each bucket's width. Log: the first bucket's upper bound.
    resolution_ns: u64,
    buckets: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scale {
    Linear,
    Log,
}

impl HistogramConfig {
    /// `buckets` buckets `width` wide; the last one is open-ended.
    pub fn linear(width: Duration, buckets: usize) -> HistogramConfig {
        HistogramConfig {
            scale: Scale::Linear,
            resolution_ns: width.as_nanos().min(u64::MAX as u128) as u64,
            buckets,
        }
    }

    /// Bucket 0 is `[0, first)`, each next bucket twice as wide as the one
    /// before (`[first·2^(i-1), first·2^i)`); the last one is open-ended.
    pub fn log(first: Duration, buckets: usize) -> HistogramConfig {
        HistogramConfig {
            scale: Scale::Log,
            resolution_ns: first.as_nanos().min(u64::MAX as u128) as u64,
            buckets,
        }
    }

    /// The number of buckets.
    pub fn buckets(&self) -> usize {
        self.buckets
    }

    /// The durations bucket `i` counts (the last one ends at `Duration::MAX`).
    ///
    /// # Panics
    /// If `i` is not below [`HistogramConfig::buckets`].
    pub fn bucket_range(&self, i: usize) -> Range<Duration> {
        assert!(
            i < self.buckets,
            "bucket {i} out of range: the histogram has {} buckets",
            self.buckets
        );
        let ns = Duration::from_nanos;
        let start = match (self.scale, i) {
            (_, 0) => 0,
            (Scale::Linear, _) => self.resolution_ns.saturating_mul(i as u64),
            (Scale::Log, _) => shl_sat(self.resolution_ns, i as u32 - 1),
        };
        let end = if i + 1 == self.buckets {
            Duration::MAX
        } else {
            ns(match self.scale {
                Scale::Linear => self.resolution_ns.saturating_mul(i as u64 + 1),
                Scale::Log => shl_sat(self.resolution_ns, i as u32),
            })
        };
        ns(start)..end
    }

    /// The bucket a poll of `ns` nanoseconds falls in.
    #[inline]
    pub(crate) fn bucket_of(&self, ns: u64) -> usize {
        let last = self.buckets - 1;
        let i = match self.scale {
            Scale::Linear => (ns / self.resolution_ns) as usize,
            // Bucket i ≥ 1 holds [r·2^(i-1), r·2^i): i = bits of ns / r.
            Scale::Log => (u64::BITS - (ns / self.resolution_ns).leading_zeros()) as usize,
        };
        i.min(last)
    }

    /// Why this shape cannot be used, naming the bad value.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.buckets == 0 {
            return Err(
                "Builder::poll_time_histogram: the histogram needs at least 1 bucket, got 0".into(),
            );
        }
        if self.buckets > 1024 {
            return Err(format!(
                "Builder::poll_time_histogram: at most 1024 buckets, got {}",
                self.buckets
            ));
        }
        if self.resolution_ns == 0 {
            return Err(
                "Builder::poll_time_histogram: the bucket resolution must be at least 1 ns, got 0"
                    .into(),
            );
        }
        Ok(())
    }
}

fn shl_sat(x: u64, by: u32) -> u64 {
    if by >= x.leading_zeros() {
        u64::MAX
    } else {
        x << by
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_duration_lands_in_the_bucket_whose_range_holds_it() {
        for cfg in [
            HistogramConfig::linear(Duration::from_micros(100), 10),
            HistogramConfig::log(Duration::from_micros(1), 16),
            HistogramConfig::log(Duration::from_nanos(3), 70),
            HistogramConfig::linear(Duration::from_nanos(1), 1),
        ] {
            for ns in [
                0u64,
                1,
                2,
                999,
                1000,
                1001,
                99_999,
                100_000,
                5_000_000,
                u64::MAX / 3,
            ] {
                let b = cfg.bucket_of(ns);
                assert!(
                    cfg.bucket_range(b).contains(&Duration::from_nanos(ns)),
                    "{cfg:?}: {ns} ns went to bucket {b} = {:?}",
                    cfg.bucket_range(b)
                );
            }
        }
    }

    #[test]
    fn bad_shapes_are_named() {
        let zero = HistogramConfig::linear(Duration::ZERO, 4)
            .check()
            .unwrap_err();
        assert!(zero.contains("resolution"), "{zero}");
        let none = HistogramConfig::log(Duration::from_micros(1), 0)
            .check()
            .unwrap_err();
        assert!(none.contains("0"), "{none}");
    }
}
