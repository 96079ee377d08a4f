//! The Job controller against steady's API server and simulated node: completions,
//! parallelism, backoffLimit, pod failure policies, pods tracked with finalizers, and
//! the status and conditions kube-controller-manager writes.

mod common;

use std::sync::Arc;

use futures::FutureExt;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, EvictParams, PropagationPolicy};
use serde_json::json;
use steady_cluster::job::per_index::FAILURE_COUNT;
use steady_cluster::job::tracking::{TRACKING_FINALIZER, has_tracking_finalizer};
use steady_cluster::job::{COMPLETION_INDEX, CONTROLLER_UID_LABEL, JOB_NAME_LABEL};
use steady_test_support::{create_json, eventually};

async fn job_cluster() -> Cluster {
    controller_cluster(steady_cluster::job::start, "job").await
}

fn job(
    name: &str,
    completions: i32,
    parallelism: i32,
    simulate: Option<&str>,
) -> serde_json::Value {
    let mut annotations = json!({});
    if let Some(fault) = simulate {
        annotations["steady.dev/simulate"] = json!(fault);
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": 2,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "work", "image": "busybox"}],
                },
            },
        },
    })
}

fn condition<'a>(
    job: &'a Job,
    type_: &str,
) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Both `types` (the interim condition and the terminal one) are set with `reason` and
/// `message`, as kube's Job controller writes them.
fn assert_conditions(job: &Job, types: [&str; 2], reason: &str, message: &str) {
    for type_ in types {
        let c = condition(job, type_).expect(type_);
        assert_eq!(c.reason.as_deref(), Some(reason), "{type_}");
        assert_eq!(c.message.as_deref(), Some(message), "{type_}");
    }
}

async fn wait_for_condition(cluster: &Cluster, name: &str, type_: &str) -> Job {
    let what = format!("job {name} {type_}");
    cluster
        .wait_for(name, &what, |job: &Job| condition(job, type_).is_some())
        .await
}

/// A Job whose `spec.managedBy` names another controller (Kueue's MultiKueue, say) is
/// that controller's: kube's Job controller (its `JobManagedBy` gate on by default in
/// 1.32) creates no pod and writes no status for it.
#[tokio::test(start_paused = true)]
async fn a_job_managed_by_another_controller_is_left_alone() {
    let cluster = job_cluster().await;
    let mut elsewhere = job("elsewhere", 1, 1, None);
    elsewhere["spec"]["managedBy"] = json!("example.com/other");
    create_json::<Job>(&cluster.api(), elsewhere).await;
    let mut here = job("here", 1, 1, None);
    here["spec"]["managedBy"] = json!("kubernetes.io/job-controller");
    create_json::<Job>(&cluster.api(), here).await;
    wait_for_condition(&cluster, "here", "Complete").await;
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    let left = cluster
        .api::<Job>()
        .get("elsewhere")
        .await
        .expect("elsewhere");
    assert_eq!(left.status, None);
    let pods = cluster.pods(&format!("{JOB_NAME_LABEL}=elsewhere")).await;
    assert!(pods.is_empty(), "{pods:?}");
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_with_three_completions_runs_its_pods_to_complete() {
    let cluster = job_cluster().await;
    let created: Job = create_json(&cluster.api(), job("count", 3, 1, None)).await;
    let uid = created.metadata.uid.clone().expect("uid");

    let done = wait_for_condition(&cluster, "count", "Complete").await;
    let status = done.status.clone().expect("status");
    assert_eq!(status.succeeded, Some(3));
    assert_eq!(status.active, None);
    assert_eq!(status.failed, None);
    assert_eq!(status.ready, Some(0));
    assert_eq!(status.terminating, Some(0));
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    assert!(status.start_time <= status.completion_time);
    assert_conditions(
        &done,
        ["SuccessCriteriaMet", "Complete"],
        "CompletionsReached",
        "Reached expected number of succeeded pods",
    );

    let pods = cluster.pods(&format!("{JOB_NAME_LABEL}=count")).await;
    assert_eq!(pods.len(), 3, "one pod per completion, none extra");
    for pod in &pods {
        assert_eq!(phase(pod), "Succeeded");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get(CONTROLLER_UID_LABEL), Some(&uid));
        let owner = &pod.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Job", uid.as_str())
        );
        assert_eq!(owner.controller, Some(true));
        assert!(
            pod.metadata
                .name
                .as_deref()
                .unwrap_or("")
                .starts_with("count-")
        );
    }

    // What `kubectl describe job` shows.
    let events: kube::Api<k8s_openapi::api::core::v1::Event> = cluster.api();
    let listed = events
        .list(&kube::api::ListParams::default().fields("involvedObject.name=count"))
        .await
        .expect("events");
    let mut reasons: Vec<String> = listed
        .items
        .iter()
        .filter_map(|e| e.reason.clone())
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "Completed",
            "SuccessfulCreate",
            "SuccessfulCreate",
            "SuccessfulCreate"
        ]
    );

    // A finished Job is left alone.
    cluster.assert_left_alone(&done).await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn parallelism_bounds_the_pods_running_at_once() {
    let cluster = job_cluster().await;
    create_json::<Job>(&cluster.api(), job("wide", 5, 2, None)).await;
    let jobs = cluster.api::<Job>();
    let most_running = Arc::new(AtomicUsize::new(0));
    eventually("job wide Complete", LIMIT, || {
        let (jobs, pods) = (jobs.clone(), cluster.api::<Pod>());
        let running = most_running.clone();
        async move {
            let selector = format!("{JOB_NAME_LABEL}=wide");
            let listed = pods
                .list(&kube::api::ListParams::default().labels(&selector))
                .await
                .ok()?;
            let unfinished = listed
                .items
                .iter()
                .filter(|p| !matches!(phase(p), "Succeeded" | "Failed"))
                .count();
            running.fetch_max(unfinished, Ordering::SeqCst);
            let job = jobs.get("wide").await.ok()?;
            condition(&job, "Complete").map(|_| ())
        }
    })
    .await;
    assert_eq!(
        most_running.load(Ordering::SeqCst),
        2,
        "two pods at a time, never more"
    );
    let pods = cluster.pods(&format!("{JOB_NAME_LABEL}=wide")).await;
    assert_eq!(pods.len(), 5);
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_pods_fail_is_failed_after_its_backoff_limit() {
    let cluster = job_cluster().await;
    create_json::<Job>(&cluster.api(), job("broken", 1, 1, Some("fail"))).await;

    let failed = wait_for_condition(&cluster, "broken", "Failed").await;
    let status = failed.status.clone().expect("status");
    // backoffLimit 2: the third failure is one too many.
    assert_eq!(status.failed, Some(3));
    assert_eq!(status.succeeded, None);
    assert_eq!(status.active, None);
    assert!(
        status.completion_time.is_none(),
        "only a Complete Job has one"
    );
    assert_conditions(
        &failed,
        ["FailureTarget", "Failed"],
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    );
    assert!(condition(&failed, "Complete").is_none());
    let pods = cluster.pods(&format!("{JOB_NAME_LABEL}=broken")).await;
    assert_eq!(pods.len(), 3, "no pod after the limit");
    assert!(pods.iter().all(|p| phase(p) == "Failed"));
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_suspended_job_runs_nothing_until_resumed() {
    let cluster = job_cluster().await;
    let mut suspended = job("later", 2, 1, None);
    suspended["spec"]["suspend"] = json!(true);
    create_json::<Job>(&cluster.api(), suspended).await;
    let waiting = wait_for_condition(&cluster, "later", "Suspended").await;
    let c = condition(&waiting, "Suspended").expect("Suspended");
    assert_eq!(
        (c.reason.as_deref(), c.message.as_deref()),
        (Some("JobSuspended"), Some("Job suspended"))
    );
    assert!(
        waiting
            .status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .is_none()
    );
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert!(
        cluster
            .pods(&format!("{JOB_NAME_LABEL}=later"))
            .await
            .is_empty()
    );

    steady_test_support::merge_patch(
        &cluster.api::<Job>(),
        "later",
        json!({"spec": {"suspend": false}}),
    )
    .await
    .expect("resume");
    let done = wait_for_condition(&cluster, "later", "Complete").await;
    let resumed = done
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Suspended"))
        .expect("Suspended condition kept");
    assert_eq!(resumed.status, "False");
    assert_eq!(resumed.reason.as_deref(), Some("JobResumed"));
    assert!(
        done.status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .is_some()
    );
    assert_eq!(done.status.and_then(|s| s.succeeded), Some(2));
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_indexed_job_runs_one_pod_per_index() {
    let cluster = job_cluster().await;
    let mut indexed = job("indexed", 3, 2, None);
    indexed["spec"]["completionMode"] = json!("Indexed");
    create_json::<Job>(&cluster.api(), indexed).await;
    let done = wait_for_condition(&cluster, "indexed", "Complete").await;
    let status = done.status.expect("status");
    assert_eq!(status.succeeded, Some(3));
    assert_eq!(status.completed_indexes.as_deref(), Some("0-2"));

    let pods = cluster.pods(&format!("{JOB_NAME_LABEL}=indexed")).await;
    let mut indexes: Vec<String> = Vec::new();
    for pod in &pods {
        let index = pod.metadata.annotations.clone().unwrap_or_default()[COMPLETION_INDEX].clone();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[COMPLETION_INDEX], index);
        let name = pod.metadata.name.clone().unwrap_or_default();
        assert!(name.starts_with(&format!("indexed-{index}-")), "{name}");
        let spec = pod.spec.clone().expect("spec");
        assert_eq!(spec.hostname, Some(format!("indexed-{index}")));
        let env = spec.containers[0].env.clone().unwrap_or_default();
        let index_from = env
            .iter()
            .find(|e| e.name == "JOB_COMPLETION_INDEX")
            .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        assert_eq!(
            index_from,
            Some("metadata.labels['batch.kubernetes.io/job-completion-index']")
        );
        indexes.push(index);
    }
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);
    cluster.stop().await;
}

/// On the paused clock: the deadline is counted from `startTime` on the cluster's clock,
/// so the Job fails when its simulated deadline passes, not before.
#[tokio::test(start_paused = true)]
async fn a_job_past_its_active_deadline_fails() {
    let cluster = job_cluster().await;
    // Failing pods, replaced after 10, 20, 40 s: still running when the deadline passes.
    let mut slow = job("slow", 1, 1, Some("fail"));
    slow["spec"]["activeDeadlineSeconds"] = json!(60);
    slow["spec"]["backoffLimit"] = json!(100);
    let started = tokio::time::Instant::now();
    create_json::<Job>(&cluster.api(), slow).await;
    let failed = wait_for_condition(&cluster, "slow", "Failed").await;
    // `startTime` is stamped to the second: up to a second early.
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(59) && waited < std::time::Duration::from_secs(62),
        "failed after {waited:?} of simulated time"
    );
    assert_conditions(
        &failed,
        ["FailureTarget", "Failed"],
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    );
    let failed_at = condition(&failed, "Failed")
        .and_then(|c| c.last_transition_time.clone())
        .expect("a transition time")
        .0;
    let status = failed.status.expect("status");
    assert_eq!(status.active, None, "its running pod was deleted");
    let started_at = status.start_time.expect("a start time").0;
    let stamped = failed_at.as_second() - started_at.as_second();
    assert!(
        (60..=61).contains(&stamped),
        "Failed stamped {stamped} s after startTime"
    );
    cluster.stop().await;
}

/// The pods of the Job `name` once `check` passes for them.
async fn pods_when(
    cluster: &Cluster,
    name: &str,
    what: &str,
    check: impl Fn(&[Pod]) -> bool,
) -> Vec<Pod> {
    let selector = format!("{JOB_NAME_LABEL}={name}");
    eventually(what, LIMIT, || async {
        let pods = cluster.pods(&selector).await;
        check(&pods).then_some(pods)
    })
    .await
}

async fn first_running_pod(cluster: &Cluster, name: &str) -> Pod {
    let running = pods_when(cluster, name, "a running pod", |pods| {
        pods.iter().any(|p| phase(p) == "Running")
    })
    .await;
    running
        .into_iter()
        .find(|p| phase(p) == "Running")
        .expect("running")
}

fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// kube 1.26+ tracks a Job's pods with a finalizer: a pod deleted after it succeeded
/// still counts, so the Job does not run it again, and a finished Job leaves no finalizer
/// and nothing uncounted behind.
#[tokio::test(start_paused = true)]
async fn a_succeeded_pod_deleted_still_counts_and_finished_pods_keep_no_finalizer() {
    let cluster = job_cluster().await;
    create_json::<Job>(&cluster.api(), job("counted", 2, 1, None)).await;
    let first = first_running_pod(&cluster, "counted").await;
    assert!(has_tracking_finalizer(&first), "a running pod is tracked");
    pods_when(&cluster, "counted", "the first pod succeeded", |pods| {
        pods.iter()
            .any(|p| p.metadata.name == first.metadata.name && phase(p) == "Succeeded")
    })
    .await;
    cluster
        .api::<Pod>()
        .delete(&pod_name(&first), &DeleteParams::default())
        .await
        .expect("delete the succeeded pod");

    let done = wait_for_condition(&cluster, "counted", "Complete").await;
    let status = done.status.clone().expect("status");
    assert_eq!((status.succeeded, status.failed), (Some(2), None));
    let uncounted = status
        .uncounted_terminated_pods
        .expect("uncountedTerminatedPods");
    assert_eq!((uncounted.succeeded, uncounted.failed), (None, None));
    let left = cluster.pods(&format!("{JOB_NAME_LABEL}=counted")).await;
    assert_eq!(left.len(), 1, "the deleted pod was not run again");
    assert!(left.iter().all(|p| !has_tracking_finalizer(p)));
    cluster.assert_left_alone(&done).await;
    cluster.stop().await;
}

/// A running pod that is deleted counts as failed once it is terminating, and under the
/// default `podReplacementPolicy` (TerminatingOrFailed) its replacement does not wait
/// for it to go.
#[tokio::test(start_paused = true)]
async fn a_running_pod_deleted_counts_as_failed_and_is_replaced() {
    let cluster = job_cluster().await;
    create_json::<Job>(&cluster.api(), job("replaced", 1, 1, None)).await;
    let running = first_running_pod(&cluster, "replaced").await;
    cluster
        .api::<Pod>()
        .delete(&pod_name(&running), &DeleteParams::default())
        .await
        .expect("delete the running pod");

    let done = wait_for_condition(&cluster, "replaced", "Complete").await;
    let status = done.status.clone().expect("status");
    assert_eq!((status.succeeded, status.failed), (Some(1), Some(1)));
    let left = cluster.pods(&format!("{JOB_NAME_LABEL}=replaced")).await;
    assert_eq!(left.len(), 1, "the deleted pod went once counted");
    assert_ne!(left[0].metadata.name, running.metadata.name);
    cluster.stop().await;
}

/// A `FailJob` rule fails the Job at the first pod that matches it, whatever
/// `backoffLimit` allows, with the message kube writes.
#[tokio::test(start_paused = true)]
async fn a_fail_job_rule_fails_the_job_at_the_first_matching_pod() {
    let cluster = job_cluster().await;
    let mut failing = job("exit-one", 3, 1, Some("fail"));
    failing["spec"]["backoffLimit"] = json!(6);
    failing["spec"]["podFailurePolicy"] = json!({"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "work", "operator": "In", "values": [1, 2]}},
    ]});
    create_json::<Job>(&cluster.api(), failing).await;

    let failed = wait_for_condition(&cluster, "exit-one", "Failed").await;
    let pods = cluster.pods(&format!("{JOB_NAME_LABEL}=exit-one")).await;
    assert_eq!(pods.len(), 1, "no pod after the rule matched");
    let message = format!(
        "Container work for pod default/{} failed with exit code 1 matching FailJob rule at index 1",
        pod_name(&pods[0])
    );
    assert_conditions(
        &failed,
        ["FailureTarget", "Failed"],
        "PodFailurePolicy",
        &message,
    );
    assert_eq!(failed.status.clone().expect("status").failed, Some(1));
    cluster.stop().await;
}

/// An `Ignore` rule on `DisruptionTarget`: an evicted pod's failure does not count
/// against `backoffLimit` (0 here), and with a failure policy its replacement waits until
/// it failed.
#[tokio::test(start_paused = true)]
async fn an_evicted_pods_failure_is_ignored_by_an_ignore_rule() {
    let cluster = job_cluster().await;
    let mut evicted = job("evicted", 1, 1, None);
    evicted["spec"]["backoffLimit"] = json!(0);
    evicted["spec"]["podFailurePolicy"] = json!({"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]});
    create_json::<Job>(&cluster.api(), evicted).await;
    let running = first_running_pod(&cluster, "evicted").await;
    cluster
        .api::<Pod>()
        .evict(&pod_name(&running), &EvictParams::default())
        .await
        .expect("evict");

    let done = wait_for_condition(&cluster, "evicted", "Complete").await;
    let status = done.status.clone().expect("status");
    assert_eq!((status.succeeded, status.failed), (Some(1), None));
    assert!(condition(&done, "Failed").is_none());
    cluster.stop().await;
}

/// A tracked pod whose Job is gone does not stay for its finalizer: kube's orphan
/// handling releases it, whether it lost its owner reference (an orphaning delete; it
/// keeps running) or its owner does not exist (the collector deletes it), and a Job
/// deleted in the background takes its pods with it.
#[tokio::test(start_paused = true)]
async fn pods_of_a_job_that_is_gone_are_released_from_their_finalizer() {
    let cluster = job_cluster().await;
    let pods = cluster.api::<Pod>();
    let tracked = |name: &str, owners: serde_json::Value| {
        json!({
            "metadata": {"name": name, "finalizers": [TRACKING_FINALIZER], "ownerReferences": owners,
                "labels": {CONTROLLER_UID_LABEL: "gone", JOB_NAME_LABEL: "gone"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox"}]},
        })
    };
    let missing_job = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "gone",
        "uid": "0b5e7a6c-0000-4000-8000-000000000001", "controller": true}]);
    create_json::<Pod>(&pods, tracked("orphaned", json!([]))).await;
    create_json::<Pod>(&pods, tracked("dangling", missing_job)).await;
    create_json::<Job>(&cluster.api(), job("background", 1, 1, None)).await;
    first_running_pod(&cluster, "background").await;
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    cluster
        .api::<Job>()
        .delete("background", &params)
        .await
        .expect("delete the job");

    pods_when(
        &cluster,
        "background",
        "the collected pod gone",
        <[Pod]>::is_empty,
    )
    .await;
    let kept = pods_when(
        &cluster,
        "gone",
        "the orphan released, the dangling pod gone",
        |pods| pods.len() == 1 && !has_tracking_finalizer(&pods[0]),
    )
    .await;
    assert_eq!(kept[0].metadata.name.as_deref(), Some("orphaned"));
    assert!(
        kept[0].metadata.deletion_timestamp.is_none(),
        "an orphan keeps running"
    );
    cluster.stop().await;
}

/// An Indexed Job whose `successPolicy` is met completes then, before `completions`,
/// with kube's `SuccessPolicy` reason on both conditions.
#[tokio::test(start_paused = true)]
async fn an_indexed_job_completes_when_its_success_policy_is_met() {
    let cluster = job_cluster().await;
    let mut leader = job("leader", 3, 1, None);
    leader["spec"]["completionMode"] = json!("Indexed");
    leader["spec"]["successPolicy"] = json!({"rules": [{"succeededIndexes": "0"}]});
    create_json::<Job>(&cluster.api(), leader).await;

    let done = wait_for_condition(&cluster, "leader", "Complete").await;
    assert_conditions(
        &done,
        ["SuccessCriteriaMet", "Complete"],
        "SuccessPolicy",
        "Matched rules at index 0",
    );
    let status = done.status.clone().expect("status");
    assert_eq!(status.succeeded, Some(1));
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    let pods = cluster.pods(&format!("{JOB_NAME_LABEL}=leader")).await;
    assert_eq!(pods.len(), 1, "the other indexes never ran");
    cluster.stop().await;
}

/// kube's ttl-after-finished controller: a finished Job is deleted, its pods with it,
/// `ttlSecondsAfterFinished` after it finished, and not before.
#[tokio::test(start_paused = true)]
async fn a_finished_job_goes_with_its_pods_once_its_ttl_passed() {
    let cluster = cluster(|client, stopped| {
        let stop = until(stopped).shared();
        let job = steady_cluster::run_one(
            steady_cluster::job::start,
            "job",
            client.clone(),
            stop.clone(),
        );
        let ttl = steady_cluster::ttl_after_finished::start;
        let cleanup = steady_cluster::run_one(ttl, "ttl-after-finished", client, stop);
        futures::future::try_join(job, cleanup).map(|both| both.map(drop))
    })
    .await;
    let mut short_lived = job("short-lived", 1, 1, None);
    short_lived["spec"]["ttlSecondsAfterFinished"] = json!(100);
    create_json::<Job>(&cluster.api(), short_lived).await;
    wait_for_condition(&cluster, "short-lived", "Complete").await;

    tokio::time::sleep(std::time::Duration::from_secs(90)).await;
    let jobs = cluster.api::<Job>();
    let kept = jobs.get_opt("short-lived").await.expect("get");
    assert!(
        kept.is_some_and(|j| j.metadata.deletion_timestamp.is_none()),
        "kept for its TTL"
    );
    eventually("the Job gone", LIMIT, || async {
        jobs.get_opt("short-lived")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let pods = cluster.pods(&format!("{JOB_NAME_LABEL}=short-lived")).await;
    assert!(pods.is_empty(), "a foreground delete takes the pods first");
    cluster.stop().await;
}

/// `backoffLimitPerIndex`: each index may fail that many times (its pods carry the count
/// so far) before it fails for good; the Job fails once every index is done, failed or
/// not, or at once past `maxFailedIndexes`, and a `FailIndex` rule fails an index at its
/// first failure.
#[tokio::test(start_paused = true)]
async fn an_indexed_job_with_a_backoff_limit_per_index_fails_its_indexes_one_by_one() {
    let cluster = job_cluster().await;
    let mut per_index = job("per-index", 2, 2, Some("fail"));
    per_index["spec"]["completionMode"] = json!("Indexed");
    per_index["spec"]["backoffLimitPerIndex"] = json!(1);
    per_index["spec"]
        .as_object_mut()
        .map(|s| s.remove("backoffLimit"));
    create_json::<Job>(&cluster.api(), per_index).await;
    let mut fail_index = job("fail-index", 3, 1, Some("fail"));
    fail_index["spec"]["completionMode"] = json!("Indexed");
    fail_index["spec"]["backoffLimitPerIndex"] = json!(5);
    fail_index["spec"]["maxFailedIndexes"] = json!(1);
    fail_index["spec"]["podFailurePolicy"] = json!({"rules": [
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]});
    create_json::<Job>(&cluster.api(), fail_index).await;

    let failed = wait_for_condition(&cluster, "per-index", "Failed").await;
    assert_conditions(
        &failed,
        ["FailureTarget", "Failed"],
        "FailedIndexes",
        "Job has failed indexes",
    );
    let status = failed.status.clone().expect("status");
    assert_eq!(status.failed_indexes.as_deref(), Some("0,1"));
    assert_eq!((status.failed, status.succeeded), (Some(4), None));
    let pods = cluster.pods(&format!("{JOB_NAME_LABEL}=per-index")).await;
    let mut counts: Vec<(String, String)> = pods
        .iter()
        .map(|p| {
            let annotations = p.metadata.annotations.clone().unwrap_or_default();
            (
                annotations[COMPLETION_INDEX].clone(),
                annotations[FAILURE_COUNT].clone(),
            )
        })
        .collect();
    counts.sort();
    let expected = [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")];
    assert_eq!(
        counts,
        expected.map(|(i, c)| (i.to_string(), c.to_string()))
    );

    let failed = wait_for_condition(&cluster, "fail-index", "Failed").await;
    assert_conditions(
        &failed,
        ["FailureTarget", "Failed"],
        "MaxFailedIndexesExceeded",
        "Job has exceeded the specified maximal number of failed indexes",
    );
    let status = failed.status.clone().expect("status");
    assert_eq!(status.failed_indexes.as_deref(), Some("0,1"));
    assert_eq!(
        status.failed,
        Some(2),
        "one pod per index: FailIndex failed each at once"
    );
    cluster.stop().await;
}

/// Under `restartPolicy: OnFailure` a failing container restarts in place; the Job counts
/// its restarts against `backoffLimit`, as kube's `pastBackoffLimitOnFailure` does, and
/// fails once they reach it.
#[tokio::test(start_paused = true)]
async fn restarts_in_place_count_against_the_backoff_limit() {
    let cluster = job_cluster().await;
    let mut restarting = job("restarting", 1, 1, Some("fail"));
    restarting["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    create_json::<Job>(&cluster.api(), restarting).await;

    let failed = wait_for_condition(&cluster, "restarting", "Failed").await;
    assert_conditions(
        &failed,
        ["FailureTarget", "Failed"],
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    );
    let status = failed.status.clone().expect("status");
    assert_eq!(
        status.failed,
        Some(1),
        "one pod, restarted in place, deleted and counted at the end"
    );
    cluster.stop().await;
}

/// A Job with `manualSelector` selects its pods by the labels its author chose (no
/// controller-uid label on them): it runs and counts them as any other Job.
#[tokio::test(start_paused = true)]
async fn a_job_with_a_manual_selector_runs_its_pods_to_complete() {
    let cluster = job_cluster().await;
    let mut manual = job("manual", 2, 1, None);
    manual["spec"]["manualSelector"] = json!(true);
    manual["spec"]["selector"] = json!({"matchLabels": {"run": "manual"}});
    manual["spec"]["template"]["metadata"]["labels"] = json!({"run": "manual"});
    create_json::<Job>(&cluster.api(), manual).await;
    let done = wait_for_condition(&cluster, "manual", "Complete").await;
    let status = done.status.clone().expect("status");
    assert_eq!((status.succeeded, status.failed), (Some(2), None));
    let pods = cluster.pods("run=manual").await;
    assert_eq!(pods.len(), 2, "one pod per completion");
    assert!(pods.iter().all(|p| !has_tracking_finalizer(p)));
    cluster.stop().await;
}

/// A `manualSelector` Job adopts a finished orphan its selector matches and counts it, as
/// kube's does (its tracking finalizer added on adoption, removed once counted): a Job
/// whose one completion already happened creates no pod.
#[tokio::test(start_paused = true)]
async fn a_manual_selector_job_adopts_and_counts_a_finished_orphan() {
    let cluster = job_cluster().await;
    let pods = cluster.api::<Pod>();
    create_json::<Pod>(
        &pods,
        json!({
            "metadata": {"name": "done-before", "labels": {"run": "adopted"}},
            "spec": {
                "nodeName": "no-such-node",
                "restartPolicy": "Never",
                "containers": [{"name": "work", "image": "busybox"}],
            },
        }),
    )
    .await;
    let finished = json!({"status": {"phase": "Succeeded", "containerStatuses": [{
        "name": "work", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
    }]}});
    steady_test_support::merge_patch_subresource::<Pod, Pod>(
        &pods,
        "status",
        "done-before",
        finished,
    )
    .await
    .expect("finish the pod");
    let mut manual = job("adopter", 1, 1, None);
    manual["spec"]["manualSelector"] = json!(true);
    manual["spec"]["selector"] = json!({"matchLabels": {"run": "adopted"}});
    manual["spec"]["template"]["metadata"]["labels"] = json!({"run": "adopted"});
    let adopter: Job = create_json(&cluster.api(), manual).await;

    let done = wait_for_condition(&cluster, "adopter", "Complete").await;
    let status = done.status.clone().expect("status");
    assert_eq!((status.succeeded, status.failed), (Some(1), None));
    let all = cluster.pods("run=adopted").await;
    assert_eq!(all.len(), 1, "no pod created: {all:?}");
    let adopted = &all[0];
    let controller = adopted.metadata.owner_references.iter().flatten().next();
    assert_eq!(controller.map(|r| &r.uid), adopter.metadata.uid.as_ref());
    assert!(!has_tracking_finalizer(adopted), "released once counted");
    cluster.stop().await;
}
