//! What kube-controller-manager's taint-eviction controller does for the simulated
//! nodes' pods: a pod on a node with a NoExecute taint it does not tolerate is deleted at
//! once; one that tolerates every such taint, some only for `tolerationSeconds`, is
//! deleted when the shortest of those has passed since it first saw the taint (the
//! taint's `timeAdded` when it has one, as the node-lifecycle controller's not-ready
//! taint does); one that tolerates them all for ever stays. Before the delete the pod is
//! marked `DisruptionTarget` (reason `DeletionByTaintManager`) and a
//! `TaintManagerEviction` Event is recorded.
//!
//! Must not know: scheduling or running pods.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
use kube::ResourceExt;
use steady_runtime::Context;

use super::{ByUid, Nodes, Source};
use crate::daemonset::tolerates;

/// Who records the eviction, as kube names the controller.
const COMPONENT: &str = "taint-eviction-controller";

/// What the taints of a pod's node mean for it now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Verdict {
    /// No NoExecute taint, or all tolerated for ever.
    Stays,
    /// A NoExecute taint it does not tolerate, or its tolerance ran out.
    Evicted,
    /// Tolerated for this much longer.
    EvictedIn(Duration),
}

/// The verdict for `pod` on `node` at `now`; `first_seen` is when the controller first
/// saw the pod tainted (remembered per pod, for taints without `timeAdded`).
pub(super) fn verdict(
    pod: &Pod,
    node: &Node,
    now: DateTime<Utc>,
    first_seen: impl FnOnce() -> DateTime<Utc>,
) -> Verdict {
    let taints: Vec<_> = node
        .spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .filter(|t| t.effect == "NoExecute")
        .collect();
    if taints.is_empty() {
        return Verdict::Stays;
    }
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let mut used: Vec<&Toleration> = Vec::new();
    for taint in &taints {
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Verdict::Evicted;
        }
        used.extend(matching);
    }
    // kube's getMinTolerationTime: the shortest bounded tolerance, none bounded = ever.
    let Some(seconds) = used.iter().filter_map(|t| t.toleration_seconds).min() else {
        return Verdict::Stays;
    };
    if seconds <= 0 {
        return Verdict::Evicted;
    }
    let since = taints
        .iter()
        .filter_map(|t| t.time_added.as_ref())
        .filter_map(|t| DateTime::from_timestamp(t.0.as_second(), 0))
        .min()
        .unwrap_or_else(first_seen);
    let due = since + chrono::Duration::seconds(seconds);
    match (due - now).to_std() {
        Ok(left) if !left.is_zero() => Verdict::EvictedIn(left),
        _ => Verdict::Evicted,
    }
}

/// When this controller first saw each tainted pod (by uid), for taints without
/// `timeAdded`; forgotten once its node is no longer tainted for it.
pub(super) type FirstSeen = ByUid<DateTime<Utc>>;

/// The taints' part of a bound pod's reconcile: `Some` when the pod was evicted (nothing
/// more to do for it), else how long its tolerance has left, if it is bounded.
pub(super) async fn step(
    pod: &Pod,
    node_name: &str,
    ctx: &Context<Nodes>,
) -> Result<Option<Duration>, Evicted> {
    let nodes = ctx.data();
    let Some((_, node_cache)) = nodes.caches.get() else {
        return Ok(None);
    };
    let Some(node) = node_cache.get(&steady_runtime::ObjectKey::new(None, node_name)) else {
        return Ok(None);
    };
    let uid = pod.uid().unwrap_or_default();
    let now = (nodes.config.clock)();
    let verdict = {
        let mut seen = nodes.taints_seen.lock().unwrap_or_else(|e| e.into_inner());
        let verdict = verdict(pod, &node, now, || *seen.entry(uid.clone()).or_insert(now));
        if verdict == Verdict::Stays {
            seen.remove(&uid);
        }
        verdict
    };
    match verdict {
        Verdict::Stays => Ok(None),
        Verdict::EvictedIn(left) => Ok(Some(left)),
        Verdict::Evicted => Err(Evicted(evict(pod, ctx).await)),
    }
}

/// The pod was evicted; the outcome of the eviction's writes.
pub(super) struct Evicted(pub(super) Result<(), kube::Error>);

/// Mark the pod and delete it, as the taint-eviction controller does.
pub(super) async fn evict(pod: &Pod, ctx: &Context<Nodes>) -> Result<(), kube::Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let nodes = ctx.data();
    let source = Source {
        component: COMPONENT,
        host: None,
        field_path: None,
    };
    let message = format!("Marking for deletion Pod {namespace}/{name}");
    let event = nodes.event(pod, "Normal", "TaintManagerEviction", &message, source);
    nodes.scheduler_events.record(vec![event]);
    let why = "Taint manager: deleting due to NoExecute taint";
    super::disrupt(pod, "DeletionByTaintManager", why, ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn node(taints: Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": {"taints": taints}}))
            .expect("a node")
    }

    fn pod(tolerations: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"containers": [], "tolerations": tolerations}}))
        .expect("a pod")
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, 0).unwrap_or_default()
    }

    #[test]
    fn untolerated_goes_bounded_waits_unbounded_stays() {
        let tainted = node(json!([{"key": "k", "value": "v", "effect": "NoExecute"}]));
        let soon = || at(1_000);
        assert_eq!(
            verdict(&pod(json!([])), &tainted, at(1_000), soon),
            Verdict::Evicted
        );
        let for_a_minute = pod(json!([{"key": "k", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 60}]));
        assert_eq!(
            verdict(&for_a_minute, &tainted, at(1_030), soon),
            Verdict::EvictedIn(Duration::from_secs(30))
        );
        assert_eq!(
            verdict(&for_a_minute, &tainted, at(1_060), soon),
            Verdict::Evicted
        );
        let always = pod(json!([{"key": "k", "operator": "Exists", "effect": "NoExecute"}]));
        assert_eq!(verdict(&always, &tainted, at(9_999), soon), Verdict::Stays);
        let schedule_only = node(json!([{"key": "k", "effect": "NoSchedule"}]));
        assert_eq!(
            verdict(&pod(json!([])), &schedule_only, at(0), soon),
            Verdict::Stays
        );
    }

    #[test]
    fn a_stamped_taint_counts_from_when_it_was_added() {
        let stamped = node(json!([{"key": "node.kubernetes.io/not-ready",
            "effect": "NoExecute", "timeAdded": "1970-01-01T00:16:40Z"}]));
        let kube_default = pod(json!([{"key": "node.kubernetes.io/not-ready",
            "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]));
        let never = || at(0);
        assert_eq!(
            verdict(&kube_default, &stamped, at(1_100), never),
            Verdict::EvictedIn(Duration::from_secs(200))
        );
    }
}
