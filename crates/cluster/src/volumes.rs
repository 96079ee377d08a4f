//! PersistentVolumeClaims bound as on a kind cluster: kube-controller-manager's
//! PersistentVolume binder and a dynamic provisioner (kind's local-path) in one.
//!
//! A claim binds to the smallest Available volume that fits it (its class, access modes,
//! volume mode and size), else one is provisioned for it when its StorageClass names
//! steady's [`PROVISIONER`]: at once for `Immediate` binding, once the scheduler has picked
//! a node for its first pod (the `volume.kubernetes.io/selected-node` annotation) for
//! `WaitForFirstConsumer`, as kind's default `standard` class does. Claims of other
//! provisioners, of missing classes or of none wait with kube's events. A volume whose
//! claim is gone is Released; steady's own are then deleted (`Delete`, the default
//! reclaim policy) or kept Released (`Retain`).
//!
//! Two controllers: claims (binding, provisioning) and volumes (their phase, reclaiming).
//! Must not know how pods use the volumes: the scheduler picks the node, the kubelet
//! mounts nothing.

use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use steady_quota::Quantity;
use steady_runtime::events::{EventType, Recorder};
use steady_runtime::{Action, Context, ObjectCache, ObjectKey};

use crate::{Error, Running, Setup, Shutdown};

/// The provisioner of steady's simulated volumes (kind's is `rancher.io/local-path`).
pub const PROVISIONER: &str = "steady.dev/simulated";
/// The annotation on a claim naming the node its first pod was scheduled to.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const STORAGE_PROVISIONER_BETA: &str = "volume.beta.kubernetes.io/storage-provisioner";
const MANAGER: &str = "persistentvolume-controller";

/// Start both controllers (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let events = crate::recorder(&client, MANAGER, &clock);

    let mut claims = crate::controller_for::<PersistentVolumeClaim>(&client, config.clone());
    let pending = claims.primary_cache();
    let volumes = claims.watches(
        Api::all(client.clone()),
        move |volume: &PersistentVolume| {
            match claim_of(volume) {
                Some((ns, name, _)) => vec![ObjectKey::new(Some(ns), name)],
                // A free volume may be what a waiting claim of its class needs.
                None => unbound(&pending, volume_class(volume)),
            }
        },
    );
    let pending = claims.primary_cache();
    let classes = claims.watches(Api::all(client.clone()), move |class: &StorageClass| {
        // A class that appears (or changes) may let waiting claims of it proceed.
        unbound(&pending, &class.name_any())
    });
    let binder = ClaimData {
        volumes,
        classes,
        events,
    };
    let claims = claims.run(reconcile_claim, Arc::new(binder), shutdown.clone());

    let reclaimer_config = crate::named(&config, "persistentvolume-reclaimer");
    let mut volumes = crate::controller_for::<PersistentVolume>(&client, reclaimer_config);
    let bound_claims = volumes.watches(Api::all(client), |claim: &PersistentVolumeClaim| {
        let volume = volume_name_of(claim);
        (!volume.is_empty())
            .then(|| ObjectKey::new(None, volume))
            .into_iter()
            .collect()
    });
    let volumes = volumes.run(reconcile_volume, Arc::new(bound_claims), shutdown);
    async move { futures::future::try_join(claims, volumes).await.map(drop) }.boxed()
}

/// The cached claims of `class` not bound to a volume yet.
fn unbound(claims: &ObjectCache<PersistentVolumeClaim>, class: &str) -> Vec<ObjectKey> {
    claims
        .list()
        .iter()
        .filter(|claim| class_of(claim) == class && volume_name_of(claim).is_empty())
        .map(|claim| ObjectKey::of(claim.as_ref()))
        .collect()
}

fn volume_class(volume: &PersistentVolume) -> &str {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

struct ClaimData {
    volumes: ObjectCache<PersistentVolume>,
    classes: ObjectCache<StorageClass>,
    events: Recorder,
}

fn class_of(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

fn volume_name_of(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or("")
}

/// The claim a volume is reserved for: namespace, name and uid (empty when not known).
fn claim_of(volume: &PersistentVolume) -> Option<(&str, &str, &str)> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some((
        reference.namespace.as_deref()?,
        reference.name.as_deref()?,
        reference.uid.as_deref().unwrap_or(""),
    ))
}

fn requested(claim: &PersistentVolumeClaim) -> Option<Quantity> {
    let requests = claim.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?;
    Quantity::parse(&requests.get("storage")?.0).ok()
}

fn capacity(volume: &PersistentVolume) -> Option<Quantity> {
    let capacity = volume.spec.as_ref()?.capacity.as_ref()?;
    Quantity::parse(&capacity.get("storage")?.0).ok()
}

async fn reconcile_claim(
    claim: Arc<PersistentVolumeClaim>,
    ctx: Arc<Context<ClaimData>>,
) -> Result<Action, Error> {
    if claim.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let data = ctx.data();
    let bound_to = volume_name_of(&claim);
    if !bound_to.is_empty() {
        if let Some(volume) = data.volumes.get(&ObjectKey::new(None, bound_to)) {
            let reserved_for_another = claim_of(&volume).is_some_and(|(ns, name, uid)| {
                (Some(ns), Some(name))
                    != (claim.namespace().as_deref(), claim.metadata.name.as_deref())
                    || (!uid.is_empty() && Some(uid) != claim.metadata.uid.as_deref())
            });
            if !reserved_for_another {
                bind(&ctx, &claim, &volume).await?;
            }
        }
        return Ok(Action::done());
    }
    if let Some(volume) = best_available(&claim, &data.volumes) {
        bind(&ctx, &claim, &volume).await?;
        return Ok(Action::done());
    }
    let class_name = class_of(&claim);
    let class = data.classes.get(&ObjectKey::new(None, class_name));
    let waiting = |reason: &'static str, message: String| wait(&ctx, &claim, reason, message);
    let Some(class) = class else {
        return match class_name {
            "" => waiting(
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set".into(),
            ),
            name => waiting(
                "ProvisioningFailed",
                format!("storageclass.storage.k8s.io \"{name}\" not found"),
            ),
        }
        .await;
    };
    if class.provisioner != PROVISIONER {
        let message = format!(
            "Waiting for a volume to be created either by the external provisioner '{}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.",
            class.provisioner
        );
        return waiting("ExternalProvisioning", message).await;
    }
    let selected = claim.annotations().get(SELECTED_NODE).cloned();
    let waits_for_consumer = class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
    if waits_for_consumer && selected.is_none() {
        return waiting(
            "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding".into(),
        )
        .await;
    }
    let volume = provision(&ctx, &claim, &class, selected.as_deref()).await?;
    bind(&ctx, &claim, &volume).await?;
    Ok(Action::done())
}

/// Leave the claim waiting, saying why in kube's event.
async fn wait(
    ctx: &Context<ClaimData>,
    claim: &PersistentVolumeClaim,
    reason: &str,
    message: String,
) -> Result<Action, Error> {
    let kind = match reason {
        "ProvisioningFailed" => EventType::Warning,
        _ => EventType::Normal,
    };
    crate::publish(&ctx.data().events, claim, kind, reason, &message).await;
    Ok(Action::done())
}

/// The smallest Available volume the claim fits, as the binder's `FindMatchingVolume`
/// picks one: same class, every requested access mode, same volume mode, enough room;
/// one already reserved for this claim first.
fn best_available(
    claim: &PersistentVolumeClaim,
    volumes: &ObjectCache<PersistentVolume>,
) -> Option<Arc<PersistentVolume>> {
    let spec = claim.spec.as_ref()?;
    let wanted = requested(claim).unwrap_or_else(|| Quantity::from_units(0));
    let modes = spec.access_modes.clone().unwrap_or_default();
    let volume_mode = spec.volume_mode.as_deref().unwrap_or("Filesystem");
    let fits = |volume: &PersistentVolume| {
        let Some(volume_spec) = volume.spec.as_ref() else {
            return false;
        };
        let reserved_for_it = claim_of(volume).is_some_and(|(ns, name, uid)| {
            Some(ns) == claim.namespace().as_deref()
                && Some(name) == claim.metadata.name.as_deref()
                && (uid.is_empty() || Some(uid) == claim.metadata.uid.as_deref())
        });
        let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
        let free =
            claim_of(volume).is_none() && matches!(phase, None | Some("Pending" | "Available"));
        (reserved_for_it || free)
            && volume.metadata.deletion_timestamp.is_none()
            && volume_class(volume) == class_of(claim)
            && volume_spec.volume_mode.as_deref().unwrap_or("Filesystem") == volume_mode
            && modes
                .iter()
                .all(|m| volume_spec.access_modes.iter().flatten().any(|v| v == m))
            && capacity(volume).is_some_and(|c| c >= wanted)
    };
    volumes
        .list()
        .into_iter()
        .filter(|volume| fits(volume))
        .min_by(|a, b| {
            capacity(a)
                .cmp(&capacity(b))
                .then_with(|| a.name_any().cmp(&b.name_any()))
        })
}

/// Create the claim's volume (named `pvc-<claim uid>`, as provisioners name them),
/// reserved for it, on the selected node when its class waited for one.
async fn provision(
    ctx: &Context<ClaimData>,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
) -> Result<Arc<PersistentVolume>, Error> {
    let (namespace, name) = (claim.namespace().unwrap_or_default(), claim.name_any());
    let uid = claim
        .uid()
        .ok_or_else(|| Error::Incomplete(format!("claim {namespace}/{name} has no uid")))?;
    let volume_name = format!("pvc-{uid}");
    if let Some(existing) = ctx.data().volumes.get(&ObjectKey::new(None, &volume_name)) {
        return Ok(existing);
    }
    let claims = ctx.api::<PersistentVolumeClaim>(&namespace);
    let annotations = json!({"metadata": {"annotations": {
        STORAGE_PROVISIONER: PROVISIONER, STORAGE_PROVISIONER_BETA: PROVISIONER}}});
    claims
        .patch(&name, &PatchParams::default(), &Patch::Merge(annotations))
        .await?;
    let spec = claim.spec.clone().unwrap_or_default();
    let size = spec
        .resources
        .and_then(|r| r.requests)
        .and_then(|r| r.get("storage").cloned());
    let mut volume = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name, "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "capacity": {"storage": size.map_or(json!("0"), |q| json!(q.0))},
            "accessModes": spec.access_modes.unwrap_or_default(),
            "persistentVolumeReclaimPolicy": class.reclaim_policy.as_deref().unwrap_or("Delete"),
            "storageClassName": class.name_any(),
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
            "hostPath": {"path": format!("/var/local-path-provisioner/{volume_name}_{namespace}_{name}"), "type": "DirectoryOrCreate"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
                         "name": name, "uid": uid, "resourceVersion": claim.resource_version()},
        },
    });
    if let Some(node) = node {
        volume["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}});
    }
    let volume: PersistentVolume =
        serde_json::from_value(volume).map_err(kube::Error::SerdeError)?;
    let volumes = ctx.cluster_api::<PersistentVolume>();
    let created = match volumes.create(&PostParams::default(), &volume).await {
        Ok(created) => created,
        Err(kube::Error::Api(status)) if status.code == 409 => {
            Api::<PersistentVolume>::all(ctx.client())
                .get(&volume.name_any())
                .await?
        }
        Err(e) => return Err(e.into()),
    };
    let message = format!("Successfully provisioned volume {}", created.name_any());
    crate::record_normal(&ctx.data().events, claim, "ProvisioningSucceeded", &message).await;
    Ok(Arc::new(created))
}

/// Reserve `volume` for `claim`, then record the binding on the claim, each only where it
/// is not yet so: a bind interrupted halfway completes on the next reconcile.
async fn bind(
    ctx: &Context<ClaimData>,
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
) -> Result<(), Error> {
    let (namespace, name) = (claim.namespace().unwrap_or_default(), claim.name_any());
    let volume_name = volume.name_any();
    let volumes = ctx.cluster_api::<PersistentVolume>();
    let reserved = claim_of(volume).is_some_and(|(_, _, uid)| !uid.is_empty());
    if !reserved {
        let patch = json!({
            "metadata": {"annotations": {BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": namespace, "name": name, "uid": claim.uid(),
                "resourceVersion": claim.resource_version()}},
        });
        volumes
            .patch(&volume_name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }
    let volume_phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    if volume_phase != Some("Bound") {
        set_volume_phase(ctx, volume, "Bound").await?;
    }
    let claims = ctx.api::<PersistentVolumeClaim>(&namespace);
    if volume_name_of(claim) != volume_name || !claim.annotations().contains_key(BIND_COMPLETED) {
        let mut annotations = json!({BIND_COMPLETED: "yes"});
        if volume_name_of(claim).is_empty() {
            annotations[BOUND_BY_CONTROLLER] = json!("yes");
        }
        let patch = json!({"metadata": {"annotations": annotations},
            "spec": {"volumeName": volume_name}});
        claims
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }
    let volume_spec = volume.spec.clone().unwrap_or_default();
    let status = json!({
        "phase": "Bound",
        "accessModes": volume_spec.access_modes,
        "capacity": volume_spec.capacity,
    });
    let current = claim
        .status
        .as_ref()
        .map(|s| json!({"phase": s.phase, "accessModes": s.access_modes, "capacity": s.capacity}));
    if current.as_ref() != Some(&status) {
        let patch = Patch::Merge(json!({"status": status}));
        claims
            .patch_status(&name, &PatchParams::default(), &patch)
            .await?;
    }
    Ok(())
}

/// A volume's phase: Available without a claim, Bound with one, Released once its claim
/// is gone, and then deleted when steady provisioned it and its policy says `Delete`.
async fn reconcile_volume(
    volume: Arc<PersistentVolume>,
    ctx: Arc<Context<ObjectCache<PersistentVolumeClaim>>>,
) -> Result<Action, Error> {
    if volume.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    let set_phase = |phase: &'static str| set_volume_phase(&ctx, &volume, phase);
    let Some((namespace, name, uid)) = claim_of(&volume) else {
        if matches!(phase, None | Some("Pending")) {
            set_phase("Available").await?;
        }
        return Ok(Action::done());
    };
    if uid.is_empty() {
        return Ok(Action::done());
    }
    if phase != Some("Released") {
        if claim_exists(&ctx, namespace, name, uid).await? {
            return Ok(Action::done());
        }
        // Released before it is reclaimed, as kube's binder does: a deleted volume keeps
        // its `kubernetes.io/pv-protection` finalizer while it is Bound.
        set_phase("Released").await?;
    }
    let ours = volume.annotations().get(PROVISIONED_BY).map(String::as_str) == Some(PROVISIONER);
    let policy = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain");
    if ours && policy == "Delete" {
        let volumes = ctx.cluster_api::<PersistentVolume>();
        match volumes
            .delete(&volume.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Action::done())
}

async fn set_volume_phase<T>(
    ctx: &Context<T>,
    volume: &PersistentVolume,
    phase: &str,
) -> Result<(), Error> {
    let patch = Patch::Merge(json!({"status": {"phase": phase}}));
    ctx.cluster_api::<PersistentVolume>()
        .patch_status(&volume.name_any(), &PatchParams::default(), &patch)
        .await?;
    Ok(())
}

/// Whether the claim a volume is reserved for still exists (the same one): the cache
/// first, the API when the cache has not seen it (a claim just created, or just gone).
async fn claim_exists(
    ctx: &Context<ObjectCache<PersistentVolumeClaim>>,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<bool, Error> {
    let same = |claim: &PersistentVolumeClaim| claim.metadata.uid.as_deref() == Some(uid);
    if let Some(claim) = ctx.data().get(&ObjectKey::new(Some(namespace), name)) {
        return Ok(same(&claim));
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client(), namespace);
    Ok(claims
        .get_opt(name)
        .await?
        .is_some_and(|claim| same(&claim)))
}

/// Create kind's default class, `standard` (steady's provisioner, `WaitForFirstConsumer`,
/// `Delete`), when the cluster has no StorageClass at all: what `steady up` does at start,
/// as kind's installer does once.
pub async fn ensure_default_class(client: &Client) -> Result<(), kube::Error> {
    let classes: Api<StorageClass> = Api::all(client.clone());
    if !classes
        .list(&ListParams::default().limit(1))
        .await?
        .items
        .is_empty()
    {
        return Ok(());
    }
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "standard",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .map_err(kube::Error::SerdeError)?;
    match classes.create(&PostParams::default(), &class).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
