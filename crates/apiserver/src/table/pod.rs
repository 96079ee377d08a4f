//! The pod columns kube's `printPod` computes: READY (`1/2`, sidecars
//! counted), STATUS (the init / waiting / terminated / terminating reason),
//! RESTARTS, READINESS GATES, and the `Completed` row condition.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::format::{NONE, arr_at, at, int_at, is_set, nonempty, str_at};

struct Summary {
    ready: String,
    status: String,
    restarts: i64,
}

pub(super) fn ready(pod: &Value, _: DateTime<Utc>) -> Value {
    json!(summary(pod).ready)
}

pub(super) fn status(pod: &Value, _: DateTime<Utc>) -> Value {
    json!(summary(pod).status)
}

pub(super) fn restarts(pod: &Value, _: DateTime<Utc>) -> Value {
    json!(summary(pod).restarts)
}

/// `true/total` of the readiness gates' conditions; `<none>` without gates.
pub(super) fn readiness_gates(pod: &Value, _: DateTime<Utc>) -> Value {
    let conditions = arr_at(pod, &["status", "conditions"]);
    let gates = arr_at(pod, &["spec", "readinessGates"]);
    json!(if gates.is_empty() {
        NONE.to_string()
    } else {
        let true_count = gates
            .iter()
            .filter(|gate| {
                let Some(ty) = str_at(gate, &["conditionType"]) else {
                    return false;
                };
                conditions
                    .iter()
                    .find(|c| str_at(c, &["type"]) == Some(ty))
                    .is_some_and(|c| str_at(c, &["status"]) == Some("True"))
            })
            .count();
        format!("{true_count}/{}", gates.len())
    })
}

/// A finished pod's row says so, as kube's does (`kubectl get` greys it out).
pub(super) fn row_conditions(pod: &Value) -> Option<Value> {
    match str_at(pod, &["status", "phase"]).unwrap_or("") {
        "Succeeded" => Some(json!([{
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }])),
        "Failed" => Some(json!([{
            "type": "Completed",
            "status": "True",
            "reason": "Failed",
            "message": "The pod failed.",
        }])),
        _ => None,
    }
}

/// kubectl's pod READY / STATUS / RESTARTS logic (printPod), which the three
/// cells that show it each read.
fn summary(pod: &Value) -> Summary {
    let containers = arr_at(pod, &["spec", "containers"]);
    let init_containers = arr_at(pod, &["spec", "initContainers"]);
    let conditions = arr_at(pod, &["status", "conditions"]);
    let phase = str_at(pod, &["status", "phase"]).unwrap_or("");
    let mut reason = nonempty(pod, &["status", "reason"])
        .unwrap_or(phase)
        .to_string();

    if conditions.iter().any(|c| {
        str_at(c, &["type"]) == Some("PodScheduled")
            && str_at(c, &["reason"]) == Some("SchedulingGated")
    }) {
        reason = "SchedulingGated".to_string();
    }

    // Sidecars: init containers with restartPolicy Always count as containers.
    let restartable: BTreeSet<&str> = init_containers
        .iter()
        .filter(|c| str_at(c, &["restartPolicy"]) == Some("Always"))
        .filter_map(|c| str_at(c, &["name"]))
        .collect();
    let total = containers.len() + restartable.len();

    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut restartable_restarts = 0i64;
    let mut initializing = false;

    for (i, cs) in arr_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let restart_count = int_at(cs, &["restartCount"]).unwrap_or(0);
        restarts += restart_count;
        let is_restartable = str_at(cs, &["name"]).is_some_and(|n| restartable.contains(n));
        if is_restartable {
            restartable_restarts += restart_count;
        }
        let terminated = at(cs, &["state", "terminated"]).filter(|t| t.is_object());
        let waiting = at(cs, &["state", "waiting"]).filter(|w| w.is_object());
        if terminated.is_some_and(|t| int_at(t, &["exitCode"]).unwrap_or(0) == 0) {
            continue;
        }
        if is_restartable && at(cs, &["started"]).and_then(Value::as_bool) == Some(true) {
            if at(cs, &["ready"]).and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            reason = match nonempty(t, &["reason"]) {
                Some(r) => format!("Init:{r}"),
                None => terminated_code("Init:", t),
            };
        } else if let Some(r) = waiting
            .and_then(|w| nonempty(w, &["reason"]))
            .filter(|r| *r != "PodInitializing")
        {
            reason = format!("Init:{r}");
        } else {
            reason = format!("Init:{i}/{}", init_containers.len());
        }
        initializing = true;
        break;
    }

    let initialized = conditions.iter().any(|c| {
        str_at(c, &["type"]) == Some("Initialized") && str_at(c, &["status"]) == Some("True")
    });
    if !initializing || initialized {
        restarts = restartable_restarts;
        let mut has_running = false;
        for cs in arr_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(cs, &["restartCount"]).unwrap_or(0);
            let terminated = at(cs, &["state", "terminated"]).filter(|t| t.is_object());
            let waiting_reason =
                at(cs, &["state", "waiting"]).and_then(|w| nonempty(w, &["reason"]));
            if let Some(r) = waiting_reason {
                reason = r.to_string();
            } else if let Some(t) = terminated {
                reason = match nonempty(t, &["reason"]) {
                    Some(r) => r.to_string(),
                    None => terminated_code("", t),
                };
            } else if at(cs, &["ready"]).and_then(Value::as_bool) == Some(true)
                && at(cs, &["state", "running"]).is_some_and(Value::is_object)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions.iter().any(|c| {
                str_at(c, &["type"]) == Some("Ready") && str_at(c, &["status"]) == Some("True")
            });
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }

    if is_set(pod, &["metadata", "deletionTimestamp"]) {
        if str_at(pod, &["status", "reason"]) == Some("NodeLost") {
            reason = "Unknown".to_string();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_string();
        }
    }

    Summary {
        ready: format!("{ready}/{total}"),
        status: reason,
        restarts,
    }
}

fn terminated_code(prefix: &str, terminated: &Value) -> String {
    match int_at(terminated, &["signal"]).filter(|s| *s != 0) {
        Some(signal) => format!("{prefix}Signal:{signal}"),
        None => format!(
            "{prefix}ExitCode:{}",
            int_at(terminated, &["exitCode"]).unwrap_or(0)
        ),
    }
}
