//! The Job controller: runs a Job's pods until enough succeed (`Complete`) or too many
//! fail (`Failed`, reason `BackoffLimitExceeded`), as kube-controller-manager 1.32 does.
//!
//! Level-triggered: every reconcile counts the Job's pods (active, ready, succeeded,
//! failed, terminating) from the runtime's cache and decides from them and the Job's
//! conditions. Once the outcome is known the Job first gets the interim condition
//! (`SuccessCriteriaMet` or `FailureTarget`) and its remaining pods are deleted; the
//! terminal condition (`Complete` or `Failed`) follows when none is left running, as
//! 1.31+ delays it. A replacement for a failed pod waits 10 s, doubling per failure
//! (capped at 10 min), like kube's pod failure backoff. A suspended Job runs no pods.
//! An Indexed Job runs one pod per index (`completedIndexes` says which are done).

use std::collections::{BTreeMap, BTreeSet};

use futures::FutureExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::PostParams;
use steady_runtime::conditions::to_time;
use steady_runtime::events::{EventType, Recorder};
use steady_runtime::{Action, Context, ObjectCache};
use tokio::time::Instant;

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

/// Start the Job controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let mut controller = crate::controller_for::<Job>(&client, config);
    let data = JobData {
        pods: crate::owns_pods_labelled(&mut controller, &client, CONTROLLER_UID_LABEL),
        events: crate::recorder(&client, MANAGER, &clock),
        failures: Mutex::new(BTreeMap::new()),
        config: JobConfig::default(),
        clock,
    };
    controller.run(reconcile, Arc::new(data), shutdown).boxed()
}

struct JobData {
    pods: ObjectCache<Pod>,
    events: Recorder,
    /// Per Job uid: the failure count last seen, and when it was first seen (the
    /// replacement backoff runs from there, on tokio's clock).
    failures: Mutex<BTreeMap<String, (i32, Instant)>>,
    config: JobConfig,
    /// `startTime`, `completionTime`, the conditions' times and the active deadline.
    clock: Clock,
}

impl JobData {
    /// How long replacements of `job`'s failed pods must still wait.
    fn replacement_delay(&self, uid: &str, failed: i32) -> Duration {
        if failed == 0 {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let seen = failures.entry(uid.to_string()).or_insert((failed, now));
        if seen.0 != failed {
            *seen = (failed, now);
        }
        let doublings = u32::try_from(failed - 1).unwrap_or(0).min(20);
        let backoff = self
            .config
            .failure_backoff
            .saturating_mul(1 << doublings)
            .min(self.config.max_failure_backoff);
        (seen.1 + backoff).saturating_duration_since(now)
    }

    fn forget(&self, uid: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }
}

/// What the Job's pods add up to.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    active: i32,
    ready: i32,
    /// Succeeded pods; for an Indexed Job, completed indexes.
    succeeded: i32,
    failed: i32,
    terminating: i32,
    /// Indexed Jobs: the indexes with a succeeded pod, and those with an active one.
    completed_indexes: BTreeSet<i32>,
    active_indexes: BTreeSet<i32>,
}

impl Counts {
    fn of(spec: &JobSpec, pods: &[Arc<Pod>]) -> Counts {
        let count = |f: &dyn Fn(&Pod) -> bool| {
            i32::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
        };
        let mut counts = Counts {
            active: count(&pod_template::is_active),
            ready: count(&|p| pod_template::is_active(p) && pod_template::is_ready(p)),
            succeeded: count(&pod_template::succeeded),
            failed: count(&pod_template::failed),
            terminating: count(&|p| {
                pod_template::is_terminating(p) && !pod_template::is_finished(p)
            }),
            ..Counts::default()
        };
        if let Some(completions) = indexed_completions(spec) {
            let indexes = |f: &dyn Fn(&Pod) -> bool| -> BTreeSet<i32> {
                pods.iter()
                    .filter(|p| f(p))
                    .filter_map(|p| completion_index(p))
                    .filter(|i| (0..completions).contains(i))
                    .collect()
            };
            counts.completed_indexes = indexes(&pod_template::succeeded);
            counts.active_indexes = indexes(&pod_template::is_active);
            counts.succeeded = i32::try_from(counts.completed_indexes.len()).unwrap_or(i32::MAX);
        }
        counts
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

/// kube's `completedIndexes`: sorted indexes, runs of consecutive ones as `first-last`.
fn compress_indexes(indexes: &BTreeSet<i32>) -> String {
    let mut runs: Vec<(i32, i32)> = Vec::new();
    for &index in indexes {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == index => *last = index,
            _ => runs.push((index, index)),
        }
    }
    runs.iter()
        .map(|&(first, last)| {
            if first == last {
                first.to_string()
            } else {
                format!("{first}-{last}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Where a Job stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    /// Pods still to run.
    Running,
    /// Enough pods succeeded.
    Succeeded,
    /// It will not succeed.
    Failed(Failure),
}

/// Why a Job failed, as kube's condition reason and message say.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Failure {
    /// More pods failed than `backoffLimit` allows.
    BackoffLimitExceeded,
    /// It ran longer than `activeDeadlineSeconds`.
    DeadlineExceeded,
}

impl Failure {
    fn reason(self) -> &'static str {
        match self {
            Failure::BackoffLimitExceeded => "BackoffLimitExceeded",
            Failure::DeadlineExceeded => "DeadlineExceeded",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Failure::BackoffLimitExceeded => "Job has reached the specified backoff limit",
            Failure::DeadlineExceeded => "Job was active longer than specified deadline",
        }
    }
}

impl Outcome {
    /// The interim and terminal condition types, reason and message kube writes.
    fn conditions(self) -> Option<(&'static str, &'static str, &'static str, &'static str)> {
        match self {
            Outcome::Running => None,
            Outcome::Succeeded => Some((
                "SuccessCriteriaMet",
                "Complete",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )),
            Outcome::Failed(failure) => Some((
                "FailureTarget",
                "Failed",
                failure.reason(),
                failure.message(),
            )),
        }
    }
}

fn has_condition(status: &JobStatus, type_: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The failure an interim or terminal condition already records.
fn recorded_failure(status: &JobStatus) -> Option<Failure> {
    let condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| (c.type_ == "FailureTarget" || c.type_ == "Failed") && c.status == "True")?;
    Some(match condition.reason.as_deref() {
        Some("DeadlineExceeded") => Failure::DeadlineExceeded,
        _ => Failure::BackoffLimitExceeded,
    })
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

/// The outcome once decided stays decided (an interim condition is never taken back).
fn outcome(
    spec: &JobSpec,
    status: &JobStatus,
    counts: &Counts,
    time_left: Option<Duration>,
) -> Outcome {
    if let Some(failure) = recorded_failure(status) {
        return Outcome::Failed(failure);
    }
    if has_condition(status, "SuccessCriteriaMet") || has_condition(status, "Complete") {
        return Outcome::Succeeded;
    }
    if counts.failed > spec.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT) {
        return Outcome::Failed(Failure::BackoffLimitExceeded);
    }
    let succeeded = match spec.completions {
        Some(completions) => counts.succeeded >= completions,
        // Without completions any success completes the Job once its pods are done.
        None => counts.succeeded > 0 && counts.active == 0,
    };
    if succeeded {
        Outcome::Succeeded
    } else if time_left.is_some_and(|left| left.is_zero()) {
        Outcome::Failed(Failure::DeadlineExceeded)
    } else {
        Outcome::Running
    }
}

/// How many pods should be running now.
fn wanted_active(spec: &JobSpec, counts: &Counts) -> i32 {
    if spec.suspend == Some(true) {
        return 0;
    }
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    match spec.completions {
        Some(completions) => (completions - counts.succeeded).clamp(0, parallelism),
        None if counts.succeeded > 0 => 0,
        None => parallelism,
    }
}

fn is_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .is_some_and(|s| has_condition(s, "Complete") || has_condition(s, "Failed"))
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Context<JobData>>) -> Result<Action, Error> {
    let data = ctx.data();
    let uid = job.uid().unwrap_or_default();
    if job.metadata.deletion_timestamp.is_some() || is_finished(&job) {
        data.forget(&uid);
        return Ok(Action::done());
    }
    let spec = job.spec.clone().unwrap_or_default();
    let owned = data.pods.owned_by(&uid);
    let counts = Counts::of(&spec, &owned);
    let mut status = job.status.clone().unwrap_or_default();
    let clock = (data.clock)();
    let left = time_left(&spec, &status, clock);
    let outcome = outcome(&spec, &status, &counts, left);
    let now = to_time(clock);
    if outcome == Outcome::Running
        && let Some((reason, message)) = track_suspension(&mut status, &spec, &now)
    {
        publish(&ctx, &job, EventType::Normal, reason, message).await;
    }
    // Back when the deadline passes, if nothing else brings it back first.
    let mut requeue = left.filter(|_| outcome == Outcome::Running);
    match outcome.conditions() {
        None => {
            let want = wanted_active(&spec, &counts);
            if counts.active < want {
                let delay = data.replacement_delay(&uid, counts.failed);
                if delay.is_zero() {
                    create_pods(&ctx, &job, &counts, want - counts.active).await?;
                } else {
                    requeue = Some(requeue.map_or(delay, |r| r.min(delay)));
                }
            } else if counts.active > want {
                let excess = usize::try_from(counts.active - want).unwrap_or(0);
                delete_pods(&ctx, &job, &owned, excess).await?;
            }
        }
        Some((interim, terminal, reason, message)) => {
            set_condition(&mut status, interim, true, reason, message, &now);
            let left = usize::try_from(counts.active).unwrap_or(0);
            delete_pods(&ctx, &job, &owned, left).await?;
            if counts.active == 0 && counts.terminating == 0 && !has_condition(&status, terminal) {
                set_condition(&mut status, terminal, true, reason, message, &now);
                if outcome == Outcome::Succeeded {
                    status.completion_time = Some(now.clone());
                    publish(&ctx, &job, EventType::Normal, "Completed", "Job completed").await;
                } else {
                    publish(&ctx, &job, EventType::Warning, reason, message).await;
                }
            }
        }
    }
    // Count again: the writes above went through the cache.
    let counts = Counts::of(&spec, &data.pods.owned_by(&uid));
    fill_counts(&mut status, &counts);
    if indexed_completions(&spec).is_some() {
        let completed = compress_indexes(&counts.completed_indexes);
        status.completed_indexes = (!completed.is_empty()).then_some(completed);
    }
    if status.start_time.is_none() && spec.suspend != Some(true) {
        status.start_time = Some(now);
    }
    write_status(&ctx, &job, status).await?;
    Ok(requeue.map_or_else(Action::done, Action::requeue_after))
}

fn fill_counts(status: &mut JobStatus, counts: &Counts) {
    // kube omits zero active/succeeded/failed (omitempty) but always writes ready and
    // terminating.
    let nonzero = |n: i32| (n != 0).then_some(n);
    status.active = nonzero(counts.active);
    status.succeeded = nonzero(counts.succeeded);
    status.failed = nonzero(counts.failed);
    status.ready = Some(counts.ready);
    status.terminating = Some(counts.terminating);
    status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());
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

/// Write `status` if it differs from the Job's (a JSON merge patch, with explicit nulls
/// for counts that dropped to zero).
async fn write_status(ctx: &Context<JobData>, job: &Job, status: JobStatus) -> Result<(), Error> {
    let api = ctx.api::<Job>(&pod_template::namespace_of(job));
    let omitted = ["active", "succeeded", "failed", "completedIndexes"];
    crate::write_status(
        &api,
        &job.name_any(),
        job.status.as_ref(),
        &status,
        &omitted,
    )
    .await?;
    Ok(())
}

/// Create `count` pods: for an Indexed Job, one per lowest index neither completed nor
/// running, each told its index (annotation, label, `JOB_COMPLETION_INDEX`, hostname).
async fn create_pods(
    ctx: &Context<JobData>,
    job: &Job,
    counts: &Counts,
    count: i32,
) -> Result<(), Error> {
    let Some(spec) = job.spec.as_ref() else {
        return Ok(());
    };
    let namespace = pod_template::namespace_of(job);
    let api = ctx.api::<Pod>(&namespace);
    let indexes: Vec<Option<i32>> = match indexed_completions(spec) {
        Some(completions) => (0..completions)
            .filter(|i| !counts.completed_indexes.contains(i) && !counts.active_indexes.contains(i))
            .take(usize::try_from(count).unwrap_or(0))
            .map(Some)
            .collect(),
        None => (0..count).map(|_| None).collect(),
    };
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
        }
        let created = match api.create(&PostParams::default(), &pod).await {
            Ok(created) => created,
            Err(error) => {
                let events = &ctx.data().events;
                let creating = |why: &str| format!("Error creating: {why}");
                return Err(crate::failed_create(events, job, creating, error).await);
            }
        };
        let message = format!("Created pod: {}", created.name_any());
        publish(ctx, job, EventType::Normal, "SuccessfulCreate", &message).await;
    }
    Ok(())
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
                field_path: format!("metadata.annotations['{COMPLETION_INDEX}']"),
            }),
            ..EnvVarSource::default()
        }),
    };
    for container in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        container
            .env
            .get_or_insert_with(Vec::new)
            .push(variable.clone());
    }
}

/// Delete `count` of the Job's active pods: those not ready first, then the newest.
async fn delete_pods(
    ctx: &Context<JobData>,
    job: &Job,
    owned: &[Arc<Pod>],
    count: usize,
) -> Result<(), Error> {
    if count == 0 {
        return Ok(());
    }
    let mut active: Vec<&Arc<Pod>> = owned
        .iter()
        .filter(|p| pod_template::is_active(p))
        .collect();
    active.sort_by_key(|p| {
        (
            pod_template::is_ready(p),
            std::cmp::Reverse(p.metadata.creation_timestamp.clone()),
        )
    });
    let api = ctx.api::<Pod>(&pod_template::namespace_of(job));
    for pod in active.into_iter().take(count) {
        if !pod_template::delete_exact(&api, pod).await? {
            // Someone else deleted it first.
            continue;
        }
        let message = format!("Deleted pod: {}", pod.name_any());
        publish(ctx, job, EventType::Normal, "SuccessfulDelete", &message).await;
    }
    Ok(())
}

/// Record an event about the object this reconcile is for.
async fn publish(ctx: &Context<JobData>, job: &Job, kind: EventType, reason: &str, message: &str) {
    crate::publish(&ctx.data().events, job, kind, reason, message).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_are_written_as_runs() {
        let indexes = |list: &[i32]| list.iter().copied().collect::<BTreeSet<i32>>();
        assert_eq!(compress_indexes(&indexes(&[])), "");
        assert_eq!(compress_indexes(&indexes(&[3])), "3");
        assert_eq!(compress_indexes(&indexes(&[0, 1, 2, 4, 6, 7])), "0-2,4,6-7");
    }
}
