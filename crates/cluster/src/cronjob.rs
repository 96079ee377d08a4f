//! The CronJob controller: creates a CronJob's Jobs on its schedule, as
//! kube-controller-manager 1.32's (v2) controller does.
//!
//! Each reconcile first reads the CronJob's Jobs from the runtime's cache: finished ones
//! leave `status.active` (`SawCompletedJob`), vanished ones too (`MissingJob`), the newest
//! completion becomes `lastSuccessfulTime`, and finished Jobs beyond the history limits
//! are deleted oldest first. Then, unless the CronJob is suspended or being deleted, it
//! finds the most recent unmet schedule time since `lastScheduleTime` (or creation),
//! honours `startingDeadlineSeconds` and `concurrencyPolicy`, creates the Job
//! `<cronjob>-<scheduled minutes since the epoch>` from `jobTemplate`, and requeues
//! itself for the next schedule time.
//!
//! Time is the cluster's [`Clock`] (it advances with tokio's), so a test on a paused
//! clock lets simulated minutes pass. A schedule is evaluated in the CronJob's
//! `timeZone` (an IANA name, or a `CRON_TZ=`/`TZ=` prefix an older object may still
//! carry), else in UTC, the zone kube-controller-manager's container runs in.
//! Must not know how Jobs run: the Job controller does that.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use futures::FutureExt;
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use steady_runtime::conditions::to_time;
use steady_runtime::events::{EventType, Recorder};
use steady_runtime::{Action, Context, ObjectCache};

use crate::pod_template::{self, Identity};
use crate::{Clock, Error, Running, Setup, Shutdown};

/// The annotation on a CronJob's Job holding the time it was scheduled for (RFC 3339).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// Who writes the CronJob's status and events.
const MANAGER: &str = "cronjob-controller";
/// More missed schedule times than this earn a `TooManyMissedTimes` warning.
const MAX_MISSED_TIMES: usize = 100;
/// Requeue this long after the next schedule time, so the reconcile sees it as passed.
const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);

/// Start the CronJob controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let mut controller = crate::controller_for::<CronJob>(&client, config);
    let data = CronJobData {
        jobs: controller.owns(Api::all(client.clone())),
        events: crate::recorder(&client, MANAGER, &clock),
        clock,
    };
    controller.run(reconcile, Arc::new(data), shutdown).boxed()
}

struct CronJobData {
    jobs: ObjectCache<Job>,
    events: Recorder,
    clock: Clock,
}

/// Why a CronJob cannot be scheduled: the event kube records.
struct Unschedulable {
    reason: &'static str,
    message: String,
}

/// A CronJob's schedule in the time zone it is evaluated in.
struct Schedule {
    cron: Cron,
    zone: Tz,
}

impl Schedule {
    /// The first schedule time after `time`.
    fn next_after(&self, time: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = time.with_timezone(&self.zone);
        let next = self.cron.find_next_occurrence(&local, false).ok()?;
        Some(next.with_timezone(&Utc))
    }

    /// The last schedule time at or before `time`.
    fn latest_until(&self, time: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = time.with_timezone(&self.zone);
        let latest = self.cron.find_previous_occurrence(&local, true).ok()?;
        Some(latest.with_timezone(&Utc))
    }

    /// How many schedule times fall in `(after, until]`, counted up to `cap`.
    fn count_between(&self, after: DateTime<Utc>, until: DateTime<Utc>, cap: usize) -> usize {
        self.cron
            .iter_after(after.with_timezone(&self.zone))
            .take_while(|time| time.with_timezone(&Utc) <= until)
            .take(cap)
            .count()
    }

    /// `time` in RFC 3339 as kube writes a schedule time: in the schedule's zone.
    fn local(&self, time: DateTime<Utc>) -> String {
        time.with_timezone(&self.zone)
            .to_rfc3339_opts(SecondsFormat::Secs, true)
    }
}

/// The zone named `name`, as Go's `time.LoadLocation` finds it (case-sensitive IANA
/// names; `Local` is the controller's own zone, UTC).
fn load_zone(name: &str) -> Result<Tz, String> {
    if name == "Local" {
        return Ok(Tz::UTC);
    }
    name.parse::<Tz>()
        .map_err(|_| format!("unknown time zone {name}"))
}

/// The CronJob's schedule, parsed as kube parses it (five fields, the `@hourly`-style
/// macros, an optional `CRON_TZ=`/`TZ=` prefix), in its time zone.
fn parse_schedule(spec: &CronJobSpec) -> Result<Schedule, Unschedulable> {
    let schedule = spec.schedule.trim();
    let unparseable = |why: &str| Unschedulable {
        reason: "UnparseableSchedule",
        message: format!("unparseable schedule: {schedule:?} : {why}"),
    };
    let mut zone = Tz::UTC;
    if let Some(name) = spec.time_zone.as_deref() {
        zone = load_zone(name).map_err(|why| Unschedulable {
            reason: "UnknownTimeZone",
            message: format!("invalid timeZone: {name:?}: {why}"),
        })?;
    }
    let pattern = match schedule.split_once(char::is_whitespace) {
        Some((prefix, rest)) if prefix.starts_with("CRON_TZ=") || prefix.starts_with("TZ=") => {
            let name = prefix.split_once('=').map_or("", |(_, name)| name);
            zone = load_zone(name)
                .map_err(|why| unparseable(&format!("provided bad location {name}: {why}")))?;
            rest.trim()
        }
        _ => schedule,
    };
    let cron = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(pattern)
        .map_err(|e| unparseable(&e.to_string()))?;
    Ok(Schedule { cron, zone })
}

/// The latest schedule time in `(earliest, now]` and how many there are (counted up to one
/// past [`MAX_MISSED_TIMES`]); None when there is none.
fn most_recent_time(
    schedule: &Schedule,
    earliest: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<(DateTime<Utc>, usize)> {
    let first = schedule.next_after(earliest)?;
    if first > now {
        return None;
    }
    let latest = schedule.latest_until(now)?;
    let missed = schedule.count_between(earliest, now, MAX_MISSED_TIMES + 1);
    Some((latest, missed))
}

/// When to look again: just after the next schedule time (never, if there is none).
fn requeue_for_next(schedule: &Schedule, now: DateTime<Utc>) -> Action {
    match schedule.next_after(now) {
        Some(next) => {
            let wait = (next - now).to_std().unwrap_or_default();
            Action::requeue_after(wait + NEXT_SCHEDULE_DELTA)
        }
        None => Action::done(),
    }
}

fn to_utc(time: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(time.0.as_millisecond()).unwrap_or_default()
}

/// Since when schedule times count: the last one scheduled (or the CronJob's creation),
/// but no earlier than `startingDeadlineSeconds` ago.
fn earliest_time(
    cronjob: &CronJob,
    spec: &CronJobSpec,
    status: &CronJobStatus,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let since = status
        .last_schedule_time
        .as_ref()
        .or(cronjob.metadata.creation_timestamp.as_ref())
        .map(to_utc)
        .unwrap_or(now);
    match spec.starting_deadline_seconds {
        Some(deadline) => since.max(now - chrono::Duration::seconds(deadline)),
        None => since,
    }
}

fn finished_condition(job: &Job) -> Option<&str> {
    job.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

fn succeeded(job: &Job) -> bool {
    finished_condition(job) == Some("Complete")
}

async fn reconcile(cronjob: Arc<CronJob>, ctx: Arc<Context<CronJobData>>) -> Result<Action, Error> {
    let data = ctx.data();
    let identity = Identity::of(cronjob.as_ref())?;
    let jobs: Vec<Arc<Job>> = data
        .jobs
        .owned_by(&identity.uid)
        .into_iter()
        .filter(|job| pod_template::is_controlled_by(&job.metadata, &identity.uid))
        .collect();
    let spec = cronjob.spec.clone().unwrap_or_default();
    let mut status = cronjob.status.clone().unwrap_or_default();
    track_jobs(&ctx, &cronjob, &jobs, &mut status).await;
    let action = if cronjob.metadata.deletion_timestamp.is_some() || spec.suspend == Some(true) {
        Action::done()
    } else {
        schedule(&ctx, &cronjob, &identity, &spec, &mut status).await?
    };
    trim_history(&ctx, &cronjob, &spec, &jobs, &mut status).await?;
    let api = ctx.api::<CronJob>(&identity.namespace);
    crate::write_status(
        &api,
        &identity.name,
        cronjob.status.as_ref(),
        &status,
        &["active"],
    )
    .await?;
    Ok(action)
}

/// Bring `status` up to date with the CronJob's Jobs: finished and vanished Jobs leave
/// `active`, the newest completion becomes `lastSuccessfulTime`.
async fn track_jobs(
    ctx: &Context<CronJobData>,
    cronjob: &CronJob,
    jobs: &[Arc<Job>],
    status: &mut CronJobStatus,
) {
    let mut active = status.active.take().unwrap_or_default();
    let mut still_active = Vec::with_capacity(active.len());
    for reference in active.drain(..) {
        let job = jobs
            .iter()
            .find(|job| job.metadata.uid.is_some() && job.metadata.uid == reference.uid);
        let name = reference.name.clone().unwrap_or_default();
        match job.map(|job| finished_condition(job)) {
            None => {
                let message = format!("Active job went missing: {name}");
                publish(ctx, cronjob, EventType::Normal, "MissingJob", &message).await;
            }
            Some(Some(condition)) => {
                let message = format!("Saw completed job: {name}, condition: {condition}");
                publish(ctx, cronjob, EventType::Normal, "SawCompletedJob", &message).await;
            }
            Some(None) => still_active.push(reference),
        }
    }
    for job in jobs {
        let listed = still_active.iter().any(|r| r.uid == job.metadata.uid);
        if !listed && finished_condition(job).is_none() {
            let message = format!(
                "Saw a job that the controller did not create or forgot: {}",
                job.name_any()
            );
            publish(ctx, cronjob, EventType::Warning, "UnexpectedJob", &message).await;
        }
    }
    status.active = (!still_active.is_empty()).then_some(still_active);
    let newest_success = jobs
        .iter()
        .filter(|job| succeeded(job))
        .filter_map(|job| job.status.as_ref()?.completion_time.clone())
        .max_by_key(|time| time.0);
    if let Some(completed) = newest_success
        && status
            .last_successful_time
            .as_ref()
            .is_none_or(|last| last.0 < completed.0)
    {
        status.last_successful_time = Some(completed);
    }
}

/// Start the Job due now, if one is: returns when to look again.
async fn schedule(
    ctx: &Context<CronJobData>,
    cronjob: &CronJob,
    identity: &Identity,
    spec: &CronJobSpec,
    status: &mut CronJobStatus,
) -> Result<Action, Error> {
    let schedule = match parse_schedule(spec) {
        Ok(schedule) => schedule,
        Err(why) => {
            publish(ctx, cronjob, EventType::Warning, why.reason, &why.message).await;
            return Ok(Action::done());
        }
    };
    let now = (ctx.data().clock)();
    let next = requeue_for_next(&schedule, now);
    let earliest = earliest_time(cronjob, spec, status, now);
    let Some((due, missed)) = most_recent_time(&schedule, earliest, now) else {
        return Ok(next);
    };
    if missed > MAX_MISSED_TIMES {
        let message = format!(
            "too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
        );
        publish(
            ctx,
            cronjob,
            EventType::Warning,
            "TooManyMissedTimes",
            &message,
        )
        .await;
    }
    if let Some(deadline) = spec.starting_deadline_seconds
        && due + chrono::Duration::seconds(deadline) < now
    {
        let message = format!(
            "Missed scheduled time to start a job: {}",
            due.format("%a, %d %b %Y %H:%M:%S %z")
        );
        publish(ctx, cronjob, EventType::Warning, "MissSchedule", &message).await;
        return Ok(next);
    }
    let name = job_name(&identity.name, due);
    let active = status.active.get_or_insert_with(Vec::new);
    let already = active.iter().any(|r| r.name.as_deref() == Some(&name));
    if already || status.last_schedule_time.as_ref().map(to_utc) == Some(due) {
        return Ok(next);
    }
    match spec.concurrency_policy.as_deref() {
        Some("Forbid") if !active.is_empty() => {
            let message = "Not starting job because prior execution is running and concurrency policy is Forbid";
            publish(ctx, cronjob, EventType::Normal, "JobAlreadyActive", message).await;
            return Ok(next);
        }
        Some("Replace") => {
            for reference in std::mem::take(active) {
                delete_job(ctx, cronjob, &identity.namespace, &reference).await?;
            }
        }
        _ => {}
    }
    let scheduled_at = schedule.local(due);
    let job = job_from_template(cronjob, spec, &identity.namespace, &name, scheduled_at);
    let api = ctx.api::<Job>(&identity.namespace);
    let created = match api.create(&PostParams::default(), &job).await {
        Ok(created) => created,
        Err(kube::Error::Api(status)) if status.code == 409 => {
            tracing::debug!(job = %name, "Job already exists");
            return Ok(next);
        }
        Err(e) => {
            let message = format!("Error creating job: {e}");
            publish(ctx, cronjob, EventType::Warning, "FailedCreate", &message).await;
            return Err(e.into());
        }
    };
    let message = format!("Created job {name}");
    publish(
        ctx,
        cronjob,
        EventType::Normal,
        "SuccessfulCreate",
        &message,
    )
    .await;
    if let Some(active) = status.active.as_mut() {
        active.push(reference_to(&created));
    }
    status.last_schedule_time = Some(to_time(due));
    Ok(next)
}

/// kube's name for the Job scheduled at `time`: minutes since the epoch, so one schedule
/// time makes at most one Job.
fn job_name(cronjob: &str, time: DateTime<Utc>) -> String {
    format!("{cronjob}-{}", time.timestamp().div_euclid(60))
}

/// The Job `jobTemplate` describes, scheduled for `scheduled_at` (RFC 3339, in the
/// schedule's zone) and controlled by `cronjob`.
fn job_from_template(
    cronjob: &CronJob,
    spec: &CronJobSpec,
    namespace: &str,
    name: &str,
    scheduled_at: String,
) -> Job {
    let template = &spec.job_template;
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut annotations = template_meta.annotations.unwrap_or_default();
    annotations.insert(SCHEDULED_TIMESTAMP.into(), scheduled_at);
    Job {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: template_meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![pod_template::controller_ref(cronjob)]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

fn reference_to(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// Delete the finished Jobs beyond `successfulJobsHistoryLimit` and
/// `failedJobsHistoryLimit`, those that started first first.
async fn trim_history(
    ctx: &Context<CronJobData>,
    cronjob: &CronJob,
    spec: &CronJobSpec,
    jobs: &[Arc<Job>],
    status: &mut CronJobStatus,
) -> Result<(), Error> {
    let namespace = pod_template::namespace_of(cronjob);
    for (condition, limit) in [
        ("Complete", spec.successful_jobs_history_limit),
        ("Failed", spec.failed_jobs_history_limit),
    ] {
        let Some(limit) = limit else {
            continue;
        };
        let mut finished: Vec<&Arc<Job>> = jobs
            .iter()
            .filter(|job| job.metadata.deletion_timestamp.is_none())
            .filter(|job| finished_condition(job) == Some(condition))
            .collect();
        // Jobs that never started sort last, as kube's byJobStartTime does.
        finished.sort_by_key(|job| {
            let started = job.status.as_ref().and_then(|s| s.start_time.as_ref());
            (started.is_none(), started.map(|t| t.0), job.name_any())
        });
        let excess = finished
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        for job in finished.into_iter().take(excess) {
            delete_job(ctx, cronjob, &namespace, &reference_to(job)).await?;
            if let Some(active) = status.active.as_mut() {
                active.retain(|r| r.uid != job.metadata.uid);
            }
        }
    }
    if status.active.as_ref().is_some_and(Vec::is_empty) {
        status.active = None;
    }
    Ok(())
}

/// Delete the Job `reference` names (its pods in the background, as kube does).
async fn delete_job(
    ctx: &Context<CronJobData>,
    cronjob: &CronJob,
    namespace: &str,
    reference: &ObjectReference,
) -> Result<(), Error> {
    let name = reference.name.clone().unwrap_or_default();
    let params = DeleteParams {
        preconditions: reference.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match ctx.api::<Job>(namespace).delete(&name, &params).await {
        Ok(_) => {
            let message = format!("Deleted job {name}");
            publish(
                ctx,
                cronjob,
                EventType::Normal,
                "SuccessfulDelete",
                &message,
            )
            .await;
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Record an event about the CronJob this reconcile is for.
async fn publish(
    ctx: &Context<CronJobData>,
    cronjob: &CronJob,
    kind: EventType,
    reason: &str,
    message: &str,
) {
    crate::publish(&ctx.data().events, cronjob, kind, reason, message).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("a valid time")
            .with_timezone(&Utc)
    }

    fn spec(schedule: &str) -> CronJobSpec {
        CronJobSpec {
            schedule: schedule.into(),
            ..CronJobSpec::default()
        }
    }

    fn parsed(schedule: &str) -> Schedule {
        parse_schedule(&spec(schedule)).unwrap_or_else(|e| panic!("{}", e.message))
    }

    #[test]
    fn schedules_parse_as_kube_parses_them() {
        let now = at("2026-12-03T10:07:30Z");
        let next = |schedule: &str| parsed(schedule).next_after(now);
        assert_eq!(next("*/1 * * * *"), Some(at("2026-12-03T10:08:00Z")));
        assert_eq!(next("@hourly"), Some(at("2026-12-03T11:00:00Z")));
        assert_eq!(next("@daily"), Some(at("2026-12-04T00:00:00Z")));
        assert_eq!(next("0 9 * * MON-FRI"), Some(at("2026-12-04T09:00:00Z")));
        assert_eq!(
            next("CRON_TZ=UTC 30 10 * * *"),
            Some(at("2026-12-03T10:30:00Z"))
        );
        for bad in ["* * * *", "0 * * * * *", "61 * * * *", "nonsense"] {
            let why = parse_schedule(&spec(bad)).err().map(|e| e.reason);
            assert_eq!(why, Some("UnparseableSchedule"), "{bad}");
        }
        let zoned = CronJobSpec {
            time_zone: Some("Mars/Olympus_Mons".into()),
            ..spec("0 * * * *")
        };
        let why = parse_schedule(&zoned).err().map(|e| (e.reason, e.message));
        let message =
            "invalid timeZone: \"Mars/Olympus_Mons\": unknown time zone Mars/Olympus_Mons";
        assert_eq!(why, Some(("UnknownTimeZone", message.to_string())));
        let prefixed = parse_schedule(&spec("TZ=Nowhere 0 * * * *"))
            .err()
            .map(|e| e.message);
        let message = "unparseable schedule: \"TZ=Nowhere 0 * * * *\" : provided bad location \
                       Nowhere: unknown time zone Nowhere";
        assert_eq!(prefixed.as_deref(), Some(message));
    }

    #[test]
    fn a_schedule_runs_in_its_time_zone_across_a_daylight_saving_change() {
        let berlin = CronJobSpec {
            time_zone: Some("Europe/Berlin".into()),
            ..spec("0 9 * * *")
        };
        let schedule = parse_schedule(&berlin).unwrap_or_else(|e| panic!("{}", e.message));
        // 09:00 in Berlin is 08:00 UTC in winter (CET) and 07:00 UTC in summer (CEST).
        let winter = schedule.next_after(at("2026-12-03T08:30:00Z"));
        assert_eq!(winter, Some(at("2026-12-04T08:00:00Z")));
        let summer = schedule.next_after(at("2026-07-01T06:00:00Z"));
        assert_eq!(summer, Some(at("2026-07-01T07:00:00Z")));
        assert_eq!(
            schedule.local(at("2026-12-04T08:00:00Z")),
            "2026-12-04T09:00:00+01:00"
        );
        assert_eq!(
            parsed("@hourly").local(at("2026-12-04T08:00:00Z")),
            "2026-12-04T08:00:00Z"
        );
    }

    #[test]
    fn the_most_recent_unmet_time_counts_the_missed_ones() {
        let every_minute = parsed("* * * * *");
        let now = at("2026-12-03T10:07:30Z");
        assert_eq!(
            most_recent_time(&every_minute, at("2026-12-03T10:07:00Z"), now),
            None
        );
        assert_eq!(
            most_recent_time(&every_minute, at("2026-12-03T10:04:10Z"), now),
            Some((at("2026-12-03T10:07:00Z"), 3))
        );
        let long_ago = at("2026-12-01T00:00:00Z");
        let (due, missed) = most_recent_time(&every_minute, long_ago, now).expect("due");
        assert_eq!(due, at("2026-12-03T10:07:00Z"));
        assert_eq!(missed, MAX_MISSED_TIMES + 1);
    }

    #[test]
    fn schedule_times_count_from_the_last_one_or_the_starting_deadline() {
        let now = at("2026-12-03T10:07:30Z");
        let created = CronJob {
            metadata: ObjectMeta {
                creation_timestamp: Some(to_time(at("2026-12-03T09:00:00Z"))),
                ..ObjectMeta::default()
            },
            ..CronJob::default()
        };
        let scheduled = CronJobStatus {
            last_schedule_time: Some(to_time(at("2026-12-03T10:05:00Z"))),
            ..CronJobStatus::default()
        };
        let no_deadline = spec("* * * * *");
        let since_creation = earliest_time(&created, &no_deadline, &CronJobStatus::default(), now);
        assert_eq!(since_creation, at("2026-12-03T09:00:00Z"));
        let since_last = earliest_time(&created, &no_deadline, &scheduled, now);
        assert_eq!(since_last, at("2026-12-03T10:05:00Z"));
        let deadline = CronJobSpec {
            starting_deadline_seconds: Some(60),
            ..no_deadline
        };
        let bounded = earliest_time(&created, &deadline, &scheduled, now);
        assert_eq!(bounded, at("2026-12-03T10:06:30Z"));
    }

    #[test]
    fn a_job_is_named_by_its_minute() {
        assert_eq!(
            job_name("backup", at("2026-12-03T10:07:00Z")),
            "backup-29938207"
        );
    }
}
