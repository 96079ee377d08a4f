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

#[cfg(test)]
mod tests {
    use crate::table::test_support::{ago, builtin, column_names, single, wide_names};
    use serde_json::{Value, json};

    fn pod(status: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-7d4b9c-x2x9z", "namespace": "default", "creationTimestamp": ago(300)},
            "spec": {
                "nodeName": "node-1",
                "containers": [{"name": "app", "image": "nginx:1.25"}, {"name": "sidecar", "image": "envoy:1"}]
            },
            "status": status
        })
    }

    fn running(name: &str, ready: bool, restarts: i64) -> Value {
        json!({
            "name": name,
            "ready": ready,
            "restartCount": restarts,
            "state": {"running": {"startedAt": ago(200)}}
        })
    }

    #[test]
    fn pod_columns_and_running() {
        let (t, c) = single(
            &builtin("", "Pod"),
            pod(json!({
                "phase": "Running",
                "podIP": "10.244.0.5",
                "podIPs": [{"ip": "10.244.0.5"}, {"ip": "fd00::5"}],
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [running("app", true, 1), running("sidecar", false, 2)]
            })),
        );
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(
            wide_names(&t),
            ["IP", "Node", "Nominated Node", "Readiness Gates"]
        );
        assert_eq!(t["columnDefinitions"][3]["type"], "integer");
        assert_eq!(
            c,
            [
                json!("web-7d4b9c-x2x9z"),
                json!("1/2"),
                json!("Running"),
                json!(3),
                json!("5m"),
                json!("10.244.0.5"),
                json!("node-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        assert!(t["rows"][0].get("conditions").is_none());
    }

    #[test]
    fn pod_pending_without_statuses() {
        let mut p = pod(json!({"phase": "Pending"}));
        p["spec"].as_object_mut().expect("spec").remove("nodeName");
        let (_, c) = single(&builtin("", "Pod"), p);
        assert_eq!(c[1], json!("0/2"));
        assert_eq!(c[2], json!("Pending"));
        assert_eq!(c[3], json!(0));
        assert_eq!(c[5], json!("<none>"));
        assert_eq!(c[6], json!("<none>"));
    }

    #[test]
    fn pod_waiting_reasons() {
        for reason in ["ContainerCreating", "CrashLoopBackOff", "ImagePullBackOff"] {
            let (_, c) = single(
                &builtin("", "Pod"),
                pod(json!({
                    "phase": "Pending",
                    "containerStatuses": [
                        {"name": "app", "ready": false, "restartCount": 4, "state": {"waiting": {"reason": reason}}},
                        running("sidecar", true, 0)
                    ]
                })),
            );
            assert_eq!(c[1], json!("1/2"));
            assert_eq!(c[2], json!(reason));
            assert_eq!(c[3], json!(4));
        }
    }

    #[test]
    fn pod_terminated_reasons() {
        let (_, c) = single(
            &builtin("", "Pod"),
            pod(json!({
                "phase": "Running",
                "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error"}}},
                    running("sidecar", true, 0)
                ]
            })),
        );
        assert_eq!(c[2], json!("Error"));

        let (_, c) = single(
            &builtin("", "Pod"),
            pod(json!({
                "phase": "Running",
                "containerStatuses": [
                    {"name": "app", "state": {"terminated": {"exitCode": 137}}},
                    {"name": "sidecar", "state": {"terminated": {"exitCode": 0, "signal": 9}}}
                ]
            })),
        );
        // Statuses are walked last-to-first, so the first container wins.
        assert_eq!(c[2], json!("ExitCode:137"));

        let (_, c) = single(
            &builtin("", "Pod"),
            pod(json!({
                "phase": "Running",
                "containerStatuses": [{"name": "app", "state": {"terminated": {"exitCode": 0, "signal": 15}}}]
            })),
        );
        assert_eq!(c[2], json!("Signal:15"));
    }

    #[test]
    fn pod_completed_and_failed() {
        let (t, c) = single(
            &builtin("", "Pod"),
            pod(json!({
                "phase": "Succeeded",
                "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "sidecar", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                ]
            })),
        );
        assert_eq!(c[1], json!("0/2"));
        assert_eq!(c[2], json!("Completed"));
        assert_eq!(
            t["rows"][0]["conditions"],
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}])
        );

        let (t, c) = single(
            &builtin("", "Pod"),
            pod(json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"})),
        );
        assert_eq!(c[2], json!("Evicted"));
        assert_eq!(t["rows"][0]["conditions"][0]["reason"], "Failed");
    }

    #[test]
    fn pod_completed_with_running_container() {
        let status = |ready: &str| {
            json!({
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": ready}],
                "containerStatuses": [
                    {"name": "app", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    running("sidecar", true, 0)
                ]
            })
        };
        let (_, c) = single(&builtin("", "Pod"), pod(status("True")));
        assert_eq!(c[2], json!("Running"));
        let (_, c) = single(&builtin("", "Pod"), pod(status("False")));
        assert_eq!(c[2], json!("NotReady"));
    }

    #[test]
    fn pod_terminating_and_unknown() {
        let mut p = pod(json!({
            "phase": "Running",
            "containerStatuses": [running("app", true, 0), running("sidecar", true, 0)]
        }));
        p["metadata"]["deletionTimestamp"] = json!(ago(3));
        let (_, c) = single(&builtin("", "Pod"), p.clone());
        assert_eq!(c[1], json!("2/2"));
        assert_eq!(c[2], json!("Terminating"));

        p["status"]["reason"] = json!("NodeLost");
        let (_, c) = single(&builtin("", "Pod"), p);
        assert_eq!(c[2], json!("Unknown"));

        // A terminal pod being deleted keeps its status.
        let mut p = pod(json!({
            "phase": "Succeeded",
            "containerStatuses": [{"name": "app", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
        }));
        p["metadata"]["deletionTimestamp"] = json!(ago(3));
        let (_, c) = single(&builtin("", "Pod"), p);
        assert_eq!(c[2], json!("Completed"));
    }

    #[test]
    fn pod_init_containers() {
        let with_init = |init_status: Value, extra: Value| {
            let mut p = pod(json!({
                "phase": "Pending",
                "initContainerStatuses": init_status,
                "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
                ]
            }));
            p["spec"]["initContainers"] =
                json!([{"name": "migrate", "image": "tool"}, {"name": "seed", "image": "tool"}]);
            if let Value::Object(extra) = extra {
                for (k, v) in extra {
                    p["status"][k.as_str()] = v;
                }
            }
            p
        };

        let (_, c) = single(
            &builtin("", "Pod"),
            with_init(
                json!([{"name": "migrate", "restartCount": 0, "state": {"running": {}}}]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("Init:0/2"));

        let (_, c) = single(
            &builtin("", "Pod"),
            with_init(
                json!([
                    {"name": "migrate", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "seed", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("Init:CrashLoopBackOff"));
        assert_eq!(c[3], json!(3));

        let (_, c) = single(
            &builtin("", "Pod"),
            with_init(
                json!([{"name": "migrate", "restartCount": 1, "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("Init:Error"));

        let (_, c) = single(
            &builtin("", "Pod"),
            with_init(
                json!([{"name": "migrate", "restartCount": 0, "state": {"terminated": {"exitCode": 2}}}]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("Init:ExitCode:2"));

        // All init containers done: main containers decide.
        let (_, c) = single(
            &builtin("", "Pod"),
            with_init(
                json!([
                    {"name": "migrate", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "seed", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                ]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("PodInitializing"));
    }

    #[test]
    fn pod_sidecar_counts_as_container() {
        let mut p = pod(json!({
            "phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
            "initContainerStatuses": [
                {"name": "proxy", "ready": true, "started": true, "restartCount": 2, "state": {"running": {}}}
            ],
            "containerStatuses": [running("app", true, 1), running("sidecar", true, 0)]
        }));
        p["spec"]["initContainers"] =
            json!([{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]);
        let (_, c) = single(&builtin("", "Pod"), p);
        assert_eq!(c[1], json!("3/3"));
        assert_eq!(c[2], json!("Running"));
        assert_eq!(c[3], json!(3));
    }

    #[test]
    fn pod_wide_columns() {
        let mut p = pod(json!({
            "phase": "Running",
            "podIP": "10.0.0.9",
            "nominatedNodeName": "node-2",
            "conditions": [
                {"type": "example.com/feature-1", "status": "True"},
                {"type": "example.com/feature-2", "status": "False"}
            ],
            "containerStatuses": [running("app", true, 0), running("sidecar", true, 0)]
        }));
        p["spec"]["readinessGates"] = json!([
            {"conditionType": "example.com/feature-1"},
            {"conditionType": "example.com/feature-2"},
            {"conditionType": "example.com/feature-3"}
        ]);
        let (_, c) = single(&builtin("", "Pod"), p);
        assert_eq!(
            c[5..].to_vec(),
            [
                json!("10.0.0.9"),
                json!("node-1"),
                json!("node-2"),
                json!("1/3")
            ]
        );
    }

    #[test]
    fn pod_scheduling_gated() {
        let (_, c) = single(
            &builtin("", "Pod"),
            pod(json!({
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
            })),
        );
        assert_eq!(c[2], json!("SchedulingGated"));
    }
}
