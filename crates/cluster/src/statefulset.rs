//! The StatefulSet controller: pods `<set>-<ordinal>` with stable names and claims, as
//! kube-controller-manager 1.32 runs them.
//!
//! `OrderedReady` (the default) creates one ordinal at a time, the next only once every
//! lower one is Running and Ready, and scales down from the highest ordinal, one pod at
//! a time, each gone before the next goes; `Parallel` creates and deletes at once. A
//! template change is rolled out by deleting, highest ordinal first and one at a time,
//! the pods at or above `partition` that are not at the update revision; they come
//! back from the new template. Each `volumeClaimTemplate` becomes a claim
//! `<template>-<set>-<ordinal>` before its pod; `persistentVolumeClaimRetentionPolicy`
//! says whether claims are retained (the default) or go with the set or a condemned pod.

use std::collections::{BTreeMap, BTreeSet};

use futures::FutureExt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, StatefulSet, StatefulSetSpec, StatefulSetStatus,
};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use steady_runtime::events::Recorder;
use steady_runtime::{Action, Context, ObjectCache, ObjectKey};

use crate::claim::{self, Claim};
use crate::clock;
use crate::pod_template::{self, Availability, PodName};
use crate::revision::{self, REVISION_LABEL};
use crate::{Clock, Error, Running, Setup, Shutdown};

/// The label holding a pod's own name (a Service can select one ordinal by it).
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label holding a pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
const MANAGER: &str = "statefulset-controller";

/// Start the StatefulSet controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let mut controller = crate::controller_for::<StatefulSet>(&client, config);
    let data = SetData {
        events: crate::recorder(&client, MANAGER, &clock),
        clock,
        pods: crate::adopts_pods_labelled(&mut controller, &client, POD_NAME_LABEL, claims),
        revisions: controller.owns(Api::<ControllerRevision>::all(client.clone())),
        // Claims outlive their pods and have no owner: read, never a trigger.
        claims: controller.watches(Api::<PersistentVolumeClaim>::all(client.clone()), |_| {
            Vec::new()
        }),
    };
    controller.run(reconcile, Arc::new(data), shutdown).boxed()
}

struct SetData {
    clock: Clock,
    pods: ObjectCache<Pod>,
    revisions: ObjectCache<ControllerRevision>,
    claims: ObjectCache<PersistentVolumeClaim>,
    events: Recorder,
}

/// What one reconcile knows about a set.
struct Set<'a> {
    object: &'a StatefulSet,
    spec: StatefulSetSpec,
    name: String,
    namespace: String,
    /// `[first, end)`: the ordinals that should exist.
    first: i32,
    end: i32,
    current_revision: String,
    update_revision: String,
    /// The reconcile's time, against which `minReadySeconds` is judged.
    now: Timestamp,
}

impl Set<'_> {
    /// Whether `pod` counts as available: Ready for `minReadySeconds`.
    fn availability(&self, pod: &Pod) -> Availability {
        let min_ready_seconds = self.spec.min_ready_seconds.unwrap_or(0);
        pod_template::availability(pod, min_ready_seconds, self.now)
    }

    /// Running, available and not being deleted: what an ordered set waits for before the
    /// next ordinal (kube's `isRunningAndAvailable`).
    fn healthy(&self, pod: &Pod) -> bool {
        pod_template::is_running(pod)
            && self.availability(pod) == Availability::Available
            && !pod_template::is_terminating(pod)
    }

    /// How long until the next Ready pod becomes available, if one is waiting.
    fn next_available(&self, pods: &BTreeMap<i32, Arc<Pod>>) -> Option<Duration> {
        let min_ready_seconds = self.spec.min_ready_seconds.unwrap_or(0);
        pod_template::next_available(
            pods.values().map(AsRef::as_ref),
            min_ready_seconds,
            self.now,
        )
    }

    fn pod_name(&self, ordinal: i32) -> String {
        format!("{}-{ordinal}", self.name)
    }

    /// The ordinal of a pod named `<set>-<n>`.
    fn ordinal_of(&self, pod: &Pod) -> Option<i32> {
        ordinal_in(&self.name, pod)
    }

    fn ordered(&self) -> bool {
        self.spec.pod_management_policy.as_deref() != Some("Parallel")
    }

    /// Pods at or above it get the update revision (None: `OnDelete`, nothing rolled).
    fn partition(&self) -> Option<i32> {
        let strategy = self.spec.update_strategy.clone().unwrap_or_default();
        if strategy.type_.as_deref() == Some("OnDelete") {
            return None;
        }
        Some(
            strategy
                .rolling_update
                .and_then(|r| r.partition)
                .unwrap_or(0),
        )
    }

    /// `persistentVolumeClaimRetentionPolicy`: whether claims go with the set (when it
    /// is deleted) and with a condemned pod (when scaled down). The default retains both.
    fn claims_deleted_when(&self, event: &str) -> bool {
        let policy = self.spec.persistent_volume_claim_retention_policy.as_ref();
        let rule = match event {
            "deleted" => policy.and_then(|p| p.when_deleted.as_deref()),
            _ => policy.and_then(|p| p.when_scaled.as_deref()),
        };
        rule == Some("Delete")
    }

    fn claim_name(&self, template: &PersistentVolumeClaim, ordinal: i32) -> String {
        format!("{}-{}", template.name_any(), self.pod_name(ordinal))
    }
}

/// The ordinal of a pod named `<set>-<digits>`, the set named `set`: kube's
/// `getParentNameAndOrdinal`.
fn ordinal_in(set: &str, pod: &Pod) -> Option<i32> {
    let digits = pod
        .metadata
        .name
        .as_deref()?
        .strip_prefix(set)?
        .strip_prefix('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether the set would claim `pod`: its selector matches and the pod is named as one of
/// its ordinals (kube's `isMemberOf` filter, so two sets with overlapping selectors take
/// only their own pods).
fn claims(set: &StatefulSet, pod: &Pod) -> bool {
    let name = set.metadata.name.as_deref().unwrap_or_default();
    ordinal_in(name, pod).is_some()
        && claim::selects(
            set.spec.as_ref().map(|s| &s.selector),
            pod.metadata.labels.as_ref(),
        )
}

async fn reconcile(object: Arc<StatefulSet>, ctx: Arc<Context<SetData>>) -> Result<Action, Error> {
    if object.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let spec = object.spec.clone().unwrap_or_default();
    let name = object.name_any();
    let first = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
    let update_revision = revision::revision_name(&name, &spec.template);
    let current_revision = object
        .status
        .as_ref()
        .and_then(|s| s.current_revision.clone())
        .unwrap_or_else(|| update_revision.clone());
    let set = Set {
        object: &object,
        end: first + spec.replicas.unwrap_or(1).max(0),
        first,
        namespace: pod_template::namespace_of(object.as_ref()),
        name,
        current_revision,
        update_revision,
        spec,
        now: clock::timestamp(&ctx.data().clock),
    };
    ensure_revision(&ctx, &set).await?;
    let candidates = ctx.data().pods.in_namespace(Some(&set.namespace));
    Claim::new(object.as_ref(), ctx.as_ref())
        .run(&candidates, Some(&set.spec.selector), |pod| {
            set.ordinal_of(pod).is_some()
        })
        .await?;
    let by_ordinal = pods_by_ordinal(&ctx, &set);
    if bring_up(&ctx, &set, &by_ordinal).await? {
        let by_ordinal = pods_by_ordinal(&ctx, &set);
        if !scale_down(&ctx, &set, &by_ordinal).await? {
            roll(&ctx, &set, &by_ordinal).await?;
        }
    }
    let mut in_use: BTreeSet<String> = pods_by_ordinal(&ctx, &set)
        .values()
        .filter_map(|pod| revision::of_pod(pod).map(str::to_string))
        .collect();
    in_use.extend([set.current_revision.clone(), set.update_revision.clone()]);
    let uid = object.uid().unwrap_or_default();
    let revisions = &ctx.data().revisions;
    let limit = set.spec.revision_history_limit;
    revision::prune(&ctx, revisions, &uid, &set.namespace, &in_use, limit).await?;
    write_status(&ctx, &set).await?;
    // A pod Ready but not yet for minReadySeconds changes the status (and, ordered, lets
    // the next ordinal come) when it turns available: look again then.
    match set.next_available(&pods_by_ordinal(&ctx, &set)) {
        Some(left) => Ok(Action::requeue_after(left)),
        None => Ok(Action::done()),
    }
}

fn pods_by_ordinal(ctx: &Context<SetData>, set: &Set) -> BTreeMap<i32, Arc<Pod>> {
    let uid = set.object.uid().unwrap_or_default();
    ctx.data()
        .pods
        .owned_by(&uid)
        .into_iter()
        .filter_map(|pod| Some((set.ordinal_of(&pod)?, pod)))
        .collect()
}

/// Create missing ordinals and replace finished pods, in order. True when every ordinal
/// that should exist is healthy (or, for `Parallel`, when nothing more was to be done
/// first), so that scaling down and rolling may go on.
async fn bring_up(
    ctx: &Context<SetData>,
    set: &Set<'_>,
    by_ordinal: &BTreeMap<i32, Arc<Pod>>,
) -> Result<bool, Error> {
    let mut settled = true;
    for ordinal in set.first..set.end {
        match by_ordinal.get(&ordinal) {
            None => {
                create_pod(ctx, set, ordinal).await?;
                settled = false;
            }
            Some(pod) if pod_template::is_finished(pod) && !pod_template::is_terminating(pod) => {
                // A pod whose containers exited is recreated under the same name.
                delete_pod(ctx, set, pod).await?;
                settled = false;
            }
            Some(pod) if !set.healthy(pod) => settled = false,
            Some(_) => continue,
        }
        if set.ordered() && !settled {
            return Ok(false);
        }
    }
    Ok(settled || !set.ordered())
}

/// Delete pods beyond the replicas, highest ordinal first (OrderedReady: one at a time,
/// each gone before the next). True while any is left.
async fn scale_down(
    ctx: &Context<SetData>,
    set: &Set<'_>,
    by_ordinal: &BTreeMap<i32, Arc<Pod>>,
) -> Result<bool, Error> {
    let condemned: Vec<(&i32, &Arc<Pod>)> = by_ordinal
        .iter()
        .rev()
        .filter(|(ordinal, _)| !(set.first..set.end).contains(*ordinal))
        .collect();
    for (ordinal, pod) in &condemned {
        if pod_template::is_terminating(pod) {
            if set.ordered() {
                break;
            }
            continue;
        }
        if set.claims_deleted_when("scaled") {
            give_claims_to(ctx, set, **ordinal, pod).await?;
        }
        delete_pod(ctx, set, pod).await?;
        if set.ordered() {
            break;
        }
    }
    Ok(!condemned.is_empty())
}

/// Replace the highest pod at or above the partition that is not at the update revision,
/// one at a time (the StatefulSet's `maxUnavailable` of 1).
async fn roll(
    ctx: &Context<SetData>,
    set: &Set<'_>,
    by_ordinal: &BTreeMap<i32, Arc<Pod>>,
) -> Result<(), Error> {
    let Some(partition) = set.partition() else {
        return Ok(());
    };
    if by_ordinal
        .values()
        .any(|pod| pod_template::is_terminating(pod))
    {
        return Ok(());
    }
    let outdated = by_ordinal
        .iter()
        .rev()
        .filter(|(ordinal, _)| **ordinal >= partition)
        .find(|(_, pod)| revision::of_pod(pod) != Some(set.update_revision.as_str()));
    if let Some((_, pod)) = outdated {
        delete_pod(ctx, set, pod).await?;
    }
    Ok(())
}

/// The revision a new pod of `ordinal` gets: below the partition the current one.
fn revision_for(set: &Set, ordinal: i32) -> String {
    match set.partition() {
        Some(partition) if ordinal < partition => set.current_revision.clone(),
        _ => set.update_revision.clone(),
    }
}

fn template_of_revision(ctx: &Context<SetData>, set: &Set, name: &str) -> PodTemplateSpec {
    ctx.data()
        .revisions
        .get(&ObjectKey::new(Some(&set.namespace), name))
        .and_then(|r| revision::template_of(&r))
        .unwrap_or_else(|| set.spec.template.clone())
}

async fn create_pod(ctx: &Context<SetData>, set: &Set<'_>, ordinal: i32) -> Result<(), Error> {
    create_claims(ctx, set, ordinal).await?;
    let revision = revision_for(set, ordinal);
    let template = template_of_revision(ctx, set, &revision);
    let name = set.pod_name(ordinal);
    let mut pod = pod_template::pod_from_template(
        &template,
        pod_template::controller_ref(set.object),
        &set.namespace,
        PodName::Exact(name.clone()),
    );
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision);
    if let Some(spec) = pod.spec.as_mut() {
        spec.hostname = Some(name.clone());
        spec.subdomain = set.spec.service_name.clone().filter(|s| !s.is_empty());
        for template in set.spec.volume_claim_templates.iter().flatten() {
            let volumes = spec.volumes.get_or_insert_with(Vec::new);
            volumes.retain(|v| v.name != template.name_any());
            volumes.push(Volume {
                name: template.name_any(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: set.claim_name(template, ordinal),
                    read_only: None,
                }),
                ..Volume::default()
            });
        }
    }
    match ctx
        .api::<Pod>(&set.namespace)
        .create(&PostParams::default(), &pod)
        .await
    {
        Ok(_) => {}
        // The cache has not seen it yet: the next event brings it.
        Err(kube::Error::Api(status)) if status.code == 409 => return Ok(()),
        Err(error) => {
            let events = &ctx.data().events;
            let creating = |why: &str| {
                format!(
                    "create Pod {name} in StatefulSet {} failed error: {why}",
                    set.name
                )
            };
            return Err(crate::failed_create(events, set.object, creating, error).await);
        }
    }
    let message = format!("create Pod {name} in StatefulSet {} successful", set.name);
    crate::record_normal(&ctx.data().events, set.object, "SuccessfulCreate", &message).await;
    Ok(())
}

/// Each claim of `ordinal` that does not exist yet, created (the volume controller binds
/// it, `crate::volumes`).
async fn create_claims(ctx: &Context<SetData>, set: &Set<'_>, ordinal: i32) -> Result<(), Error> {
    let api = ctx.api::<PersistentVolumeClaim>(&set.namespace);
    for template in set.spec.volume_claim_templates.iter().flatten() {
        let name = set.claim_name(template, ordinal);
        let key = ObjectKey::new(Some(&set.namespace), &name);
        if ctx.data().claims.get(&key).is_some() {
            continue;
        }
        let mut labels = template.metadata.labels.clone().unwrap_or_default();
        labels.extend(set.spec.selector.match_labels.clone().unwrap_or_default());
        let claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(set.namespace.clone()),
                labels: Some(labels),
                annotations: template.metadata.annotations.clone(),
                // The garbage collector removes them with the set.
                owner_references: set
                    .claims_deleted_when("deleted")
                    .then(|| vec![pod_template::controller_ref(set.object)]),
                ..ObjectMeta::default()
            },
            spec: template.spec.clone(),
            status: None,
        };
        match api.create(&PostParams::default(), &claim).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let message = format!(
            "create Claim {name} Pod {} in StatefulSet {} success",
            set.pod_name(ordinal),
            set.name
        );
        crate::record_normal(&ctx.data().events, set.object, "SuccessfulCreate", &message).await;
    }
    Ok(())
}

/// Make the condemned `pod` the owner of its claims instead of the set, so the garbage
/// collector deletes them once the pod is gone (`whenScaled: Delete`).
async fn give_claims_to(
    ctx: &Context<SetData>,
    set: &Set<'_>,
    ordinal: i32,
    pod: &Pod,
) -> Result<(), Error> {
    let pod_reference = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        controller: None,
        block_owner_deletion: Some(true),
    };
    let api = ctx.api::<PersistentVolumeClaim>(&set.namespace);
    for template in set.spec.volume_claim_templates.iter().flatten() {
        let name = set.claim_name(template, ordinal);
        let key = ObjectKey::new(Some(&set.namespace), &name);
        let Some(claim) = ctx.data().claims.get(&key) else {
            continue;
        };
        let mut owners = claim.metadata.owner_references.clone().unwrap_or_default();
        if owners.iter().any(|o| o.uid == pod_reference.uid) {
            continue;
        }
        // The pod alone owns them now: with the set still an owner they would stay.
        let set_uid = set.object.uid().unwrap_or_default();
        owners.retain(|o| o.uid != set_uid);
        owners.push(pod_reference.clone());
        let patch = Patch::Merge(json!({"metadata": {"ownerReferences": owners}}));
        match api.patch(&name, &PatchParams::default(), &patch).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

async fn delete_pod(ctx: &Context<SetData>, set: &Set<'_>, pod: &Pod) -> Result<(), Error> {
    let api = ctx.api::<Pod>(&set.namespace);
    if !pod_template::delete_exact(&api, pod).await? {
        return Ok(());
    }
    let message = format!(
        "delete Pod {} in StatefulSet {} successful",
        pod.name_any(),
        set.name
    );
    crate::record_normal(&ctx.data().events, set.object, "SuccessfulDelete", &message).await;
    Ok(())
}

/// The ControllerRevision of the set's template, created once.
async fn ensure_revision(ctx: &Context<SetData>, set: &Set<'_>) -> Result<(), Error> {
    let revisions = &ctx.data().revisions;
    let template = &set.spec.template;
    revision::ensure(ctx, revisions, set.object, &set.update_revision, template).await?;
    Ok(())
}

/// The status kube writes, from the pods as the cache has them after this reconcile.
fn status_of(ctx: &Context<SetData>, set: &Set) -> StatefulSetStatus {
    let by_ordinal = pods_by_ordinal(ctx, set);
    let count = |f: &dyn Fn(&Pod) -> bool| {
        i32::try_from(by_ordinal.values().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let replicas = count(&|_| true);
    let ready = count(&|p| pod_template::is_running(p) && pod_template::is_ready(p));
    let available =
        count(&|p| pod_template::is_running(p) && set.availability(p) == Availability::Available);
    let at = |revision: &str| {
        let revision = revision.to_string();
        count(&move |p| revision::of_pod(p) == Some(revision.as_str()))
    };
    let updated = at(&set.update_revision);
    let (current_revision, current) =
        if updated == replicas && ready == replicas && replicas == set.end - set.first {
            // The rollout is over: the update revision becomes the current one.
            (set.update_revision.clone(), updated)
        } else {
            (set.current_revision.clone(), at(&set.current_revision))
        };
    StatefulSetStatus {
        observed_generation: set.object.metadata.generation,
        replicas,
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        current_replicas: Some(current),
        updated_replicas: Some(updated),
        current_revision: Some(current_revision),
        update_revision: Some(set.update_revision.clone()),
        collision_count: Some(0),
        conditions: set
            .object
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone()),
    }
}

async fn write_status(ctx: &Context<SetData>, set: &Set<'_>) -> Result<(), Error> {
    let status = status_of(ctx, set);
    let api = ctx.api::<StatefulSet>(&set.namespace);
    crate::write_status(&api, &set.name, set.object.status.as_ref(), &status, &[]).await?;
    Ok(())
}
