//! The DaemonSet controller: one pod per eligible Node, as kube-controller-manager 1.32
//! runs them.
//!
//! A Node is eligible when its labels match the template's `nodeSelector` and required
//! node affinity and the pod tolerates its `NoSchedule`/`NoExecute` taints. Each eligible Node without a pod gets
//! one (its `nodeName` set: see below), pods that failed are replaced, extra pods and
//! pods on Nodes no longer eligible (or gone) are deleted. A template change is rolled
//! one pod at a time (`maxUnavailable` 1, the default), only while every other pod is
//! available. Nodes are listed through the API, so every node the cluster has counts.

use std::collections::{BTreeMap, BTreeSet};

use futures::FutureExt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, Taint, Toleration,
};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use steady_runtime::events::Recorder;
use steady_runtime::{Action, Context, ObjectCache};

use crate::claim::{self, Claim};
use crate::clock;
use crate::node_affinity;
use crate::pod_template::{self, Availability, PodName};
use crate::revision::{self, REVISION_LABEL};
use crate::{Clock, Error, Running, Setup, Shutdown};

/// The label holding the DaemonSet generation a pod was made at.
pub const GENERATION_LABEL: &str = "pod-template-generation";
const MANAGER: &str = "daemonset-controller";

/// Start the DaemonSet controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let mut controller = crate::controller_for::<DaemonSet>(&client, config);
    let sets = controller.primary_cache();
    let data = DaemonData {
        events: crate::recorder(&client, MANAGER, &clock),
        clock,
        pods: crate::adopts_pods_labelled(&mut controller, &client, GENERATION_LABEL, selects),
        revisions: controller.owns(Api::<ControllerRevision>::all(client.clone())),
        // Any Node change may change where every DaemonSet runs.
        nodes: controller.watches(Api::<Node>::all(client.clone()), move |_| sets.keys()),
    };
    controller.run(reconcile, Arc::new(data), shutdown).boxed()
}

struct DaemonData {
    clock: Clock,
    pods: ObjectCache<Pod>,
    revisions: ObjectCache<ControllerRevision>,
    nodes: ObjectCache<Node>,
    events: Recorder,
}

/// Whether the pod's toleration covers the taint.
pub(crate) fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect_matches = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key_matches = match toleration.key.as_deref() {
        None | Some("") => toleration.operator.as_deref() == Some("Exists"),
        Some(key) => key == taint.key,
    };
    let value_matches = match toleration.operator.as_deref() {
        Some("Exists") => true,
        _ => toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
    };
    effect_matches && key_matches && value_matches
}

/// Whether a pod of `spec` may run on `node` (kube's `predicates`): its nodeSelector and
/// required node affinity match and every scheduling taint is tolerated.
fn eligible(spec: &PodSpec, node: &Node) -> bool {
    let selected = node_affinity::required_match(spec, node);
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    let tolerated = taints
        .iter()
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)));
    selected && tolerated
}

/// The tolerations kube adds to every daemon pod, so node trouble does not evict it.
fn daemon_tolerations() -> Vec<Toleration> {
    [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
    .into_iter()
    .map(|(key, effect)| Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Toleration::default()
    })
    .collect()
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// What one reconcile knows about a DaemonSet.
struct Daemon<'a> {
    ctx: &'a Context<DaemonData>,
    object: &'a DaemonSet,
    name: String,
    namespace: String,
    update_revision: String,
    /// Eligible node names.
    nodes: Vec<String>,
    /// The DaemonSet's pods by node (terminating ones included).
    pods: BTreeMap<String, Vec<Arc<Pod>>>,
    /// The reconcile's time, against which `minReadySeconds` is judged.
    now: Timestamp,
}

/// Whether the DaemonSet's selector matches the pod (kube's DaemonSet controller claims
/// every pod of its namespace by selector alone).
fn selects(set: &DaemonSet, pod: &Pod) -> bool {
    claim::selects(
        set.spec.as_ref().map(|s| &s.selector),
        pod.metadata.labels.as_ref(),
    )
}

async fn reconcile(object: Arc<DaemonSet>, ctx: Arc<Context<DaemonData>>) -> Result<Action, Error> {
    if object.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let Some(spec) = object.spec.clone() else {
        return Ok(Action::done());
    };
    let pod_spec = spec.template.spec.clone().unwrap_or_default();
    let name = object.name_any();
    let mut daemon = Daemon {
        ctx: &ctx,
        object: &object,
        namespace: pod_template::namespace_of(object.as_ref()),
        update_revision: revision::revision_name(&name, &spec.template),
        name,
        nodes: ctx
            .data()
            .nodes
            .list()
            .iter()
            .filter(|node| eligible(&pod_spec, node))
            .map(|node| node.name_any())
            .collect(),
        pods: BTreeMap::new(),
        now: clock::timestamp(&ctx.data().clock),
    };
    daemon.ensure_revision().await?;
    let candidates = ctx.data().pods.in_namespace(Some(&daemon.namespace));
    Claim::new(object.as_ref(), ctx.as_ref())
        .run(&candidates, Some(&spec.selector), |_| true)
        .await?;
    daemon.pods = daemon.pods_by_node();
    for node in daemon.nodes.clone() {
        daemon.place(&node).await?;
    }
    for (node, pods) in &daemon.pods {
        if !daemon.nodes.contains(node) {
            for pod in pods.iter().filter(|p| !pod_template::is_terminating(p)) {
                daemon.delete_pod(pod).await?;
            }
        }
    }
    daemon.pods = daemon.pods_by_node();
    daemon.roll().await?;
    daemon.pods = daemon.pods_by_node();
    let mut in_use: BTreeSet<String> = daemon
        .pods
        .values()
        .flatten()
        .filter_map(|pod| revision::of_pod(pod).map(str::to_string))
        .collect();
    in_use.insert(daemon.update_revision.clone());
    let uid = object.uid().unwrap_or_default();
    let revisions = &ctx.data().revisions;
    revision::prune(
        &ctx,
        revisions,
        &uid,
        &daemon.namespace,
        &in_use,
        spec.revision_history_limit,
    )
    .await?;
    daemon.write_status().await?;
    // A pod Ready but not yet for minReadySeconds changes the status (and lets the rollout
    // go on) when it turns available: look again then.
    match daemon.next_available() {
        Some(left) => Ok(Action::requeue_after(left)),
        None => Ok(Action::done()),
    }
}

impl Daemon<'_> {
    fn min_ready_seconds(&self) -> i32 {
        let spec = self.object.spec.as_ref();
        spec.and_then(|s| s.min_ready_seconds).unwrap_or(0)
    }

    /// Whether `pod` counts as available: Ready for `minReadySeconds`.
    fn available(&self, pod: &Pod) -> bool {
        pod_template::availability(pod, self.min_ready_seconds(), self.now)
            == Availability::Available
    }

    /// How long until the next Ready pod becomes available, if one is waiting.
    fn next_available(&self) -> Option<Duration> {
        let pods = self.pods.values().flatten().map(AsRef::as_ref);
        pod_template::next_available(pods, self.min_ready_seconds(), self.now)
    }

    fn template(&self) -> Option<&k8s_openapi::api::core::v1::PodTemplateSpec> {
        self.object.spec.as_ref().map(|s| &s.template)
    }

    fn pods_by_node(&self) -> BTreeMap<String, Vec<Arc<Pod>>> {
        let mut by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
        for pod in self
            .ctx
            .data()
            .pods
            .owned_by(&self.object.uid().unwrap_or_default())
        {
            by_node
                .entry(node_of(&pod).to_string())
                .or_default()
                .push(pod);
        }
        by_node
    }

    /// Exactly one live pod on `node`: create one, replace a failed one, delete extras.
    async fn place(&self, node: &str) -> Result<(), Error> {
        let pods = self.pods.get(node).cloned().unwrap_or_default();
        let mut live: Vec<&Arc<Pod>> = pods
            .iter()
            .filter(|p| !pod_template::is_terminating(p))
            .collect();
        for failed in live.iter().filter(|p| pod_template::is_finished(p)) {
            self.delete_pod(failed).await?;
        }
        live.retain(|p| !pod_template::is_finished(p));
        // The oldest stays.
        live.sort_by_key(|p| p.metadata.creation_timestamp.clone());
        for extra in live.iter().skip(1) {
            self.delete_pod(extra).await?;
        }
        if live.is_empty() && pods.iter().all(|p| !pod_template::is_terminating(p)) {
            self.create_pod(node).await?;
        }
        Ok(())
    }

    /// Replace one outdated pod once every other pod is available (`maxUnavailable` 1).
    async fn roll(&self) -> Result<(), Error> {
        let strategy = self
            .object
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.clone());
        if strategy.and_then(|s| s.type_).as_deref() == Some("OnDelete") {
            return Ok(());
        }
        let pods: Vec<&Arc<Pod>> = self
            .nodes
            .iter()
            .filter_map(|node| self.pods.get(node))
            .flatten()
            .collect();
        let all_available = pods.len() == self.nodes.len()
            && pods
                .iter()
                .all(|p| self.available(p) && !pod_template::is_terminating(p));
        if !all_available {
            return Ok(());
        }
        let outdated = pods
            .iter()
            .find(|p| revision::of_pod(p) != Some(self.update_revision.as_str()));
        if let Some(pod) = outdated {
            self.delete_pod(pod).await?;
        }
        Ok(())
    }

    async fn create_pod(&self, node: &str) -> Result<(), Error> {
        let Some(template) = self.template() else {
            return Ok(());
        };
        let mut pod = pod_template::pod_from_template(
            template,
            pod_template::controller_ref(self.object),
            &self.namespace,
            PodName::Prefix(format!("{}-", self.name)),
        );
        let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(REVISION_LABEL.into(), self.update_revision.clone());
        let generation = self.object.metadata.generation.unwrap_or(1);
        labels.insert(GENERATION_LABEL.into(), generation.to_string());
        let spec = pod.spec.get_or_insert_with(PodSpec::default);
        // kube pins the pod with node affinity and lets the scheduler bind it; steady binds
        // it here, so a simulated node only ever runs the pods meant for it.
        spec.node_name = Some(node.to_string());
        // kube's `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required terms (already
        // judged here) give way to the node's name; the rest of the affinity stays.
        let pinned = NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_fields: Some(vec![NodeSelectorRequirement {
                    key: "metadata.name".into(),
                    operator: "In".into(),
                    values: Some(vec![node.to_string()]),
                }]),
                match_expressions: None,
            }],
        };
        spec.affinity
            .get_or_insert_with(Affinity::default)
            .node_affinity
            .get_or_insert_with(NodeAffinity::default)
            .required_during_scheduling_ignored_during_execution = Some(pinned);
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        for toleration in daemon_tolerations() {
            if !tolerations.contains(&toleration) {
                tolerations.push(toleration);
            }
        }
        let created = match self
            .ctx
            .api::<Pod>(&self.namespace)
            .create(&PostParams::default(), &pod)
            .await
        {
            Ok(created) => created,
            Err(error) => {
                let events = &self.ctx.data().events;
                let creating = |why: &str| format!("Error creating: {why}");
                return Err(crate::failed_create(events, self.object, creating, error).await);
            }
        };
        let message = format!("Created pod: {}", created.name_any());
        self.record("SuccessfulCreate", &message).await;
        Ok(())
    }

    async fn delete_pod(&self, pod: &Pod) -> Result<(), Error> {
        let api = self.ctx.api::<Pod>(&self.namespace);
        if !pod_template::delete_exact(&api, pod).await? {
            return Ok(());
        }
        let message = format!("Deleted pod: {}", pod.name_any());
        self.record("SuccessfulDelete", &message).await;
        Ok(())
    }

    /// Record a Normal event about this DaemonSet.
    async fn record(&self, reason: &str, message: &str) {
        crate::record_normal(&self.ctx.data().events, self.object, reason, message).await;
    }

    async fn ensure_revision(&self) -> Result<(), Error> {
        let Some(template) = self.template() else {
            return Ok(());
        };
        let revisions = &self.ctx.data().revisions;
        revision::ensure(
            self.ctx,
            revisions,
            self.object,
            &self.update_revision,
            template,
        )
        .await?;
        Ok(())
    }

    fn status(&self) -> DaemonSetStatus {
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let scheduled: Vec<&Arc<Pod>> = self
            .nodes
            .iter()
            .filter_map(|node| {
                self.pods
                    .get(node)?
                    .iter()
                    .find(|p| !pod_template::is_terminating(p))
            })
            .collect();
        let misscheduled = self
            .pods
            .iter()
            .filter(|(node, pods)| {
                !self.nodes.contains(node) && pods.iter().any(|p| !pod_template::is_terminating(p))
            })
            .count();
        let ready = scheduled
            .iter()
            .filter(|p| pod_template::is_ready(p))
            .count();
        let available = scheduled.iter().filter(|p| self.available(p)).count();
        let updated = scheduled
            .iter()
            .filter(|p| revision::of_pod(p) == Some(self.update_revision.as_str()))
            .count();
        let desired = count(self.nodes.len());
        let nonzero = |n: i32| (n != 0).then_some(n);
        DaemonSetStatus {
            observed_generation: self.object.metadata.generation,
            desired_number_scheduled: desired,
            current_number_scheduled: count(scheduled.len()),
            number_misscheduled: count(misscheduled),
            number_ready: count(ready),
            number_available: nonzero(count(available)),
            number_unavailable: nonzero(desired - count(available)),
            updated_number_scheduled: nonzero(count(updated)),
            collision_count: None,
            conditions: self
                .object
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone()),
        }
    }

    async fn write_status(&self) -> Result<(), Error> {
        let status = self.status();
        let api = self.ctx.api::<DaemonSet>(&self.namespace);
        // Counts that dropped to zero are omitted by kube: remove them.
        let omitted = [
            "numberAvailable",
            "numberUnavailable",
            "updatedNumberScheduled",
        ];
        let current = self.object.status.as_ref();
        crate::write_status(&api, &self.name, current, &status, &omitted).await?;
        Ok(())
    }
}
