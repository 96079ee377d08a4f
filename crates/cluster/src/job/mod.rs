//! The Job controller: runs a Job's pods until enough succeed (`Complete`) or the Job
//! fails (`Failed`: `BackoffLimitExceeded`, `DeadlineExceeded`, or `PodFailurePolicy`
//! when a failed pod matches a `FailJob` rule), as kube-controller-manager 1.32 does.
//!
//! Level-triggered: every reconcile reads the Job's pods (active, ready, terminating) from
//! the runtime's cache and adds the finished ones not yet counted to the counts in its
//! status, which only grow: pods are tracked with a finalizer ([`tracking`]), so a pod
//! deleted after it finished still counts. Once the outcome is known the Job first gets
//! the interim condition (`SuccessCriteriaMet` or `FailureTarget`) and its remaining pods
//! are deleted; the terminal condition (`Complete` or `Failed`) follows when none is left
//! running or uncounted, as 1.31+ delays it. A replacement for a failed pod waits 10 s,
//! doubling per failure since the Job's last success (capped at 10 min), like kube's pod
//! failure backoff record; under
//! `podReplacementPolicy: Failed` (or with a `podFailurePolicy`) it also waits until the
//! pod it replaces is no longer terminating. A suspended Job runs no pods. An Indexed Job
//! runs one pod per index (`completedIndexes` says which are done) and succeeds early
//! when its `successPolicy` says so.

mod failure_policy;
pub mod per_index;
pub mod tracking;

use std::collections::{BTreeMap, BTreeSet};

use futures::FutureExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus};
use k8s_openapi::api::core::v1::{
    ContainerStatus, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use steady_runtime::backoff::BackoffPolicy;
use steady_runtime::conditions::to_time;
use steady_runtime::events::{EventType, Recorder};
use steady_runtime::{Action, Context, ObjectCache};
use tokio::time::Instant;

use crate::claim::{self, Claim};
use crate::pod_template::{self, PodName};
use crate::{Clock, Error, Running, Setup, Shutdown};

/// The label naming a pod's Job (the API server adds it to the template).
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The label carrying the uid of a pod's Job: the Job's generated selector.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The annotation (and label) holding an Indexed Job pod's completion index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// Who writes the Job's status and events.
const MANAGER: &str = "job-controller";

/// kube's default `backoffLimit`, should a Job reach us without defaults.
const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// How the Job controller paces replacements of failed pods.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// Delay before the first replacement after a failure (kube: 10 s); it doubles
    /// with every further failure.
    pub failure_backoff: Duration,
    /// The longest that delay gets (kube: 10 min).
    pub max_failure_backoff: Duration,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            failure_backoff: Duration::from_secs(10),
            max_failure_backoff: Duration::from_secs(600),
        }
    }
}

impl JobConfig {
    /// The wait after `failures` failures: the runtime's exponential back-off, unjittered.
    fn back_off(&self, failures: i32) -> Duration {
        let policy = BackoffPolicy {
            base: self.failure_backoff,
            max: self.max_failure_backoff,
            jitter: 0.0,
        };
        policy.delay(u32::try_from(failures).unwrap_or(0))
    }
}

/// Start the Job controller (an entry of [`crate::CONTROLLERS`]), with the release of
/// orphaned pods' finalizers beside it.
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let orphans = crate::named(&config, &format!("{}-orphans", config.name));
    let releasing = tracking::start_orphan_release(&client, orphans, shutdown.clone());
    let mut controller = crate::controller_for::<Job>(&client, config);
    controller.trim(trim_for_tracking);
    let data = JobData {
        // Every pod, as kube's: a Job with `manualSelector` selects pods by its author's
        // labels, which need not include the controller-uid one.
        pods: controller.owns_or_adopts(Api::<Pod>::all(client.clone()), claims),
        events: crate::recorder(&client, MANAGER, &clock),
        failures: Mutex::new(BTreeMap::new()),
        config: JobConfig::default(),
        clock,
    };
    let counting = controller.run(reconcile, Arc::new(data), shutdown);
    futures::future::try_join(counting, releasing)
        .map(|both| both.map(drop))
        .boxed()
}

struct JobData {
    pods: ObjectCache<Pod>,
    events: Recorder,
    /// Per Job uid: its failures since its last success (kube's `backoffRecord`).
    failures: Mutex<BTreeMap<String, BackoffRecord>>,
    config: JobConfig,
    /// `startTime`, `completionTime`, the conditions' times and the active deadline.
    clock: Clock,
}

impl JobData {
    /// How long replacements of `job`'s failed pods must still wait: the back-off after
    /// the failures since the Job's last success, from the last failure.
    fn replacement_delay(&self, uid: &str, tally: &Tally) -> Duration {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let record = failures
            .entry(uid.to_string())
            .or_insert_with(|| BackoffRecord::first_seen(tally, now));
        record.observe(tally, now);
        if record.failures_after_success == 0 {
            return Duration::ZERO;
        }
        let backoff = self.config.back_off(record.failures_after_success);
        (record.last_failure + backoff).saturating_duration_since(now)
    }

    fn forget(&self, uid: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }
}

/// kube's `backoffRecord`: how many pods failed since the Job's last success and when
/// the last of them was seen (on tokio's clock), so that a success resets the back-off of
/// replacements as on a cluster instead of each failure waiting longer than the last.
#[derive(Debug)]
struct BackoffRecord {
    /// The counts of the last sync, to tell what finished since.
    failed: i32,
    succeeded: i32,
    failures_after_success: i32,
    last_failure: Instant,
}

impl BackoffRecord {
    /// A Job first seen with failures (a restarted controller) backs off after all of
    /// them: its pods' order is no longer known.
    fn first_seen(tally: &Tally, now: Instant) -> BackoffRecord {
        BackoffRecord {
            failed: tally.failed,
            succeeded: tally.succeeded,
            failures_after_success: tally.failed,
            last_failure: now,
        }
    }

    /// Take in what finished since the last sync (kube's `newBackoffRecord`): a success
    /// that finished after every new failure resets the count; otherwise the new
    /// failures count on (from zero when a success came between).
    fn observe(&mut self, tally: &Tally, now: Instant) {
        let new_failures = tally.failed.saturating_sub(self.failed).max(0);
        let new_successes = tally.succeeded.saturating_sub(self.succeeded).max(0);
        self.failed = tally.failed;
        self.succeeded = tally.succeeded;
        if new_failures == 0 && new_successes == 0 {
            return;
        }
        self.failures_after_success = match (new_successes > 0, new_failures > 0) {
            (true, false) => 0,
            (true, true) if last_finished_succeeded(&tally.pods) => 0,
            (true, true) => new_failures,
            _ => self.failures_after_success.saturating_add(new_failures),
        };
        if new_failures > 0 {
            self.last_failure = now;
        }
    }
}

/// Whether, of the Job's finished pods, the one that finished last succeeded.
fn last_finished_succeeded(pods: &[Arc<Pod>]) -> bool {
    pods.iter()
        .filter(|pod| pod_template::is_finished(pod))
        .max_by_key(|pod| per_index::finished_at(pod))
        .is_some_and(|pod| pod_template::succeeded(pod))
}

/// What a sync of the Job sees: its pods, and its counts as kube's `syncJobCtx` holds
/// them (finished pods not yet in the status counters included).
#[derive(Debug, Default)]
struct Tally {
    /// The pods the Job controls.
    pods: Vec<Arc<Pod>>,
    /// Those not finished and not being deleted.
    active: Vec<Arc<Pod>>,
    /// How many are active after this sync's creates and deletes.
    active_count: i32,
    ready: i32,
    /// Pods being deleted that have not finished.
    terminating: i32,
    /// Succeeded pods (for an Indexed Job, completed indexes), counted or not yet.
    succeeded: i32,
    /// Failed pods that count (see [`failure_policy`]), counted or not yet.
    failed: i32,
    /// Indexed Jobs: the indexes completed (the status's and those just finished).
    completed_indexes: BTreeSet<i32>,
    /// Under `backoffLimitPerIndex`: the indexes failed for good, and per index still to
    /// run, its last failed pod (see [`per_index`]).
    per_index: Option<PerIndex>,
}

#[derive(Debug, Default)]
struct PerIndex {
    failed: BTreeSet<i32>,
    awaiting: BTreeMap<i32, Arc<Pod>>,
}

impl Tally {
    fn of(spec: &JobSpec, status: &JobStatus, pods: Vec<Arc<Pod>>) -> Tally {
        let uncounted = tracking::Uncounted::of(status);
        let to_count = |p: &Pod| tracking::has_tracking_finalizer(p) && has_valid_index(spec, p);
        let counted = |uids: &[String], p: &Pod| {
            p.metadata
                .uid
                .as_ref()
                .is_some_and(|uid| uids.contains(uid))
        };
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let new_succeeded = pods
            .iter()
            .filter(|p| {
                to_count(p) && !counted(&uncounted.succeeded, p) && pod_template::succeeded(p)
            })
            .count();
        let new_failed = pods
            .iter()
            .filter(|p| to_count(p) && !counted(&uncounted.failed, p) && pod_failed(spec, p))
            .filter(|p| failure_policy::judge(spec, p).counts())
            .count();
        let active: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| pod_template::is_active(p))
            .cloned()
            .collect();
        let mut tally = Tally {
            active_count: count(active.len()),
            ready: count(active.iter().filter(|p| pod_template::is_ready(p)).count()),
            terminating: count(
                pods.iter()
                    .filter(|p| pod_template::is_terminating(p) && !pod_template::is_finished(p))
                    .count(),
            ),
            succeeded: status.succeeded.unwrap_or(0)
                + count(new_succeeded)
                + count(uncounted.succeeded.len()),
            failed: status.failed.unwrap_or(0) + count(new_failed) + count(uncounted.failed.len()),
            active,
            ..Tally::default()
        };
        if let Some(completions) = indexed_completions(spec) {
            let finished_now = pods
                .iter()
                .filter(|p| to_count(p) && pod_template::succeeded(p))
                .filter_map(|p| completion_index(p));
            tally.completed_indexes =
                parse_indexes(status.completed_indexes.as_deref(), completions)
                    .into_iter()
                    .chain(finished_now)
                    .collect();
            tally.succeeded = count(tally.completed_indexes.len());
            if let Some(limit) = spec.backoff_limit_per_index {
                let listed = status.failed_indexes.as_deref();
                let failed = per_index::failed_indexes(spec, listed, &pods, completions, limit);
                let settled = tally.completed_indexes.union(&failed).copied().collect();
                let awaiting =
                    per_index::awaiting_replacement(spec, &pods, &settled, &tally.active_indexes());
                tally.per_index = Some(PerIndex { failed, awaiting });
            }
        }
        tally.pods = pods;
        tally
    }

    /// Whether `pod`'s finalizer must stay until its index's replacement exists.
    fn awaits_replacement(&self, pod: &Pod) -> bool {
        let Some(per_index) = &self.per_index else {
            return false;
        };
        let awaited = completion_index(pod).and_then(|i| per_index.awaiting.get(&i));
        awaited.is_some_and(|p| p.metadata.uid == pod.metadata.uid)
    }

    /// Indexes an active pod runs.
    fn active_indexes(&self) -> BTreeSet<i32> {
        self.active
            .iter()
            .filter_map(|p| completion_index(p))
            .collect()
    }
}

/// Whether a pod's failure is final for the Job: phase Failed, or (unless the Job waits
/// for failed pods only, `podReplacementPolicy: Failed` or a `podFailurePolicy`) being
/// deleted without having succeeded, so an orphaned or evicted pod counts.
fn pod_failed(spec: &JobSpec, pod: &Pod) -> bool {
    if pod_template::failed(pod) {
        return true;
    }
    !replaces_failed_pods_only(spec)
        && pod_template::is_terminating(pod)
        && !pod_template::succeeded(pod)
}

/// kube's `onlyReplaceFailedPods`: a replacement waits until the pod it replaces failed
/// (a terminating one still counts against `parallelism`).
fn replaces_failed_pods_only(spec: &JobSpec) -> bool {
    spec.pod_replacement_policy.as_deref() == Some("Failed") || spec.pod_failure_policy.is_some()
}

/// Pods of a NonIndexed Job all count; those of an Indexed one only with an index below
/// `completions`.
fn has_valid_index(spec: &JobSpec, pod: &Pod) -> bool {
    match indexed_completions(spec) {
        None => true,
        Some(completions) => completion_index(pod).is_some_and(|i| (0..completions).contains(&i)),
    }
}

/// `completions` of an Indexed Job (None for NonIndexed).
fn indexed_completions(spec: &JobSpec) -> Option<i32> {
    if spec.completion_mode.as_deref() == Some("Indexed") {
        spec.completions
    } else {
        None
    }
}

fn completion_index(pod: &Pod) -> Option<i32> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX)?
        .parse()
        .ok()
}

/// kube's `completedIndexes`: sorted indexes, runs of three or more consecutive ones as
/// `first-last` (two are `first,last`, as kube's `orderedIntervals.String` writes them).
fn compress_indexes(indexes: &BTreeSet<i32>) -> String {
    let mut runs: Vec<(i32, i32)> = Vec::new();
    for &index in indexes {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == index => *last = index,
            _ => runs.push((index, index)),
        }
    }
    runs.iter()
        .map(|&(first, last)| match last - first {
            0 => first.to_string(),
            1 => format!("{first},{last}"),
            _ => format!("{first}-{last}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The indexes `completedIndexes` lists, those below `completions` (what kube's
/// `parseIndexesFromString` keeps; a malformed run is skipped).
fn parse_indexes(listed: Option<&str>, completions: i32) -> BTreeSet<i32> {
    let mut indexes = BTreeSet::new();
    for run in listed.unwrap_or("").split(',').filter(|r| !r.is_empty()) {
        let bounds: Option<(i32, i32)> = match run.split_once('-') {
            Some((first, last)) => first.parse().ok().zip(last.parse().ok()),
            None => run.parse::<i32>().ok().map(|i| (i, i)),
        };
        if let Some((first, last)) = bounds {
            indexes.extend((first..=last.min(completions - 1)).filter(|i| *i >= 0));
        }
    }
    indexes
}

/// How a Job ends, once that is decided: the reason and message its interim condition
/// (`SuccessCriteriaMet`/`FailureTarget`) and then its terminal one (`Complete`/`Failed`)
/// carry.
#[derive(Debug, Clone, PartialEq)]
struct Verdict {
    success: bool,
    reason: String,
    message: String,
}

impl Verdict {
    fn failure(reason: &str, message: &str) -> Verdict {
        Verdict {
            success: false,
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn completions_reached() -> Verdict {
        Verdict {
            success: true,
            reason: "CompletionsReached".into(),
            message: "Reached expected number of succeeded pods".into(),
        }
    }

    /// The verdict an interim condition already records (never taken back).
    fn recorded(status: &JobStatus) -> Option<Verdict> {
        ["SuccessCriteriaMet", "FailureTarget"]
            .into_iter()
            .find_map(|type_| condition(status, type_))
            .map(|c| Verdict {
                success: c.type_ == "SuccessCriteriaMet",
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            })
    }

    fn interim(&self) -> &'static str {
        if self.success {
            "SuccessCriteriaMet"
        } else {
            "FailureTarget"
        }
    }

    fn terminal(&self) -> &'static str {
        if self.success { "Complete" } else { "Failed" }
    }
}

fn condition<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")
}

fn has_condition(status: &JobStatus, type_: &str) -> bool {
    condition(status, type_).is_some()
}

/// How long the Job may still run under `activeDeadlineSeconds` (counted from
/// `startTime`, stopped while suspended); None without a deadline.
fn time_left(
    spec: &JobSpec,
    status: &JobStatus,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Duration> {
    if spec.suspend == Some(true) {
        return None;
    }
    let deadline = spec.active_deadline_seconds?;
    let started = status.start_time.as_ref()?.0.as_millisecond();
    let ends = started.saturating_add(deadline.saturating_mul(1000));
    let left = ends.saturating_sub(now.timestamp_millis());
    Some(Duration::from_millis(u64::try_from(left).unwrap_or(0)))
}

/// Whether the Job fails now, in kube's order: a pod matching a `FailJob` rule, more
/// counted failures than `backoffLimit`, the active deadline passed.
fn failure(spec: &JobSpec, tally: &Tally, time_left: Option<Duration>) -> Option<Verdict> {
    if spec.pod_failure_policy.is_some() {
        let fail_job = tally
            .pods
            .iter()
            .filter(|p| pod_failed(spec, p))
            .find_map(|p| match failure_policy::judge(spec, p) {
                failure_policy::Verdict::FailJob(message) => Some(message),
                _ => None,
            });
        if let Some(message) = fail_job {
            return Some(Verdict::failure("PodFailurePolicy", &message));
        }
    }
    let limit = spec.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT);
    if tally.failed > limit || past_limit_in_restarts(spec, &tally.pods, limit) {
        return Some(Verdict::failure(
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ));
    }
    if time_left.is_some_and(|left| left.is_zero()) {
        return Some(Verdict::failure(
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
        ));
    }
    None
}

/// An Indexed Job's `successPolicy`: the first rule its completed indexes satisfy (all
/// of the rule's `succeededIndexes`, or `succeededCount` of them, or `succeededCount`
/// indexes in all) decides it succeeded, with kube's `SuccessPolicy` reason and message.
fn success_by_policy(spec: &JobSpec, completed: &BTreeSet<i32>) -> Option<Verdict> {
    let completions = indexed_completions(spec)?;
    let policy = spec.success_policy.as_ref()?;
    if completed.is_empty() {
        return None;
    }
    let at_least = |count: Option<i32>, done: usize| {
        count.is_some_and(|count| i32::try_from(done).unwrap_or(i32::MAX) >= count)
    };
    let index = policy
        .rules
        .iter()
        .position(|rule| match &rule.succeeded_indexes {
            Some(listed) => {
                let required = parse_indexes(Some(listed), completions);
                let done = required.intersection(completed).count();
                !required.is_empty()
                    && (done == required.len() || at_least(rule.succeeded_count, done))
            }
            None => at_least(rule.succeeded_count, completed.len()),
        })?;
    Some(Verdict {
        success: true,
        reason: "SuccessPolicy".into(),
        message: format!("Matched rules at index {index}"),
    })
}

/// Under `backoffLimitPerIndex`, whether the failed indexes fail the Job: more than
/// `maxFailedIndexes`, or some failed and every other index completed.
fn failure_by_index(spec: &JobSpec, tally: &Tally) -> Option<Verdict> {
    let failed = i32::try_from(tally.per_index.as_ref()?.failed.len()).unwrap_or(i32::MAX);
    if spec.max_failed_indexes.is_some_and(|max| failed > max) {
        return Some(Verdict::failure(
            "MaxFailedIndexesExceeded",
            "Job has exceeded the specified maximal number of failed indexes",
        ));
    }
    let completions = spec.completions.unwrap_or(0);
    (failed > 0 && failed.saturating_add(tally.succeeded) >= completions)
        .then(|| Verdict::failure("FailedIndexes", "Job has failed indexes"))
}

/// kube's `pastBackoffLimitOnFailure`: under `restartPolicy: OnFailure` failures are
/// container restarts, and the running and pending pods' restarts (init containers'
/// too) reach `limit` (exceed 0 when the limit is 0).
fn past_limit_in_restarts(spec: &JobSpec, pods: &[Arc<Pod>], limit: i32) -> bool {
    let template = spec.template.spec.as_ref();
    if template.and_then(|s| s.restart_policy.as_deref()) != Some("OnFailure") {
        return false;
    }
    let restarts: i32 = pods
        .iter()
        .filter(|p| matches!(pod_template::phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            let regular = s.container_statuses.iter().flatten();
            regular.chain(s.init_container_statuses.iter().flatten())
        })
        .map(|c| c.restart_count)
        .fold(0, i32::saturating_add);
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= limit
    }
}

/// Whether enough pods succeeded, once none is left running.
fn completed(spec: &JobSpec, tally: &Tally) -> bool {
    let enough = match spec.completions {
        Some(completions) => tally.succeeded >= completions,
        // Without completions any success completes the Job once its pods are done.
        None => tally.succeeded > 0,
    };
    enough && tally.active_count == 0
}

/// How many pods should be running now.
fn wanted_active(spec: &JobSpec, tally: &Tally) -> i32 {
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    match spec.completions {
        Some(completions) => (completions - tally.succeeded).clamp(0, parallelism),
        // Once one succeeded, what still runs may finish; nothing new starts.
        None if tally.succeeded > 0 => tally.active_count,
        None => parallelism,
    }
}

/// Whether the Job's selector matches the pod (kube's Job controller claims the pods of
/// its namespace its selector matches, finished or not).
fn claims(job: &Job, pod: &Pod) -> bool {
    claim::selects(
        job.spec.as_ref().and_then(|s| s.selector.as_ref()),
        pod.metadata.labels.as_ref(),
    )
}

/// Keep of a cached pod what the Job controller reads: metadata, phase, conditions and
/// its containers' names, states and restarts. It caches every pod of the cluster, as
/// kube's does, so the rest (spec, addresses, images, resources) is dropped.
fn trim_for_tracking(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    pod.spec = None;
    let Some(status) = pod.status.take() else {
        return;
    };
    let containers = |statuses: Option<Vec<ContainerStatus>>| {
        statuses.map(|statuses| {
            statuses
                .into_iter()
                .map(|c| ContainerStatus {
                    name: c.name,
                    state: c.state,
                    last_state: c.last_state,
                    restart_count: c.restart_count,
                    ready: c.ready,
                    ..ContainerStatus::default()
                })
                .collect()
        })
    };
    pod.status = Some(PodStatus {
        phase: status.phase,
        conditions: status.conditions,
        container_statuses: containers(status.container_statuses),
        init_container_statuses: containers(status.init_container_statuses),
        ..PodStatus::default()
    });
}

/// The built-in controller's name in `spec.managedBy` (none there means it too).
const JOB_CONTROLLER: &str = "kubernetes.io/job-controller";

/// kube's `managedByExternalController` (the `JobManagedBy` gate is on by default in
/// 1.32): the controller `spec.managedBy` names, when it is not the built-in one, which
/// then leaves the Job, its pods and their finalizers alone.
fn managed_by_other(job: &Job) -> Option<&str> {
    let managed_by = job.spec.as_ref()?.managed_by.as_deref()?;
    (managed_by != JOB_CONTROLLER).then_some(managed_by)
}

fn is_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .is_some_and(|s| has_condition(s, "Complete") || has_condition(s, "Failed"))
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Context<JobData>>) -> Result<Action, Error> {
    if let Some(controller) = managed_by_other(&job) {
        tracing::debug!(job = %job.name_any(), %controller, "managed by another controller");
        return Ok(Action::done());
    }
    let data = ctx.data();
    let uid = job.uid().unwrap_or_default();
    if is_finished(&job) {
        // Pods it still holds are the orphan release's (`tracking`).
        data.forget(&uid);
        return Ok(Action::done());
    }
    let namespace = pod_template::namespace_of(job.as_ref());
    Claim::new(job.as_ref(), ctx.as_ref())
        .with_finalizer(tracking::TRACKING_FINALIZER)
        .run(
            &data.pods.in_namespace(Some(&namespace)),
            job.spec.as_ref().and_then(|s| s.selector.as_ref()),
            |_| true,
        )
        .await?;
    let spec = job.spec.clone().unwrap_or_default();
    let pods: Vec<Arc<Pod>> = data
        .pods
        .owned_by(&uid)
        .into_iter()
        .filter(|p| pod_template::is_controlled_by(&p.metadata, &uid))
        .collect();
    let mut status = job.status.clone().unwrap_or_default();
    let clock = (data.clock)();
    let now = to_time(clock);
    if status.start_time.is_none() && spec.suspend != Some(true) {
        status.start_time = Some(now.clone());
    }
    let mut tally = Tally::of(&spec, &status, pods);
    let left = time_left(&spec, &status, clock);
    let mut verdict = Verdict::recorded(&status)
        .or_else(|| failure(&spec, &tally, left))
        .or_else(|| failure_by_index(&spec, &tally))
        .or_else(|| success_by_policy(&spec, &tally.completed_indexes));
    // Back when the deadline passes, if nothing else brings it back first.
    let mut requeue = left.filter(|_| verdict.is_none());
    if verdict.is_some() {
        // Its pods go, keeping their finalizers: they are counted as they finish.
        let active = std::mem::take(&mut tally.active);
        let deleted =
            delete_pods(&ctx, &job, &active, active.len(), Release::AfterCounting).await?;
        tally.terminating += deleted.total;
        tally.ready -= deleted.ready;
        tally.active_count -= deleted.total;
    } else if job.metadata.deletion_timestamp.is_none() {
        if let Some(delay) = manage(&ctx, &job, &spec, &mut tally).await? {
            requeue = Some(requeue.map_or(delay, |r| r.min(delay)));
        }
        if completed(&spec, &tally) {
            verdict = Some(Verdict::completions_reached());
        } else if let Some((reason, message)) = track_suspension(&mut status, &spec, &now) {
            publish(&ctx, &job, EventType::Normal, reason, message).await;
        }
    }
    let finished =
        track_and_write(&ctx, &job, &spec, status, &tally, verdict.as_ref(), &now).await?;
    if finished {
        data.forget(&uid);
    }
    Ok(requeue.map_or_else(Action::done, Action::requeue_after))
}

/// kube's `manageJob`: delete the pods of a suspended Job, or those beyond what should
/// run; else create the missing ones, unless the failure backoff says wait (how long is
/// returned).
async fn manage(
    ctx: &Context<JobData>,
    job: &Job,
    spec: &JobSpec,
    tally: &mut Tally,
) -> Result<Option<Duration>, Error> {
    let want = if spec.suspend == Some(true) {
        0
    } else {
        wanted_active(spec, tally)
    };
    if tally.active_count > want {
        let excess = usize::try_from(tally.active_count - want).unwrap_or(0);
        let deleted = delete_pods(ctx, job, &tally.active, excess, Release::First).await?;
        tally.active_count -= deleted.total;
        tally.ready -= deleted.ready;
        tally.terminating += deleted.total;
        return Ok(None);
    }
    let blocking = if replaces_failed_pods_only(spec) {
        tally.terminating
    } else {
        0
    };
    let missing = want - blocking - tally.active_count;
    if missing <= 0 {
        return Ok(None);
    }
    if tally.per_index.is_none() {
        let delay = ctx
            .data()
            .replacement_delay(&job.uid().unwrap_or_default(), tally);
        if !delay.is_zero() {
            return Ok(Some(delay));
        }
    }
    let (created, wait) = create_pods(ctx, job, tally, missing).await?;
    tally.active_count += created;
    Ok(wait)
}

/// kube's `trackJobStatusAndRemoveFinalizers`: put the finished pods' uids in
/// `uncountedTerminatedPods` (with the interim condition, if the Job's end is decided) and
/// write that, then remove their finalizers, then move the released uids into the
/// counters; the terminal condition follows once nothing is uncounted or terminating.
/// Writes only what changed; true when the Job finished.
async fn track_and_write(
    ctx: &Context<JobData>,
    job: &Job,
    spec: &JobSpec,
    mut status: JobStatus,
    tally: &Tally,
    verdict: Option<&Verdict>,
    now: &Time,
) -> Result<bool, Error> {
    let tracked_uid = |p: &Arc<Pod>| {
        tracking::has_tracking_finalizer(p)
            .then(|| p.metadata.uid.clone())
            .flatten()
    };
    let mut tracked: BTreeSet<String> = tally.pods.iter().filter_map(tracked_uid).collect();
    let mut uncounted = tracking::Uncounted::of(&status);
    uncounted.settle(&mut status, |uid| tracked.contains(uid));
    let deleting = job.metadata.deletion_timestamp.is_some();
    let (to_release, reached_max) = note_finished(spec, tally, verdict, deleting, &mut uncounted);
    uncounted.store(&mut status);
    if indexed_completions(spec).is_some() {
        let completed = compress_indexes(&tally.completed_indexes);
        status.completed_indexes = (!completed.is_empty()).then_some(completed);
        status.succeeded = (tally.succeeded != 0).then_some(tally.succeeded);
        if let Some(per_index) = &tally.per_index {
            status.failed_indexes = Some(compress_indexes(&per_index.failed));
        }
    }
    if let Some(verdict) = verdict {
        set_verdict_condition(&mut status, verdict.interim(), verdict, now);
    }
    fill_active_counts(&mut status, tally);
    let mut current = job.clone();
    write_status(ctx, &mut current, &status).await?;

    let release_error = release_all(ctx, job, &to_release, &mut tracked).await;
    uncounted.settle(&mut status, |uid| tracked.contains(uid));
    let verdict =
        verdict.filter(|_| !reached_max && uncounted.len() == 0 && tally.terminating == 0);
    if let Some(verdict) = verdict {
        set_verdict_condition(&mut status, verdict.terminal(), verdict, now);
        if verdict.success {
            status.completion_time = Some(now.clone());
        }
    }
    write_status(ctx, &mut current, &status).await?;
    if let Some(e) = release_error {
        return Err(e.into());
    }
    if let Some(verdict) = verdict {
        announce_finish(ctx, job, verdict).await;
    }
    Ok(verdict.is_some())
}

/// kube's pass over the tracked pods: those whose finalizers may go now (finished, or
/// all of them once the Job is deleted or its end decided; a failed pod awaiting its
/// index's replacement stays), with the uids of those not yet counted added to
/// `uncounted` (failures a policy ignores are not). Stops at [`tracking::MAX_UNCOUNTED`]
/// (true then).
fn note_finished(
    spec: &JobSpec,
    tally: &Tally,
    verdict: Option<&Verdict>,
    deleting: bool,
    uncounted: &mut tracking::Uncounted,
) -> (Vec<Arc<Pod>>, bool) {
    let indexed = indexed_completions(spec).is_some();
    let mut to_release = Vec::new();
    let tracked = tally
        .pods
        .iter()
        .filter(|p| tracking::has_tracking_finalizer(p));
    for pod in tracked {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let failed = pod_failed(spec, pod);
        let succeeded = pod_template::succeeded(pod);
        let may_release = deleting
            || verdict.is_some()
            || succeeded
            || (failed && !tally.awaits_replacement(pod));
        if !may_release {
            continue;
        }
        to_release.push(pod.clone());
        if succeeded && !uncounted.failed.contains(&uid) {
            // An Indexed Job counts completed indexes, not uids.
            if !indexed && !uncounted.succeeded.contains(&uid) {
                uncounted.succeeded.push(uid);
            }
        } else if (failed || verdict.is_some_and(|v| !v.success))
            && !uncounted.failed.contains(&uid)
            && has_valid_index(spec, pod)
            && failure_policy::judge(spec, pod).counts()
        {
            uncounted.failed.push(uid);
        }
        if uncounted.len() >= tracking::MAX_UNCOUNTED {
            return (to_release, true);
        }
    }
    (to_release, false)
}

/// Remove the tracking finalizers of `pods`, taking each released one out of `tracked`;
/// the first error, once every pod was tried.
async fn release_all(
    ctx: &Context<JobData>,
    job: &Job,
    pods: &[Arc<Pod>],
    tracked: &mut BTreeSet<String>,
) -> Option<kube::Error> {
    let api = ctx.api::<Pod>(&pod_template::namespace_of(job));
    let mut first_error = None;
    for pod in pods {
        match tracking::release(&api, pod).await {
            Ok(_) => {
                tracked.remove(pod.metadata.uid.as_deref().unwrap_or(""));
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error
}

fn set_verdict_condition(status: &mut JobStatus, type_: &str, verdict: &Verdict, now: &Time) {
    set_condition(status, type_, true, &verdict.reason, &verdict.message, now);
}

/// The Event kube records when a Job finishes.
async fn announce_finish(ctx: &Context<JobData>, job: &Job, verdict: &Verdict) {
    if verdict.success {
        publish(ctx, job, EventType::Normal, "Completed", "Job completed").await;
    } else {
        let (reason, message) = (&verdict.reason, &verdict.message);
        publish(ctx, job, EventType::Warning, reason, message).await;
    }
}

/// kube writes `ready` and `terminating` always, `active` only when not zero.
fn fill_active_counts(status: &mut JobStatus, tally: &Tally) {
    status.active = (tally.active_count != 0).then_some(tally.active_count);
    status.ready = Some(tally.ready.max(0));
    status.terminating = Some(tally.terminating);
}

/// Set condition `type_` to `value`: added when missing, replaced (a new transition time)
/// when its status changes, left alone otherwise. Both times are `now`, as kube writes.
fn set_condition(
    status: &mut JobStatus,
    type_: &str,
    value: bool,
    reason: &str,
    message: &str,
    now: &Time,
) {
    let wanted = if value { "True" } else { "False" };
    let new = JobCondition {
        type_: type_.into(),
        status: wanted.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) if existing.status == wanted => {}
        Some(existing) => *existing = new,
        None => conditions.push(new),
    }
}

/// kube's `Suspended` condition: True while `spec.suspend` (its pods are deleted), False
/// with reason `JobResumed` after; a resumed Job's `startTime` starts again. Returns the
/// event to record, if the Job was just suspended or resumed.
fn track_suspension(
    status: &mut JobStatus,
    spec: &JobSpec,
    now: &Time,
) -> Option<(&'static str, &'static str)> {
    let was_suspended = has_condition(status, "Suspended");
    if spec.suspend == Some(true) {
        if was_suspended {
            return None;
        }
        set_condition(
            status,
            "Suspended",
            true,
            "JobSuspended",
            "Job suspended",
            now,
        );
        return Some(("Suspended", "Job suspended"));
    }
    if !was_suspended {
        return None;
    }
    set_condition(status, "Suspended", false, "JobResumed", "Job resumed", now);
    status.start_time = Some(now.clone());
    Some(("Resumed", "Job resumed"))
}

/// Write `status` if it differs from `job`'s, as a JSON merge patch (explicit nulls for
/// counts that dropped to zero and uid lists that emptied) preconditioned on `job`'s
/// resourceVersion, as kube's `UpdateStatus` is: counts built on a stale read conflict,
/// and the reconcile retries, instead of counting a pod twice. `job` becomes the result.
async fn write_status(
    ctx: &Context<JobData>,
    job: &mut Job,
    status: &JobStatus,
) -> Result<(), Error> {
    if job.status.as_ref() == Some(status) {
        return Ok(());
    }
    let omitted = ["active", "succeeded", "failed", "completedIndexes"];
    let mut body = crate::status_body(status, &omitted)?;
    let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
    body["uncountedTerminatedPods"] =
        json!({"succeeded": uncounted.succeeded, "failed": uncounted.failed});
    let patch = Patch::Merge(json!({
        "metadata": {"resourceVersion": job.metadata.resource_version},
        "status": body,
    }));
    let api = ctx.api::<Job>(&pod_template::namespace_of(job));
    *job = api
        .patch_status(&job.name_any(), &PatchParams::default(), &patch)
        .await?;
    Ok(())
}

/// Create `count` pods: for an Indexed Job, one per lowest index neither completed,
/// failed nor running (nor, when only failed pods are replaced, terminating), each told
/// its index (annotation, label, `JOB_COMPLETION_INDEX`, hostname) and, under
/// `backoffLimitPerIndex`, its index's failure counts, once the index's backoff passed.
/// Each carries the tracking finalizer. Returns how many were created, and how long the
/// indexes still backing off wait when none could start.
async fn create_pods(
    ctx: &Context<JobData>,
    job: &Job,
    tally: &Tally,
    count: i32,
) -> Result<(i32, Option<Duration>), Error> {
    let Some(spec) = job.spec.as_ref() else {
        return Ok((0, None));
    };
    let namespace = pod_template::namespace_of(job);
    let api = ctx.api::<Pod>(&namespace);
    let indexes: Vec<Option<i32>> = match indexed_completions(spec) {
        Some(completions) => {
            let pending = pending_indexes(spec, tally, completions, count);
            match ready_indexes(ctx.data(), tally, pending) {
                Ok(ready) => ready.into_iter().map(Some).collect(),
                Err(wait) => return Ok((0, Some(wait))),
            }
        }
        None => (0..count).map(|_| None).collect(),
    };
    let mut created_count = 0;
    for index in indexes {
        let prefix = match index {
            Some(index) => format!("{}-{index}-", job.name_any()),
            None => format!("{}-", job.name_any()),
        };
        let mut pod = pod_template::pod_from_template(
            &spec.template,
            pod_template::controller_ref(job),
            &namespace,
            PodName::Prefix(prefix),
        );
        if let Some(index) = index {
            label_with_index(&mut pod, &job.name_any(), index);
            if let Some(per_index) = &tally.per_index {
                let replaced = per_index.awaiting.get(&index);
                annotate_failure_counts(&mut pod, spec, replaced.map(AsRef::as_ref));
            }
        }
        let finalizers = pod.metadata.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == tracking::TRACKING_FINALIZER) {
            finalizers.push(tracking::TRACKING_FINALIZER.into());
        }
        let created = match api.create(&PostParams::default(), &pod).await {
            Ok(created) => created,
            Err(error) => {
                let events = &ctx.data().events;
                let creating = |why: &str| format!("Error creating: {why}");
                return Err(crate::failed_create(events, job, creating, error).await);
            }
        };
        created_count += 1;
        let message = format!("Created pod: {}", created.name_any());
        publish(ctx, job, EventType::Normal, "SuccessfulCreate", &message).await;
    }
    Ok((created_count, None))
}

/// kube's `firstPendingIndexes`: the lowest `count` indexes below `completions` that no
/// pod runs, completed or failed for good.
fn pending_indexes(spec: &JobSpec, tally: &Tally, completions: i32, count: i32) -> Vec<i32> {
    let mut taken = tally.active_indexes();
    taken.extend(&tally.completed_indexes);
    if let Some(per_index) = &tally.per_index {
        taken.extend(&per_index.failed);
    }
    if replaces_failed_pods_only(spec) {
        let terminating = tally
            .pods
            .iter()
            .filter(|p| pod_template::is_terminating(p) && !pod_template::is_finished(p));
        taken.extend(terminating.filter_map(|p| completion_index(p)));
    }
    (0..completions)
        .filter(|i| !taken.contains(i))
        .take(usize::try_from(count).unwrap_or(0))
        .collect()
}

/// Of `pending` indexes, those whose backoff under `backoffLimitPerIndex` passed (all of
/// them without it); when none has, how long until the first does.
fn ready_indexes(data: &JobData, tally: &Tally, pending: Vec<i32>) -> Result<Vec<i32>, Duration> {
    let Some(per_index) = &tally.per_index else {
        return Ok(pending);
    };
    let now = (data.clock)();
    let delay = |index: &i32| {
        per_index
            .awaiting
            .get(index)
            .map_or(Duration::ZERO, |replaced| {
                per_index::replacement_delay(replaced, now, &data.config)
            })
    };
    let ready: Vec<i32> = pending
        .iter()
        .copied()
        .filter(|i| delay(i).is_zero())
        .collect();
    match pending.iter().map(delay).min() {
        Some(wait) if ready.is_empty() => Err(wait),
        _ => Ok(ready),
    }
}

/// kube's `addIndexFailureCountAnnotation`: the failures of the index so far, carried
/// over from the pod it replaces (ignored ones apart, when there are any).
fn annotate_failure_counts(pod: &mut Pod, spec: &JobSpec, replaced: Option<&Pod>) {
    let (counted, ignored) = replaced.map_or((0, 0), |r| per_index::replacement_counts(spec, r));
    let annotations = pod
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(per_index::FAILURE_COUNT.into(), counted.to_string());
    if ignored > 0 {
        annotations.insert(per_index::IGNORED_FAILURE_COUNT.into(), ignored.to_string());
    }
}

/// What kube gives an Indexed Job's pod: its index as annotation, label and environment
/// variable, and the hostname `<job>-<index>`.
fn label_with_index(pod: &mut Pod, job: &str, index: i32) {
    let value = index.to_string();
    let metadata = &mut pod.metadata;
    metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(COMPLETION_INDEX.into(), value.clone());
    metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(COMPLETION_INDEX.into(), value);
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    spec.hostname = Some(format!("{job}-{index}"));
    let variable = EnvVar {
        name: "JOB_COMPLETION_INDEX".into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: Some("v1".into()),
                // kube 1.32 (PodIndexLabel GA) reads the index from the label.
                field_path: format!("metadata.labels['{COMPLETION_INDEX}']"),
            }),
            ..EnvVarSource::default()
        }),
    };
    for container in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        let env = container.env.get_or_insert_with(Vec::new);
        if !env.iter().any(|e| e.name == variable.name) {
            env.push(variable.clone());
        }
    }
}

/// When a deleted pod's tracking finalizer goes.
#[derive(Clone, Copy, PartialEq)]
enum Release {
    /// Before the delete: the pod is not the Job's to count (suspended, or one too many).
    First,
    /// When the pod is counted as it finishes (the Job's end is decided).
    AfterCounting,
}

/// The pods a sync deleted: how many, and how many of them were ready.
struct Deleted {
    total: i32,
    ready: i32,
}

/// Delete `count` of `active` pods: those not ready first, then the newest.
async fn delete_pods(
    ctx: &Context<JobData>,
    job: &Job,
    active: &[Arc<Pod>],
    count: usize,
    release: Release,
) -> Result<Deleted, Error> {
    let mut deleted = Deleted { total: 0, ready: 0 };
    let mut candidates: Vec<&Arc<Pod>> = active.iter().collect();
    candidates.sort_by_key(|p| {
        (
            pod_template::is_ready(p),
            std::cmp::Reverse(p.metadata.creation_timestamp.clone()),
        )
    });
    let api = ctx.api::<Pod>(&pod_template::namespace_of(job));
    for pod in candidates.into_iter().take(count) {
        if release == Release::First {
            tracking::release(&api, pod).await?;
        }
        // Deleted by someone else first, it still leaves the active pods.
        let deleted_here = pod_template::delete_exact(&api, pod).await?;
        deleted.total += 1;
        deleted.ready += i32::from(pod_template::is_ready(pod));
        if deleted_here {
            let message = format!("Deleted pod: {}", pod.name_any());
            publish(ctx, job, EventType::Normal, "SuccessfulDelete", &message).await;
        }
    }
    Ok(deleted)
}

/// Record an event about the object this reconcile is for.
async fn publish(ctx: &Context<JobData>, job: &Job, kind: EventType, reason: &str, message: &str) {
    crate::publish(&ctx.data().events, job, kind, reason, message).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished pod of the Job: `phase`, its container exited at second `at`.
    fn finished(phase: &str, at: i64) -> Arc<Pod> {
        let finished_at = chrono::DateTime::from_timestamp(at, 0).map(|t| t.to_rfc3339());
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("p{at}")},
                "status": {"phase": phase, "containerStatuses": [{
                    "name": "work", "image": "busybox", "imageID": "", "ready": false,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "finishedAt": finished_at}},
                }]},
            }))
            .expect("a pod"),
        )
    }

    #[test]
    fn only_another_controller_named_in_managed_by_takes_the_job() {
        let managed = |by: Option<&str>| -> Job {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "j"},
                "spec": {"template": {}, "managedBy": by},
            }))
            .expect("a job")
        };
        assert_eq!(managed_by_other(&managed(None)), None);
        assert_eq!(managed_by_other(&managed(Some(JOB_CONTROLLER))), None);
        let kueue = managed(Some("kueue.x-k8s.io/multikueue"));
        assert_eq!(managed_by_other(&kueue), Some("kueue.x-k8s.io/multikueue"));
    }

    fn tally(failed: i32, succeeded: i32, pods: Vec<Arc<Pod>>) -> Tally {
        Tally {
            failed,
            succeeded,
            pods,
            ..Tally::default()
        }
    }

    #[test]
    fn a_success_resets_the_replacement_back_off() {
        let now = Instant::now();
        let mut record = BackoffRecord::first_seen(&tally(0, 0, Vec::new()), now);
        assert_eq!(record.failures_after_success, 0);
        record.observe(&tally(2, 0, Vec::new()), now);
        assert_eq!(record.failures_after_success, 2);
        record.observe(&tally(2, 1, Vec::new()), now);
        assert_eq!(record.failures_after_success, 0, "a success resets it");
        record.observe(&tally(3, 1, Vec::new()), now);
        assert_eq!(
            record.failures_after_success, 1,
            "then failures count again"
        );
        record.observe(&tally(3, 1, Vec::new()), now);
        assert_eq!(record.failures_after_success, 1, "nothing new: as it was");
    }

    #[test]
    fn of_a_success_and_failures_seen_together_the_last_to_finish_decides() {
        let now = Instant::now();
        let mut record = BackoffRecord::first_seen(&tally(1, 0, Vec::new()), now);
        let success_last = vec![finished("Failed", 10), finished("Succeeded", 20)];
        record.observe(&tally(3, 1, success_last), now);
        assert_eq!(record.failures_after_success, 0);
        let failure_last = vec![finished("Succeeded", 30), finished("Failed", 40)];
        record.observe(&tally(5, 2, failure_last), now);
        assert_eq!(record.failures_after_success, 2);
    }

    #[test]
    fn completed_indexes_read_back_as_written_below_completions() {
        let read = |listed: &str| {
            parse_indexes(Some(listed), 7)
                .into_iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(read("0-2,4,6-7"), [0, 1, 2, 4, 6]);
        assert_eq!(read("0,1,5"), [0, 1, 5]);
        assert_eq!(read(""), Vec::<i32>::new());
        assert_eq!(read("x,3"), [3], "a malformed run is skipped");
        let written: BTreeSet<i32> = [0, 1, 3].into();
        assert_eq!(parse_indexes(Some(&compress_indexes(&written)), 7), written);
    }

    #[test]
    fn a_success_policy_matches_its_first_satisfied_rule() {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "template": {}, "completionMode": "Indexed", "completions": 6,
            "successPolicy": {"rules": [
                {"succeededIndexes": "0-2"},
                {"succeededIndexes": "3-5", "succeededCount": 2},
                {"succeededCount": 4},
            ]},
        }))
        .expect("spec");
        let judged = |done: &[i32]| {
            let completed: BTreeSet<i32> = done.iter().copied().collect();
            success_by_policy(&spec, &completed).map(|v| v.message)
        };
        assert_eq!(judged(&[]), None);
        assert_eq!(judged(&[0, 1]), None);
        assert_eq!(
            judged(&[0, 1, 2]).as_deref(),
            Some("Matched rules at index 0")
        );
        assert_eq!(judged(&[3, 5]).as_deref(), Some("Matched rules at index 1"));
        assert_eq!(
            judged(&[0, 1, 3, 4]).as_deref(),
            Some("Matched rules at index 1")
        );
        assert_eq!(judged(&[0, 1, 3]), None);
        assert_eq!(
            judged(&[0, 1, 2, 3]).as_deref(),
            Some("Matched rules at index 0")
        );
    }

    #[test]
    fn completed_indexes_are_written_as_runs() {
        let indexes = |list: &[i32]| list.iter().copied().collect::<BTreeSet<i32>>();
        assert_eq!(compress_indexes(&indexes(&[])), "");
        assert_eq!(compress_indexes(&indexes(&[3])), "3");
        assert_eq!(compress_indexes(&indexes(&[0, 1, 2, 4, 6, 7])), "0-2,4,6,7");
    }
}
