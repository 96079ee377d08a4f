//! Where the cluster's controllers and nodes get the time: one wall clock that advances
//! with tokio's clock, so on a paused runtime every timestamp they write and every "how
//! long ago" they judge (`minReadySeconds`, `progressDeadlineSeconds`,
//! `activeDeadlineSeconds`, CronJob schedules, node heartbeats) is on simulated time.
//!
//! Owns: the [`Clock`] type and its two starts — the wall clock now (`steady up`, tests)
//! or a fixed instant (the simulator, so a run's timestamps do not depend on the day it
//! ran). Must not know who reads it.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// A source of wall-clock time (the runtime's, which its event recorder reads too). The
/// simulator hands its API server and the cluster the same one, so the server's
/// timestamps and the controllers' agree.
pub use steady_runtime::events::Clock;

/// Wall time from now on, advancing with tokio's clock (on a paused runtime: simulated
/// time). Call it inside the runtime whose clock it should follow.
pub fn starting_now() -> Clock {
    starting_at(Utc::now())
}

/// `start` now, advancing with tokio's clock from here on: a simulated run's timestamps
/// are then the same whatever the day.
pub fn starting_at(start: DateTime<Utc>) -> Clock {
    let started = tokio::time::Instant::now();
    Arc::new(move || start + chrono::Duration::from_std(started.elapsed()).unwrap_or_default())
}

/// The clock's time as a `metav1.Time` (whole seconds, as Kubernetes serialises it).
pub(crate) fn time(clock: &Clock) -> Time {
    steady_runtime::conditions::to_time(clock())
}

/// The clock's time to the millisecond, for judging durations (`minReadySeconds`).
pub(crate) fn timestamp(clock: &Clock) -> Timestamp {
    Timestamp::from_millisecond(clock().timestamp_millis()).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// How long ago `time` was by `clock` (zero if unknown or in the future).
pub(crate) fn since(clock: &Clock, time: Option<&Time>) -> Duration {
    let Some(time) = time else {
        return Duration::ZERO;
    };
    let millis = timestamp(clock).as_millisecond() - time.0.as_millisecond();
    Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_clock_advances_with_the_paused_tokio_clock_from_its_start() {
        let start = DateTime::from_timestamp(1_000, 0).unwrap_or_default();
        let clock = starting_at(start);
        tokio::time::sleep(Duration::from_secs(90)).await;
        assert_eq!(clock(), start + chrono::Duration::seconds(90));
        let then = steady_runtime::conditions::to_time(start);
        assert_eq!(since(&clock, Some(&then)), Duration::from_secs(90));
        assert_eq!(since(&clock, None), Duration::ZERO);
    }
}
