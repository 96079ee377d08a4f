//! PersistentVolumeClaims bound as on a kind cluster, driven through kube-rs against
//! steady's API server, the simulated node (its scheduler) and the volume controller:
//! the default class waits for the first pod and provisions on its node, an `Immediate`
//! class provisions at once, a static volume is bound by size, a claim deleted under its
//! pod waits for the pod (pvc-protection), and a volume whose claim is gone is deleted or
//! Released as its reclaim policy says.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;
use steady_test_support::{create_json, eventually};

async fn volume_cluster() -> Cluster {
    controllers_cluster(&[(steady_cluster::volumes::start, "persistentvolume-binder")]).await
}

fn claim(name: &str, class: Option<&str>, size: &str) -> serde_json::Value {
    let mut claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}});
    if let Some(class) = class {
        claim["spec"]["storageClassName"] = json!(class);
    }
    claim
}

fn pod_using(name: &str, claim: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "db", "image": "postgres:17"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})
}

fn phase_of(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

async fn events_of(cluster: &Cluster, name: &str) -> Vec<Event> {
    let events: Api<Event> = cluster.api();
    let listed = events.list(&ListParams::default()).await.expect("events");
    listed
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .collect()
}

/// Wait until the pod `name` is marked Unschedulable, and return it.
async fn unschedulable(cluster: &Cluster, name: &str) -> Pod {
    cluster
        .wait_for::<Pod>(name, "unschedulable", |p| {
            p.status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .any(|c| c.reason.as_deref() == Some("Unschedulable"))
        })
        .await
}

async fn volume_eventually(cluster: &Cluster, name: &str, phase: &str) -> PersistentVolume {
    let volumes: Api<PersistentVolume> = Api::all(cluster.client.clone());
    eventually(&format!("volume {name} {phase}"), LIMIT, || async {
        let volume = volumes.get_opt(name).await.ok()??;
        (volume_phase(&volume) == phase).then_some(volume)
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn the_default_class_waits_for_the_first_pod_and_provisions_on_its_node() {
    let cluster = volume_cluster().await;
    let claims: Api<PersistentVolumeClaim> = cluster.api();
    let created: PersistentVolumeClaim = create_json(&claims, claim("data", None, "1Gi")).await;
    let spec = created.spec.clone().expect("spec");
    assert_eq!(
        spec.storage_class_name.as_deref(),
        Some("standard"),
        "the default class, by admission"
    );
    let waiting = event_with_reason(&cluster.client, "WaitForFirstConsumer").await;
    assert_eq!(
        waiting.message.as_deref(),
        Some("waiting for first consumer to be created before binding")
    );
    assert_eq!(
        phase_of(&claims.get("data").await.expect("claim")),
        "Pending"
    );

    let _: Pod = create_json(&cluster.api(), pod_using("db", "data")).await;
    let bound = cluster
        .wait_for::<PersistentVolumeClaim>("data", "bound", |c| phase_of(c) == "Bound")
        .await;
    let pod = cluster
        .wait_for::<Pod>("db", "running", |p| phase(p) == "Running")
        .await;
    let node = pod.spec.and_then(|s| s.node_name).expect("scheduled");
    let annotations = bound.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations["volume.kubernetes.io/selected-node"], node);
    assert_eq!(annotations["pv.kubernetes.io/bind-completed"], "yes");
    assert_eq!(
        annotations["volume.kubernetes.io/storage-provisioner"],
        "steady.dev/simulated"
    );
    let volume_name = bound.spec.and_then(|s| s.volume_name).expect("volumeName");
    assert_eq!(
        volume_name,
        format!("pvc-{}", bound.metadata.uid.clone().expect("uid"))
    );
    let status = bound.status.expect("status");
    assert_eq!(status.capacity.expect("capacity")["storage"].0, "1Gi");
    let volume = volume_eventually(&cluster, &volume_name, "Bound").await;
    let volume_spec = volume.spec.expect("spec");
    assert_eq!(
        volume_spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    let pinned = serde_json::to_value(&volume_spec.node_affinity).expect("json");
    assert_eq!(
        pinned["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"],
        json!([node])
    );
    assert!(
        events_of(&cluster, "data")
            .await
            .iter()
            .any(|e| e.reason.as_deref() == Some("ProvisioningSucceeded"))
    );

    // The claim deleted under its running pod is kept (pvc-protection), Terminating and
    // still Bound, until the pod is gone; then its provisioned volume goes too (reclaim
    // policy Delete).
    claims
        .delete("data", &DeleteParams::default())
        .await
        .expect("claim deleted");
    let kept = claims.get("data").await.expect("the claim is kept");
    assert!(kept.metadata.deletion_timestamp.is_some());
    assert_eq!(
        kept.metadata.finalizers.as_deref(),
        Some(&["kubernetes.io/pvc-protection".to_string()][..])
    );
    assert_eq!(phase_of(&kept), "Bound");
    cluster
        .api::<Pod>()
        .delete("db", &DeleteParams::default())
        .await
        .expect("pod deleted");
    eventually("the claim gone with its pod", LIMIT, || async {
        claims.get_opt("data").await.ok()?.is_none().then_some(())
    })
    .await;
    let volumes: Api<PersistentVolume> = Api::all(cluster.client.clone());
    eventually("the volume deleted", LIMIT, || async {
        volumes
            .get_opt(&volume_name)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn immediate_classes_static_volumes_and_claims_that_cannot_bind() {
    let cluster = volume_cluster().await;
    let classes: Api<k8s_openapi::api::storage::v1::StorageClass> =
        Api::all(cluster.client.clone());
    let _: k8s_openapi::api::storage::v1::StorageClass = create_json(
        &classes,
        json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
        "provisioner": "steady.dev/simulated", "volumeBindingMode": "Immediate"}),
    )
    .await;
    let claims: Api<PersistentVolumeClaim> = cluster.api();
    let _: PersistentVolumeClaim = create_json(&claims, claim("fast", Some("fast"), "2Gi")).await;
    let bound = cluster
        .wait_for::<PersistentVolumeClaim>("fast", "bound without a pod", |c| {
            phase_of(c) == "Bound"
        })
        .await;
    assert!(
        !bound
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("volume.kubernetes.io/selected-node")
    );

    // A static volume, no class: the smallest that fits is bound; Retain keeps it, Released.
    let volumes: Api<PersistentVolume> = Api::all(cluster.client.clone());
    for (name, size) in [("big", "100Gi"), ("small", "10Gi"), ("tiny", "1Gi")] {
        let _: PersistentVolume = create_json(&volumes, json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": format!("/data/{name}")}}})).await;
    }
    volume_eventually(&cluster, "small", "Available").await;
    let _: PersistentVolumeClaim = create_json(&claims, claim("static", Some(""), "5Gi")).await;
    let bound = cluster
        .wait_for::<PersistentVolumeClaim>("static", "bound", |c| phase_of(c) == "Bound")
        .await;
    assert_eq!(
        bound.spec.and_then(|s| s.volume_name).as_deref(),
        Some("small")
    );
    volume_eventually(&cluster, "small", "Bound").await;
    claims
        .delete("static", &DeleteParams::default())
        .await
        .expect("deleted");
    volume_eventually(&cluster, "small", "Released").await;

    // What cannot bind says why, and a pod of a missing claim stays Pending.
    let _: PersistentVolumeClaim = create_json(&claims, claim("gold", Some("gold"), "1Gi")).await;
    let failed = event_with_reason(&cluster.client, "ProvisioningFailed").await;
    assert_eq!(
        failed.message.as_deref(),
        Some("storageclass.storage.k8s.io \"gold\" not found")
    );
    let _: Pod = create_json(&cluster.api(), pod_using("orphan", "nope")).await;
    let pending = unschedulable(&cluster, "orphan").await;
    let condition = pending
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    let message = condition
        .iter()
        .find_map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.starts_with("0/1 nodes are available: persistentvolumeclaim \"nope\" not found."),
        "{message}"
    );
    let _: Pod = create_json(&cluster.api(), pod_using("waiting", "gold")).await;
    let pending = unschedulable(&cluster, "waiting").await;
    assert_eq!(phase(&pending), "Pending");
    cluster.stop().await;
}

/// The volume binder and the ephemeral volume controller, as `steady up` runs them.
async fn ephemeral_cluster() -> Cluster {
    controllers_cluster(&[
        (steady_cluster::volumes::start, "persistentvolume-binder"),
        (steady_cluster::ephemeral::start, "ephemeral-volume"),
    ])
    .await
}

/// A pod with the generic ephemeral volume `scratch`.
fn pod_with_scratch(name: &str) -> serde_json::Value {
    let template = json!({
        "metadata": {"labels": {"type": "scratch"}, "annotations": {"example.com/purpose": "cache"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    });
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "busybox"}],
                 "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}]}})
}

/// kube's ephemeral volume controller: the pod's claim `<pod>-<volume>` is made from the
/// template, controlled by the pod, bound on the pod's node before it runs, and deleted
/// with the pod (its volume with it, by the default class's reclaim policy).
#[tokio::test(start_paused = true)]
async fn an_ephemeral_volume_is_a_claim_made_bound_and_deleted_with_its_pod() {
    let cluster = ephemeral_cluster().await;
    let pod: Pod = create_json(&cluster.api(), pod_with_scratch("web")).await;
    let claim = cluster
        .wait_for::<PersistentVolumeClaim>("web-scratch", "bound", |c| phase_of(c) == "Bound")
        .await;
    let owner = &claim.metadata.owner_references.clone().expect("an owner")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            Some(&owner.uid),
            owner.controller,
            owner.block_owner_deletion
        ),
        (
            "Pod",
            "web",
            pod.metadata.uid.as_ref(),
            Some(true),
            Some(true)
        )
    );
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    let annotations = claim.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(labels.get("type").map(String::as_str), Some("scratch"));
    assert_eq!(
        annotations.get("example.com/purpose").map(String::as_str),
        Some("cache")
    );
    let spec = claim.spec.clone().expect("a spec");
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    let volume = spec.volume_name.expect("bound to a volume");
    let running = cluster
        .wait_for::<Pod>("web", "running", |p| phase(p) == "Running")
        .await;
    assert_eq!(
        running.spec.and_then(|s| s.node_name).as_ref(),
        annotations.get("volume.kubernetes.io/selected-node")
    );

    let pods: Api<Pod> = cluster.api();
    pods.delete("web", &DeleteParams::default())
        .await
        .expect("delete the pod");
    let claims: Api<PersistentVolumeClaim> = cluster.api();
    let volumes: Api<PersistentVolume> = Api::all(cluster.client.clone());
    eventually("the claim and its volume gone", LIMIT, || async {
        let claim = claims.get_opt("web-scratch").await.ok()?;
        let volume = volumes.get_opt(&volume).await.ok()?;
        (claim.is_none() && volume.is_none()).then_some(())
    })
    .await;
    cluster.stop().await;
}

/// A claim of the ephemeral volume's name that the pod does not control is not its
/// volume: kube reports it on the pod (`FailedBinding`) and never schedules the pod.
#[tokio::test(start_paused = true)]
async fn a_pod_whose_ephemeral_claim_is_someone_elses_is_not_scheduled() {
    let cluster = ephemeral_cluster().await;
    let claims: Api<PersistentVolumeClaim> = cluster.api();
    let _: PersistentVolumeClaim = create_json(&claims, claim("web-scratch", None, "1Gi")).await;
    let _: Pod = create_json(&cluster.api(), pod_with_scratch("web")).await;
    let not_owner =
        "PVC default/web-scratch was not created for pod default/web (pod is not owner)";
    let reported = eventually("FailedBinding on the pod", LIMIT, || async {
        let events = events_of(&cluster, "web").await;
        events
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedBinding"))
    })
    .await;
    assert_eq!(
        (reported.type_.as_deref(), reported.message),
        (
            Some("Warning"),
            Some(format!("ephemeral volume scratch: {not_owner}"))
        )
    );
    let pod = unschedulable(&cluster, "web").await;
    let scheduled = pod
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_ == "PodScheduled")
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(scheduled.contains(not_owner), "{scheduled}");
    let owners = claims
        .get("web-scratch")
        .await
        .expect("the claim")
        .metadata
        .owner_references;
    assert_eq!(owners, None, "someone else's claim is left alone");
    cluster.stop().await;
}
