//! The scheduler: binds each pod without a node to one of the simulated nodes, as
//! kube-scheduler's default plugins filter them (Ready, not cordoned, `nodeSelector`
//! matched, `NoSchedule`/`NoExecute` taints tolerated) and spread pods (the node with the
//! fewest, then the first). A pod no node fits stays Pending with `PodScheduled=False`
//! (reason `Unschedulable`) and a `FailedScheduling` event, and is tried again when a
//! Node changes. A pod's PersistentVolumeClaims are checked as kube's VolumeBinding
//! plugin checks them (`volumes`).
//!
//! Must not know: how a bound pod runs (the kubelet).

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Status};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use steady_runtime::{Action, Context, ObjectCache, ObjectKey};

use crate::daemonset::tolerates;
use crate::node_affinity;

use super::{ByUid, Nodes, Source, resources, tolerate_races, volumes};

/// Pods bound but not yet seen bound in the cache, by uid (their node), so a burst of
/// bindings spreads instead of piling onto the node that looked emptiest.
pub(super) type Assumed = ByUid<String>;

pub(super) const SCHEDULER: &str = "default-scheduler";

/// Which pods a Node change may concern: those waiting for a node (it may fit now) and
/// those on it (their readiness follows the node's). Only a change of what scheduling and
/// readiness read counts: a heartbeat concerns no pod.
pub(super) fn on_node_change(
    pods: ObjectCache<Pod>,
) -> impl Fn(&Node) -> Vec<ObjectKey> + Send + Sync {
    let seen: Mutex<BTreeMap<String, String>> = Mutex::default();
    move |node| {
        let name = node.name_any();
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        let fit = what_scheduling_reads(node);
        if seen.get(&name) == Some(&fit) {
            return Vec::new();
        }
        seen.insert(name.clone(), fit);
        pods.list()
            .iter()
            .filter(|pod| {
                let on = node_of(pod);
                on.is_empty() || on == name
            })
            .map(|pod| ObjectKey::of(pod.as_ref()))
            .collect()
    }
}

/// The parts of a Node that decide which pods fit it and whether its pods are ready.
fn what_scheduling_reads(node: &Node) -> String {
    let spec = node.spec.as_ref();
    json!({
        "ready": super::lifecycle::is_ready(node),
        "unschedulable": spec.and_then(|s| s.unschedulable),
        "taints": spec.and_then(|s| s.taints.as_ref()),
        "labels": node.labels(),
    })
    .to_string()
}

pub(super) fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// Why a node cannot take the pod, in kube-scheduler's words (`None`: it can).
fn unfit(pod: &Pod, node: &Node) -> Option<String> {
    let spec = pod.spec.clone().unwrap_or_default();
    if !super::lifecycle::is_ready(node) {
        return Some("node(s) had untolerated taint {node.kubernetes.io/not-ready: }".into());
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some("node(s) were unschedulable".into());
    }
    if !node_affinity::required_match(&spec, node) {
        return Some("node(s) didn't match Pod's node affinity/selector".into());
    }
    if let Some(taint) = untolerated_taint(&spec, node) {
        return Some(format!("node(s) had untolerated taint {{{taint}}}"));
    }
    None
}

/// The first scheduling taint the pod does not tolerate, as kube-scheduler names it.
fn untolerated_taint(spec: &PodSpec, node: &Node) -> Option<String> {
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    let taints = node.spec.as_ref()?.taints.as_ref()?;
    taints
        .iter()
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
        .map(|taint| format!("{}: {}", taint.key, taint.value.as_deref().unwrap_or("")))
}

/// Bind `pod` to the best node that fits, or report why none does.
pub(super) async fn schedule(pod: &Pod, ctx: &Context<Nodes>) -> Result<Action, kube::Error> {
    let nodes = ctx.data();
    let Some((pod_cache, node_cache)) = nodes.caches.get() else {
        return Ok(Action::done());
    };
    let total = nodes.names.len();
    let claims = match volumes::claims_of(pod, &ctx.client()).await? {
        Ok(claims) => claims,
        Err(unresolvable) => {
            let message = unschedulable_message(&unresolvable, &BTreeMap::new(), total);
            tolerate_races(report_unschedulable(pod, message, ctx).await)?;
            return Ok(Action::requeue_after(volumes::CLAIM_RETRY));
        }
    };
    let wanted = resources::requested(pod);
    let in_use = match wanted.is_empty() {
        true => BTreeMap::new(),
        false => super::lock(&nodes.usage).by_node(pod_cache).clone(),
    };
    // The fitting nodes, with how much the pod's preferred node affinity likes each.
    let mut fitting: Vec<(String, i64)> = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for name in &nodes.names {
        let key = ObjectKey::new(None, name);
        let Some(node) = node_cache.get(&key) else {
            *reasons.entry("node(s) were not found".into()).or_default() += 1;
            continue;
        };
        let why_not = match unfit(pod, &node) {
            Some(reason) => vec![reason],
            None => resources::insufficient(&wanted, &node, in_use.get(name)),
        };
        let why_not = match why_not.is_empty() {
            true => claims.unfit(name).into_iter().collect(),
            false => why_not,
        };
        if why_not.is_empty() {
            fitting.push((name.clone(), preferred_score(pod, &node)));
        }
        for reason in why_not {
            *reasons.entry(reason).or_default() += 1;
        }
    }
    let fitting = most_preferred(fitting);
    let chosen = claims
        .selected_node(&fitting)
        .or_else(|| least_loaded(&fitting, pod_cache, nodes));
    let Some(chosen) = chosen else {
        let message = unschedulable_message("", &reasons, total);
        tolerate_races(report_unschedulable(pod, message, ctx).await)?;
        // A Node change wakes the pod (`on_node_change`); room freed by other pods does
        // not, so a pod short of resources looks again (kube: on the pods' events).
        let short = reasons
            .keys()
            .any(|r| r.starts_with(resources::INSUFFICIENT));
        return Ok(match short {
            true => Action::requeue_after(resources::RETRY),
            false => Action::done(),
        });
    };
    let namespace = pod.namespace().unwrap_or_default();
    if claims
        .wait_for_binding(&chosen, &ctx.client(), &namespace)
        .await?
    {
        return Ok(Action::requeue_after(volumes::CLAIM_RETRY));
    }
    bind(pod, &chosen, ctx).await?;
    Ok(Action::done())
}

/// kube's NodeAffinity score of `node` for the pod.
fn preferred_score(pod: &Pod, node: &Node) -> i64 {
    pod.spec
        .as_ref()
        .map_or(0, |spec| node_affinity::preferred_score(spec, node))
}

/// The fitting nodes the pod's preferred node affinity likes best. kube adds that score
/// (weight 2, normalised to 100) to others; on simulated nodes of equal size with small
/// pods the others barely differ, so it decides, and the load breaks ties.
fn most_preferred(fitting: Vec<(String, i64)>) -> Vec<String> {
    let best = fitting.iter().map(|(_, score)| *score).max().unwrap_or(0);
    fitting
        .into_iter()
        .filter(|(_, score)| *score == best)
        .map(|(name, _)| name)
        .collect()
}

/// The fitting node with the fewest pods (bound or being bound), the first on a tie.
fn least_loaded(fitting: &[String], pods: &ObjectCache<Pod>, nodes: &Nodes) -> Option<String> {
    if fitting.len() <= 1 {
        return fitting.first().cloned();
    }
    let mut load: BTreeMap<&str, usize> = fitting.iter().map(|n| (n.as_str(), 0)).collect();
    let mut assumed = nodes.scheduler.lock().unwrap_or_else(|e| e.into_inner());
    for pod in pods.list() {
        let on = node_of(&pod);
        if !on.is_empty()
            && let Some(uid) = pod.metadata.uid.as_deref()
        {
            assumed.remove(uid);
        }
        if !crate::pod_template::is_finished(&pod)
            && let Some(count) = load.get_mut(on)
        {
            *count += 1;
        }
    }
    for on in assumed.values() {
        if let Some(count) = load.get_mut(on.as_str()) {
            *count += 1;
        }
    }
    fitting
        .iter()
        .min_by_key(|n| load.get(n.as_str()).copied().unwrap_or(0))
        .cloned()
}

/// Bind through `pods/binding`, as kube-scheduler's DefaultBinder does: the server sets the
/// node and `PodScheduled=True` in one write, and refuses a pod that is terminating or
/// already bound (a race this scheduler tolerates: the pod's next event settles it).
async fn bind(pod: &Pod, node: &str, ctx: &Context<Nodes>) -> Result<(), kube::Error> {
    let nodes = ctx.data();
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            uid: pod.uid(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..ObjectReference::default()
        },
    };
    let written: Result<Status, _> = Api::<Pod>::namespaced(ctx.client(), &namespace)
        .create_subresource("binding", &name, &PostParams::default(), &binding)
        .await;
    if let Err(e) = written {
        return tolerate_races(Err(e));
    }
    super::lock(&nodes.usage).bound(pod, node);
    if nodes.names.len() > 1
        && let Some(uid) = pod.uid()
    {
        let mut assumed = nodes.scheduler.lock().unwrap_or_else(|e| e.into_inner());
        assumed.insert(uid, node.to_string());
    }
    let message = format!("Successfully assigned {namespace}/{name} to {node}");
    let event = nodes.event(pod, "Normal", "Scheduled", &message, scheduler_source());
    nodes.scheduler_events.record(vec![event]);
    Ok(())
}

fn scheduler_source() -> Source<'static> {
    Source {
        component: SCHEDULER,
        host: None,
        field_path: None,
    }
}

/// kube-scheduler's summary of why no node fits: `0/3 nodes are available: …`, from a
/// reason that rules out every node at once (a pre-filter's) or the count of nodes each
/// reason ruled out.
fn unschedulable_message(
    unresolvable: &str,
    reasons: &BTreeMap<String, usize>,
    total: usize,
) -> String {
    let why = match unresolvable {
        "" => {
            // kube sorts the counted reasons as strings.
            let mut counted: Vec<String> = reasons
                .iter()
                .map(|(reason, count)| format!("{count} {reason}"))
                .collect();
            counted.sort();
            counted.join(", ")
        }
        reason => reason.to_string(),
    };
    format!(
        "0/{total} nodes are available: {why}. preemption: 0/{total} nodes are available: \
         {total} Preemption is not helpful for scheduling."
    )
}

/// Set `PodScheduled=False reason=Unschedulable` and record `FailedScheduling`, once per
/// new message (a pod retried on every Node change does not write each time).
async fn report_unschedulable(
    pod: &Pod,
    message: String,
    ctx: &Context<Nodes>,
) -> Result<(), kube::Error> {
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    if current.is_some_and(|c| c.status == "False" && c.message.as_deref() == Some(&message)) {
        return Ok(());
    }
    let nodes = ctx.data();
    let event = nodes.event(
        pod,
        "Warning",
        "FailedScheduling",
        &message,
        scheduler_source(),
    );
    nodes.scheduler_events.record(vec![event]);
    let condition = json!({
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": nodes.config.timestamp(),
    });
    let mut conditions: Vec<serde_json::Value> = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != "PodScheduled")
        .map(|c| json!(c))
        .collect();
    conditions.push(condition);
    let patch = json!({
        "metadata": {"resourceVersion": pod.resource_version()},
        "status": {"phase": "Pending", "conditions": conditions},
    });
    patch_status(&ctx.client(), pod, patch, ctx).await
}

/// Merge-patch the pod's status (conflicting if it changed since it was read) and
/// remember the result.
pub(super) async fn patch_status(
    client: &Client,
    pod: &Pod,
    patch: serde_json::Value,
    ctx: &Context<Nodes>,
) -> Result<(), kube::Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let api = Api::<Pod>::namespaced(client.clone(), &namespace);
    let written = api
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?;
    if let Some((pods, _)) = ctx.data().caches.get() {
        pods.remember(written);
    }
    Ok(())
}
