//! The Job and CronJob cells kube's `printJob` / `printCronJob` compute:
//! STATUS from the job's conditions, COMPLETIONS, DURATION, SUSPEND and
//! LAST SCHEDULE.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::format::{NONE, arr_at, at, human_duration, int_at, is_set, str_at, time_at};

/// Whether the job's first condition of this type is True.
fn has_condition(job: &Value, ty: &str) -> bool {
    arr_at(job, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == Some(ty))
        .is_some_and(|c| str_at(c, &["status"]) == Some("True"))
}

pub(super) fn job_status(job: &Value, _: DateTime<Utc>) -> Value {
    json!(if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if is_set(job, &["metadata", "deletionTimestamp"]) {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    })
}

/// `succeeded/completions`; without completions `succeeded/1`, and
/// `succeeded/1 of parallelism` for a parallel work queue.
pub(super) fn job_completions(job: &Value, _: DateTime<Utc>) -> Value {
    let succeeded = int_at(job, &["status", "succeeded"]).unwrap_or(0);
    let parallelism = int_at(job, &["spec", "parallelism"]).unwrap_or(0);
    json!(match int_at(job, &["spec", "completions"]) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
        None => format!("{succeeded}/1"),
    })
}

/// From start to completion, or to now while running; empty before it starts.
pub(super) fn job_duration(job: &Value, now: DateTime<Utc>) -> Value {
    let time = |field| time_at(job, &["status", field]);
    json!(match (time("startTime"), time("completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    })
}

/// kube's `printBoolPtr`: True, False or `<unset>`.
pub(super) fn cron_job_suspend(cron_job: &Value, _: DateTime<Utc>) -> Value {
    json!(
        match at(cron_job, &["spec", "suspend"]).and_then(Value::as_bool) {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        }
    )
}

pub(super) fn cron_job_last_schedule(cron_job: &Value, now: DateTime<Utc>) -> Value {
    json!(match time_at(cron_job, &["status", "lastScheduleTime"]) {
        Some(t) => human_duration(now - t),
        None => NONE.to_string(),
    })
}
