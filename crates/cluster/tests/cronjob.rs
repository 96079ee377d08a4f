//! The CronJob controller against steady's API server on tokio's paused clock: one Job per
//! simulated minute, named and annotated as kube names them, concurrencyPolicy, suspend
//! and the history limits. No Job controller runs: a test finishes a Job by writing the
//! status the Job controller would.

mod common;

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use common::*;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use steady_cluster::cronjob::SCHEDULED_TIMESTAMP;
use steady_test_support::create_json;

async fn cronjob_cluster() -> Cluster {
    controller_cluster(steady_cluster::cronjob::start, "cronjob").await
}

fn every_minute(name: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut spec = json!({
        "schedule": "*/1 * * * *",
        "jobTemplate": {
            "metadata": {"labels": {"app": name}},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "work", "image": "busybox"}],
            }}},
        },
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name}, "spec": spec})
}

/// The CronJob's Jobs, oldest schedule first (the names end in the scheduled minute).
async fn jobs_of(cluster: &Cluster, name: &str) -> Vec<Job> {
    let mut jobs = cluster
        .api::<Job>()
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .expect("list jobs")
        .items;
    jobs.sort_by_key(scheduled_minute);
    jobs
}

fn scheduled_minute(job: &Job) -> i64 {
    let name = job.name_any();
    let minute = name.rsplit('-').next().unwrap_or_default();
    minute
        .parse()
        .unwrap_or_else(|_| panic!("{name} ends in its minute"))
}

/// Check `check` once a simulated second (schedules are in minutes, and a finer poll
/// only costs real time) until it returns something.
async fn every_second<T, Fut>(what: &str, mut check: impl FnMut() -> Fut) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Wait until the CronJob has at least `count` Jobs; returns them.
async fn wait_for_jobs(cluster: &Cluster, name: &str, count: usize) -> Vec<Job> {
    every_second(&format!("{count} jobs of {name}"), || async {
        let jobs = jobs_of(cluster, name).await;
        (jobs.len() >= count).then_some(jobs)
    })
    .await
}

/// A cluster running the CronJob `name` every minute with `concurrencyPolicy`, once its
/// first Job exists; returns that Job.
async fn first_job_with_policy(name: &str, policy: &str) -> (Cluster, Job) {
    let cluster = cronjob_cluster().await;
    let spec = json!({ "concurrencyPolicy": policy });
    create_json::<CronJob>(&cluster.api(), every_minute(name, spec)).await;
    let first = wait_for_jobs(&cluster, name, 1).await.remove(0);
    (cluster, first)
}

/// Write the status the Job controller writes when `job` ends with `condition`.
async fn finish(cluster: &Cluster, job: &Job, condition: &str) {
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut status = json!({
        "startTime": scheduled_at(job),
        "conditions": [{"type": condition, "status": "True", "lastTransitionTime": now}],
    });
    if condition == "Complete" {
        status["completionTime"] = json!(now);
        status["succeeded"] = json!(1);
    } else {
        status["failed"] = json!(1);
    }
    cluster
        .api::<Job>()
        .patch_status(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .expect("finish the job");
}

fn scheduled_at(job: &Job) -> String {
    job.annotations()
        .get(SCHEDULED_TIMESTAMP)
        .cloned()
        .unwrap_or_else(|| panic!("{} has no scheduled timestamp", job.name_any()))
}

fn active_names(cronjob: &CronJob) -> Vec<String> {
    let active = cronjob.status.as_ref().and_then(|s| s.active.as_ref());
    active
        .into_iter()
        .flatten()
        .filter_map(|r| r.name.clone())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn every_minute_makes_one_job_per_simulated_minute() {
    let cluster = cronjob_cluster().await;
    let started = tokio::time::Instant::now();
    let cronjob: CronJob = create_json(&cluster.api(), every_minute("tick", json!({}))).await;
    let jobs = wait_for_jobs(&cluster, "tick", 3).await;
    // The third minute boundary after creation is 120 to 180 s away; the poll adds up
    // to a second.
    let elapsed = started.elapsed();
    assert!(
        (Duration::from_secs(120)..=Duration::from_secs(182)).contains(&elapsed),
        "three jobs after {elapsed:?}"
    );
    assert_eq!(jobs.len(), 3, "one job per minute");
    let minutes: Vec<i64> = jobs.iter().map(scheduled_minute).collect();
    assert_eq!(minutes, [minutes[0], minutes[0] + 1, minutes[0] + 2]);
    for job in &jobs {
        let scheduled = DateTime::<Utc>::from_timestamp(scheduled_minute(job) * 60, 0)
            .expect("a valid time")
            .to_rfc3339_opts(SecondsFormat::Secs, true);
        assert_eq!(scheduled_at(job), scheduled);
        let owner = job.owner_references().first().expect("an owner");
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("CronJob", Some(true))
        );
        assert_eq!(Some(&owner.uid), cronjob.metadata.uid.as_ref());
    }
    let names: Vec<String> = jobs.iter().map(ResourceExt::name_any).collect();
    let latest = scheduled_at(&jobs[2]);
    let settled = cluster
        .wait_for::<CronJob>("tick", "three active jobs", |c| active_names(c) == names)
        .await;
    let last_schedule = settled.status.and_then(|s| s.last_schedule_time);
    let last_schedule = last_schedule.map(|t| t.0.to_string());
    assert_eq!(last_schedule.as_deref(), Some(latest.as_str()));
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn forbid_skips_while_a_job_is_active() {
    let (cluster, first) = first_job_with_policy("lone", "Forbid").await;
    tokio::time::sleep(Duration::from_secs(150)).await;
    assert_eq!(jobs_of(&cluster, "lone").await.len(), 1, "Forbid skipped");
    finish(&cluster, &first, "Complete").await;
    let jobs = wait_for_jobs(&cluster, "lone", 2).await;
    let second = jobs[1].name_any();
    let settled = cluster
        .wait_for::<CronJob>("lone", "the second job active", |c| {
            active_names(c) == [second.clone()]
                && c.status
                    .as_ref()
                    .and_then(|s| s.last_successful_time.as_ref())
                    .is_some()
        })
        .await;
    assert_eq!(active_names(&settled), [second]);
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn replace_deletes_the_running_job() {
    let (cluster, first) = first_job_with_policy("swap", "Replace").await;
    let replacement = every_second("the first job replaced", || async {
        let jobs = jobs_of(&cluster, "swap").await;
        let replaced = jobs.iter().all(|j| j.uid() != first.uid());
        (replaced && jobs.len() == 1).then(|| jobs[0].name_any())
    })
    .await;
    assert!(scheduled_minute(&first) < scheduled_minute(&jobs_of(&cluster, "swap").await[0]));
    cluster
        .wait_for::<CronJob>("swap", "the replacement active", |c| {
            active_names(c) == [replacement.clone()]
        })
        .await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_suspended_cronjob_starts_nothing_until_resumed() {
    let cluster = cronjob_cluster().await;
    let suspended = json!({"suspend": true});
    create_json::<CronJob>(&cluster.api(), every_minute("nap", suspended)).await;
    tokio::time::sleep(Duration::from_secs(150)).await;
    assert!(jobs_of(&cluster, "nap").await.is_empty(), "suspended");
    let resume = Patch::Merge(json!({"spec": {"suspend": false}}));
    cluster
        .api::<CronJob>()
        .patch("nap", &PatchParams::default(), &resume)
        .await
        .expect("resume");
    // The most recent missed time is started at once, not a minute later.
    let resumed = tokio::time::Instant::now();
    wait_for_jobs(&cluster, "nap", 1).await;
    assert!(resumed.elapsed() < Duration::from_secs(30), "started late");
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn finished_jobs_beyond_the_history_limits_are_deleted_oldest_first() {
    let cluster = cronjob_cluster().await;
    let limits = json!({"successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1});
    create_json::<CronJob>(&cluster.api(), every_minute("trim", limits)).await;
    let mut last_finished = i64::MIN;
    for condition in ["Complete", "Failed", "Complete", "Failed"] {
        let next = every_second("the next job", || async {
            let jobs = jobs_of(&cluster, "trim").await;
            jobs.into_iter()
                .find(|j| scheduled_minute(j) > last_finished)
        })
        .await;
        finish(&cluster, &next, condition).await;
        last_finished = scheduled_minute(&next);
    }
    let kept = every_second("two finished jobs kept", || async {
        let jobs = jobs_of(&cluster, "trim").await;
        let finished: Vec<Job> = jobs
            .into_iter()
            .filter(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some()
            })
            .collect();
        (finished.len() == 2).then_some(finished)
    })
    .await;
    let minutes: Vec<i64> = kept.iter().map(scheduled_minute).collect();
    let first = minutes[0];
    assert_eq!(
        minutes,
        [first, first + 1],
        "the newest of each outcome stay"
    );
    cluster.stop().await;
}

/// A `timeZone` moves the schedule: minute 30 in Kolkata (+05:30) is minute 0 in UTC, and
/// the scheduled-timestamp annotation is written in the CronJob's zone, as kube writes it.
#[tokio::test(start_paused = true)]
async fn a_schedule_runs_in_the_cronjobs_time_zone() {
    let cluster = cronjob_cluster().await;
    let zoned = json!({"schedule": "30 * * * *", "timeZone": "Asia/Kolkata"});
    create_json::<CronJob>(&cluster.api(), every_minute("kolkata", zoned)).await;
    // Up to an hour of simulated time, looked at once a simulated minute.
    let mut jobs = Vec::new();
    for _ in 0..=61 {
        jobs = jobs_of(&cluster, "kolkata").await;
        if !jobs.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    let first = jobs.first().expect("a Job within the hour");
    assert_eq!(scheduled_minute(first).rem_euclid(60), 0, "on the UTC hour");
    let annotated = scheduled_at(first);
    assert!(annotated.ends_with(":30:00+05:30"), "{annotated}");
    cluster.stop().await;
}
