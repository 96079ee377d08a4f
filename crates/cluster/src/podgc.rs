//! The pod garbage collector, as kube-controller-manager's `pod-garbage-collector`
//! cleans up what no kubelet will: a pod bound to a node that no longer exists is, once
//! the node has been missing for the quarantine (40 s) and a fresh read of it agrees,
//! marked Failed with the `DisruptionTarget` condition (`DeletionByPodGC`, "PodGC: node
//! no longer exists") and deleted at once (grace 0); a pod being deleted that was never
//! scheduled is marked Failed and deleted at once. This is what `kubectl delete node`
//! does to the node's pods on a cluster: their controllers see them fail and replace them.
//!
//! Per pod and level-triggered where kube's is a periodic sweep: a pod is looked at when
//! it changes and when its node is added or deleted; the quarantine is timed from when
//! the controller first saw the node missing, as kube's node queue times it. Not done:
//! the cap on terminated pods (`--terminated-pod-gc-threshold`, 12,500 by default) and
//! the pods of out-of-service nodes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, PodStatus};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;
use steady_runtime::{Action, Context, ObjectCache, ObjectKey};
use tokio::time::Instant;

use crate::{Clock, Error, Running, Setup, Shutdown, clock, pod_template};

/// How long a node must be missing before its pods are deleted (kube's `quarantineTime`).
pub const QUARANTINE: Duration = Duration::from_secs(40);

/// The field manager of its status writes, as kube's.
const FIELD_MANAGER: &str = "PodGC";

/// Start the controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let mut controller = crate::controller_for::<Pod>(&client, config);
    controller.trim(keep_binding_and_phase);
    let pods = controller.primary_cache();
    // Only a node's coming and going matters: trimmed to its metadata, its heartbeats
    // wake nothing.
    let nodes = controller.watches(Api::<Node>::all(client), move |node: &Node| {
        pods_on(&pods, &node.name_any())
    });
    controller.trim(|node: &mut Node| {
        (node.spec, node.status) = (None, None);
        let meta = &mut node.metadata;
        (meta.labels, meta.annotations, meta.managed_fields) = (None, None, None);
    });
    let state = PodGc {
        nodes,
        clock,
        missing_since: Mutex::default(),
    };
    controller.run(reconcile, Arc::new(state), shutdown).boxed()
}

/// What the collector reads: the nodes that exist, the time its conditions are stamped
/// with, and since when each missing node has been seen missing.
pub struct PodGc {
    nodes: ObjectCache<Node>,
    clock: Clock,
    missing_since: Mutex<HashMap<String, Instant>>,
}

impl PodGc {
    /// How much longer `node`, missing now, is quarantined (starting its quarantine if
    /// this is the first time it is seen missing). A quarantine long over is forgotten,
    /// so pods naming made-up nodes cannot grow the map; a pod of such a node seen later
    /// waits a quarantine of its own, as it would in kube's node queue.
    fn quarantine_left(&self, node: &str) -> Duration {
        let mut missing = self.missing_since.lock().unwrap_or_else(|e| e.into_inner());
        missing.retain(|_, since| since.elapsed() < QUARANTINE * 2);
        let since = *missing.entry(node.to_string()).or_insert_with(Instant::now);
        QUARANTINE.saturating_sub(since.elapsed())
    }

    fn forget(&self, node: &str) {
        let mut missing = self.missing_since.lock().unwrap_or_else(|e| e.into_inner());
        missing.remove(node);
    }
}

/// What the collector reads of a pod: its identity, its node, whether it is being
/// deleted and its phase.
fn keep_binding_and_phase(pod: &mut Pod) {
    let node_name = pod.spec.take().and_then(|spec| spec.node_name);
    let phase = pod.status.take().and_then(|status| status.phase);
    pod.spec = Some(PodSpec {
        node_name,
        ..PodSpec::default()
    });
    pod.status = Some(PodStatus {
        phase,
        ..PodStatus::default()
    });
    let meta = &mut pod.metadata;
    (meta.labels, meta.annotations, meta.managed_fields) = (None, None, None);
    (meta.owner_references, meta.finalizers) = (None, None);
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The pods bound to `node` (a scan: nodes come and go rarely).
fn pods_on(pods: &ObjectCache<Pod>, node: &str) -> Vec<ObjectKey> {
    pods.list()
        .iter()
        .filter(|pod| node_of(pod) == Some(node))
        .map(|pod| ObjectKey::new(pod.namespace().as_deref(), &pod.name_any()))
        .collect()
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context<PodGc>>) -> Result<Action, Error> {
    let Some(node) = node_of(&pod) else {
        // kube's `gcUnscheduledTerminating`: no kubelet will ever finish its deletion.
        if pod.metadata.deletion_timestamp.is_some() {
            mark_failed_and_delete(&pod, None, &ctx).await?;
        }
        return Ok(Action::done());
    };
    let gc = ctx.data();
    if gc.nodes.get(&ObjectKey::new(None, node)).is_some() {
        gc.forget(node);
        return Ok(Action::done());
    }
    let left = gc.quarantine_left(node);
    if !left.is_zero() {
        return Ok(Action::requeue_after(left));
    }
    // The cache may lag a node that came back: the API decides.
    if Api::<Node>::all(ctx.client())
        .get_opt(node)
        .await?
        .is_some()
    {
        gc.forget(node);
        return Ok(Action::done());
    }
    let gone = json!({
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "DeletionByPodGC",
        "message": "PodGC: node no longer exists",
        "lastTransitionTime": clock::time(&gc.clock),
    });
    mark_failed_and_delete(&pod, Some(gone), &ctx).await?;
    Ok(Action::done())
}

/// kube's `markFailedAndDeletePodWithCondition`: phase Failed (and `condition`) applied to
/// a pod not already finished, as the field manager `PodGC`, then a delete with no grace.
/// Both name the pod's uid, so a successor of the same name is left alone.
async fn mark_failed_and_delete(
    pod: &Pod,
    condition: Option<serde_json::Value>,
    ctx: &Context<PodGc>,
) -> Result<(), Error> {
    let namespace = pod_template::namespace_of(pod);
    let api: Api<Pod> = Api::namespaced(ctx.client(), &namespace);
    let name = pod.name_any();
    let finished = matches!(pod_template::phase(pod), "Succeeded" | "Failed");
    if !finished {
        let status = match condition {
            Some(condition) => json!({"phase": "Failed", "conditions": [condition]}),
            None => json!({"phase": "Failed"}),
        };
        let apply = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": pod.metadata.uid},
            "status": status,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch_status(&name, &params, &Patch::Apply(apply)).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                return Ok(());
            }
            Err(error) => return Err(error.into()),
        }
    }
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_kept_as_its_identity_node_and_phase() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"},
        }))
        .expect("a pod");
        keep_binding_and_phase(&mut pod);
        assert_eq!(node_of(&pod), Some("n1"));
        assert_eq!(pod_template::phase(&pod), "Running");
        let spec = pod.spec.as_ref().expect("spec");
        assert!(spec.containers.is_empty());
        assert_eq!(pod.status.as_ref().and_then(|s| s.pod_ip.clone()), None);
        assert_eq!(
            (pod.metadata.labels, pod.metadata.uid.as_deref()),
            (None, Some("u"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_node_is_quarantined_from_when_it_was_first_seen_missing() {
        let gc = PodGc {
            nodes: ObjectCache::default(),
            clock: clock::starting_now(),
            missing_since: Mutex::default(),
        };
        assert_eq!(gc.quarantine_left("n1"), QUARANTINE);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(gc.quarantine_left("n1"), Duration::from_secs(10));
        tokio::time::sleep(Duration::from_secs(15)).await;
        assert_eq!(gc.quarantine_left("n1"), Duration::ZERO);
        gc.forget("n1");
        assert_eq!(gc.quarantine_left("n1"), QUARANTINE);
        tokio::time::sleep(QUARANTINE * 2).await;
        assert_eq!(gc.quarantine_left("n2"), QUARANTINE);
        assert_eq!(
            gc.missing_since.lock().map(|m| m.len()).ok(),
            Some(1),
            "n1 forgotten"
        );
    }
}
