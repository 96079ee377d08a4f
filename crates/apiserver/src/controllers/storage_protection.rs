//! kube-controller-manager's pvc-protection and pv-protection controllers, as steps of the
//! in-server collector's pass (it already follows every object and knows each one's
//! deletion and finalizers):
//!
//! - a deleted claim keeps `kubernetes.io/pvc-protection` while a scheduled pod names it
//!   (an ephemeral volume's claim, `<pod>-<volume>` owned by the pod, until that pod has
//!   shut down); the pods of its namespace are read once for all its waiting claims, and
//!   read again when a pod that names one is deleted, finishes or is unscheduled;
//! - a deleted volume keeps `kubernetes.io/pv-protection` while its phase is Bound;
//! - a live claim or volume without its finalizer gets it back.
//!
//! The finalizers are added at create by the admission plugin (`storage_protection.rs`).

use std::collections::BTreeSet;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::{GarbageCollector, Node, remove_finalizer};
use crate::error::ApiResult;
use crate::meta;
use crate::storage_protection::{PV_PROTECTION, PVC_PROTECTION, add_finalizer, finalizer_for};

const CORE_PREFIX: &str = "/core/";
const CLAIM_PREFIX: &str = "/core/persistentvolumeclaims/";
const VOLUME_PREFIX: &str = "/core/persistentvolumes/";
const POD_PREFIX: &str = "/core/pods/";

/// The protection finalizer of the object stored at `key`, if it is a claim or a volume.
fn protection_of(key: &str) -> Option<&'static str> {
    let plural = key.strip_prefix(CORE_PREFIX)?.split('/').next()?;
    finalizer_for(plural)
}

/// Whether a live `node` lacks the finalizer that protects it.
pub(super) fn needs_protection(node: &Node) -> bool {
    !node.deleting && protection_of(&node.key).is_some_and(|f| !node.has_finalizer(f))
}

/// What the pvc-protection controller reads of a pod.
#[derive(Deserialize, Default)]
#[serde(default)]
struct PodUse {
    metadata: PodUseMetadata,
    spec: PodUseSpec,
    status: PodUseStatus,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PodUseStatus {
    phase: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodUseMetadata {
    name: Option<String>,
    uid: Option<String>,
    deletion_timestamp: Option<IgnoredAny>,
    deletion_grace_period_seconds: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodUseSpec {
    node_name: Option<String>,
    volumes: Option<Vec<PodVolume>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodVolume {
    #[serde(default)]
    name: String,
    #[serde(default)]
    persistent_volume_claim: Option<ClaimSource>,
    #[serde(default)]
    ephemeral: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimSource {
    #[serde(default)]
    claim_name: String,
}

impl PodUse {
    /// Whether this pod holds `claim` (of its namespace), as kube judges it: only a
    /// scheduled pod does, since the kubelet starts no pod whose claim is being deleted;
    /// an ephemeral volume's claim only until the pod has shut down.
    fn holds(&self, claim: &Node) -> bool {
        let (named, ephemeral) = self.references(claim);
        self.scheduled() && (named || (ephemeral && !self.shut_down()))
    }

    /// Whether one of this pod's volumes is `claim`, however it stands.
    fn names(&self, claim: &Node) -> bool {
        let (named, ephemeral) = self.references(claim);
        named || ephemeral
    }

    /// Whether this change of the pod (`deleted`, or its new state) can let a claim go:
    /// a running pod's updates cannot.
    fn could_release(&self, deleted: bool) -> bool {
        deleted || self.finished() || !self.scheduled()
    }

    fn scheduled(&self) -> bool {
        !self.spec.node_name.as_deref().unwrap_or("").is_empty()
    }

    /// Succeeded or Failed.
    fn finished(&self) -> bool {
        matches!(self.status.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// Whether a volume names `claim` (`persistentVolumeClaim.claimName`), and whether an
    /// ephemeral volume's claim is `claim` (`<pod>-<volume>`, owned by the pod).
    fn references(&self, claim: &Node) -> (bool, bool) {
        let pod = self.metadata.name.as_deref().unwrap_or("");
        let uid = self.metadata.uid.as_deref().unwrap_or("");
        let volumes = || self.spec.volumes.iter().flatten();
        let named = volumes().any(|volume| {
            volume
                .persistent_volume_claim
                .as_ref()
                .is_some_and(|source| source.claim_name == claim.name)
        });
        let ephemeral = volumes().any(|volume| {
            volume.ephemeral.is_some()
                && claim.name == format!("{pod}-{}", volume.name)
                && claim.owners.iter().any(|owner| owner.uid == uid)
        });
        (named, ephemeral)
    }

    /// Deleted with no grace left: the kubelet is done with it, or it was forced. kube
    /// lets such a pod's ephemeral claims go, so a finalizer of the pod that waits for
    /// them cannot deadlock.
    fn shut_down(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
            && self.metadata.deletion_grace_period_seconds == Some(0)
    }
}

impl GarbageCollector {
    /// A pod at `key` changed or went (`bytes`, its new or last state): the claims
    /// waiting in its namespace look again if it could be what releases one of them, as
    /// kube's controller filters pod events: a pod deleted, finished or not scheduled
    /// that names one of them. A running pod's updates, the most frequent writes, only
    /// cost this check.
    pub(super) fn pod_changed(&mut self, key: &str, bytes: &[u8], deleted: bool) {
        if self.waiting_claims.is_empty() {
            return;
        }
        let Some((namespace, _)) = key
            .strip_prefix(POD_PREFIX)
            .and_then(|rest| rest.split_once('/'))
        else {
            return;
        };
        let Some(waiting) = self.waiting_claims.get(namespace) else {
            return;
        };
        let relevant = match serde_json::from_slice::<PodUse>(bytes) {
            Ok(pod) => {
                pod.could_release(deleted)
                    && waiting
                        .iter()
                        .filter_map(|uid| self.nodes.get(uid))
                        .any(|claim| pod.names(claim))
            }
            // Not readable as a pod: look again rather than miss a release.
            Err(_) => true,
        };
        if relevant {
            self.claims_due.insert(namespace.to_string());
        }
    }

    /// The object `uid` at `key` is gone: it waits no more.
    pub(super) fn forget_claim(&mut self, key: &str, uid: &str, node: &Node) {
        if !key.starts_with(CLAIM_PREFIX) {
            return;
        }
        if let Some(namespace) = &node.namespace
            && let Some(waiting) = self.waiting_claims.get_mut(namespace)
        {
            waiting.remove(uid);
            if waiting.is_empty() {
                self.waiting_claims.remove(namespace);
            }
        }
    }

    /// Put a live claim's or volume's finalizer back.
    pub(super) async fn protect(&mut self, uid: &str, node: &Node) -> ApiResult<()> {
        let Some(finalizer) = protection_of(&node.key) else {
            return Ok(());
        };
        self.modify(uid, node, None, |obj| add_finalizer(obj, finalizer))
            .await?;
        if let Some(node) = self.nodes.get_mut(uid) {
            node.finalizers.push(finalizer.to_string());
        }
        Ok(())
    }

    /// A deleted claim waits for the pods of its namespace to be looked at; a deleted
    /// volume is released once it is no longer Bound.
    pub(super) async fn release_if_unused(&mut self, uid: &str, node: &Node) -> ApiResult<()> {
        if node.key.starts_with(CLAIM_PREFIX) && node.has_finalizer(PVC_PROTECTION) {
            if let Some(namespace) = &node.namespace {
                self.waiting_claims
                    .entry(namespace.clone())
                    .or_default()
                    .insert(uid.to_string());
                self.claims_due.insert(namespace.clone());
            }
            return Ok(());
        }
        if node.key.starts_with(VOLUME_PREFIX) && node.has_finalizer(PV_PROTECTION) {
            let released = self
                .modify_when(uid, node, None, |obj| {
                    let bound = meta::str_at(obj, "/status/phase") == Some("Bound");
                    if !bound {
                        remove_finalizer(obj, PV_PROTECTION);
                    }
                    !bound
                })
                .await?;
            if released {
                self.finalized(uid, PV_PROTECTION);
            }
        }
        Ok(())
    }

    /// Release every waiting claim no pod holds, in each namespace whose pods changed or
    /// whose claims were deleted since the last look.
    pub(super) async fn release_unused_claims(&mut self) {
        for namespace in std::mem::take(&mut self.claims_due) {
            let waiting: Vec<String> = self
                .waiting_claims
                .get(&namespace)
                .map(|uids| uids.iter().cloned().collect())
                .unwrap_or_default();
            let pods = match self.pods_in(&namespace) {
                Ok(pods) => pods,
                Err(e) => {
                    for uid in waiting {
                        self.failed(uid, &e);
                    }
                    continue;
                }
            };
            let mut released = BTreeSet::new();
            for uid in waiting {
                let Some(node) = self.nodes.get(&uid).cloned() else {
                    released.insert(uid);
                    continue;
                };
                if !node.deleting || !node.has_finalizer(PVC_PROTECTION) {
                    released.insert(uid);
                    continue;
                }
                if pods.iter().any(|pod| pod.holds(&node)) {
                    continue;
                }
                match self
                    .modify(&uid, &node, None, |obj| {
                        remove_finalizer(obj, PVC_PROTECTION)
                    })
                    .await
                {
                    Ok(()) => {
                        self.finalized(&uid, PVC_PROTECTION);
                        released.insert(uid);
                    }
                    Err(e) => self.failed(uid, &e),
                }
            }
            if let Some(waiting) = self.waiting_claims.get_mut(&namespace) {
                waiting.retain(|uid| !released.contains(uid));
                if waiting.is_empty() {
                    self.waiting_claims.remove(&namespace);
                }
            }
        }
    }

    /// What the pods of `namespace` use, read from the store: the collector's index knows
    /// no pod's volumes, and a pod just created must not be missed.
    fn pods_in(&self, namespace: &str) -> ApiResult<Vec<PodUse>> {
        let Some(rt) = self.server.registry().builtin("", "pods") else {
            return Ok(Vec::new());
        };
        self.server.current_builtin_objects(&rt, Some(namespace))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::Owner;
    use super::*;

    fn pod_use(pod: Value) -> PodUse {
        serde_json::from_value(pod).expect("a pod")
    }

    fn claim(name: &str, owner: Option<&str>) -> Node {
        Node {
            key: format!("{CLAIM_PREFIX}default/{name}"),
            namespace: Some("default".into()),
            name: name.into(),
            owners: owner
                .map(|uid| Owner {
                    uid: uid.into(),
                    blocks: true,
                })
                .into_iter()
                .collect(),
            deleting: true,
            finalizers: vec![PVC_PROTECTION.into()],
            namespace_finalizer: false,
            crd_prefix: None,
        }
    }

    fn pod(node_name: &str, volumes: Value) -> Value {
        json!({
            "metadata": {"name": "web-0", "uid": "pod-uid"},
            "spec": {"nodeName": node_name, "volumes": volumes},
        })
    }

    #[test]
    fn only_a_scheduled_pod_holds_the_claims_it_names() {
        let volumes =
            json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}]);
        let scheduled = pod_use(pod("steady-node", volumes.clone()));
        assert!(scheduled.holds(&claim("data-web-0", None)));
        assert!(!scheduled.holds(&claim("data-web-1", None)));
        assert!(!pod_use(pod("", volumes)).holds(&claim("data-web-0", None)));
        assert!(!pod_use(json!({"metadata": {"name": "bare"}})).holds(&claim("data-web-0", None)));
    }

    #[test]
    fn an_ephemeral_claim_is_held_by_its_own_pod_until_it_has_shut_down() {
        let volumes = json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]);
        let mut running = pod("steady-node", volumes);
        assert!(pod_use(running.clone()).holds(&claim("web-0-scratch", Some("pod-uid"))));
        assert!(!pod_use(running.clone()).holds(&claim("web-0-scratch", Some("another-pod"))));
        running["metadata"]["deletionTimestamp"] = json!("2026-12-06T00:00:00Z");
        running["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        assert!(pod_use(running.clone()).holds(&claim("web-0-scratch", Some("pod-uid"))));
        running["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        assert!(!pod_use(running).holds(&claim("web-0-scratch", Some("pod-uid"))));
    }

    #[test]
    fn only_a_pod_deleted_finished_or_unscheduled_can_let_a_claim_go() {
        let volumes = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
        let running = pod_use(pod("steady-node", volumes.clone()));
        assert!(!running.could_release(false));
        assert!(running.could_release(true));
        assert!(pod_use(pod("", volumes.clone())).could_release(false));
        let mut finished = pod("steady-node", volumes);
        finished["status"] = json!({"phase": "Succeeded"});
        assert!(pod_use(finished).could_release(false));
    }

    #[test]
    fn claims_and_volumes_are_the_protected_keys() {
        assert_eq!(
            protection_of("/core/persistentvolumeclaims/default/data"),
            Some(PVC_PROTECTION)
        );
        assert_eq!(
            protection_of("/core/persistentvolumes/pv1"),
            Some(PV_PROTECTION)
        );
        assert_eq!(protection_of("/core/pods/default/data"), None);
        assert_eq!(protection_of("/apps/persistentvolumes/x"), None);
    }
}
