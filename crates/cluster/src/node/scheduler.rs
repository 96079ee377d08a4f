//! The scheduler: binds each pod without a node that it is to place (its own
//! `schedulerName`, no scheduling gate) to one of the simulated nodes, one decision at a
//! time, as kube-scheduler's default plugins do: the filters in kube's order (Ready, not
//! cordoned, taints, node affinity here; host ports, resources, claims (`volumes`),
//! topology spread and inter-pod affinity in their modules), the fitting nodes ranked
//! (`scoring`), the chosen one assumed before the binding is written. A pod no node fits
//! may preempt (`preemption`); else it stays Pending with `PodScheduled=False` (reason
//! `Unschedulable`, kube's message) and a `FailedScheduling` event, and is tried again
//! when a Node changes, or after a while when other pods decided it.
//!
//! Must not know: how a bound pod runs (the kubelet).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Binding, Namespace, Node, ObjectReference, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Status};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use steady_quota::ResourceList;
use steady_runtime::{Action, Context, ObjectCache, ObjectKey};

use crate::daemonset::tolerates;
use crate::node_affinity;

use super::placed::Placed;
use super::{
    ByUid, Nodes, Source, host_ports, pod_affinity, preemption, resources, scoring, tolerate_races,
    topology_spread, volumes,
};

/// Pods bound but not yet seen bound in the cache, by uid (their node and the pod), so a
/// burst of bindings spreads, and keeps its affinity rules, instead of piling onto the
/// node that looked emptiest (kube-scheduler's assumed pods). A pod's bound event removes
/// it; those deleted before theirs came are pruned whenever a decision reads them all,
/// and at latest when the set has doubled since it was last pruned.
#[derive(Default)]
pub(super) struct Assumed {
    pods: ByUid<(String, Arc<Pod>, ObjectKey)>,
    prune_at: usize,
}

impl Assumed {
    fn insert(&mut self, uid: String, node: &str, pod: &Arc<Pod>, cache: &ObjectCache<Pod>) {
        let entry = (node.to_string(), pod.clone(), ObjectKey::of(pod.as_ref()));
        self.pods.insert(uid, entry);
        if self.pods.len() > self.prune_at.max(1024) {
            self.pending(cache);
            self.prune_at = 2 * self.pods.len();
        }
    }

    pub(super) fn remove(&mut self, uid: &str) {
        self.pods.remove(uid);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Those the cache still shows unbound, with their nodes; those it shows bound,
    /// finished or gone are forgotten.
    pub(super) fn pending(&mut self, cache: &ObjectCache<Pod>) -> Vec<(String, Arc<Pod>)> {
        let mut still = Vec::new();
        self.pods.retain(|uid, (node, pod, key)| {
            let pending = cache.get(key).is_some_and(|c| {
                c.metadata.uid.as_deref() == Some(uid)
                    && node_of(&c).is_empty()
                    && !crate::pod_template::is_finished(&c)
            });
            if pending {
                still.push((node.clone(), pod.clone()));
            }
            pending
        });
        still
    }
}

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

/// Whether this scheduler is to place the pod: it names no other scheduler (kube's
/// default-scheduler takes only pods of its profile) and no scheduling gate holds it
/// (kube's SchedulingGates pre-enqueue check; the API server already wrote why it waits).
pub(super) fn takes(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let ours = spec
        .scheduler_name
        .as_deref()
        .is_none_or(|name| name.is_empty() || name == SCHEDULER);
    ours && spec.scheduling_gates.as_ref().is_none_or(Vec::is_empty)
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
pub(super) fn untolerated_taint(spec: &PodSpec, node: &Node) -> Option<String> {
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let taints = node.spec.as_ref()?.taints.as_ref()?;
    taints
        .iter()
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
        .map(|taint| format!("{}: {}", taint.key, taint.value.as_deref().unwrap_or("")))
}

/// Why one node cannot take the pod: the reasons of the first filter that refused it,
/// whether evicting pods from it could help (kube's `Unschedulable`, as against
/// `UnschedulableAndUnresolvable`), and whether other pods decided it (their events may
/// change it, as kube's queueing hints say).
pub(super) struct Refusal {
    pub(super) reasons: Vec<String>,
    pub(super) preemptible: bool,
    by_other_pods: bool,
}

impl Refusal {
    fn by_node(reason: impl Into<String>) -> Self {
        Refusal {
            reasons: vec![reason.into()],
            preemptible: false,
            by_other_pods: false,
        }
    }

    fn by_pods((reason, preemptible): (&str, bool)) -> Self {
        Refusal {
            reasons: vec![reason.to_string()],
            preemptible,
            by_other_pods: true,
        }
    }

    /// Refused for what other pods hold, evicting them could help: `None` if nothing is
    /// short.
    fn short_of(reasons: Vec<String>) -> Option<Self> {
        (!reasons.is_empty()).then_some(Refusal {
            reasons,
            preemptible: true,
            by_other_pods: true,
        })
    }
}

/// What one decision weighs, read once (kube's cycle state): the pod's requests, host
/// ports, claims, affinity terms and spread constraints, what each node's pods request
/// (with the room kept for pods nominated there ahead of it), and the nodes.
pub(super) struct Cycle<'a> {
    pub(super) pod: &'a Arc<Pod>,
    wanted: ResourceList,
    in_use: BTreeMap<String, ResourceList>,
    ports: Vec<host_ports::HostPort>,
    nominated: BTreeMap<String, Vec<Arc<Pod>>>,
    claims: &'a volumes::Claims,
    pub(super) terms: pod_affinity::Terms,
    pub(super) spread: topology_spread::Constraints,
    pub(super) namespaces: pod_affinity::NamespaceLabels,
    pub(super) all_nodes: Vec<Arc<Node>>,
    node_cache: &'a ObjectCache<Node>,
}

/// The filters that read other pods, over one view of them.
struct PodFilters<'c> {
    affinity: Option<pod_affinity::Filter<'c>>,
    spreading: Option<topology_spread::Filter<'c>>,
}

impl Cycle<'_> {
    pub(super) fn node_named(&self, name: &str) -> Option<Arc<Node>> {
        self.node_cache.get(&ObjectKey::new(None, name))
    }

    fn filters(&self, placed: &Placed) -> PodFilters<'_> {
        let node_named = |name: &str| self.node_named(name);
        let pod = self.pod;
        PodFilters {
            affinity: pod_affinity::Filter::new(
                pod,
                &self.terms,
                placed,
                &node_named,
                &self.namespaces,
            ),
            spreading: topology_spread::Filter::new(pod, &self.spread, placed, &self.all_nodes),
        }
    }

    /// kube's filters in its order on the node `name`, over `placed` with `in_use`
    /// requested there; the first that refuses it names why.
    fn refusal(
        &self,
        name: &str,
        node: &Node,
        placed: &Placed,
        filters: &PodFilters,
        in_use: Option<&ResourceList>,
    ) -> Option<Refusal> {
        let nominated = self.nominated.get(name).into_iter().flatten();
        unfit(self.pod, node)
            .map(Refusal::by_node)
            .or_else(|| {
                let taken = host_ports::taken(&self.ports, placed.on(name).iter().chain(nominated));
                taken.then(|| Refusal::by_pods((host_ports::PORTS_TAKEN, true)))
            })
            .or_else(|| Refusal::short_of(resources::insufficient(&self.wanted, node, in_use)))
            .or_else(|| self.claims.unfit(name).map(Refusal::by_node))
            .or_else(|| {
                filters
                    .spreading
                    .as_ref()?
                    .refuses(node)
                    .map(Refusal::by_pods)
            })
            .or_else(|| {
                filters
                    .affinity
                    .as_ref()?
                    .refuses(node)
                    .map(Refusal::by_pods)
            })
    }

    /// Why the node `name` would still refuse the pod with `removed` (pods placed there)
    /// gone: preemption's dry run.
    pub(super) fn refusal_without(
        &self,
        name: &str,
        placed: &Placed,
        removed: &[Arc<Pod>],
    ) -> Option<Refusal> {
        let Some(node) = self.node_named(name) else {
            return Some(Refusal::by_node("node(s) were not found"));
        };
        let remaining = placed.without(removed);
        let filters = self.filters(&remaining);
        let mut in_use = self.in_use.get(name).cloned().unwrap_or_default();
        for pod in removed {
            resources::add_to(&mut in_use, &resources::requested(pod), -1);
        }
        self.refusal(name, &node, &remaining, &filters, Some(&in_use))
    }
}

/// Bind `pod` to the best node that fits, else evict pods of lower priority for it where
/// that helps, else report why no node fits.
pub(super) async fn schedule(pod: &Arc<Pod>, ctx: &Context<Nodes>) -> Result<Action, kube::Error> {
    let nodes = ctx.data();
    let Some((pod_cache, node_cache)) = nodes.caches.get() else {
        return Ok(Action::done());
    };
    let total = nodes.names.len();
    let claims = match volumes::claims_of(pod, &ctx.client()).await? {
        Ok(claims) => claims,
        Err(unresolvable) => {
            let note = preemption::note_for_all(pod, total);
            let message = unschedulable_message(&unresolvable, Some(&note), total);
            tolerate_races(report_unschedulable(pod, message, None, ctx).await)?;
            return Ok(Action::requeue_after(volumes::CLAIM_RETRY));
        }
    };
    // One decision at a time, each seeing the pods the ones before assumed (kube's
    // scheduling cycle): the pods controller reconciles many pods at once.
    let deciding = nodes.deciding.lock().await;
    let wanted = resources::requested(pod);
    let nominated = super::lock(&nodes.nominated).ahead_of(pod, pod_cache);
    let mut in_use = match wanted.is_empty() {
        true => BTreeMap::new(),
        false => super::lock(&nodes.usage).by_node(pod_cache).clone(),
    };
    if !wanted.is_empty() {
        for (node, held) in &nominated {
            let sum = in_use.entry(node.clone()).or_default();
            for pod in held {
                resources::add_to(sum, &resources::requested(pod), 1);
            }
        }
    }
    let terms = pod_affinity::Terms::of(pod);
    let spread = topology_spread::Constraints::of(pod);
    let ports = host_ports::wanted(pod);
    let placed = placed_for(&terms, &spread, !ports.is_empty(), pod_cache, nodes);
    let namespaces = match terms.read_namespace_labels(&placed) {
        true => namespace_labels(&ctx.client()).await?,
        false => pod_affinity::NamespaceLabels::new(),
    };
    let cycle = Cycle {
        pod,
        wanted,
        in_use,
        ports,
        nominated,
        claims: &claims,
        terms,
        spread,
        namespaces,
        all_nodes: node_cache.list(),
        node_cache,
    };
    let filters = cycle.filters(&placed);
    let mut fitting: Vec<Arc<Node>> = Vec::new();
    let mut refusals: Vec<(String, Refusal)> = Vec::new();
    for name in &nodes.names {
        let refusal = match cycle.node_named(name) {
            None => Some(Refusal::by_node("node(s) were not found")),
            Some(node) => {
                let refused = cycle.refusal(name, &node, &placed, &filters, cycle.in_use.get(name));
                if refused.is_none() {
                    fitting.push(node);
                }
                refused
            }
        };
        if let Some(refusal) = refusal {
            refusals.push((name.clone(), refusal));
        }
    }
    let chosen = claims.selected_node(&names(&fitting)).or_else(|| {
        let scoring = scoring::Scoring {
            cycle: &cycle,
            placed: &placed,
            pods: pod_cache,
            nodes,
        };
        scoring.best(&fitting)
    });
    let Some(chosen) = chosen else {
        // Evicting needs every pod of the nodes in view, not only those with terms.
        let plan = preemption::plan(&cycle, &refusals, &everyone(pod_cache, nodes));
        drop(deciding);
        return report_unfit(pod, &refusals, plan, total, ctx).await;
    };
    assume(pod, &chosen, nodes, pod_cache);
    drop(deciding);
    let namespace = pod.namespace().unwrap_or_default();
    let bound = match claims
        .wait_for_binding(&chosen, &ctx.client(), &namespace)
        .await
    {
        Ok(true) => Ok(None),
        Ok(false) => bind(pod, &chosen, ctx).await.map(Some),
        Err(e) => Err(e),
    };
    if !matches!(bound, Ok(Some(true))) {
        forget(pod, nodes);
    }
    Ok(match bound? {
        None => Action::requeue_after(volumes::CLAIM_RETRY),
        Some(_) => Action::done(),
    })
}

/// Report why no node fits, after carrying out what preemption planned; look again when
/// other pods may have changed it.
async fn report_unfit(
    pod: &Arc<Pod>,
    refusals: &[(String, Refusal)],
    plan: preemption::Plan,
    total: usize,
    ctx: &Context<Nodes>,
) -> Result<Action, kube::Error> {
    let reasons = refusals
        .iter()
        .flat_map(|(_, r)| r.reasons.iter().map(String::as_str));
    let why = histogram(reasons);
    let (note, nominated) = match plan {
        preemption::Plan::Refused(note) => (Some(note), None),
        preemption::Plan::Evict { node, victims } => {
            preemption::evict(pod, &node, &victims, ctx).await?;
            (None, Some(node))
        }
    };
    let message = unschedulable_message(&why, note.as_deref(), total);
    tolerate_races(report_unschedulable(pod, message, nominated.as_deref(), ctx).await)?;
    // A Node change wakes the pod (`on_node_change`); other pods' changes (room freed, a
    // pod its affinity needs, victims gone) do not, so such a pod looks again (kube: on
    // the pods' events).
    let by_other_pods = nominated.is_some() || refusals.iter().any(|(_, r)| r.by_other_pods);
    Ok(match by_other_pods {
        true => Action::requeue_after(resources::RETRY),
        false => Action::done(),
    })
}

/// Count the pod on `node` before its binding is written, as kube-scheduler assumes a
/// pod in its cache before it binds: the next decision sees it there.
fn assume(pod: &Arc<Pod>, node: &str, nodes: &Nodes, cache: &ObjectCache<Pod>) {
    super::lock(&nodes.usage).bound(pod, node);
    if let Some(uid) = pod.uid() {
        super::lock(&nodes.scheduler).insert(uid, node, pod, cache);
    }
}

/// Undo [`assume`] for a pod that was not bound after all.
fn forget(pod: &Pod, nodes: &Nodes) {
    super::lock(&nodes.usage).observe(pod);
    if let Some(uid) = pod.metadata.uid.as_deref() {
        super::lock(&nodes.scheduler).remove(uid);
    }
}

fn names(nodes: &[Arc<Node>]) -> Vec<String> {
    nodes.iter().map(|n| n.name_any()).collect()
}

/// What the decision's filters and scores must see of other pods: every placed pod when
/// the pod states inter-pod affinity, spread constraints or host ports; else only those
/// whose own affinity terms may concern it (the load is counted apart).
fn placed_for(
    terms: &pod_affinity::Terms,
    spread: &topology_spread::Constraints,
    host_ports: bool,
    pods: &ObjectCache<Pod>,
    nodes: &Nodes,
) -> Placed {
    if !terms.is_empty() || !spread.is_empty() || host_ports {
        return everyone(pods, nodes);
    }
    let mut with_terms = super::lock(&nodes.with_terms);
    if with_terms.is_empty() {
        return Placed::default();
    }
    let assumed = super::lock(&nodes.scheduler).pending(pods);
    let assumed = assumed
        .into_iter()
        .filter(|(_, pod)| pod_affinity::has_terms(pod));
    Placed::new(with_terms.placed(pods), assumed)
}

/// Every placed pod, bound or assumed.
fn everyone(pods: &ObjectCache<Pod>, nodes: &Nodes) -> Placed {
    let assumed = super::lock(&nodes.scheduler).pending(pods);
    Placed::new(pods.list(), assumed)
}

/// Every namespace's labels, for the namespace selectors of affinity terms.
async fn namespace_labels(client: &Client) -> Result<pod_affinity::NamespaceLabels, kube::Error> {
    let listed = Api::<Namespace>::all(client.clone())
        .list(&Default::default())
        .await?;
    Ok(listed
        .items
        .into_iter()
        .map(|ns| (ns.name_any(), ns.metadata.labels.unwrap_or_default()))
        .collect())
}

/// Bind through `pods/binding`, as kube-scheduler's DefaultBinder does: the server sets the
/// node and `PodScheduled=True` in one write, and refuses a pod that is terminating or
/// already bound (a race this scheduler tolerates: the pod's next event settles it).
/// Whether the pod was bound.
async fn bind(pod: &Arc<Pod>, node: &str, ctx: &Context<Nodes>) -> Result<bool, kube::Error> {
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
        return tolerate_races(Err(e)).map(|()| false);
    }
    let message = format!("Successfully assigned {namespace}/{name} to {node}");
    let event = nodes.event(pod, "Normal", "Scheduled", &message, source());
    nodes.scheduler_events.record(vec![event]);
    Ok(true)
}

pub(super) fn source() -> Source<'static> {
    Source {
        component: SCHEDULER,
        host: None,
        field_path: None,
    }
}

/// kube-scheduler's summary of why no node fits (its `FitError`): `0/3 nodes are
/// available: …` with `why` (a pre-filter's reason that rules out every node at once, or
/// the count of nodes each reason ruled out), then preemption's note, if it left one (a
/// preemption carried out leaves none).
fn unschedulable_message(why: &str, preemption: Option<&str>, total: usize) -> String {
    let note = preemption
        .map(|note| format!(" preemption: {note}."))
        .unwrap_or_default();
    format!("0/{total} nodes are available: {why}.{note}")
}

/// `3 reason, 1 other`: how many times each reason occurs, sorted as strings (as kube
/// sorts them).
pub(super) fn histogram<'a>(reasons: impl Iterator<Item = &'a str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in reasons {
        *counts.entry(reason).or_default() += 1;
    }
    let mut counted: Vec<String> = counts
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    counted.sort();
    counted.join(", ")
}

/// Set `PodScheduled=False reason=Unschedulable` (and the node preemption nominated the
/// pod to) and record `FailedScheduling`, once per new message (a pod retried on every
/// Node change does not write each time).
async fn report_unschedulable(
    pod: &Pod,
    message: String,
    nominated: Option<&str>,
    ctx: &Context<Nodes>,
) -> Result<(), kube::Error> {
    let status = pod.status.as_ref();
    let current = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    let nominated_now = status.and_then(|s| s.nominated_node_name.as_deref());
    let reported =
        current.is_some_and(|c| c.status == "False" && c.message.as_deref() == Some(&message));
    if reported && (nominated.is_none() || nominated == nominated_now) {
        return Ok(());
    }
    let nodes = ctx.data();
    let event = nodes.event(pod, "Warning", "FailedScheduling", &message, source());
    nodes.scheduler_events.record(vec![event]);
    let condition = json!({
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": nodes.config.timestamp(),
    });
    let mut status = json!({"phase": "Pending", "conditions": with_condition(pod, condition)});
    if let Some(node) = nominated {
        status["nominatedNodeName"] = json!(node);
    }
    let patch = json!({
        "metadata": {"resourceVersion": pod.resource_version()},
        "status": status,
    });
    patch_status(&ctx.client(), pod, patch, ctx).await
}

/// The pod's conditions with `condition` in place of any of its type: what a merge
/// patch of `status.conditions` must carry.
fn with_condition(pod: &Pod, condition: serde_json::Value) -> Vec<serde_json::Value> {
    let kind = condition["type"].as_str().unwrap_or_default().to_string();
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let mut kept: Vec<serde_json::Value> = conditions
        .into_iter()
        .flatten()
        .filter(|c| c.type_ != kind)
        .map(|c| json!(c))
        .collect();
    kept.push(condition);
    kept
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
    super::lock(&ctx.data().nominated).observe(&written);
    if let Some((pods, _)) = ctx.data().caches.get() {
        pods.remember(written);
    }
    Ok(())
}
