//! The kubelet of each simulated node: starts the pods bound to it after the start delay
//! (Running and Ready, or Failed / never Ready when a `steady.dev/simulate` annotation
//! asks), completes a Job's pods after their run time, and ends a graceful deletion once
//! the containers "stopped": the pod's terminal status (Failed, its containers' exit
//! codes), then the confirmation, with the container events a kubelet records.
//!
//! Must not know: how pods are bound (the scheduler) or the Node objects (lifecycle).

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};
use kube::ResourceExt;
use kube::api::{DeleteParams, PostParams, Preconditions};
use serde::Deserialize;
use serde_json::{Value, json};
use steady_runtime::{Action, Context};
use tokio::time::Instant;

use super::{ByUid, Nodes, SIMULATE_ANNOTATION, Source, requeue_at, tolerate_races};

/// When the kubelet first saw each pod in a stage whose end it waits for.
#[derive(Default)]
pub(super) struct Timers {
    /// Bound, not yet started (start = that + start delay).
    bound_at: ByUid<Instant>,
    /// Deleted (its Killing events were recorded then).
    stopping_since: ByUid<Instant>,
    /// Running, to run to completion (a Job's pod).
    running_since: ByUid<Instant>,
    /// Crashed, waiting out the back-off before its containers restart.
    crashed_since: ByUid<Instant>,
    /// The last pod IP handed out, per node.
    last_ip: ByUid<u32>,
}

impl Timers {
    fn forget(&mut self, uid: &str) {
        self.bound_at.remove(uid);
        self.stopping_since.remove(uid);
        self.running_since.remove(uid);
        self.crashed_since.remove(uid);
    }
}

/// The writes one step makes, in order.
#[derive(Default)]
struct Step {
    /// Events recorded before the write (the kubelet's container events precede the
    /// status it reports).
    events: Vec<Value>,
    write: Option<Write>,
}

enum Write {
    /// Replace the pod's status with this one (the rest of the pod is as read).
    Status(Value),
    /// Confirm the pod's deletion (no grace left, only if it is still this pod).
    Delete,
}

/// The next step of `pod`, bound to the node at `index`; when to look again.
pub(super) async fn step(
    pod: &Pod,
    index: usize,
    ctx: &Context<Nodes>,
) -> Result<Action, kube::Error> {
    let nodes = ctx.data();
    let (step, action) = decide(pod, index, nodes);
    take(pod, index, step, ctx).await?;
    Ok(action)
}

/// What the kubelet does for `pod` now (it holds the timers' lock only here, not across
/// writes).
fn decide(pod: &Pod, index: usize, nodes: &Nodes) -> (Step, Action) {
    let uid = pod.uid().unwrap_or_default();
    let phase = crate::pod_template::phase(pod);
    let mut timers = nodes.kubelet.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(deletion) = &pod.metadata.deletion_timestamp {
        // A pod whose containers already exited has nothing left to stop.
        let exited = matches!(phase, "Succeeded" | "Failed");
        return stop(
            &mut timers,
            pod,
            &uid,
            index,
            deletion.0.to_string(),
            exited,
            nodes,
        );
    }
    if phase == "Running"
        && let Some(step) = follow_node_readiness(pod, index, nodes)
    {
        return (step, Action::done());
    }
    if phase == "Running" && crash_loops(pod) {
        return restart_after_back_off(&mut timers, pod, &uid, index, nodes);
    }
    if phase == "Running" && owned_by_job(pod) {
        return complete_after_run(&mut timers, pod, &uid, nodes);
    }
    if phase != "Pending" {
        return (Step::default(), Action::done());
    }
    let now = Instant::now();
    let bound_at = *timers.bound_at.entry(uid.clone()).or_insert(now);
    let due = bound_at + nodes.config.pod_start_delay;
    if now < due {
        return (Step::default(), requeue_at(due));
    }
    timers.bound_at.remove(&uid);
    let node = nodes.names[index].clone();
    let last_ip = timers.last_ip.entry(node).or_insert(0);
    *last_ip = *last_ip % 250 + 1;
    let pod_ip = format!("10.244.{index}.{}", *last_ip + 1);
    (start(pod, index, &pod_ip, nodes), Action::done())
}

/// The pod conditions a kubelet writes (kube's `PodConditionByKubelet`); it keeps others.
const KUBELET_CONDITIONS: &[&str] = &[
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
];

/// The fault a pod asks the node to simulate (`steady.dev/simulate`), or "".
fn simulated_behaviour(pod: &Pod) -> &str {
    pod.annotations()
        .get(SIMULATE_ANNOTATION)
        .map(String::as_str)
        .unwrap_or("")
}

/// Whether `pod`'s containers fail and are restarted in place (`fail` under
/// `restartPolicy` Always or OnFailure): it stays Running, in CrashLoopBackOff.
fn crash_loops(pod: &Pod) -> bool {
    let restart_policy = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref());
    simulated_behaviour(pod) == "fail" && restart_policy != Some("Never")
}

/// kubelet's crash back-off: 10 s, doubling with each restart, at most 5 minutes.
fn back_off(restarts: i32) -> Duration {
    let policy = steady_runtime::backoff::BackoffPolicy {
        base: Duration::from_secs(10),
        max: Duration::from_secs(300),
        jitter: 0.0,
    };
    policy.delay(u32::try_from(restarts).unwrap_or(0).saturating_add(1))
}

/// A crashed container as kubelet reports it while it waits to restart it: waiting in
/// CrashLoopBackOff, the exit it waits after as its last state.
fn crashed_container(container: &Value, pod: &Pod, restarts: i32, at: &str) -> Value {
    let name = container["name"].as_str().unwrap_or("");
    let waiting = format!(
        "back-off {}s restarting failed container={name} pod={}",
        back_off(restarts).as_secs(),
        pod_reference(pod)
    );
    let mut crashed = container.clone();
    crashed["ready"] = json!(false);
    crashed["started"] = json!(false);
    crashed["restartCount"] = json!(restarts);
    crashed["state"] = json!({"waiting": {"reason": "CrashLoopBackOff", "message": waiting}});
    crashed["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error",
        "startedAt": at, "finishedAt": at, "containerID": container["containerID"]}});
    crashed
}

/// How kubelet names a pod in its messages: `name_namespace(uid)`.
fn pod_reference(pod: &Pod) -> String {
    let namespace = pod.namespace().unwrap_or_default();
    format!(
        "{}_{namespace}({})",
        pod.name_any(),
        pod.uid().unwrap_or_default()
    )
}

/// The Warning kubelet records each time it backs off restarting `container`.
fn back_off_event(pod: &Pod, index: usize, nodes: &Nodes, container: &str) -> Value {
    let field = format!("spec.containers{{{container}}}");
    let message = format!(
        "Back-off restarting failed container {container} in pod {}",
        pod_reference(pod)
    );
    let source = kubelet_source(nodes, index, &field);
    nodes.event(pod, "Warning", "BackOff", &message, source)
}

/// A crash-looping pod: once the back-off after its last crash has passed, its containers
/// restart and crash again (restart count up by one, a longer back-off), as a container
/// that exits 1 at once does under kubelet.
fn restart_after_back_off(
    timers: &mut Timers,
    pod: &Pod,
    uid: &str,
    index: usize,
    nodes: &Nodes,
) -> (Step, Action) {
    let statuses = pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten());
    let restarts = statuses.map(|c| c.restart_count).max().unwrap_or(0);
    let now = Instant::now();
    let since = *timers.crashed_since.entry(uid.to_string()).or_insert(now);
    let due = since + back_off(restarts);
    if now < due {
        return (Step::default(), requeue_at(due));
    }
    timers.crashed_since.remove(uid);
    let at = nodes.config.timestamp();
    let mut status = json!(pod.status);
    let mut events = Vec::new();
    if let Some(containers) = status
        .pointer_mut("/containerStatuses")
        .and_then(Value::as_array_mut)
    {
        for container in containers.iter_mut() {
            let name = container["name"].as_str().unwrap_or("").to_string();
            events.extend(start_events(pod, index, nodes, &name));
            events.push(back_off_event(pod, index, nodes, &name));
            *container = crashed_container(container, pod, restarts + 1, &at);
        }
    }
    let step = Step {
        events,
        write: Some(Write::Status(status)),
    };
    (step, Action::done())
}

/// Whether a Job controls `pod` (its containers run to completion).
fn owned_by_job(pod: &Pod) -> bool {
    pod.owner_references()
        .iter()
        .any(|o| o.kind == "Job" && o.api_version == "batch/v1" && o.controller == Some(true))
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
}

/// What the kubelet reports about the container `name`.
fn kubelet_source<'a>(nodes: &'a Nodes, index: usize, field_path: &'a str) -> Source<'a> {
    Source {
        component: "kubelet",
        host: Some(nodes.names[index].as_str()),
        field_path: Some(field_path),
    }
}

/// What a kubelet records as it starts `container`, whose image is already pulled.
fn start_events(pod: &Pod, index: usize, nodes: &Nodes, container: &str) -> Vec<Value> {
    let image = containers(pod)
        .iter()
        .find(|c| c.name == container)
        .and_then(|c| c.image.as_deref())
        .unwrap_or("");
    let field = format!("spec.containers{{{container}}}");
    let source = kubelet_source(nodes, index, &field);
    [
        (
            "Pulled",
            format!("Container image \"{image}\" already present on machine"),
        ),
        ("Created", format!("Created container: {container}")),
        ("Started", format!("Started container {container}")),
    ]
    .into_iter()
    .map(|(reason, message)| nodes.event(pod, "Normal", reason, &message, source))
    .collect()
}

fn start(pod: &Pod, index: usize, pod_ip: &str, nodes: &Nodes) -> Step {
    let mut events = Vec::new();
    let behaviour = simulated_behaviour(pod);
    let crashing = crash_loops(pod);
    // Exited for good: nothing restarts it.
    let failed = behaviour == "fail" && !crashing;
    let ready = behaviour != "fail" && behaviour != "never-ready";
    let now = nodes.config.timestamp();
    for c in containers(pod) {
        let cname = c.name.as_str();
        events.extend(start_events(pod, index, nodes, cname));
        // A container that is not restarted gets no event for its exit.
        if crashing {
            events.push(back_off_event(pod, index, nodes, cname));
        }
    }
    let statuses: Vec<Value> = containers(pod)
        .iter()
        .map(|c| {
            let container_id = format!("steady://{}", c.name);
            let state = if failed {
                json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now, "containerID": container_id}})
            } else {
                json!({"running": {"startedAt": now}})
            };
            let status = json!({
                "name": c.name,
                "image": c.image,
                "imageID": format!("steady://{}", c.image.as_deref().unwrap_or("")),
                "containerID": container_id,
                "ready": ready,
                "started": !failed,
                "restartCount": 0,
                "state": state,
            });
            if crashing {
                crashed_container(&status, pod, 0, &now)
            } else {
                status
            }
        })
        .collect();
    let condition = |kind: &str, status: bool| {
        let mut c = json!({"type": kind, "status": if status { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": now});
        if !status {
            c["reason"] = json!(if failed {
                "PodFailed"
            } else {
                "ContainersNotReady"
            });
        }
        if !status && !failed && kind != "PodReadyToStartContainers" {
            let names: Vec<&str> = containers(pod).iter().map(|c| c.name.as_str()).collect();
            c["message"] = json!(format!(
                "containers with unready status: [{}]",
                names.join(" ")
            ));
        }
        c
    };
    let host_ip = nodes.host_ip(index);
    let qos_class = pod
        .status
        .as_ref()
        .and_then(|s| s.qos_class.clone())
        .unwrap_or_else(|| "BestEffort".into());
    let mut conditions = vec![
        condition("PodReadyToStartContainers", !failed),
        condition("Initialized", true),
        condition("Ready", ready),
        condition("ContainersReady", ready),
        condition("PodScheduled", true),
    ];
    // The kubelet's status manager keeps the conditions it does not own (a readiness
    // gate's, an eviction's DisruptionTarget).
    let others = pod
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten());
    conditions.extend(
        others
            .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
            .map(|c| json!(c)),
    );
    let started = json!({
        "phase": if failed { "Failed" } else { "Running" },
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "containerStatuses": statuses,
        "qosClass": qos_class,
    });
    Step {
        events,
        write: Some(Write::Status(started)),
    }
}

/// A running pod is Ready only while its node is: the node-lifecycle controller marks it
/// (and its containers) not ready when the node stops being Ready, and the kubelet reports
/// it ready again when the node recovers. `None` when the pod already agrees.
fn follow_node_readiness(pod: &Pod, index: usize, nodes: &Nodes) -> Option<Step> {
    let (_, node_cache) = nodes.caches.get()?;
    let node = node_cache.get(&steady_runtime::ObjectKey::new(None, &nodes.names[index]))?;
    let node_ready = super::lifecycle::is_ready(&node);
    let should_be_ready = node_ready && !matches!(simulated_behaviour(pod), "never-ready" | "fail");
    if crate::pod_template::is_ready(pod) == should_be_ready {
        return None;
    }
    let now = nodes.config.timestamp();
    let status = if should_be_ready { "True" } else { "False" };
    let mut updated = json!(pod.status);
    if let Some(conditions) = updated
        .pointer_mut("/conditions")
        .and_then(Value::as_array_mut)
    {
        for condition in conditions {
            let kind = condition["type"].as_str().unwrap_or("");
            let follows = kind == "Ready" || (should_be_ready && kind == "ContainersReady");
            if follows && condition["status"] != status {
                condition["status"] = json!(status);
                condition["lastTransitionTime"] = json!(now);
                if should_be_ready {
                    condition.as_object_mut().map(|c| c.remove("reason"));
                }
            }
        }
    }
    if let Some(statuses) = updated
        .pointer_mut("/containerStatuses")
        .and_then(Value::as_array_mut)
    {
        for container in statuses {
            container["ready"] = json!(should_be_ready);
        }
    }
    let mut events = Vec::new();
    if !node_ready {
        let source = Source {
            component: "node-controller",
            host: None,
            field_path: None,
        };
        events.push(nodes.event(pod, "Warning", "NodeNotReady", "Node is not ready", source));
    }
    Some(Step {
        events,
        write: Some(Write::Status(updated)),
    })
}

/// A Job's pod: its containers exit 0 once it has run `job_pod_run_time`.
fn complete_after_run(timers: &mut Timers, pod: &Pod, uid: &str, nodes: &Nodes) -> (Step, Action) {
    let now = Instant::now();
    let since = *timers.running_since.entry(uid.to_string()).or_insert(now);
    let due = since + nodes.config.job_pod_run_time;
    if now < due {
        return (Step::default(), requeue_at(due));
    }
    timers.running_since.remove(uid);
    let completed = terminal_status(pod, Exit::Completed, &nodes.config.timestamp());
    let step = Step {
        write: Some(Write::Status(completed)),
        ..Step::default()
    };
    (step, Action::done())
}

/// How a pod's containers ended.
#[derive(Clone, Copy)]
enum Exit {
    /// Ran to completion (exit code 0): the pod Succeeded.
    Completed,
    /// Stopped by the SIGTERM a deletion sends: the pod Failed.
    Terminated,
    /// Killed at the end of the grace period: the pod Failed.
    Killed,
}

/// `pod`'s status once its containers ended `how` at `finished_at`: kubelet 1.27+ gives
/// every pod it stops a terminal phase before it confirms the deletion (a container still
/// running exits 143 on SIGTERM or 137 on SIGKILL; one never started is reported
/// `ContainerStatusUnknown`), and its Ready conditions turn False with the phase's reason.
fn terminal_status(pod: &Pod, how: Exit, finished_at: &str) -> Value {
    let (phase, ready_reason) = match how {
        Exit::Completed => ("Succeeded", "PodCompleted"),
        Exit::Terminated | Exit::Killed => ("Failed", "PodFailed"),
    };
    let mut status = json!(pod.status);
    status["phase"] = json!(phase);
    let statuses = status
        .pointer_mut("/containerStatuses")
        .and_then(Value::as_array_mut);
    match statuses {
        Some(statuses) => {
            for container in statuses {
                container["ready"] = json!(false);
                container["started"] = json!(false);
                container["state"] = terminated_state(container, how, finished_at);
            }
        }
        None => {
            let never_started = |c: &Container| {
                json!({"name": c.name, "image": c.image, "imageID": "", "ready": false,
                    "started": false, "restartCount": 0,
                    "state": terminated_state(&Value::Null, how, finished_at)})
            };
            status["containerStatuses"] = containers(pod).iter().map(never_started).collect();
        }
    }
    if let Some(conditions) = status
        .pointer_mut("/conditions")
        .and_then(Value::as_array_mut)
    {
        for condition in conditions {
            if matches!(
                condition["type"].as_str(),
                Some("Ready" | "ContainersReady")
            ) && condition["status"] != "False"
            {
                condition["status"] = json!("False");
                condition["reason"] = json!(ready_reason);
                condition["lastTransitionTime"] = json!(finished_at);
            }
        }
    }
    status
}

/// The `terminated` state of a container whose status is `container` (Null when the
/// kubelet never reported one).
fn terminated_state(container: &Value, how: Exit, finished_at: &str) -> Value {
    let Some(started_at) = container.pointer("/state/running/startedAt") else {
        if let Some(terminated) = container.pointer("/state/terminated") {
            return json!({"terminated": terminated});
        }
        return json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated",
            "startedAt": null, "finishedAt": null}});
    };
    let (exit_code, reason) = match how {
        Exit::Completed => (0, "Completed"),
        Exit::Terminated => (143, "Error"),
        Exit::Killed => (137, "Error"),
    };
    json!({"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": started_at,
        "finishedAt": finished_at, "containerID": container["containerID"]}})
}

/// Containers stop after `pod_stop_delay` (or the whole grace period when told to ignore
/// SIGTERM); then the node confirms the deletion.
fn stop(
    timers: &mut Timers,
    pod: &Pod,
    uid: &str,
    index: usize,
    deletion: String,
    exited: bool,
    nodes: &Nodes,
) -> (Step, Action) {
    let mut step = Step::default();
    timers.bound_at.remove(uid);
    timers.running_since.remove(uid);
    let first_seen = match timers.stopping_since.get(uid) {
        Some(since) => *since,
        None => {
            let now = Instant::now();
            timers.stopping_since.insert(uid.to_string(), now);
            if !exited {
                step.events = announce_stop(pod, index, nodes);
            }
            now
        }
    };
    let now = nodes.config.now();
    let deadline = DateTime::parse_from_rfc3339(&deletion)
        .map(|d| d.with_timezone(&Utc))
        .unwrap_or(now);
    let until_deadline = (deadline - now).to_std().unwrap_or(Duration::ZERO);
    let ignores_sigterm = simulated_behaviour(pod) == "ignore-sigterm";
    let wait = if exited {
        Duration::ZERO
    } else if ignores_sigterm {
        until_deadline
    } else {
        until_deadline.min(nodes.config.pod_stop_delay)
    };
    let due = first_seen + wait;
    if Instant::now() < due {
        return (step, requeue_at(due));
    }
    if !exited {
        // The terminal status first; the deletion is confirmed when it is read back.
        let how = if ignores_sigterm {
            Exit::Killed
        } else {
            Exit::Terminated
        };
        let stopped = terminal_status(pod, how, &nodes.config.timestamp());
        step.write = Some(Write::Status(stopped));
        return (step, Action::done());
    }
    timers.forget(uid);
    step.write = Some(Write::Delete);
    (step, Action::done())
}

/// A Killing event per container, as the kubelet records when it stops a pod.
fn announce_stop(pod: &Pod, index: usize, nodes: &Nodes) -> Vec<Value> {
    containers(pod)
        .iter()
        .map(|c| {
            let cname = c.name.as_str();
            let field = format!("spec.containers{{{cname}}}");
            let message = format!("Stopping container {cname}");
            nodes.event(
                pod,
                "Normal",
                "Killing",
                &message,
                kubelet_source(nodes, index, &field),
            )
        })
        .collect()
}

/// Take one pod's step on the node at `index` in order: queue its events, then write.
async fn take(
    pod: &Pod,
    index: usize,
    step: Step,
    ctx: &Context<Nodes>,
) -> Result<(), kube::Error> {
    if let Some(events) = ctx.data().kubelet_events.get(index) {
        events.record(step.events);
    }
    let Some(write) = step.write else {
        return Ok(());
    };
    let result = match write {
        Write::Status(status) => write_status(pod, status, ctx).await,
        Write::Delete => confirm_deletion(pod, ctx).await,
    };
    tolerate_races(result)
}

/// Replace the pod's status (conflicting if the pod changed since it was read), through
/// the context: the result is cached, so the next reconcile reads it.
async fn write_status(pod: &Pod, status: Value, ctx: &Context<Nodes>) -> Result<(), kube::Error> {
    let status = Option::<PodStatus>::deserialize(status).map_err(kube::Error::SerdeError)?;
    let written = Pod {
        status,
        ..pod.clone()
    };
    let namespace = pod.namespace().unwrap_or_default();
    ctx.api::<Pod>(&namespace)
        .replace_status(&pod.name_any(), &PostParams::default(), &written)
        .await
        .map(drop)
}

/// Delete the pod with no grace left, only if it is still this pod, through the context.
async fn confirm_deletion(pod: &Pod, ctx: &Context<Nodes>) -> Result<(), kube::Error> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let namespace = pod.namespace().unwrap_or_default();
    ctx.api::<Pod>(&namespace)
        .delete(&pod.name_any(), &params)
        .await
        .map(drop)
}
