//! What the scheduler reads of a pod's PersistentVolumeClaims, as kube-scheduler's
//! VolumeBinding plugin does: every claim must exist and not be terminating (an
//! ephemeral volume's, `<pod>-<volume>`, must also be controlled by the pod); an unbound
//! claim of an `Immediate` class (or of no class) keeps the pod Pending until it is bound;
//! a bound claim's volume keeps the pod to the nodes its node affinity names; an unbound
//! claim of a `WaitForFirstConsumer` class gets the chosen node
//! (`volume.kubernetes.io/selected-node`) and the pod is bound once the volume controller
//! has bound the claim, polled as kube's PreBind polls.
//!
//! Pods without claims cost nothing (no cache of claims, volumes or classes); a pod with
//! claims costs a GET of each, and of its volume or class, per scheduling attempt.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::ephemeral;
use crate::volumes::SELECTED_NODE;

/// How often a pod waiting on its claims is tried again.
pub(super) const CLAIM_RETRY: Duration = Duration::from_secs(1);
const HOSTNAME: &str = "kubernetes.io/hostname";

/// A schedulable pod's claims: where their volumes allow it, and those bound only once
/// it has a node.
#[derive(Debug, Default)]
pub(super) struct Claims {
    /// The nodes the bound volumes' node affinity allows (`None`: any).
    allowed: Option<Vec<String>>,
    /// Unbound claims of `WaitForFirstConsumer` classes, with the node they name, if any.
    delayed: Vec<(String, Option<String>)>,
}

/// The pod's claims, or why no node can take it now (kube's pre-filter reasons).
pub(super) async fn claims_of(
    pod: &Pod,
    client: &Client,
) -> Result<Result<Claims, String>, kube::Error> {
    let namespace = pod.namespace().unwrap_or_default();
    // Each claim's name, and whether it stands for an ephemeral volume.
    let names = pod
        .spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .filter_map(
            |volume| match (&volume.persistent_volume_claim, &volume.ephemeral) {
                (Some(source), _) => Some((source.claim_name.clone(), false)),
                (None, Some(_)) => Some((ephemeral::claim_name(pod, &volume.name), true)),
                (None, None) => None,
            },
        );
    let claims_api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
    let mut claims = Claims::default();
    for (name, is_ephemeral) in names {
        let Some(claim) = claims_api.get_opt(&name).await? else {
            return Ok(Err(format!("persistentvolumeclaim \"{name}\" not found")));
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(Err(format!(
                "persistentvolumeclaim \"{name}\" is being deleted"
            )));
        }
        if is_ephemeral && let Err(not_for_pod) = ephemeral::claim_is_for_pod(pod, &claim) {
            return Ok(Err(not_for_pod));
        }
        let spec = claim.spec.clone().unwrap_or_default();
        match spec.volume_name.as_deref().filter(|v| !v.is_empty()) {
            Some(volume) => {
                let volumes: Api<PersistentVolume> = Api::all(client.clone());
                let Some(volume) = volumes.get_opt(volume).await? else {
                    return Ok(Err(format!("pvc {name} bound to non-existent pv {volume}")));
                };
                claims.allow_only(hostnames(&volume));
            }
            None => {
                let class = spec.storage_class_name.unwrap_or_default();
                let classes: Api<StorageClass> = Api::all(client.clone());
                let delayed = !class.is_empty()
                    && classes.get_opt(&class).await?.is_some_and(|c| {
                        c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
                    });
                if !delayed {
                    return Ok(Err(
                        "pod has unbound immediate PersistentVolumeClaims".into()
                    ));
                }
                let selected = claim.annotations().get(SELECTED_NODE).cloned();
                claims.delayed.push((name, selected));
            }
        }
    }
    Ok(Ok(claims))
}

/// The hostnames a volume's required node affinity names (`None`: no such constraint).
fn hostnames(volume: &PersistentVolume) -> Option<Vec<String>> {
    let terms = &volume
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms;
    let names: Vec<String> = terms
        .iter()
        .flat_map(|term| term.match_expressions.iter().flatten())
        .filter(|e| e.key == HOSTNAME && e.operator == "In")
        .flat_map(|e| e.values.iter().flatten().cloned())
        .collect();
    (!names.is_empty()).then_some(names)
}

impl Claims {
    fn allow_only(&mut self, nodes: Option<Vec<String>>) {
        let Some(nodes) = nodes else {
            return;
        };
        self.allowed = Some(match self.allowed.take() {
            None => nodes,
            Some(allowed) => allowed.into_iter().filter(|n| nodes.contains(n)).collect(),
        });
    }

    /// Why `node` cannot take the pod for its volumes, in kube-scheduler's words.
    pub(super) fn unfit(&self, node: &str) -> Option<String> {
        let allowed = self.allowed.as_ref()?;
        (!allowed.iter().any(|n| n == node))
            .then(|| "node(s) had volume node affinity conflict".to_string())
    }

    /// The node a waiting claim was already given, if it still fits.
    pub(super) fn selected_node(&self, fitting: &[String]) -> Option<String> {
        self.delayed
            .iter()
            .filter_map(|(_, selected)| selected.as_ref())
            .find(|node| fitting.contains(node))
            .cloned()
    }

    /// Give every waiting claim the chosen node; true while any is still unbound (the
    /// pod is bound once they all are).
    pub(super) async fn wait_for_binding(
        &self,
        chosen: &str,
        client: &Client,
        namespace: &str,
    ) -> Result<bool, kube::Error> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
        for (name, selected) in &self.delayed {
            if selected.as_deref() != Some(chosen) {
                let patch = json!({"metadata": {"annotations": {SELECTED_NODE: chosen}}});
                claims
                    .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await?;
            }
        }
        Ok(!self.delayed.is_empty())
    }
}
