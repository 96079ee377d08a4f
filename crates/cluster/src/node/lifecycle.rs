//! The Node objects: each simulated node registers as a kubelet does (conditions,
//! capacity/allocatable, addresses, node info) and heartbeats its conditions; and what
//! kube-controller-manager's node-lifecycle controller does about them: a node whose Ready
//! condition is not True gets the `node.kubernetes.io/not-ready` NoSchedule and NoExecute
//! taints, a cordoned one `node.kubernetes.io/unschedulable`, and loses them when it
//! recovers. (Pods on a node that is not Ready are marked not ready by the kubelet module,
//! which sees the node change.)
//!
//! Must not know: pods' scheduling or running.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use steady_runtime::{Action, Context, Controller};

use super::Nodes;

/// The taint a node whose Ready condition is False or Unknown gets.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// The taint a cordoned node (`spec.unschedulable`) gets.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Whether the node's Ready condition is True.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// The conditions a healthy kubelet reports, stamped `now`.
fn healthy_conditions(now: &str) -> Value {
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!([
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure"
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        condition(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status"
        ),
    ])
}

/// The Node object the simulated node at `index` registers.
fn node_object(nodes: &Nodes, index: usize) -> Value {
    let now = nodes.config.timestamp();
    let name = &nodes.names[index];
    let offered = &nodes.config.capacity;
    let capacity = json!({"cpu": offered.cpu, "memory": offered.memory, "pods": offered.pods,
        "ephemeral-storage": offered.ephemeral_storage});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "steady-simulated",
        }},
        "spec": {"podCIDR": format!("10.244.{index}.0/24"), "podCIDRs": [format!("10.244.{index}.0/24")]},
        "status": {
            "conditions": healthy_conditions(&now),
            "addresses": [{"type": "InternalIP", "address": nodes.host_ip(index)}, {"type": "Hostname", "address": name}],
            "capacity": capacity,
            "allocatable": capacity,
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "kubeProxyVersion": "v1.32.0",
                "containerRuntimeVersion": "steady://simulated",
                "osImage": "steady simulated node",
                "kernelVersion": "simulated",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
            },
        },
    })
}

/// Register every simulated node that is not registered yet (failures only log: the
/// scheduler treats a missing node as unfit).
pub(super) async fn register(client: &Client, nodes: &Nodes) {
    let api = Api::<Node>::all(client.clone());
    for index in 0..nodes.names.len() {
        let node = match serde_json::from_value::<Node>(node_object(nodes, index)) {
            Ok(node) => node,
            Err(e) => {
                tracing::warn!(error = %e, "simulated node object does not decode");
                continue;
            }
        };
        match api.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => {
                tracing::warn!(node = %nodes.names[index], error = %e, "simulated node could not register")
            }
        }
    }
}

/// The controller over Nodes: heartbeats and node-lifecycle taints.
pub(super) fn controller(client: &Client, nodes: &Nodes) -> Controller<Node> {
    let config = steady_runtime::Config {
        name: "simulated-node-lifecycle".into(),
        seed: nodes.config.seed,
        ..steady_runtime::Config::default()
    };
    Controller::new(Api::<Node>::all(client.clone()), config)
}

/// Bring the node's taints in line with its conditions and, for one of ours, post a
/// heartbeat when due.
pub(super) async fn reconcile(
    node: Arc<Node>,
    ctx: Arc<Context<Nodes>>,
) -> Result<Action, kube::Error> {
    let nodes = ctx.data();
    if nodes.index_of(&node.name_any()).is_none() {
        return Ok(Action::done());
    }
    let taints = wanted_taints(&node, nodes);
    let api = ctx.cluster_api::<Node>();
    if taints != current_taints(&node) {
        let patch = json!({
            "metadata": {"resourceVersion": node.resource_version()},
            "spec": {"taints": taints},
        });
        let written = api
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await;
        return super::tolerate_races(written.map(drop)).map(|()| Action::done());
    }
    let interval = nodes.config.heartbeat_interval;
    let now = nodes.config.now();
    let since = last_heartbeat(&node).map(|at| (now - at).to_std().unwrap_or_default());
    match since {
        Some(since) if since < interval => Ok(Action::requeue_after(interval - since)),
        _ => {
            heartbeat(
                &node,
                &now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                &ctx,
            )
            .await?;
            Ok(Action::requeue_after(interval))
        }
    }
}

fn current_taints(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// The node's taints with the node-lifecycle ones added or removed as its state asks
/// (a taint already present keeps its `timeAdded`).
fn wanted_taints(node: &Node, nodes: &Nodes) -> Vec<Taint> {
    let current = current_taints(node);
    let ready = is_ready(node);
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let mut wanted: Vec<Taint> = current
        .iter()
        .filter(|t| t.key != NOT_READY_TAINT && t.key != UNSCHEDULABLE_TAINT)
        .cloned()
        .collect();
    let mut keep_or_add = |key: &str, effect: &str, stamped: bool| {
        let existing = current.iter().find(|t| t.key == key && t.effect == effect);
        wanted.push(existing.cloned().unwrap_or_else(|| Taint {
            key: key.into(),
            effect: effect.into(),
            time_added: stamped.then(|| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    nodes.config.timestamp().parse().unwrap_or_default(),
                )
            }),
            value: None,
        }));
    };
    if cordoned {
        keep_or_add(UNSCHEDULABLE_TAINT, "NoSchedule", false);
    }
    if !ready {
        keep_or_add(NOT_READY_TAINT, "NoSchedule", false);
        keep_or_add(NOT_READY_TAINT, "NoExecute", true);
    }
    wanted
}

fn last_heartbeat(node: &Node) -> Option<DateTime<Utc>> {
    let ready = node
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    let at = ready.last_heartbeat_time.as_ref()?;
    DateTime::from_timestamp(at.0.as_second(), 0)
}

/// A merge patch of the node's status conditions, each as `edit` leaves it (conflicting
/// if the node changed since it was read).
fn conditions_patch(node: &Node, edit: impl Fn(&NodeCondition, &mut Value)) -> Value {
    let conditions: Vec<Value> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let mut value = json!(c);
            edit(c, &mut value);
            value
        })
        .collect();
    json!({
        "metadata": {"resourceVersion": node.resource_version()},
        "status": {"conditions": conditions},
    })
}

/// The kubelet's periodic status post: every condition as it stands, heartbeat renewed.
async fn heartbeat(node: &Node, now: &str, ctx: &Context<Nodes>) -> Result<(), kube::Error> {
    let patch = conditions_patch(node, |_, c| c["lastHeartbeatTime"] = json!(now));
    let written = ctx
        .cluster_api::<Node>()
        .patch_status(
            &node.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await;
    super::tolerate_races(written.map(drop))
}

/// Set the Ready condition of the node `name` (what a kubelet that stops, or recovers,
/// reports): the node-lifecycle taints and the pods' readiness follow.
pub async fn set_ready(
    client: &Client,
    name: &str,
    ready: bool,
    now: DateTime<Utc>,
) -> Result<(), kube::Error> {
    let api = Api::<Node>::all(client.clone());
    let node = api.get(name).await?;
    let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", "kubelet is posting ready status")
    } else {
        (
            "False",
            "KubeletNotReady",
            "container runtime is down (simulated)",
        )
    };
    let patch = conditions_patch(&node, |c, value| {
        if c.type_ == "Ready" && c.status != status {
            value["status"] = json!(status);
            value["reason"] = json!(reason);
            value["message"] = json!(message);
            value["lastTransitionTime"] = json!(stamp);
            value["lastHeartbeatTime"] = json!(stamp);
        }
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(drop)
}
