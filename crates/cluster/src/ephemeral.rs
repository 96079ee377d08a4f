//! The ephemeral volume controller: for a pod's generic ephemeral volume
//! (`volumes[].ephemeral.volumeClaimTemplate`), the PersistentVolumeClaim
//! `<pod>-<volume>` it stands for, made from the template and controlled by the pod (so
//! the collector deletes it with the pod), as kube-controller-manager's
//! `ephemeral-volume-controller` makes it. The scheduler (`node`) waits for the claim and
//! the volume controller binds it, as for any claim.
//!
//! A pod's volumes never change, so a claim is made once, or again if it is deleted
//! before its pod; a pod being deleted gets none. A claim of that name the pod does not
//! control is left alone: the pod gets kube's Warning `FailedBinding` and, at the
//! scheduler, never a node.

use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{EphemeralVolumeSource, PersistentVolumeClaim, Pod, PodSpec};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use steady_runtime::events::{EventType, Recorder};
use steady_runtime::{Action, Context, ObjectCache, ObjectKey};

use crate::{Error, Running, Setup, Shutdown, pod_template};

/// The component its events name, as kube-controller-manager's.
const MANAGER: &str = "ephemeral_volume";

/// Start the controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let mut controller = crate::controller_for::<Pod>(&client, config);
    controller.trim(keep_ephemeral_volumes);
    let claims = controller.owns(Api::<PersistentVolumeClaim>::all(client.clone()));
    controller.trim(|claim: &mut PersistentVolumeClaim| {
        claim.spec = None;
        claim.status = None;
        claim.metadata.managed_fields = None;
    });
    let caches = Caches {
        claims,
        events: crate::recorder(&client, MANAGER, &clock),
    };
    controller
        .run(reconcile, Arc::new(caches), shutdown)
        .boxed()
}

/// The claims (their metadata) and where the controller reports a claim it cannot make.
pub struct Caches {
    claims: ObjectCache<PersistentVolumeClaim>,
    events: Recorder,
}

/// What the controller reads of a pod: its identity, whether it is being deleted, and its
/// ephemeral volumes.
fn keep_ephemeral_volumes(pod: &mut Pod) {
    let volumes = pod
        .spec
        .take()
        .and_then(|spec| spec.volumes)
        .map(|volumes| {
            volumes
                .into_iter()
                .filter(|volume| volume.ephemeral.is_some())
                .collect()
        });
    pod.spec = Some(PodSpec {
        volumes,
        ..PodSpec::default()
    });
    pod.status = None;
    let meta = &mut pod.metadata;
    (meta.labels, meta.annotations, meta.managed_fields) = (None, None, None);
}

/// kube's `VolumeClaimName`: the claim an ephemeral volume of `pod` stands for.
pub fn claim_name(pod: &Pod, volume: &str) -> String {
    format!("{}-{volume}", pod.name_any())
}

/// kube's `VolumeIsForPod`: the claim of an ephemeral volume must be controlled by the pod,
/// or it is someone else's that happens to have the name.
pub fn claim_is_for_pod(pod: &Pod, claim: &PersistentVolumeClaim) -> Result<(), String> {
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    if claim.namespace() == pod.namespace()
        && pod_template::is_controlled_by(&claim.metadata, pod_uid)
    {
        return Ok(());
    }
    Err(format!(
        "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
        claim.namespace().unwrap_or_default(),
        claim.name_any(),
        pod.namespace().unwrap_or_default(),
        pod.name_any()
    ))
}

/// Make every ephemeral volume's claim the pod lacks; report and retry what fails.
async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context<Caches>>) -> Result<Action, Error> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    for volume in volumes {
        let Some(source) = &volume.ephemeral else {
            continue;
        };
        if let Err((error, message)) = ensure_claim(&pod, &volume.name, source, &ctx).await {
            let message = format!("ephemeral volume {}: {message}", volume.name);
            let events = &ctx.data().events;
            crate::publish(
                events,
                pod.as_ref(),
                EventType::Warning,
                "FailedBinding",
                &message,
            )
            .await;
            return Err(error);
        }
    }
    Ok(Action::done())
}

/// Create the claim of the ephemeral volume `volume` unless the pod has it. A failure
/// comes with kube's words for it.
async fn ensure_claim(
    pod: &Pod,
    volume: &str,
    source: &EphemeralVolumeSource,
    ctx: &Context<Caches>,
) -> Result<(), (Error, String)> {
    let namespace = pod_template::namespace_of(pod);
    let name = claim_name(pod, volume);
    if let Some(existing) = ctx
        .data()
        .claims
        .get(&ObjectKey::new(Some(&namespace), &name))
    {
        return claim_is_for_pod(pod, &existing)
            .map_err(|message| (Error::Taken(message.clone()), message));
    }
    let Some(template) = &source.volume_claim_template else {
        // Validation requires the template; without one there is nothing to make.
        return Ok(());
    };
    let template_meta = template.metadata.clone().unwrap_or_default();
    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            owner_references: Some(vec![pod_template::controller_ref(pod)]),
            annotations: template_meta.annotations,
            labels: template_meta.labels,
            ..ObjectMeta::default()
        },
        spec: Some(template.spec.clone()),
        status: None,
    };
    let claims = ctx.api::<PersistentVolumeClaim>(&namespace);
    match claims.create(&PostParams::default(), &claim).await {
        Ok(_) => Ok(()),
        Err(error) => {
            let error = Error::from(error);
            let message = format!("create PVC {name}: {}", crate::error_message(&error));
            Err((error, message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "p1",
                         "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "volumes": [
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "config", "configMap": {"name": "web"}},
            ]},
            "status": {"phase": "Running"},
        }))
        .expect("a pod")
    }

    fn claim_controlled_by(uid: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "web-scratch", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": uid,
                 "controller": true},
            ]},
        }))
        .expect("a claim")
    }

    #[test]
    fn the_claim_is_named_after_the_pod_and_the_volume() {
        assert_eq!(claim_name(&pod(), "scratch"), "web-scratch");
    }

    #[test]
    fn only_a_claim_the_pod_controls_is_its_ephemeral_volume() {
        assert_eq!(claim_is_for_pod(&pod(), &claim_controlled_by("p1")), Ok(()));
        assert_eq!(
            claim_is_for_pod(&pod(), &claim_controlled_by("p0")),
            Err("PVC ns/web-scratch was not created for pod ns/web (pod is not owner)".into())
        );
    }

    #[test]
    fn a_pod_is_kept_as_its_identity_and_its_ephemeral_volumes() {
        let mut pod = pod();
        keep_ephemeral_volumes(&mut pod);
        let spec = pod.spec.as_ref().expect("a spec");
        let kept: Vec<&str> = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(kept, ["scratch"]);
        assert!(spec.containers.is_empty() && pod.status.is_none());
        assert_eq!(pod.metadata.labels, None);
        assert_eq!(pod.metadata.uid.as_deref(), Some("p1"));
    }
}
