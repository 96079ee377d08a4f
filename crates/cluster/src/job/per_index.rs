//! `backoffLimitPerIndex` of an Indexed Job, as kube-controller-manager 1.32 runs it: each
//! index may fail that many times (its pods carry the count so far in
//! `batch.kubernetes.io/job-index-failure-count`) before it is failed for good and listed
//! in `status.failedIndexes`; a `FailIndex` rule of the pod failure policy fails it at
//! once. A failed pod keeps its tracking finalizer until its replacement exists, so the
//! count passes on to it, and the replacement waits the index's own backoff.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::JobSpec;
use k8s_openapi::api::core::v1::Pod;

use super::failure_policy::{self, Verdict};
use super::{JobConfig, completion_index, has_valid_index, pod_failed, tracking};

/// How many times a pod's index failed before it (counted failures).
pub const FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// How many failures of its index the pod failure policy ignored before it.
pub const IGNORED_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-ignored-failure-count";

/// A count annotation of `pod`; 0 when missing or not a non-negative int32, as kube reads it.
fn count(pod: &Pod, key: &str) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|v| *v >= 0)
        .unwrap_or(0)
}

/// Whether `pod`'s failure fails its index for good: a `FailIndex` rule matched, or a
/// counted failure with the index's count already at `limit`.
fn fails_index(spec: &JobSpec, pod: &Pod, limit: i32) -> bool {
    if !pod_failed(spec, pod) {
        return false;
    }
    let counted = match failure_policy::judge(spec, pod) {
        Verdict::FailIndex => return true,
        verdict => verdict.counts(),
    };
    counted && count(pod, FAILURE_COUNT) >= limit
}

/// The indexes failed for good: those `status.failedIndexes` lists and those a tracked
/// pod just failed.
pub(super) fn failed_indexes(
    spec: &JobSpec,
    listed: Option<&str>,
    pods: &[Arc<Pod>],
    completions: i32,
    limit: i32,
) -> BTreeSet<i32> {
    let just_failed = pods
        .iter()
        .filter(|p| tracking::has_tracking_finalizer(p) && has_valid_index(spec, p))
        .filter(|p| fails_index(spec, p, limit))
        .filter_map(|p| completion_index(p));
    super::parse_indexes(listed, completions)
        .into_iter()
        .chain(just_failed)
        .collect()
}

/// Per index neither completed, failed nor running: its last failed pod, which keeps its
/// finalizer until the replacement is created (kube's `podsWithDelayedDeletionPerIndex`).
pub(super) fn awaiting_replacement(
    spec: &JobSpec,
    pods: &[Arc<Pod>],
    settled: &BTreeSet<i32>,
    running: &BTreeSet<i32>,
) -> BTreeMap<i32, Arc<Pod>> {
    let mut awaiting: BTreeMap<i32, Arc<Pod>> = BTreeMap::new();
    let failed = pods.iter().filter(|p| {
        tracking::has_tracking_finalizer(p) && has_valid_index(spec, p) && pod_failed(spec, p)
    });
    for pod in failed {
        let Some(index) = completion_index(pod) else {
            continue;
        };
        if settled.contains(&index) || running.contains(&index) {
            continue;
        }
        let later = |last: &Pod| {
            absolute_count(last) <= absolute_count(pod) && finished_at(pod) >= finished_at(last)
        };
        if awaiting.get(&index).is_none_or(|last| later(last)) {
            awaiting.insert(index, pod.clone());
        }
    }
    awaiting
}

fn absolute_count(pod: &Pod) -> i32 {
    count(pod, FAILURE_COUNT).saturating_add(count(pod, IGNORED_FAILURE_COUNT))
}

/// When `pod` finished: its containers' last exit, else its deletion.
pub(super) fn finished_at(pod: &Pod) -> Option<DateTime<Utc>> {
    let statuses = pod.status.iter().flat_map(|s| {
        let regular = s.container_statuses.iter().flatten();
        regular.chain(s.init_container_statuses.iter().flatten())
    });
    let exits = statuses
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .filter_map(|t| DateTime::from_timestamp_millis(t.0.as_millisecond()));
    exits.max().or_else(|| {
        let deleted = pod.metadata.deletion_timestamp.as_ref()?;
        DateTime::from_timestamp_millis(deleted.0.as_millisecond())
    })
}

/// The failure-count annotations (counted, ignored) of the pod that replaces `replaced`.
pub(super) fn replacement_counts(spec: &JobSpec, replaced: &Pod) -> (i32, i32) {
    let (counted, ignored) = (
        count(replaced, FAILURE_COUNT),
        count(replaced, IGNORED_FAILURE_COUNT),
    );
    if failure_policy::judge(spec, replaced).counts() {
        (counted.saturating_add(1), ignored)
    } else {
        (counted, ignored.saturating_add(1))
    }
}

/// How long the replacement of the index's failed pod `replaced` still waits: the Job's
/// failure back-off after as many failures as the index had (ignored ones too), from
/// when it finished.
pub(super) fn replacement_delay(
    replaced: &Pod,
    now: DateTime<Utc>,
    config: &JobConfig,
) -> Duration {
    let backoff = config.back_off(absolute_count(replaced).saturating_add(1));
    let since = finished_at(replaced)
        .map(|at| (now - at).to_std().unwrap_or(Duration::ZERO))
        .unwrap_or(backoff);
    backoff.saturating_sub(since)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failed_pod(index: i32, counts: (i32, i32), finished: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("p{index}"), "namespace": "ns",
                "finalizers": [tracking::TRACKING_FINALIZER],
                "annotations": {
                    "batch.kubernetes.io/job-completion-index": index.to_string(),
                    FAILURE_COUNT: counts.0.to_string(),
                    IGNORED_FAILURE_COUNT: counts.1.to_string(),
                }},
            "status": {"phase": "Failed", "containerStatuses": [{"name": "c", "image": "i",
                "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 1, "finishedAt": finished}}}]},
        }))
        .expect("pod")
    }

    fn indexed(extra: serde_json::Value) -> JobSpec {
        let mut spec = json!({"template": {}, "completionMode": "Indexed", "completions": 4,
            "backoffLimitPerIndex": 1});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(spec).expect("spec")
    }

    #[test]
    fn an_index_fails_once_its_count_reaches_the_limit_or_a_fail_index_rule_matches() {
        let spec = indexed(json!({}));
        let pods = [
            Arc::new(failed_pod(0, (0, 0), "2026-01-01T00:00:00Z")),
            Arc::new(failed_pod(1, (1, 0), "2026-01-01T00:00:00Z")),
        ];
        assert_eq!(failed_indexes(&spec, Some("3"), &pods, 4, 1), [1, 3].into());
        let fail_index = indexed(json!({"podFailurePolicy": {"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]}}));
        assert_eq!(
            failed_indexes(&fail_index, None, &pods, 4, 1),
            [0, 1].into()
        );
    }

    #[test]
    fn the_last_failed_pod_of_an_index_awaits_its_replacement_which_inherits_its_count() {
        let spec = indexed(json!({}));
        let first = Arc::new(failed_pod(2, (0, 0), "2026-01-01T00:00:00Z"));
        let second = Arc::new(failed_pod(2, (1, 0), "2026-01-01T00:00:30Z"));
        let pods = [first, second.clone()];
        let awaiting = awaiting_replacement(&spec, &pods, &BTreeSet::new(), &BTreeSet::new());
        assert_eq!(
            awaiting.get(&2).map(|p| p.metadata.name.clone()),
            Some(second.metadata.name.clone())
        );
        assert!(awaiting_replacement(&spec, &pods, &BTreeSet::new(), &[2].into()).is_empty());
        assert_eq!(replacement_counts(&spec, &second), (2, 0));
        let now = "2026-01-01T00:00:35Z".parse().expect("now");
        let delay = replacement_delay(&second, now, &JobConfig::default());
        assert_eq!(
            delay,
            Duration::from_secs(15),
            "20 s for the second failure, 5 s gone"
        );
    }
}
