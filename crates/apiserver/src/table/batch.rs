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

#[cfg(test)]
mod tests {
    use crate::table::test_support::{ago, builtin, column_names, single, wide_names};
    use serde_json::json;

    #[test]
    fn jobs() {
        let (t, c) = single(
            &builtin("batch", "Job"),
            json!({
                "metadata": {"name": "pi", "creationTimestamp": ago(600)},
                "spec": {
                    "completions": 3,
                    "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
                    "template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.34"}]}}
                },
                "status": {
                    "succeeded": 3,
                    "startTime": ago(600),
                    "completionTime": ago(480),
                    "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]
                }
            }),
        );
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Status",
                "Completions",
                "Duration",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(wide_names(&t), ["Containers", "Images", "Selector"]);
        assert_eq!(
            c,
            [
                json!("pi"),
                json!("Complete"),
                json!("3/3"),
                json!("2m"),
                json!("10m"),
                json!("pi"),
                json!("perl:5.34"),
                json!("batch.kubernetes.io/controller-uid=u1")
            ]
        );

        let (_, c) = single(
            &builtin("batch", "Job"),
            json!({
                "metadata": {"name": "queue", "creationTimestamp": ago(90)},
                "spec": {"parallelism": 4},
                "status": {"succeeded": 1, "startTime": ago(90)}
            }),
        );
        assert_eq!(
            c[1..4].to_vec(),
            [json!("Running"), json!("1/1 of 4"), json!("90s")]
        );

        let (_, c) = single(
            &builtin("batch", "Job"),
            json!({
                "metadata": {"name": "held", "creationTimestamp": ago(5)},
                "spec": {"suspend": true},
                "status": {"conditions": [{"type": "Suspended", "status": "True"}]}
            }),
        );
        assert_eq!(
            c[1..4].to_vec(),
            [json!("Suspended"), json!("0/1"), json!("")]
        );
        assert_eq!(c[7], json!("<none>"));
    }

    #[test]
    fn cron_jobs() {
        let (t, c) = single(
            &builtin("batch", "CronJob"),
            json!({
                "metadata": {"name": "nightly", "creationTimestamp": ago(3 * 86400)},
                "spec": {
                    "schedule": "0 3 * * *",
                    "suspend": false,
                    "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "backup", "image": "restic"}]}}}}
                },
                "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": ago(3600)}
            }),
        );
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Schedule",
                "Timezone",
                "Suspend",
                "Active",
                "Last Schedule",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(
            c,
            [
                json!("nightly"),
                json!("0 3 * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("60m"),
                json!("3d"),
                json!("backup"),
                json!("restic"),
                json!("<none>")
            ]
        );

        let (_, c) = single(
            &builtin("batch", "CronJob"),
            json!({"metadata": {"name": "new"}, "spec": {"schedule": "@hourly", "timeZone": "Etc/UTC"}}),
        );
        assert_eq!(
            c[1..6].to_vec(),
            [
                json!("@hourly"),
                json!("Etc/UTC"),
                json!("<unset>"),
                json!(0),
                json!("<none>")
            ]
        );
    }
}
