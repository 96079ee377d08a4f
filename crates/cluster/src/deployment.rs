//! The Deployment controller: one ReplicaSet per pod template, named
//! `<deployment>-<pod-template-hash>`, and the rollout between them as
//! kube-controller-manager 1.32 runs it — RollingUpdate within `maxSurge` and
//! `maxUnavailable` (defaults 25 % / 25 %), Recreate, revisions
//! (`deployment.kubernetes.io/revision` on the ReplicaSets and the Deployment), the
//! history kept to `revisionHistoryLimit`, and the status (`replicas`, `updatedReplicas`,
//! `readyReplicas`, `availableReplicas`, `unavailableReplicas`, `observedGeneration`, the
//! `Available` and `Progressing` conditions) that `kubectl rollout status` reads.
//!
//! `kubectl rollout undo` needs nothing more: kubectl copies an old ReplicaSet's template
//! back into the Deployment, whose template then equals that ReplicaSet's again, and it
//! becomes the new one with the next revision.
//!
//! Decisions read ReplicaSets from the runtime's cache (this controller's own writes
//! included) and their status as the ReplicaSet controller wrote it; pods only for
//! Recreate, which waits until the old ones are gone, terminating ones included.
//! An old ReplicaSet's availability counts at most its `spec.replicas`, so a status not
//! yet updated after a scale-down cannot make the rollout remove more pods than allowed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentSpec, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use steady_runtime::events::Recorder;
use steady_runtime::{Action, Context, ObjectCache, ObjectKey};

use crate::claim::{self, Claim};
use crate::clock;
use crate::pod_template::{self, Identity, TEMPLATE_HASH_LABEL};
use crate::replicaset::{REPLICA_FAILURE, nonzero};
use crate::{Clock, Error, Running, Setup, Shutdown};

/// The revision of a ReplicaSet (and of its Deployment: the new ReplicaSet's).
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// The Deployment's replicas when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// The Deployment's replicas plus `maxSurge` when the ReplicaSet was last scaled.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";

/// Deployment annotations not copied onto its ReplicaSets (kube's list).
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION_ANNOTATION,
    "deployment.kubernetes.io/revision-history",
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    "deprecated.deployment.rollback.to",
];

/// The component its events name, as kube-controller-manager's.
const MANAGER: &str = "deployment-controller";

/// The Progressing reason of a rollout past its `progressDeadlineSeconds`.
const TIMED_OUT: &str = "ProgressDeadlineExceeded";
/// The Progressing reason of a paused Deployment.
const PAUSED: &str = "DeploymentPaused";

/// The status counts kube omits when zero.
const OMITTED_COUNTS: &[&str] = &[
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
];

/// Start the Deployment controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let mut controller = crate::controller_for::<Deployment>(&client, config);
    let events = crate::recorder(&client, MANAGER, &clock);
    let sets = controller.owns_or_adopts(Api::<ReplicaSet>::all(client.clone()), selects);
    // Only pods a ReplicaSet made for a Deployment (they carry the hash label), kept as
    // little more than owner and lifecycle; only their ending wakes the Deployment (a
    // Recreate waits for it).
    let owners = sets.clone();
    let managed = watcher::Config::default().labels(TEMPLATE_HASH_LABEL);
    let pods = controller.watches_with(Api::<Pod>::all(client), managed, move |pod: &Pod| {
        ending(pod)
            .then(|| deployment_of(&owners, pod))
            .flatten()
            .into_iter()
            .collect()
    });
    controller.trim(pod_template::trim_for_counting);
    let caches = Caches {
        sets,
        pods,
        clock,
        events,
    };
    controller
        .run(reconcile, Arc::new(caches), shutdown)
        .boxed()
}

/// What the Deployment controller reads: its ReplicaSets, the pods of Deployments'
/// ReplicaSets (only owner and lifecycle), and the time its conditions are stamped and
/// judged with (`progressDeadlineSeconds`); and where it records its events.
pub struct Caches {
    sets: ObjectCache<ReplicaSet>,
    pods: ObjectCache<Pod>,
    clock: Clock,
    events: Recorder,
}

/// Whether the pod is on its way out (being deleted or finished).
fn ending(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() || !pod_template::is_active(pod)
}

/// The Deployment controlling the ReplicaSet controlling `pod`, if cached.
fn deployment_of(sets: &ObjectCache<ReplicaSet>, pod: &Pod) -> Option<ObjectKey> {
    let namespace = pod.metadata.namespace.as_deref();
    let controller = |refs: &Option<Vec<OwnerReference>>| {
        refs.iter()
            .flatten()
            .find(|r| r.controller == Some(true))
            .map(|r| r.name.clone())
    };
    let rs = sets.get(&ObjectKey::new(
        namespace,
        &controller(&pod.metadata.owner_references)?,
    ))?;
    Some(ObjectKey::new(
        namespace,
        &controller(&rs.metadata.owner_references)?,
    ))
}

/// Whether the Deployment's selector matches the ReplicaSet's labels (kube's Deployment
/// controller claims the ReplicaSets of its namespace by selector).
fn selects(deployment: &Deployment, rs: &ReplicaSet) -> bool {
    claim::selects(
        deployment.spec.as_ref().map(|s| &s.selector),
        rs.metadata.labels.as_ref(),
    )
}

/// Take the Deployment's rollout one step (create, scale or clean up ReplicaSets), then
/// write its status if it changed.
pub async fn reconcile(
    deployment: Arc<Deployment>,
    ctx: Arc<Context<Caches>>,
) -> Result<Action, Error> {
    if deployment.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let id = Identity::of(deployment.as_ref())?;
    let candidates = ctx.data().sets.in_namespace(Some(&id.namespace));
    Claim::new(deployment.as_ref(), ctx.as_ref())
        .run(
            &candidates,
            deployment.spec.as_ref().map(|s| &s.selector),
            |_| true,
        )
        .await?;
    let spec = deployment
        .spec
        .as_ref()
        .ok_or_else(|| Error::Incomplete(format!("deployment {} has no spec", id.name)))?;
    let rollout = Rollout {
        deployment: &deployment,
        owner: deployment.clone(),
        spec,
        ctx: &ctx,
        sets: ReplicaSets::of(&ctx.data().sets, &id.uid, spec),
        id,
        new_condition: None,
    };
    rollout.run().await
}

/// The Deployment's ReplicaSets: the one running its template, and the others, oldest
/// first.
struct ReplicaSets {
    new: Option<ReplicaSet>,
    old: Vec<ReplicaSet>,
}

impl ReplicaSets {
    fn of(cache: &ObjectCache<ReplicaSet>, uid: &str, spec: &DeploymentSpec) -> ReplicaSets {
        let mut owned: Vec<ReplicaSet> = cache
            .owned_by(uid)
            .into_iter()
            .filter(|rs| pod_template::is_controlled_by(&rs.metadata, uid))
            .map(|rs| rs.as_ref().clone())
            .collect();
        owned.sort_by(|a, b| {
            let created = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        // Of several with the template (an old bug's leftovers), the oldest is the new one.
        let new = owned
            .iter()
            .position(|rs| {
                template_of(rs)
                    .is_some_and(|t| pod_template::equal_ignoring_hash(t, &spec.template))
            })
            .map(|at| owned.remove(at));
        ReplicaSets { new, old: owned }
    }

    fn all(&self) -> impl Iterator<Item = &ReplicaSet> {
        self.new.iter().chain(&self.old)
    }

    /// Put the server's answer to a write of a ReplicaSet in place of what we had.
    fn replace(&mut self, written: ReplicaSet) {
        let name = written.metadata.name.clone();
        let slot = self
            .new
            .iter_mut()
            .chain(self.old.iter_mut())
            .find(|rs| rs.metadata.name == name);
        if let Some(slot) = slot {
            *slot = written;
        }
    }
}

fn template_of(rs: &ReplicaSet) -> Option<&k8s_openapi::api::core::v1::PodTemplateSpec> {
    rs.spec.as_ref().and_then(|s| s.template.as_ref())
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn status_of(
    rs: &ReplicaSet,
    field: fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> Option<i32>,
) -> i32 {
    rs.status.as_ref().and_then(field).unwrap_or(0)
}

/// Available pods the ReplicaSet can be counted on for: never more than it is scaled to,
/// since pods beyond that are about to be deleted whatever its status still says.
fn dependable_available(rs: &ReplicaSet) -> i32 {
    status_of(rs, |s| s.available_replicas).min(spec_replicas(rs))
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// `maxSurge` and `maxUnavailable` as pod counts for `replicas`: a percentage of surge
/// rounds up, of unavailability down, and both zero would deadlock, so unavailability is
/// then 1 (kube's `ResolveFenceposts`).
fn fenceposts(spec: &DeploymentSpec, replicas: i32) -> (i32, i32) {
    let rolling = spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    let quarter = IntOrString::String("25%".into());
    let resolve = |value: Option<&IntOrString>, round_up: bool| match value.unwrap_or(&quarter) {
        IntOrString::Int(n) => (*n).max(0),
        IntOrString::String(text) => {
            let percent: i64 = text.trim_end_matches('%').parse().unwrap_or(25);
            let scaled = percent * i64::from(replicas);
            let pods = if round_up {
                (scaled + 99) / 100
            } else {
                scaled / 100
            };
            i32::try_from(pods.max(0)).unwrap_or(i32::MAX)
        }
    };
    let surge = resolve(rolling.and_then(|r| r.max_surge.as_ref()), true);
    let unavailable = resolve(rolling.and_then(|r| r.max_unavailable.as_ref()), false);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

fn is_recreate(spec: &DeploymentSpec) -> bool {
    spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate")
}

/// One reconcile of one Deployment: its ReplicaSets as they are now (updated by each
/// write), and the Progressing condition a new ReplicaSet brings.
struct Rollout<'a> {
    deployment: &'a Deployment,
    /// The same Deployment, shared with the events about it.
    owner: Arc<Deployment>,
    spec: &'a DeploymentSpec,
    ctx: &'a Context<Caches>,
    id: Identity,
    sets: ReplicaSets,
    new_condition: Option<DeploymentCondition>,
}

impl Rollout<'_> {
    fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }

    /// A condition stamped with the cluster's time.
    fn condition(
        &self,
        type_: &str,
        status: &str,
        reason: &str,
        message: String,
    ) -> DeploymentCondition {
        let now = clock::time(&self.ctx.data().clock);
        condition_at(now, type_, status, reason, message)
    }

    /// How long ago `time` was on the cluster's clock.
    fn since(&self, time: Option<&Time>) -> Duration {
        clock::since(&self.ctx.data().clock, time)
    }

    fn api(&self) -> steady_runtime::CachingApi<ReplicaSet> {
        self.ctx.api::<ReplicaSet>(&self.id.namespace)
    }

    async fn run(mut self) -> Result<Action, Error> {
        if !self.spec.paused.unwrap_or(false) {
            if is_recreate(self.spec) {
                self.recreate().await?;
            } else {
                self.roll().await?;
            }
        }
        let status = self.sync_status().await?;
        Ok(match self.until_deadline(&status) {
            // A second past it, as kube requeues a stuck Deployment.
            Some(left) => Action::requeue_after(left + Duration::from_secs(1)),
            None => Action::done(),
        })
    }

    /// `progressDeadlineSeconds`, when set (kube defaults it to 600).
    fn deadline(&self) -> Option<Duration> {
        let seconds = self.spec.progress_deadline_seconds?;
        Some(Duration::from_secs(u64::try_from(seconds).ok()?))
    }

    /// How long until a rollout still in progress passes its deadline.
    fn until_deadline(&self, status: &DeploymentStatus) -> Option<Duration> {
        let deadline = self.deadline()?;
        let progressing = find_condition(status, "Progressing")?;
        let stuck_for = |c: &DeploymentCondition| self.since(c.last_update_time.as_ref());
        // kube's `requeueStuckDeployment`, which a paused Deployment never reaches.
        let running = !self.spec.paused.unwrap_or(false)
            && !matches!(
                progressing.reason.as_deref(),
                Some("NewReplicaSetAvailable" | TIMED_OUT)
            )
            && !is_complete(self.deployment, status);
        running.then(|| deadline.saturating_sub(stuck_for(progressing)))
    }

    /// RollingUpdate: surge the new ReplicaSet up, then take old ones down as far as
    /// `maxUnavailable` allows; clean up history once complete.
    async fn roll(&mut self) -> Result<(), Error> {
        self.ensure_new_replica_set(true).await?;
        if let Some(new) = self.sets.new.clone() {
            let target = self.new_replica_set_target(spec_replicas(&new));
            if target != spec_replicas(&new) {
                self.scale(&new, target).await?;
                if target > spec_replicas(&new) {
                    // Old ones go down once the new pods are available (their status
                    // change triggers the next reconcile).
                    return Ok(());
                }
            }
        }
        if self.scale_down_old().await? {
            return Ok(());
        }
        self.clean_up_if_complete().await
    }

    /// Recreate: every old ReplicaSet to zero, and only once their pods are gone the new
    /// one to `replicas`.
    async fn recreate(&mut self) -> Result<(), Error> {
        self.ensure_new_replica_set(false).await?;
        let running: Vec<ReplicaSet> = self
            .sets
            .old
            .iter()
            .filter(|rs| spec_replicas(rs) > 0)
            .cloned()
            .collect();
        for rs in &running {
            self.scale(rs, 0).await?;
        }
        // Terminating pods count: their containers may still be running.
        let pods = &self.ctx.data().pods;
        let pods_left = self.sets.old.iter().any(|rs| {
            let uid = rs.metadata.uid.as_deref().unwrap_or_default();
            pods.owned_by(uid).iter().any(|pod| {
                pod_template::is_controlled_by(&pod.metadata, uid)
                    && !matches!(pod_template::phase(pod), "Succeeded" | "Failed")
            })
        });
        if !running.is_empty() || pods_left {
            return Ok(());
        }
        self.ensure_new_replica_set(true).await?;
        if let Some(new) = self.sets.new.clone()
            && spec_replicas(&new) != self.replicas()
        {
            self.scale(&new, self.replicas()).await?;
        }
        self.clean_up_if_complete().await
    }

    /// What the new ReplicaSet should be scaled to now (kube's `NewRSNewReplicas`).
    fn new_replica_set_target(&self, current: i32) -> i32 {
        let replicas = self.replicas();
        if is_recreate(self.spec) || current >= replicas {
            return replicas;
        }
        let (surge, _) = fenceposts(self.spec, replicas);
        let pods: i32 = self.sets.all().map(spec_replicas).sum();
        let room = replicas + surge - pods;
        if room <= 0 {
            return current;
        }
        current + room.min(replicas - current)
    }

    /// Scale old ReplicaSets down, first their unavailable pods, then available ones as
    /// far as keeping `replicas - maxUnavailable` available allows. Whether any scaled.
    async fn scale_down_old(&mut self) -> Result<bool, Error> {
        let old_pods: i32 = self.sets.old.iter().map(spec_replicas).sum();
        if old_pods == 0 {
            return Ok(false);
        }
        let replicas = self.replicas();
        let (_, max_unavailable) = fenceposts(self.spec, replicas);
        let min_available = replicas - max_unavailable;
        let all_pods: i32 = self.sets.all().map(spec_replicas).sum();
        let new_unavailable = self
            .sets
            .new
            .as_ref()
            .map_or(0, |rs| spec_replicas(rs) - dependable_available(rs));
        let mut budget = all_pods - min_available - new_unavailable;
        if budget <= 0 {
            return Ok(false);
        }
        let mut scaled = false;
        // Unavailable old pods cost no availability: they go first.
        for rs in self.sets.old.clone() {
            let unhealthy = spec_replicas(&rs) - dependable_available(&rs);
            if budget <= 0 {
                break;
            }
            if unhealthy <= 0 {
                continue;
            }
            let down = unhealthy.min(budget);
            self.scale(&rs, spec_replicas(&rs) - down).await?;
            budget -= down;
            scaled = true;
        }
        let available: i32 = self.sets.all().map(dependable_available).sum();
        let mut spare = available - min_available;
        for rs in self.sets.old.clone() {
            if spare <= 0 {
                break;
            }
            let current = spec_replicas(&rs);
            if current == 0 {
                continue;
            }
            let down = current.min(spare);
            self.scale(&rs, current - down).await?;
            spare -= down;
            scaled = true;
        }
        Ok(scaled)
    }

    /// Find the new ReplicaSet's revision and annotations up to date, or (when `create`)
    /// create it; keep the Deployment's revision annotation on the new one's.
    async fn ensure_new_replica_set(&mut self, create: bool) -> Result<(), Error> {
        let next_revision = self.sets.old.iter().map(revision).max().unwrap_or(0) + 1;
        match self.sets.new.clone() {
            Some(existing) => {
                let annotations = self.annotations_for(&existing, next_revision);
                let min_ready = self.spec.min_ready_seconds;
                let stale_min_ready =
                    existing.spec.as_ref().and_then(|s| s.min_ready_seconds) != min_ready;
                if Some(&annotations) != existing.metadata.annotations.as_ref() || stale_min_ready {
                    let patch = json!({
                        "metadata": {"annotations": annotations},
                        "spec": {"minReadySeconds": min_ready},
                    });
                    let written = self
                        .api()
                        .patch(
                            &name_of(&existing),
                            &PatchParams::default(),
                            &Patch::Merge(patch),
                        )
                        .await?;
                    self.sets.replace(written);
                }
            }
            None if create => self.create_new_replica_set(next_revision).await?,
            None => return Ok(()),
        }
        self.sync_revision_annotation().await
    }

    /// The new ReplicaSet's annotations: the Deployment's (but kube's exceptions), and
    /// `revision` raised to `next_revision` if it is older (a rollback makes an old
    /// template new again).
    fn annotations_for(&self, rs: &ReplicaSet, next_revision: i64) -> BTreeMap<String, String> {
        let mut annotations = rs.metadata.annotations.clone().unwrap_or_default();
        for (key, value) in self.deployment.metadata.annotations.iter().flatten() {
            if !NOT_COPIED.contains(&key.as_str()) {
                annotations.insert(key.clone(), value.clone());
            }
        }
        if revision(rs) < next_revision {
            annotations.insert(REVISION_ANNOTATION.into(), next_revision.to_string());
        }
        annotations
    }

    fn replicas_annotations(&self) -> [(String, String); 2] {
        let replicas = self.replicas();
        let (surge, _) = fenceposts(self.spec, replicas);
        [
            (DESIRED_REPLICAS_ANNOTATION.into(), replicas.to_string()),
            (
                MAX_REPLICAS_ANNOTATION.into(),
                (replicas + surge).to_string(),
            ),
        ]
    }

    async fn create_new_replica_set(&mut self, revision: i64) -> Result<(), Error> {
        let collision_count = self
            .deployment
            .status
            .as_ref()
            .and_then(|s| s.collision_count);
        let hash = pod_template::template_hash(&self.spec.template, collision_count);
        let name = format!("{}-{hash}", self.id.name);
        let mut template = self.spec.template.clone();
        let template_meta = template.metadata.get_or_insert_with(ObjectMeta::default);
        let labels = template_meta.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(TEMPLATE_HASH_LABEL.into(), hash.clone());
        let labels = labels.clone();
        let mut selector = self.spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(TEMPLATE_HASH_LABEL.into(), hash);
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.id.namespace.clone()),
                labels: Some(labels),
                owner_references: Some(vec![pod_template::controller_ref(self.deployment)]),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: self.spec.min_ready_seconds,
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let mut annotations = self.annotations_for(&rs, revision);
        annotations.extend(self.replicas_annotations());
        rs.metadata.annotations = Some(annotations);
        let replicas = self.new_replica_set_target(0);
        if let Some(spec) = rs.spec.as_mut() {
            spec.replicas = Some(replicas);
        }
        match self.api().create(&PostParams::default(), &rs).await {
            Ok(created) => {
                self.record(format!("Scaled up replica set {name} to {replicas}"));
                self.new_condition = Some(self.condition(
                    "Progressing",
                    "True",
                    "NewReplicaSetCreated",
                    format!("Created new replica set \"{name}\""),
                ));
                self.sets.new = Some(created);
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => self.collided(&name).await,
            Err(error) => Err(error.into()),
        }
    }

    /// The new ReplicaSet's name is taken. If by our own ReplicaSet of this template (our
    /// cache had not seen it yet), it is the new one; otherwise count a collision, which
    /// changes the hash, and try again on the next reconcile.
    async fn collided(&mut self, name: &str) -> Result<(), Error> {
        let existing = self.api().inner().get(name).await?;
        let ours = pod_template::is_controlled_by(&existing.metadata, &self.id.uid)
            && template_of(&existing)
                .is_some_and(|t| pod_template::equal_ignoring_hash(t, &self.spec.template));
        if ours {
            self.sets.new = Some(existing);
            return Ok(());
        }
        let collisions = self
            .deployment
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let patch = json!({"status": {"collisionCount": collisions + 1}});
        self.ctx
            .api::<Deployment>(&self.id.namespace)
            .patch_status(&self.id.name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Err(Error::NameCollision(format!(
            "replica set {name} exists and is not deployment {}'s for its template",
            self.id.name
        )))
    }

    /// The Deployment's `revision` annotation is its new ReplicaSet's.
    async fn sync_revision_annotation(&self) -> Result<(), Error> {
        let Some(new) = &self.sets.new else {
            return Ok(());
        };
        let wanted = revision(new).to_string();
        let current = self
            .deployment
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_ANNOTATION));
        if current == Some(&wanted) {
            return Ok(());
        }
        let patch = json!({"metadata": {"annotations": {REVISION_ANNOTATION: wanted}}});
        self.ctx
            .api::<Deployment>(&self.id.namespace)
            .patch(&self.id.name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }

    async fn scale(&mut self, rs: &ReplicaSet, replicas: i32) -> Result<(), Error> {
        let annotations: BTreeMap<String, String> =
            self.replicas_annotations().into_iter().collect();
        let patch = json!({
            "metadata": {"annotations": annotations},
            "spec": {"replicas": replicas},
        });
        let written = self
            .api()
            .patch(&name_of(rs), &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        let from = spec_replicas(rs);
        if from != replicas {
            let direction = if replicas > from { "up" } else { "down" };
            let name = name_of(rs);
            self.record(format!(
                "Scaled {direction} replica set {name} to {replicas} from {from}"
            ));
        }
        self.sets.replace(written);
        Ok(())
    }

    /// A `ScalingReplicaSet` event on the Deployment, as kube's deployment controller
    /// records for every scale.
    fn record(&self, message: String) {
        let events = self.ctx.data().events.clone();
        crate::publish_in_background(events, self.owner.clone(), "ScalingReplicaSet", message);
    }

    /// Once the rollout is complete, delete the oldest scaled-down ReplicaSets beyond
    /// `revisionHistoryLimit` (their pods all gone).
    async fn clean_up_if_complete(&mut self) -> Result<(), Error> {
        let complete = self
            .deployment
            .status
            .as_ref()
            .is_some_and(|status| is_complete(self.deployment, status));
        if !complete {
            return Ok(());
        }
        let limit = usize::try_from(self.spec.revision_history_limit.unwrap_or(10)).unwrap_or(0);
        let mut cleanable: Vec<&ReplicaSet> = self
            .sets
            .old
            .iter()
            .filter(|rs| {
                spec_replicas(rs) == 0
                    && status_of(rs, |s| Some(s.replicas)) == 0
                    && rs.metadata.deletion_timestamp.is_none()
                    && rs.status.as_ref().and_then(|s| s.observed_generation)
                        >= rs.metadata.generation
            })
            .collect();
        if cleanable.len() <= limit {
            return Ok(());
        }
        cleanable.sort_by_key(|rs| revision(rs));
        let api = self.api();
        for doomed in &cleanable[..cleanable.len() - limit] {
            pod_template::delete_exact(&api, *doomed).await?;
        }
        Ok(())
    }

    /// Write the status the ReplicaSets give the Deployment, if it changed; returns it.
    async fn sync_status(&self) -> Result<DeploymentStatus, Error> {
        let status = self.status();
        let api = self.ctx.api::<Deployment>(&self.id.namespace);
        let current = self.deployment.status.as_ref();
        crate::write_status(&api, &self.id.name, current, &status, OMITTED_COUNTS).await?;
        Ok(status)
    }

    /// kube's `calculateStatus` and `syncRolloutStatus`.
    fn status(&self) -> DeploymentStatus {
        let sets: Vec<&ReplicaSet> = self.sets.all().collect();
        let sum = |field: fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> Option<i32>| -> i32 {
            sets.iter().map(|rs| status_of(rs, field)).sum()
        };
        let available = sum(|s| s.available_replicas);
        let scaled_to: i32 = sets.iter().map(|rs| spec_replicas(rs)).sum();
        let previous = self.deployment.status.clone().unwrap_or_default();
        let mut status = DeploymentStatus {
            observed_generation: self.deployment.metadata.generation,
            replicas: nonzero(sum(|s| Some(s.replicas))),
            updated_replicas: nonzero(
                self.sets
                    .new
                    .as_ref()
                    .map_or(0, |rs| status_of(rs, |s| Some(s.replicas))),
            ),
            ready_replicas: nonzero(sum(|s| s.ready_replicas)),
            available_replicas: nonzero(available),
            unavailable_replicas: nonzero((scaled_to - available).max(0)),
            collision_count: previous.collision_count,
            conditions: previous.conditions.clone(),
            terminating_replicas: None,
        };
        if let Some(created) = &self.new_condition {
            set_condition(&mut status, created.clone());
        }
        let (_, max_unavailable) = fenceposts(self.spec, self.replicas());
        let availability = if available >= self.replicas() - max_unavailable {
            self.condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
            )
        } else {
            self.condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
            )
        };
        set_condition(&mut status, availability);
        self.check_paused(&mut status);
        if !self.spec.paused.unwrap_or(false) {
            self.update_progressing(&previous, &mut status);
            self.carry_replica_failure(&mut status);
        }
        status
    }

    /// kube's `checkPausedConditions`: with a progress deadline, pausing sets Progressing
    /// Unknown (`DeploymentPaused`) and resuming sets it again (`DeploymentResumed`), so
    /// the deadline counts from the resume, not from before the pause; a timed-out
    /// rollout keeps its `ProgressDeadlineExceeded`.
    fn check_paused(&self, status: &mut DeploymentStatus) {
        if self.deadline().is_none() {
            return;
        }
        let reason = find_condition(status, "Progressing").and_then(|c| c.reason.clone());
        let paused = self.spec.paused.unwrap_or(false);
        let (reason, message) = match reason.as_deref() {
            Some(TIMED_OUT) => return,
            Some(PAUSED) if !paused => ("DeploymentResumed", "Deployment is resumed"),
            Some(PAUSED) => return,
            _ if paused => (PAUSED, "Deployment is paused"),
            _ => return,
        };
        let condition = self.condition("Progressing", "Unknown", reason, message.into());
        set_condition(status, condition);
    }

    /// kube's `syncRolloutStatus`: a ReplicaSet's `ReplicaFailure` (the new one's first)
    /// is the Deployment's, and goes when none has one.
    fn carry_replica_failure(&self, status: &mut DeploymentStatus) {
        let failure = |rs: &ReplicaSet| {
            let conditions = rs.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions
                .into_iter()
                .flatten()
                .find(|c| c.type_ == REPLICA_FAILURE)
                .cloned()
        };
        let found = self
            .sets
            .new
            .as_ref()
            .and_then(failure)
            .or_else(|| self.sets.all().find_map(failure));
        match found {
            Some(c) => set_condition(
                status,
                DeploymentCondition {
                    type_: c.type_,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                    last_update_time: c.last_transition_time.clone(),
                    last_transition_time: c.last_transition_time,
                },
            ),
            None => {
                if let Some(conditions) = status.conditions.as_mut() {
                    conditions.retain(|c| c.type_ != REPLICA_FAILURE);
                }
            }
        }
    }

    /// The Progressing condition: `NewReplicaSetAvailable` once complete,
    /// `ReplicaSetUpdated` (with a fresh update time) while counts move.
    fn update_progressing(&self, previous: &DeploymentStatus, status: &mut DeploymentStatus) {
        let current = find_condition(status, "Progressing").cloned();
        let already_complete = status.replicas == status.updated_replicas
            && current
                .as_ref()
                .is_some_and(|c| c.reason.as_deref() == Some("NewReplicaSetAvailable"));
        if already_complete {
            return;
        }
        let subject = match &self.sets.new {
            Some(rs) => format!("ReplicaSet \"{}\"", name_of(rs)),
            None => format!("Deployment \"{}\"", self.id.name),
        };
        if is_complete(self.deployment, status) {
            set_condition(
                status,
                self.condition(
                    "Progressing",
                    "True",
                    "NewReplicaSetAvailable",
                    format!("{subject} has successfully progressed."),
                ),
            );
        } else if is_progressing(previous, status) {
            let mut updated = self.condition(
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                format!("{subject} is progressing."),
            );
            if let Some(current) = current.filter(|c| c.status == "True") {
                updated.last_transition_time = current.last_transition_time;
            }
            if let Some(conditions) = status.conditions.as_mut() {
                conditions.retain(|c| c.type_ != "Progressing");
            }
            set_condition(status, updated);
        } else if let Some(deadline) = self.deadline()
            && let Some(current) = current.filter(|c| {
                // kube's `DeploymentTimedOut`: whatever the status, from the last update.
                !matches!(
                    c.reason.as_deref(),
                    Some("NewReplicaSetAvailable" | TIMED_OUT)
                )
            })
            && self.since(current.last_update_time.as_ref()) > deadline
        {
            set_condition(
                status,
                self.condition(
                    "Progressing",
                    "False",
                    TIMED_OUT,
                    format!("{subject} has timed out progressing."),
                ),
            );
        }
    }
}

fn name_of(rs: &ReplicaSet) -> String {
    rs.metadata.name.clone().unwrap_or_default()
}

/// Every replica updated and available, none old, and the current generation observed.
fn is_complete(deployment: &Deployment, status: &DeploymentStatus) -> bool {
    let replicas = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let n = |count: Option<i32>| count.unwrap_or(0);
    n(status.updated_replicas) == replicas
        && n(status.replicas) == replicas
        && n(status.available_replicas) == replicas
        && status.observed_generation >= deployment.metadata.generation
}

/// Whether the rollout moved since `previous`: more pods updated, ready or available, or
/// fewer old ones.
fn is_progressing(previous: &DeploymentStatus, status: &DeploymentStatus) -> bool {
    let n = |count: Option<i32>| count.unwrap_or(0);
    let old = |s: &DeploymentStatus| n(s.replicas) - n(s.updated_replicas);
    n(status.updated_replicas) > n(previous.updated_replicas)
        || n(status.ready_replicas) > n(previous.ready_replicas)
        || n(status.available_replicas) > n(previous.available_replicas)
        || old(previous) > old(status)
}

fn condition_at(
    now: Time,
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
) -> DeploymentCondition {
    let now = Some(now);
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: now.clone(),
        last_transition_time: now,
    }
}

fn find_condition<'a>(
    status: &'a DeploymentStatus,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// kube's `SetDeploymentCondition`: a condition with the same status and reason is kept
/// as it is; a new reason keeps the transition time if the status did not change.
fn set_condition(status: &mut DeploymentStatus, mut new: DeploymentCondition) {
    if let Some(current) = find_condition(status, &new.type_) {
        if current.status == new.status && current.reason == new.reason {
            return;
        }
        if current.status == new.status {
            new.last_transition_time = current.last_transition_time.clone();
        }
    }
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != new.type_);
    conditions.push(new);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentStrategy, RollingUpdateDeployment};

    fn spec(surge: IntOrString, unavailable: IntOrString) -> DeploymentSpec {
        DeploymentSpec {
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(surge),
                    max_unavailable: Some(unavailable),
                }),
            }),
            ..DeploymentSpec::default()
        }
    }

    #[test]
    fn percentages_round_surge_up_and_unavailability_down() {
        let quarter = || IntOrString::String("25%".into());
        assert_eq!(fenceposts(&spec(quarter(), quarter()), 3), (1, 0));
        assert_eq!(fenceposts(&spec(quarter(), quarter()), 10), (3, 2));
        assert_eq!(fenceposts(&DeploymentSpec::default(), 4), (1, 1));
        assert_eq!(
            fenceposts(&spec(IntOrString::Int(2), IntOrString::Int(1)), 3),
            (2, 1)
        );
    }

    #[test]
    fn no_surge_and_no_unavailability_allows_one_unavailable() {
        let zero = || IntOrString::Int(0);
        assert_eq!(fenceposts(&spec(zero(), zero()), 3), (0, 1));
        let none = || IntOrString::String("0%".into());
        assert_eq!(fenceposts(&spec(none(), none()), 3), (0, 1));
    }

    #[test]
    fn a_condition_with_the_same_status_and_reason_is_kept() {
        let condition = |type_: &str, status: &str, reason: &str, message: String| {
            let now = steady_runtime::conditions::to_time(chrono::Utc::now());
            condition_at(now, type_, status, reason, message)
        };
        let mut status = DeploymentStatus::default();
        let first = condition("Available", "True", "MinimumReplicasAvailable", "a".into());
        set_condition(&mut status, first.clone());
        let mut later = condition("Available", "True", "MinimumReplicasAvailable", "b".into());
        later.last_update_time = None;
        set_condition(&mut status, later);
        assert_eq!(status.conditions, Some(vec![first.clone()]));
        let mut other_reason = condition("Available", "True", "Other", "c".into());
        other_reason.last_transition_time = None;
        set_condition(&mut status, other_reason);
        let kept = find_condition(&status, "Available").expect("set");
        assert_eq!(kept.reason.as_deref(), Some("Other"));
        assert_eq!(kept.last_transition_time, first.last_transition_time);
    }
}
