//! Jittered exponential backoff for tower's `Retry`, sleeping on numa_rt.

use ::tower::retry::backoff::{Backoff, MakeBackoff};
use ::tower::util::rng::{HasherRng, Rng};
use numa_rt::time::Sleep;
use std::fmt;
use std::time::Duration;

/// Makes an [`ExponentialBackoff`] per retry session (tower's
/// `ExponentialBackoffMaker`, sleeping on numa_rt).
#[derive(Debug, Clone)]
pub struct ExponentialBackoffMaker<R = HasherRng> {
    min: Duration,
    max: Duration,
    /// Up to `jitter × base` is added to each backoff, at random.
    jitter: f64,
    rng: R,
}

impl<R: Rng> ExponentialBackoffMaker<R> {
    /// Backoffs from `min`, doubling, up to `max`, each with up to
    /// `jitter × base` added at random (`jitter` in `0.0..=100.0`).
    ///
    /// Fails as tower's does: `min > max`, a zero `max`, a negative, NaN or
    /// over-100 `jitter`.
    pub fn new(min: Duration, max: Duration, jitter: f64, rng: R) -> Result<Self, InvalidBackoff> {
        let problem = if min > max {
            Some("maximum must not be less than minimum")
        } else if max.is_zero() {
            Some("maximum must be non-zero")
        } else if jitter.is_nan() {
            Some("jitter must not be NaN")
        } else if jitter < 0.0 {
            Some("jitter must not be negative")
        } else if jitter > 100.0 {
            Some("jitter must not be greater than 100")
        } else {
            None
        };
        match problem {
            Some(why) => Err(InvalidBackoff(why)),
            None => Ok(ExponentialBackoffMaker {
                min,
                max,
                jitter,
                rng,
            }),
        }
    }
}

impl Default for ExponentialBackoffMaker {
    /// tower's default: from 50 ms, unbounded, jitter 0.99.
    fn default() -> Self {
        ExponentialBackoffMaker {
            min: Duration::from_millis(50),
            max: Duration::from_millis(u64::MAX),
            jitter: 0.99,
            rng: HasherRng::default(),
        }
    }
}

impl<R: Rng + Clone> MakeBackoff for ExponentialBackoffMaker<R> {
    type Backoff = ExponentialBackoff<R>;

    fn make_backoff(&mut self) -> ExponentialBackoff<R> {
        ExponentialBackoff {
            min: self.min,
            max: self.max,
            jitter: self.jitter,
            rng: self.rng.clone(),
            iterations: 0,
        }
    }
}

/// One retry session's backoffs: `min × 2ⁿ` capped at `max`, plus jitter
/// (tower's `ExponentialBackoff`; each backoff is a numa_rt [`Sleep`]).
#[derive(Debug, Clone)]
pub struct ExponentialBackoff<R = HasherRng> {
    min: Duration,
    max: Duration,
    jitter: f64,
    rng: R,
    iterations: u32,
}

impl<R: Rng> ExponentialBackoff<R> {
    /// The backoff before jitter: `min × 2^iterations`, at most `max`.
    fn base(&self) -> Duration {
        self.min
            .checked_mul(2u32.saturating_pow(self.iterations))
            .map_or(self.max, |d| d.min(self.max))
    }

    /// A random share of `base × jitter`, never past `max`.
    fn jitter(&mut self, base: Duration) -> Duration {
        if self.jitter == 0.0 {
            return Duration::ZERO;
        }
        let share = self.rng.next_f64() * self.jitter;
        // `mul_f64` panics on overflow; the float product saturates
        // instead, and `max - base` bounds it.
        let secs = base.as_secs_f64() * share;
        let jitter = Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
        jitter.min(self.max.saturating_sub(base))
    }

    /// The duration the next [`next_backoff`](Backoff::next_backoff) would
    /// sleep, without the jitter.
    pub fn next_base(&self) -> Duration {
        self.base()
    }
}

impl<R: Rng> Backoff for ExponentialBackoff<R> {
    type Future = Sleep;

    fn next_backoff(&mut self) -> Sleep {
        let base = self.base();
        let next = base.saturating_add(self.jitter(base));
        self.iterations = self.iterations.saturating_add(1);
        numa_rt::time::sleep(next)
    }
}

/// [`ExponentialBackoffMaker::new`]'s error: the parameters make no
/// backoff.
#[derive(Debug, Clone)]
pub struct InvalidBackoff(&'static str);

impl fmt::Display for InvalidBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid backoff: {}", self.0)
    }
}

impl std::error::Error for InvalidBackoff {}
