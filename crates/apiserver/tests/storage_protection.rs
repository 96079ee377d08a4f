//! Storage object in-use protection through kube-rs, as on a cluster: a claim a scheduled
//! pod uses, and a volume still Bound, are kept (Terminating) after their delete until
//! that is over; the finalizers are there from the create and come back if removed.

mod common;

use common::{eventually, eventually_gone, server};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

async fn create<K>(api: &Api<K>, object: serde_json::Value) -> K
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).expect("a valid object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created")
}

async fn create_claim(claims: &Api<PersistentVolumeClaim>, name: &str) -> PersistentVolumeClaim {
    create(
        claims,
        json!({
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }),
    )
    .await
}

/// A pod mounting `claim`, bound to a node when `node` names one.
async fn create_pod(pods: &Api<Pod>, name: &str, claim: &str, node: Option<&str>) -> Pod {
    create(
        pods,
        json!({
            "metadata": {"name": name},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "image": "busybox:1.36",
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            },
        }),
    )
    .await
}

async fn create_volume(volumes: &Api<PersistentVolume>, name: &str) -> PersistentVolume {
    create(
        volumes,
        json!({
            "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": format!("/tmp/{name}")}},
        }),
    )
    .await
}

async fn set_phase(volumes: &Api<PersistentVolume>, name: &str, phase: &str) {
    volumes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase}})),
        )
        .await
        .expect("status written");
}

async fn delete<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete accepted");
}

#[tokio::test]
async fn a_claim_a_scheduled_pod_uses_is_kept_until_the_pod_is_gone() {
    let server = server().await;
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(server.client());
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let used = create_claim(&claims, "used").await;
    assert_eq!(used.finalizers(), [PVC_PROTECTION]);
    create_claim(&claims, "named-by-a-pending-pod").await;
    create_pod(&pods, "runs", "used", Some("steady-node")).await;
    // A pod no scheduler has placed holds nothing: the kubelet would not start it now.
    create_pod(&pods, "pending", "named-by-a-pending-pod", None).await;

    delete(&claims, "used").await;
    delete(&claims, "named-by-a-pending-pod").await;
    // The second delete came after the first: once it is through, so is the first.
    eventually_gone(&claims, "named-by-a-pending-pod").await;
    let kept = claims.get("used").await.expect("the used claim is kept");
    assert!(kept.metadata.deletion_timestamp.is_some(), "{kept:?}");
    assert_eq!(kept.finalizers(), [PVC_PROTECTION]);

    // Gone once its pod is.
    pods.delete("runs", &DeleteParams::default().grace_period(0))
        .await
        .expect("pod deleted");
    eventually_gone(&claims, "used").await;
}

#[tokio::test]
async fn a_volume_is_kept_while_it_is_bound() {
    let server = server().await;
    let volumes: Api<PersistentVolume> = Api::all(server.client());
    let bound = create_volume(&volumes, "bound").await;
    assert_eq!(bound.finalizers(), [PV_PROTECTION]);
    set_phase(&volumes, "bound", "Bound").await;
    create_volume(&volumes, "available").await;
    set_phase(&volumes, "available", "Available").await;

    delete(&volumes, "bound").await;
    delete(&volumes, "available").await;
    eventually_gone(&volumes, "available").await;
    let kept = volumes
        .get("bound")
        .await
        .expect("the bound volume is kept");
    assert!(kept.metadata.deletion_timestamp.is_some(), "{kept:?}");

    // The binder releases it once its claim is gone.
    set_phase(&volumes, "bound", "Released").await;
    eventually_gone(&volumes, "bound").await;
}

#[tokio::test]
async fn a_live_claim_or_volume_gets_its_finalizer_back() {
    let server = server().await;
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(server.client());
    let volumes: Api<PersistentVolume> = Api::all(server.client());
    create_claim(&claims, "data").await;
    create_volume(&volumes, "pv1").await;
    let unprotect = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    claims
        .patch("data", &PatchParams::default(), &unprotect)
        .await
        .expect("claim patched");
    volumes
        .patch("pv1", &PatchParams::default(), &unprotect)
        .await
        .expect("volume patched");
    eventually("the claim's finalizer back", || async {
        let claim = claims.get("data").await.ok()?;
        (claim.finalizers() == [PVC_PROTECTION]).then_some(())
    })
    .await;
    eventually("the volume's finalizer back", || async {
        let volume = volumes.get("pv1").await.ok()?;
        (volume.finalizers() == [PV_PROTECTION]).then_some(())
    })
    .await;
}
