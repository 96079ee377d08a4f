//! The simulated node (what kwok does, in-process): one Ready node; new pods are bound to
//! it, become Running and Ready after a start delay, and their graceful deletion is
//! confirmed once their containers "stop". No container really runs.
//!
//! Level-triggered like any controller: every pod event or timer re-reads the pod and
//! decides the next step from its state. It works in rounds, as a kubelet's workers do
//! many pods at once: each round takes every pod change already waiting and every due
//! timer, decides each pod's step in turn (the node's state, addresses and event names
//! are drawn in that order, so a seeded run repeats), then makes all the rounds' writes
//! concurrently, so the store commits them in a few group commits instead of one each. Annotations on a pod inject faults:
//! `steady.dev/simulate: fail` (the container exits 1: phase Failed), `never-ready`
//! (Running, never Ready), `ignore-sigterm` (deletion waits the whole grace period).
//! A pod a Job owns runs to completion (phase Succeeded, exit 0) after
//! `job_pod_run_time`, as kwok's default stages complete Job pods.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::FutureExt;
use serde_json::{Value, json};
use steady_store::{Event, EventKind, ListOptions, StoreError};
use tokio::time::Instant;

use crate::ApiServer;
use crate::error::ApiResult;
use crate::meta;
use crate::objects::Target;
use crate::request::{DeleteOptions, WriteOptions};

/// Annotation that makes the simulated node misbehave for one pod.
pub const SIMULATE_ANNOTATION: &str = "steady.dev/simulate";

/// The fault a pod asks the node to simulate (`steady.dev/simulate`), or "".
fn simulated_behaviour(pod: &Value) -> &str {
    meta::metadata(pod)
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(SIMULATE_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Whether a Job controls `pod` (its containers run to completion).
fn owned_by_job(pod: &Value) -> bool {
    meta::metadata(pod)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .is_some_and(|owners| {
            owners.iter().any(|o| {
                o["kind"] == "Job"
                    && o["apiVersion"] == "batch/v1"
                    && o["controller"] == json!(true)
            })
        })
}

/// How the simulated node behaves.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub name: String,
    /// From binding to Running/Ready.
    pub pod_start_delay: Duration,
    /// From a graceful delete to the node confirming it (capped by the grace period).
    pub pod_stop_delay: Duration,
    /// From Running to Succeeded, for pods a Job owns (their containers exit 0).
    pub job_pod_run_time: Duration,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            name: "steady-node".into(),
            pod_start_delay: Duration::from_millis(200),
            pod_stop_delay: Duration::from_millis(100),
            job_pod_run_time: Duration::from_millis(300),
        }
    }
}

const PODS_PREFIX: &str = "/core/pods/";

pub(crate) struct NodeSimulator {
    server: ApiServer,
    config: NodeConfig,
    /// When the node first saw each bound, not yet started pod (start = that + delay).
    bound_at: BTreeMap<String, Instant>,
    /// When the node began stopping each deleted pod (its Killing event was recorded then).
    stopping_since: BTreeMap<String, Instant>,
    /// When the node first saw each running pod that will run to completion.
    running_since: BTreeMap<String, Instant>,
    timers: BTreeMap<(Instant, u64), String>,
    timer_seq: u64,
    next_ip: u32,
}

/// At most this many pod changes are decided per round (the rest wait for the next).
const ROUND_LIMIT: usize = 1024;

/// Why the node's watch ended.
enum StreamEnd {
    /// The store shut down.
    Closed,
    /// The watch fell behind compaction: list again.
    Expired,
}

/// The pods a round looks at: the latest stored state of each, in the order first seen
/// (`None`: deleted since).
#[derive(Default)]
struct Round {
    pods: Vec<(String, Option<Vec<u8>>)>,
    index: BTreeMap<String, usize>,
}

impl Round {
    fn len(&self) -> usize {
        self.pods.len()
    }

    fn changed(&mut self, key: &str, value: &[u8]) {
        self.set(key, Some(value.to_vec()));
    }

    fn deleted(&mut self, key: &str) {
        if self.index.contains_key(key) {
            self.set(key, None);
        }
    }

    fn set(&mut self, key: &str, value: Option<Vec<u8>>) {
        match self.index.get(key) {
            Some(&at) => self.pods[at].1 = value,
            None => {
                self.index.insert(key.to_string(), self.pods.len());
                self.pods.push((key.to_string(), value));
            }
        }
    }
}

/// One pod's writes, decided from the node's state and taken concurrently with the
/// other pods' of the round (in order within the pod).
#[derive(Default)]
struct Step {
    /// Events recorded before the write (the kubelet's container events precede the
    /// status it reports).
    events_before: Vec<Value>,
    write: Option<Write>,
    /// Events recorded once the write succeeded (the scheduler reports a binding made).
    events_after: Vec<Value>,
}

enum Write {
    /// Replace the pod (or, with `status`, its status) with this.
    Update {
        pod: Value,
        subresource: Option<&'static str>,
    },
    /// Confirm the pod's deletion (no grace left, only if it is still this pod).
    Delete { pod: Value },
}

impl NodeSimulator {
    pub(crate) fn new(server: ApiServer, config: NodeConfig) -> Self {
        NodeSimulator {
            server,
            config,
            bound_at: BTreeMap::new(),
            stopping_since: BTreeMap::new(),
            running_since: BTreeMap::new(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            next_ip: 0,
        }
    }

    pub(crate) async fn run(mut self) {
        if let Err(e) = self.ensure_node().await {
            tracing::warn!(error = %e, "simulated node could not register itself");
        }
        loop {
            let store = self.server.store().clone();
            let options = ListOptions::at(store.revision());
            let page = match store.list(PODS_PREFIX, &options, &|_| true) {
                Ok(page) => page,
                Err(StoreError::Closed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "simulated node could not list pods");
                    return;
                }
            };
            let mut round = Round::default();
            for object in page.items {
                round.changed(&object.key, &object.value);
            }
            self.take_round(round).await;
            let Ok(mut watcher) = store.watch(PODS_PREFIX, page.revision) else {
                return;
            };
            loop {
                let next_timer = self.timers.keys().next().map(|(at, _)| *at);
                let wake = async {
                    match next_timer {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                let mut round = Round::default();
                let mut stream_ended = tokio::select! {
                    biased;
                    event = watcher.next() => self.note(&mut round, event),
                    _ = wake => None,
                };
                // Every change already waiting joins this round.
                while stream_ended.is_none() && round.len() < ROUND_LIMIT {
                    match watcher.next().now_or_never() {
                        Some(event) => stream_ended = self.note(&mut round, event),
                        None => break,
                    }
                }
                self.add_due_timers(&mut round);
                self.take_round(round).await;
                match stream_ended {
                    None => {}
                    Some(StreamEnd::Closed) => return,
                    Some(StreamEnd::Expired) => break,
                }
            }
        }
    }

    /// Add a watch event to `round`; why the watch ended, if it did.
    fn note(
        &mut self,
        round: &mut Round,
        event: Option<Result<Arc<Event>, StoreError>>,
    ) -> Option<StreamEnd> {
        match event {
            None => Some(StreamEnd::Closed),
            Some(Err(_)) => Some(StreamEnd::Expired),
            Some(Ok(event)) if event.kind == EventKind::Deleted => {
                self.forget(&event.key);
                round.deleted(&event.key);
                None
            }
            Some(Ok(event)) => {
                round.changed(&event.key, &event.value);
                None
            }
        }
    }

    /// Decide each pod's step in the round's order, then take them all concurrently.
    async fn take_round(&mut self, round: Round) {
        let mut steps = Vec::new();
        for (key, bytes) in round.pods {
            let Some(bytes) = bytes else { continue };
            let Ok(pod) = serde_json::from_slice::<Value>(&bytes) else {
                continue;
            };
            if let Some(step) = self.examine(&key, &pod) {
                steps.push((key, step));
            }
        }
        let this = &*self;
        let taken = steps
            .into_iter()
            .map(|(key, step)| async move { (key, this.take(step).await) });
        for (key, result) in futures::future::join_all(taken).await {
            if let Err(e) = result
                && e.code != 409
                && e.code != 404
            {
                tracing::warn!(%key, error = %e, "simulated node step failed");
            }
        }
    }

    fn forget(&mut self, key: &str) {
        self.bound_at.remove(key);
        self.stopping_since.remove(key);
        self.running_since.remove(key);
    }

    /// Add the pods whose timers are due to `round`, as they are stored now.
    fn add_due_timers(&mut self, round: &mut Round) {
        let now = Instant::now();
        let due: Vec<(Instant, u64)> = self
            .timers
            .range(..=(now, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for timer in due {
            if let Some(key) = self.timers.remove(&timer) {
                match self.server.store().get(&key, None) {
                    Ok(Some(object)) => round.changed(&key, &object.value),
                    _ => self.forget(&key),
                }
            }
        }
    }

    fn schedule(&mut self, at: Instant, key: &str) {
        self.timer_seq += 1;
        self.timers.insert((at, self.timer_seq), key.to_string());
    }

    /// Decide the pod's next step, if it has one now.
    fn examine(&mut self, key: &str, pod: &Value) -> Option<Step> {
        let node = meta::str_at(pod, "/spec/nodeName").unwrap_or("");
        let phase = meta::str_at(pod, "/status/phase").unwrap_or("Pending");
        if let Some(deletion) = meta::deletion_timestamp(pod) {
            if node == self.config.name {
                // A pod whose containers already exited has nothing left to stop.
                let exited = matches!(phase, "Succeeded" | "Failed");
                return self.stop(key, pod, deletion, exited);
            }
            return None;
        }
        if node.is_empty() {
            return Some(self.bind(pod));
        }
        if node != self.config.name {
            return None;
        }
        if phase == "Running" && owned_by_job(pod) {
            return self.complete_after_run(key, pod);
        }
        if phase != "Pending" {
            return None;
        }
        let now = Instant::now();
        let bound_at = *self.bound_at.entry(key.to_string()).or_insert(now);
        let due = bound_at + self.config.pod_start_delay;
        if now < due {
            self.schedule(due, key);
            return None;
        }
        self.bound_at.remove(key);
        Some(self.start(pod))
    }

    fn bind(&self, pod: &Value) -> Step {
        let mut bound = pod.clone();
        bound["spec"]["nodeName"] = json!(self.config.name);
        let (ns, name) = (meta::namespace(pod), meta::name(pod).unwrap_or(""));
        let message = format!(
            "Successfully assigned {}/{name} to {}",
            ns.unwrap_or(""),
            self.config.name
        );
        let scheduled = self.event(
            pod,
            "Normal",
            "Scheduled",
            &message,
            "default-scheduler",
            None,
        );
        Step {
            write: Some(Write::Update {
                pod: bound,
                subresource: None,
            }),
            events_after: vec![scheduled],
            ..Step::default()
        }
    }

    fn start(&mut self, pod: &Value) -> Step {
        let mut events = Vec::new();
        let behaviour = simulated_behaviour(pod);
        let failed = behaviour == "fail";
        let ready = !failed && behaviour != "never-ready";
        let now = self.server.timestamp();
        self.next_ip = self.next_ip % 250 + 1;
        let pod_ip = format!("10.244.0.{}", self.next_ip + 1);
        let containers = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for c in &containers {
            let cname = c["name"].as_str().unwrap_or("");
            let image = c["image"].as_str().unwrap_or("");
            let field = format!("spec.containers{{{cname}}}");
            // What a kubelet reports for a container whose image is already pulled.
            for (reason, message) in [
                (
                    "Pulled",
                    format!("Container image \"{image}\" already present on machine"),
                ),
                ("Created", format!("Created container: {cname}")),
                ("Started", format!("Started container {cname}")),
            ] {
                events.push(self.event(pod, "Normal", reason, &message, "kubelet", Some(&field)));
            }
            if failed {
                events.push(self.event(
                    pod,
                    "Warning",
                    "BackOff",
                    &format!("Container {cname} exited with code 1 (steady.dev/simulate: fail)"),
                    "kubelet",
                    Some(&field),
                ));
            }
        }
        let statuses: Vec<Value> = containers
            .iter()
            .map(|c| {
                let state = if failed {
                    json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now, "containerID": format!("steady://{}", c["name"].as_str().unwrap_or(""))}})
                } else {
                    json!({"running": {"startedAt": now}})
                };
                json!({
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": format!("steady://{}", c["image"].as_str().unwrap_or("")),
                    "containerID": format!("steady://{}", c["name"].as_str().unwrap_or("")),
                    "ready": ready,
                    "started": !failed,
                    "restartCount": 0,
                    "state": state,
                })
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
            c
        };
        let mut started = pod.clone();
        started["status"] = json!({
            "phase": if failed { "Failed" } else { "Running" },
            "conditions": [
                condition("PodReadyToStartContainers", !failed),
                condition("Initialized", true),
                condition("Ready", ready),
                condition("ContainersReady", ready),
                condition("PodScheduled", true),
            ],
            "hostIP": "10.0.0.1",
            "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": now,
            "containerStatuses": statuses,
            "qosClass": pod.pointer("/status/qosClass").cloned().unwrap_or(json!("BestEffort")),
        });
        Step {
            events_before: events,
            write: Some(Write::Update {
                pod: started,
                subresource: Some("status"),
            }),
            ..Step::default()
        }
    }

    /// A Job's pod: its containers exit 0 once it has run `job_pod_run_time`.
    fn complete_after_run(&mut self, key: &str, pod: &Value) -> Option<Step> {
        let now = Instant::now();
        let since = *self.running_since.entry(key.to_string()).or_insert(now);
        let due = since + self.config.job_pod_run_time;
        if now < due {
            self.schedule(due, key);
            return None;
        }
        self.running_since.remove(key);
        let finished_at = self.server.timestamp();
        let mut completed = pod.clone();
        completed["status"]["phase"] = json!("Succeeded");
        if let Some(statuses) = completed
            .pointer_mut("/status/containerStatuses")
            .and_then(Value::as_array_mut)
        {
            for status in statuses {
                let started_at = status.pointer("/state/running/startedAt").cloned();
                status["ready"] = json!(false);
                status["started"] = json!(false);
                status["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started_at, "finishedAt": finished_at, "containerID": status["containerID"]}});
            }
        }
        if let Some(conditions) = completed
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
        {
            for condition in conditions {
                if matches!(
                    condition["type"].as_str(),
                    Some("Ready" | "ContainersReady")
                ) {
                    condition["status"] = json!("False");
                    condition["reason"] = json!("PodCompleted");
                    condition["lastTransitionTime"] = json!(finished_at);
                }
            }
        }
        Some(Step {
            write: Some(Write::Update {
                pod: completed,
                subresource: Some("status"),
            }),
            ..Step::default()
        })
    }

    /// Containers stop after `pod_stop_delay` (or the whole grace period when told to
    /// ignore SIGTERM); then the node confirms the deletion.
    fn stop(&mut self, key: &str, pod: &Value, deletion: &str, exited: bool) -> Option<Step> {
        let mut step = Step::default();
        let first_seen = match self.stopping_since.get(key) {
            Some(since) => *since,
            None => {
                let now = Instant::now();
                self.stopping_since.insert(key.to_string(), now);
                if !exited {
                    step.events_before = self.announce_stop(pod);
                }
                now
            }
        };
        let deadline = DateTime::parse_from_rfc3339(deletion)
            .map(|d| d.with_timezone(&Utc))
            .unwrap_or_else(|_| self.server.now());
        let until_deadline = (deadline - self.server.now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        let wait = if exited {
            Duration::ZERO
        } else if simulated_behaviour(pod) == "ignore-sigterm" {
            until_deadline
        } else {
            until_deadline.min(self.config.pod_stop_delay)
        };
        let due = first_seen + wait;
        if Instant::now() < due {
            self.schedule(due, key);
        } else {
            step.write = Some(Write::Delete { pod: pod.clone() });
        }
        (step.write.is_some() || !step.events_before.is_empty()).then_some(step)
    }

    /// A Killing event per container, as the kubelet records when it stops a pod.
    fn announce_stop(&self, pod: &Value) -> Vec<Value> {
        let containers = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        containers
            .iter()
            .map(|c| {
                let cname = c["name"].as_str().unwrap_or("");
                let field = format!("spec.containers{{{cname}}}");
                self.event(
                    pod,
                    "Normal",
                    "Killing",
                    &format!("Stopping container {cname}"),
                    "kubelet",
                    Some(&field),
                )
            })
            .collect()
    }

    /// Take one pod's step in order (its events before, its write, and if that succeeded
    /// its events after): concurrency is across pods, a pod's own writes stay in order.
    async fn take(&self, step: Step) -> ApiResult<()> {
        for event in step.events_before {
            self.post_event(event).await;
        }
        if let Some(write) = step.write {
            self.write(write).await?;
        }
        for event in step.events_after {
            self.post_event(event).await;
        }
        Ok(())
    }

    async fn write(&self, write: Write) -> ApiResult<()> {
        let Some(rt) = self.server.registry().builtin("", "pods") else {
            return Ok(());
        };
        match write {
            Write::Update { pod, subresource } => {
                let ns = meta::namespace(&pod).map(str::to_string);
                let name = meta::name(&pod).unwrap_or("").to_string();
                let options = WriteOptions::default();
                let target = Target::object(&rt, ns.as_deref(), &name).subresource(subresource);
                self.server.update(target, pod, &options).await?;
            }
            Write::Delete { pod } => {
                let opts = DeleteOptions {
                    grace_period_seconds: Some(0),
                    precondition_uid: meta::uid(&pod).map(str::to_string),
                    ..Default::default()
                };
                let (ns, name) = (meta::namespace(&pod), meta::name(&pod).unwrap_or(""));
                self.server.delete(&rt, ns, name, &opts).await?;
            }
        }
        Ok(())
    }

    async fn ensure_node(&self) -> ApiResult<()> {
        let Some(rt) = self.server.registry().builtin("", "nodes") else {
            return Ok(());
        };
        if self.server.get_stored(&rt, None, &self.config.name).is_ok() {
            return Ok(());
        }
        let now = self.server.timestamp();
        let name = &self.config.name;
        let capacity =
            json!({"cpu": "32", "memory": "256Gi", "pods": "1000", "ephemeral-storage": "100Gi"});
        let node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "steady-simulated",
            }},
            "spec": {},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "steady's simulated node is ready", "lastHeartbeatTime": now, "lastTransitionTime": now}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
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
                    "machineID": "steady",
                    "systemUUID": "steady",
                    "bootID": "steady",
                },
            },
        });
        match self
            .server
            .create(&rt, None, node, &WriteOptions::default())
            .await
        {
            Err(e) if e.reason != "AlreadyExists" => Err(e),
            _ => Ok(()),
        }
    }

    /// A core/v1 Event about `pod` (its name drawn now, so a seeded run repeats).
    fn event(
        &self,
        pod: &Value,
        kind: &str,
        reason: &str,
        message: &str,
        component: &str,
        field_path: Option<&str>,
    ) -> Value {
        let now = self.server.timestamp();
        let pod_name = meta::name(pod).unwrap_or("");
        let suffix: u64 = self.server.with_rng(rand::Rng::random);
        let mut involved = json!({
            "kind": "Pod",
            "apiVersion": "v1",
            "namespace": meta::namespace(pod),
            "name": pod_name,
            "uid": meta::uid(pod),
        });
        if let Some(path) = field_path {
            involved["fieldPath"] = json!(path);
        }
        let host = if component == "kubelet" {
            Some(self.config.name.as_str())
        } else {
            None
        };
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": format!("{pod_name}.{suffix:016x}"), "namespace": meta::namespace(pod)},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": component, "host": host},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": component,
            "reportingInstance": host.unwrap_or(component),
        })
    }

    /// Record `event`; failures only log (events are best effort).
    async fn post_event(&self, event: Value) {
        let Some(rt) = self.server.registry().builtin("", "events") else {
            return;
        };
        let ns = meta::namespace(&event).map(str::to_string);
        let options = WriteOptions::default();
        if let Err(e) = self
            .server
            .create(&rt, ns.as_deref(), event, &options)
            .await
        {
            tracing::debug!(error = %e, "could not record event");
        }
    }
}
