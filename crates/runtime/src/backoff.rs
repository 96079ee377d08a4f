//! Per-key exponential backoff for failed reconciles.
//!
//! The delay after the `n`-th consecutive failure of a key is `base * 2^(n-1)`, capped at
//! `max`, then jittered downwards: the returned delay is uniform in `[d * (1 - jitter), d]`,
//! so it is never above the cap. The count is forgotten on success (or when the object goes
//! away) and restarts at 1 when the primary's desired state changes between two failures
//! (its `metadata.generation`, or its resourceVersion for kinds without one): a new spec
//! deserves a fast retry, not the tail of the old spec's backoff.
//!
//! All randomness comes from the injected [`StdRng`], so a seeded backoff replays exactly.
//! No clock is read here; the caller turns the returned [`Duration`] into a deadline.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;

/// Per-key exponential backoff: `base * 2^(failures-1)`, capped at `max`, with jitter
/// (uniform in `[d*(1-j), d]`, `j` default 0.1 — never above the cap), reset on success and
/// when the primary's generation changes.
#[derive(Debug, Clone)]
pub struct BackoffPolicy {
    /// Delay after the first failure (default 5 ms).
    pub base: Duration,
    /// Upper bound of any delay (default 1000 s).
    pub max: Duration,
    /// Fraction of the delay that may be shaved off at random, in `[0, 1]` (default 0.1).
    /// Values outside that range (or NaN) are clamped (NaN counts as 0).
    pub jitter: f64,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1000),
            jitter: 0.1,
        }
    }
}

impl BackoffPolicy {
    /// The un-jittered delay after `failures` consecutive failures:
    /// `base * 2^(failures-1)` capped at `max` (`failures == 0` gives zero). Never overflows.
    pub fn delay(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let max = self.max.as_nanos();
        let exp = failures - 1;
        let nanos = if exp >= 127 {
            max
        } else {
            self.base
                .as_nanos()
                .checked_mul(1u128 << exp)
                .map_or(max, |n| n.min(max))
        };
        duration_from_nanos(nanos)
    }

    fn jitter_fraction(&self) -> f64 {
        if self.jitter.is_nan() {
            0.0
        } else {
            self.jitter.clamp(0.0, 1.0)
        }
    }
}

/// `nanos` must not exceed some existing `Duration`'s nanos (true for anything <= `max`).
fn duration_from_nanos(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).unwrap_or(u64::MAX);
    // The remainder is < 1e9, so it always fits in a u32.
    let sub = u32::try_from(nanos % NANOS_PER_SEC).unwrap_or(0);
    Duration::new(secs, sub)
}

#[derive(Debug, Clone, Copy)]
struct KeyState {
    failures: u32,
    generation: Option<i64>,
}

/// Failure counts (and the generation seen at the last failure) per key.
///
/// Only keys that are currently failing are held: [`Backoff::success`] and
/// [`Backoff::forget`] drop the key, so memory is bounded by the number of failing objects.
#[derive(Debug)]
pub struct Backoff<K: Ord + Clone> {
    policy: BackoffPolicy,
    rng: StdRng,
    keys: BTreeMap<K, KeyState>,
}

impl<K: Ord + Clone> Backoff<K> {
    /// Backoff per key under `policy`, with jitter drawn from `rng` (seeded for reproducible runs).
    pub fn new(policy: BackoffPolicy, rng: StdRng) -> Self {
        Self {
            policy,
            rng,
            keys: BTreeMap::new(),
        }
    }

    /// The delays this backoff follows.
    pub fn policy(&self) -> &BackoffPolicy {
        &self.policy
    }

    /// Record a failure of `key` (observed at `generation`, if known) and return how long to
    /// wait before retrying.
    ///
    /// If the generation differs from the one recorded at the previous failure, the count
    /// restarts at 1 (a spec change deserves a fast retry). An unknown generation (`None`),
    /// on either side, is not a change: it neither resets the count nor erases the
    /// generation already recorded.
    pub fn failure(&mut self, key: &K, generation: Option<i64>) -> Duration {
        let failures = match self.keys.get_mut(key) {
            Some(state) => {
                let changed = matches!(
                    (state.generation, generation),
                    (Some(old), Some(new)) if old != new
                );
                state.failures = if changed {
                    1
                } else {
                    state.failures.saturating_add(1)
                };
                if generation.is_some() {
                    state.generation = generation;
                }
                state.failures
            }
            None => {
                self.keys.insert(
                    key.clone(),
                    KeyState {
                        failures: 1,
                        generation,
                    },
                );
                1
            }
        };
        let delay = self.policy.delay(failures);
        self.jittered(delay)
    }

    /// The reconcile of `key` succeeded: forget its failures.
    pub fn success(&mut self, key: &K) {
        self.keys.remove(key);
    }

    /// Consecutive failures recorded for `key` (0 if none).
    pub fn failures(&self, key: &K) -> u32 {
        self.keys.get(key).map_or(0, |s| s.failures)
    }

    /// Drop all state of `key` (e.g. the object was deleted).
    pub fn forget(&mut self, key: &K) {
        self.keys.remove(key);
    }

    /// Number of keys with at least one recorded failure.
    pub fn tracked(&self) -> usize {
        self.keys.len()
    }

    /// Uniform in `[d * (1 - j), d]`, computed in integer nanoseconds so it never exceeds `d`.
    fn jittered(&mut self, d: Duration) -> Duration {
        let j = self.policy.jitter_fraction();
        let nanos = d.as_nanos();
        if j == 0.0 || nanos == 0 {
            return d;
        }
        // Truncation of the float product is fine: the span only bounds the jitter.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let span = ((nanos as f64 * j) as u128).min(nanos);
        if span == 0 {
            return d;
        }
        let picked = self.rng.random_range(nanos - span..=nanos);
        duration_from_nanos(picked)
    }
}

/// What the backoff compares to see a new desired state: `metadata.generation` where the
/// kind keeps one (custom resources, Deployments, …: a status-only change keeps it), else the
/// resourceVersion, since every change of a ConfigMap or a Secret is a change of what it
/// asks for. Opaque: only equality matters.
pub(crate) fn desired_state_version(meta: &kube::core::ObjectMeta) -> Option<i64> {
    use std::hash::{Hash, Hasher};
    meta.generation.or_else(|| {
        let version = meta.resource_version.as_ref()?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        version.hash(&mut hasher);
        Some(i64::from_ne_bytes(hasher.finish().to_ne_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn no_jitter() -> BackoffPolicy {
        BackoffPolicy {
            jitter: 0.0,
            ..BackoffPolicy::default()
        }
    }

    fn backoff(policy: BackoffPolicy, seed: u64) -> Backoff<String> {
        Backoff::new(policy, StdRng::seed_from_u64(seed))
    }

    fn k(s: &str) -> String {
        s.to_string()
    }

    #[test]
    fn default_policy() {
        let p = BackoffPolicy::default();
        assert_eq!(p.base, Duration::from_millis(5));
        assert_eq!(p.max, Duration::from_secs(1000));
        assert_eq!(p.jitter, 0.1);
        assert_eq!(p.delay(0), Duration::ZERO);
    }

    #[test]
    fn exact_sequence_without_jitter() {
        let mut b = backoff(no_jitter(), 1);
        let key = k("default/a");
        let expected_ms = [5u64, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240];
        for (i, ms) in expected_ms.iter().enumerate() {
            assert_eq!(
                b.failure(&key, None),
                Duration::from_millis(*ms),
                "failure {}",
                i + 1
            );
            assert_eq!(b.failures(&key), i as u32 + 1);
        }
        // Failure 18: 5ms * 2^17 = 655.36s; failure 19: 5ms * 2^18 = 1310.72s -> capped.
        let mut last = Duration::ZERO;
        for n in 13..=19 {
            last = b.failure(&key, None);
            assert_eq!(b.failures(&key), n);
        }
        assert_eq!(last, Duration::from_secs(1000));
        assert_eq!(no_jitter().delay(18), Duration::from_millis(655_360));
        assert_eq!(no_jitter().delay(19), Duration::from_secs(1000));
        for _ in 0..100 {
            assert_eq!(b.failure(&key, None), Duration::from_secs(1000));
        }
        assert_eq!(b.failures(&key), 119);
    }

    #[test]
    fn no_overflow_at_extremes() {
        let p = BackoffPolicy {
            base: Duration::MAX,
            max: Duration::MAX,
            jitter: 0.0,
        };
        assert_eq!(p.delay(1), Duration::MAX);
        assert_eq!(p.delay(2), Duration::MAX);
        assert_eq!(p.delay(u32::MAX), Duration::MAX);
        let p = BackoffPolicy {
            base: Duration::from_nanos(1),
            max: Duration::MAX,
            jitter: 0.0,
        };
        assert_eq!(p.delay(64), Duration::from_nanos(1 << 63));
        assert_eq!(p.delay(200), Duration::MAX);
        let p = no_jitter();
        assert_eq!(p.delay(u32::MAX), Duration::from_secs(1000));
        // The failure count saturates instead of wrapping.
        let mut b = backoff(BackoffPolicy::default(), 3);
        b.keys.insert(
            k("x"),
            KeyState {
                failures: u32::MAX,
                generation: None,
            },
        );
        let d = b.failure(&k("x"), None);
        assert_eq!(b.failures(&k("x")), u32::MAX);
        assert!(d <= Duration::from_secs(1000));
    }

    #[test]
    fn jitter_bounds() {
        let policy = BackoffPolicy::default();
        let mut b = backoff(policy.clone(), 42);
        let mut saw_below = false;
        for round in 0..50 {
            let key = k(&format!("k{round}"));
            for n in 1..=30 {
                let nominal = policy.delay(n);
                let d = b.failure(&key, None);
                assert!(d <= nominal, "{d:?} > {nominal:?}");
                assert!(d <= policy.max);
                assert!(d >= nominal.mul_f64(0.9) - Duration::from_nanos(1), "{d:?}");
                saw_below |= d < nominal;
            }
        }
        assert!(saw_below, "jitter never applied");

        // Full jitter stays in [0, d]; out-of-range jitter is clamped.
        for jitter in [1.0, 7.5, -3.0, f64::NAN] {
            let p = BackoffPolicy {
                jitter,
                ..BackoffPolicy::default()
            };
            let mut b = backoff(p.clone(), 7);
            for n in 1..=25 {
                let d = b.failure(&k("a"), None);
                assert!(d <= p.delay(n));
                if jitter < 0.0 || jitter.is_nan() {
                    assert_eq!(d, p.delay(n));
                }
            }
        }
    }

    #[test]
    fn reset_on_success_and_forget() {
        let mut b = backoff(no_jitter(), 1);
        let key = k("a");
        b.failure(&key, Some(1));
        b.failure(&key, Some(1));
        assert_eq!(b.failure(&key, Some(1)), Duration::from_millis(20));
        b.success(&key);
        assert_eq!(b.failures(&key), 0);
        assert_eq!(b.tracked(), 0);
        assert_eq!(b.failure(&key, Some(1)), Duration::from_millis(5));
        b.failure(&key, Some(1));
        b.forget(&key);
        assert_eq!(b.failures(&key), 0);
        assert_eq!(b.failure(&key, None), Duration::from_millis(5));
    }

    #[test]
    fn reset_on_generation_change() {
        let mut b = backoff(no_jitter(), 1);
        let key = k("a");
        for _ in 0..5 {
            b.failure(&key, Some(3));
        }
        assert_eq!(b.failures(&key), 5);
        // New spec: fast retry.
        assert_eq!(b.failure(&key, Some(4)), Duration::from_millis(5));
        assert_eq!(b.failures(&key), 1);
        assert_eq!(b.failure(&key, Some(4)), Duration::from_millis(10));
        // Unknown generation is not a change, and keeps the recorded one.
        assert_eq!(b.failure(&key, None), Duration::from_millis(20));
        assert_eq!(b.failure(&key, Some(4)), Duration::from_millis(40));
        assert_eq!(b.failure(&key, Some(5)), Duration::from_millis(5));
        // First failure without generation, later with one: not a reset.
        let other = k("b");
        b.failure(&other, None);
        assert_eq!(b.failure(&other, Some(9)), Duration::from_millis(10));
        assert_eq!(b.failure(&other, Some(9)), Duration::from_millis(20));
    }

    #[test]
    fn per_key_independence() {
        let mut b = backoff(no_jitter(), 1);
        let (a, c) = (k("a"), k("c"));
        for _ in 0..4 {
            b.failure(&a, None);
        }
        assert_eq!(b.failure(&c, None), Duration::from_millis(5));
        assert_eq!(b.failures(&a), 4);
        assert_eq!(b.failures(&c), 1);
        b.success(&a);
        assert_eq!(b.failures(&c), 1);
        assert_eq!(b.failure(&c, Some(2)), Duration::from_millis(10));
        assert_eq!(b.failure(&a, Some(7)), Duration::from_millis(5));
        assert_eq!(b.tracked(), 2);
    }

    #[test]
    fn same_seed_same_sequence() {
        let run = |seed: u64| {
            let mut b = backoff(BackoffPolicy::default(), seed);
            let keys = [k("a"), k("b"), k("c")];
            (0..60)
                .map(|i| b.failure(&keys[i % 3], Some((i / 20) as i64)))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(11), run(11));
        assert_ne!(run(11), run(12));
    }
}
