//! The simulated nodes (what kwok does, in-process): Node objects that register and stay
//! Ready, a scheduler that binds each new pod to one of them, and a kubelet that "runs"
//! the pods bound there: Running and Ready after a start delay, graceful deletion
//! confirmed once their containers "stop". No container really runs.
//!
//! Owns: the nodes' names, addresses and pod IPs ([`NodeConfig`]), the pod's walk from
//! Pending to Running/Succeeded/Failed and its deletion (`kubelet`), binding (`scheduler`)
//! and the Node objects with their conditions and heartbeats (`lifecycle`).
//! Must not know: the API server or the store. Like a kubelet and kube-scheduler it talks
//! to the API only through `kube::Client`, on steady's runtime: one controller over
//! Pods whose reconcile takes the pod's next step and asks to be requeued when its next
//! timer (start delay, run time, grace period) is due. Every random draw comes from
//! [`NodeConfig::seed`] and every timestamp from [`NodeConfig::clock`], so a seeded
//! simulation repeats.
//!
//! Annotations on a pod inject faults: `steady.dev/simulate: fail` (the container exits 1:
//! phase Failed), `never-ready` (Running, never Ready), `ignore-sigterm` (deletion waits the
//! whole grace period). A pod a Job owns runs to completion (phase Succeeded, exit 0) after
//! `job_pod_run_time`, as kwok's default stages complete Job pods.

mod event_queue;
mod host_ports;
mod kubelet;
mod lifecycle;
mod placed;
mod pod_affinity;
mod preemption;
mod resources;
mod scheduler;
mod scoring;
mod taints;
mod topology_spread;
mod volumes;

pub use lifecycle::{NOT_READY_TAINT, UNSCHEDULABLE_TAINT, is_ready, set_ready};

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::{Client, ResourceExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use steady_runtime::{Controller, ObjectCache};
use tokio::time::Instant;

use event_queue::{EventQueue, QUEUED_EVENTS};

/// Annotation that makes the simulated node misbehave for one pod.
pub const SIMULATE_ANNOTATION: &str = "steady.dev/simulate";

pub use crate::clock::Clock;

/// How the simulated nodes behave.
#[derive(Clone)]
pub struct NodeConfig {
    /// The node's name when there is one; with more, `<name>-0`, `<name>-1`, …
    pub name: String,
    /// How many nodes register (at least one).
    pub nodes: usize,
    /// From binding to Running/Ready.
    pub pod_start_delay: Duration,
    /// From a graceful delete to the node confirming it (capped by the grace period).
    pub pod_stop_delay: Duration,
    /// From Running to Succeeded, for pods a Job owns (their containers exit 0).
    pub job_pod_run_time: Duration,
    /// How often each node reports its status (the kubelet's heartbeat).
    pub heartbeat_interval: Duration,
    /// Seed for event names and the runtime's jitter; `None` draws one from the OS.
    pub seed: Option<u64>,
    /// Source of the timestamps the nodes write (the simulator supplies its own, a fixed
    /// start advancing with the paused clock).
    pub clock: Clock,
    /// Whether the kubelets and the scheduler record Events (Scheduled, Pulled, Started,
    /// Killing, ...), as real ones do. A simulation whose controller reads no Events may
    /// leave them out: they are most of the node's writes.
    pub record_events: bool,
    /// What each node offers pods (its capacity, allocatable alike).
    pub capacity: NodeCapacity,
}

/// A simulated node's `capacity` (and `allocatable`, the same): what the scheduler fits
/// the pods' requests into.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeCapacity {
    pub cpu: String,
    pub memory: String,
    pub ephemeral_storage: String,
    pub pods: String,
}

impl Default for NodeCapacity {
    /// A roomy workstation's: 32 CPUs, 256 GiB.
    fn default() -> Self {
        NodeCapacity {
            cpu: "32".into(),
            memory: "256Gi".into(),
            ephemeral_storage: "100Gi".into(),
            pods: "1000".into(),
        }
    }
}

impl NodeCapacity {
    /// Room for the benchmarks' hundred thousand pods on one node (no real node has it).
    pub fn for_benchmarks() -> Self {
        NodeCapacity {
            cpu: "1M".into(),
            memory: "1Pi".into(),
            ephemeral_storage: "1Pi".into(),
            pods: "1000000".into(),
        }
    }
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            name: "steady-node".into(),
            nodes: 1,
            pod_start_delay: Duration::from_millis(200),
            pod_stop_delay: Duration::from_millis(100),
            job_pod_run_time: Duration::from_millis(300),
            heartbeat_interval: Duration::from_secs(40),
            seed: None,
            clock: crate::clock::starting_now(),
            record_events: true,
            capacity: NodeCapacity::default(),
        }
    }
}

impl NodeConfig {
    /// The nodes' names, in registration order.
    pub fn node_names(&self) -> Vec<String> {
        let count = self.nodes.max(1);
        if count == 1 {
            return vec![self.name.clone()];
        }
        (0..count).map(|i| format!("{}-{i}", self.name)).collect()
    }

    fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    /// RFC 3339 with seconds, as Kubernetes writes `metav1.Time`.
    fn timestamp(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Secs, true)
    }
}

/// Why the nodes stopped other than by shutdown.
pub type Error = steady_runtime::Error;

/// Register the nodes and run them (scheduler, kubelets, node lifecycle) through `client`
/// until `shutdown` completes.
pub async fn run(
    client: Client,
    config: NodeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let shutdown = shutdown.boxed().shared();
    let nodes = Arc::new(Nodes::new(config, &client));
    lifecycle::register(&client, &nodes).await;
    let pods = pods_controller(&client, &nodes);
    let lifecycle = lifecycle::controller(&client, &nodes);
    futures::future::try_join(
        pods.run(reconcile_pod, nodes.clone(), shutdown.clone()),
        lifecycle.run(lifecycle::reconcile, nodes, shutdown),
    )
    .await
    .map(drop)
}

/// [`run`] in a task of its own until the task is aborted (or the runtime ends): what a
/// process or test that serves the API beside its nodes starts.
pub fn spawn(client: Client, config: NodeConfig) -> tokio::task::JoinHandle<Result<(), Error>> {
    tokio::spawn(run(client, config, std::future::pending()))
}

/// One controller over every pod: the scheduler's and the kubelets' decisions.
fn pods_controller(client: &Client, nodes: &Arc<Nodes>) -> Controller<Pod> {
    let config = steady_runtime::Config {
        name: "simulated-nodes".into(),
        // A kubelet starts many pods at once: writes go side by side, so the store
        // commits them together.
        concurrency: 256,
        seed: nodes.config.seed,
        ..steady_runtime::Config::default()
    };
    let mut controller = Controller::new(Api::<Pod>::all(client.clone()), config);
    let pods = controller.primary_cache();
    let on_node_change = scheduler::on_node_change(pods.clone());
    let node_cache = controller.watches(
        Api::<k8s_openapi::api::core::v1::Node>::all(client.clone()),
        on_node_change,
    );
    nodes.attach(pods, node_cache);
    controller
}

/// The state the scheduler and kubelets share.
struct Nodes {
    config: NodeConfig,
    names: Vec<String>,
    caches: std::sync::OnceLock<(
        ObjectCache<Pod>,
        ObjectCache<k8s_openapi::api::core::v1::Node>,
    )>,
    rng: Mutex<StdRng>,
    kubelet: Mutex<kubelet::Timers>,
    taints_seen: Mutex<taints::FirstSeen>,
    scheduler: Mutex<scheduler::Assumed>,
    /// Held through each scheduling decision.
    deciding: tokio::sync::Mutex<()>,
    with_terms: Mutex<pod_affinity::WithTerms>,
    nominated: Mutex<preemption::Nominated>,
    usage: Mutex<resources::Usage>,
    /// Each kubelet's Events, by node index, and the scheduler's: a queue each, as each
    /// is a process of its own on a real cluster.
    kubelet_events: Vec<EventQueue>,
    scheduler_events: EventQueue,
}

impl Nodes {
    fn new(config: NodeConfig, client: &Client) -> Self {
        let rng = match config.seed {
            Some(seed) => StdRng::seed_from_u64(seed ^ 0x0de5_1a7e),
            None => StdRng::from_os_rng(),
        };
        let names = config.node_names();
        let queue = |component: String| match config.record_events {
            true => EventQueue::start(client.clone(), component, QUEUED_EVENTS),
            false => EventQueue::discarding(component),
        };
        Nodes {
            kubelet_events: names
                .iter()
                .map(|n| queue(format!("kubelet/{n}")))
                .collect(),
            scheduler_events: queue(scheduler::SCHEDULER.to_string()),
            names,
            config,
            caches: std::sync::OnceLock::new(),
            rng: Mutex::new(rng),
            kubelet: Mutex::default(),
            taints_seen: Mutex::default(),
            scheduler: Mutex::default(),
            deciding: tokio::sync::Mutex::default(),
            with_terms: Mutex::default(),
            nominated: Mutex::default(),
            usage: Mutex::default(),
        }
    }

    fn attach(&self, pods: ObjectCache<Pod>, nodes: ObjectCache<k8s_openapi::api::core::v1::Node>) {
        let _ = self.caches.set((pods, nodes));
    }

    /// The index of the simulated node `name`, if it is one of these.
    fn index_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The node's InternalIP.
    fn host_ip(&self, index: usize) -> String {
        format!("10.0.{}.{}", index / 250, index % 250 + 1)
    }

    fn random(&self) -> u64 {
        self.rng.lock().unwrap_or_else(|e| e.into_inner()).random()
    }

    /// A core/v1 Event about `pod` from `component` (on `host`, for the kubelet), its
    /// name drawn now.
    fn event(
        &self,
        pod: &Pod,
        kind: &str,
        reason: &str,
        message: &str,
        source: Source<'_>,
    ) -> Value {
        let now = self.config.timestamp();
        let pod_name = pod.name_any();
        let suffix = self.random();
        let mut involved = json!({
            "kind": "Pod",
            "apiVersion": "v1",
            "namespace": pod.namespace(),
            "name": pod_name,
            "uid": pod.uid(),
        });
        if let Some(path) = source.field_path {
            involved["fieldPath"] = json!(path);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": format!("{pod_name}.{suffix:016x}"), "namespace": pod.namespace()},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": source.component, "host": source.host},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": source.component,
            "reportingInstance": source.host.unwrap_or(source.component),
        })
    }
}

/// Who reports an event: the component, its host (the kubelet's node) and the part of
/// the pod it is about.
#[derive(Clone, Copy)]
struct Source<'a> {
    component: &'a str,
    host: Option<&'a str>,
    field_path: Option<&'a str>,
}

/// The pod's next step: bind it if nobody has, else run it if it is on one of ours.
async fn reconcile_pod(
    pod: Arc<Pod>,
    ctx: Arc<steady_runtime::Context<Nodes>>,
) -> Result<steady_runtime::Action, kube::Error> {
    observe(&pod, ctx.data());
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    if node_name.is_empty() {
        // A gate's removal or a binding by the pod's own scheduler is an event of its own.
        if pod.metadata.deletion_timestamp.is_some() || !scheduler::takes(&pod) {
            return Ok(steady_runtime::Action::done());
        }
        return scheduler::schedule(&pod, &ctx).await;
    }
    let Some(index) = ctx.data().index_of(&node_name) else {
        return Ok(steady_runtime::Action::done());
    };
    if pod.metadata.deletion_timestamp.is_some() {
        return kubelet::step(&pod, index, &ctx).await;
    }
    let tolerated_for = match taints::step(&pod, &node_name, &ctx).await {
        Ok(left) => left,
        Err(taints::Evicted(result)) => {
            tolerate_races(result)?;
            return Ok(steady_runtime::Action::done());
        }
    };
    let action = kubelet::step(&pod, index, &ctx).await?;
    // Look again when the tolerance runs out, or sooner if the kubelet asked.
    Ok(match (action.requeue(), tolerated_for) {
        (Some(kubelet), Some(taints)) => steady_runtime::Action::requeue_after(kubelet.min(taints)),
        (None, Some(taints)) => steady_runtime::Action::requeue_after(taints),
        _ => action,
    })
}

/// Keep what the scheduler remembers of pods in step with the pod's event: the room it
/// holds, its affinity terms, and whether a binding is still only assumed.
fn observe(pod: &Pod, nodes: &Nodes) {
    lock(&nodes.usage).observe(pod);
    if pod_affinity::has_terms(pod) {
        lock(&nodes.with_terms).observe(pod);
    }
    lock(&nodes.nominated).observe(pod);
    if !scheduler::node_of(pod).is_empty()
        && let Some(uid) = pod.metadata.uid.as_deref()
    {
        let mut assumed = lock(&nodes.scheduler);
        if !assumed.is_empty() {
            assumed.remove(uid);
        }
    }
}

/// A deadline on the paused-clock-friendly tokio clock, as the runtime's requeue wants it.
fn requeue_at(due: Instant) -> steady_runtime::Action {
    steady_runtime::Action::requeue_after(due.saturating_duration_since(Instant::now()))
}

/// Ignore a conflict or a missing object: the pod changed under the step, and the watch
/// brings the next state (which the next reconcile decides from).
fn tolerate_races(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        other => other,
    }
}

/// The value behind `mutex`, even if a panicking holder poisoned it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Mark the pod `DisruptionTarget` (`reason`, `message`) by a strategic merge of its
/// status and delete it, as kube's evicting controllers do (taint eviction, preemption).
async fn disrupt(
    pod: &Pod,
    reason: &str,
    message: &str,
    ctx: &steady_runtime::Context<Nodes>,
) -> Result<(), kube::Error> {
    let mark = json!({"status": {"conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
        "lastTransitionTime": ctx.data().config.timestamp(),
    }]}});
    let api = ctx.api::<Pod>(&pod.namespace().unwrap_or_default());
    let name = pod.name_any();
    let patch = kube::api::Patch::Strategic(mark);
    api.patch_status(&name, &Default::default(), &patch).await?;
    api.delete(&name, &Default::default()).await.map(drop)
}

/// Keep `pod` among `tracked` (by uid, its key) or drop it, as its latest event says.
fn track(tracked: &mut ByUid<steady_runtime::ObjectKey>, pod: &Pod, keep: bool) {
    let Some(uid) = pod.metadata.uid.as_deref() else {
        return;
    };
    if !keep {
        tracked.remove(uid);
    } else if !tracked.contains_key(uid) {
        tracked.insert(uid.to_string(), steady_runtime::ObjectKey::of(pod));
    }
}

/// `BTreeMap` of pod uid to an instant, the kubelet's and scheduler's memory.
type ByUid<T> = BTreeMap<String, T>;
