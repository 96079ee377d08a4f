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
use steady_runtime::events::{EventType, Recorder};
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
/// The reason of a new ReplicaSet the API refused.
const CREATE_ERROR: &str = "ReplicaSetCreateError";

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
        owned.sort_by(created_order);
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

fn replicas_of(spec: &DeploymentSpec) -> i32 {
    spec.replicas.unwrap_or(1)
}

/// kube's `MaxSurge`: `maxSurge` in pods; none but for RollingUpdate.
fn max_surge(spec: &DeploymentSpec) -> i32 {
    if is_recreate(spec) {
        return 0;
    }
    fenceposts(spec, replicas_of(spec)).0
}

/// kube's `MaxUnavailable`: `maxUnavailable` in pods, at most `replicas`; none but for
/// RollingUpdate.
fn max_unavailable(spec: &DeploymentSpec) -> i32 {
    let replicas = replicas_of(spec);
    if is_recreate(spec) || replicas == 0 {
        return 0;
    }
    fenceposts(spec, replicas).1.min(replicas)
}

/// One of the size annotations a Deployment puts on its ReplicaSets, as a number.
fn replicas_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

/// kube's `ReplicaSetsByCreationTimestamp`: by creation, then by name.
fn created_order(a: &ReplicaSet, b: &ReplicaSet) -> std::cmp::Ordering {
    let created = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
    created(a)
        .cmp(&created(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// What one reconcile of a Deployment does (kube's `syncDeployment` chooses).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sync {
    /// Being deleted: its status only (`syncStatusOnly`).
    StatusOnly,
    /// Paused, or `replicas` changed: scale what runs, roll nothing out (`sync`).
    Scale,
    /// A step of the rollout (`rolloutRolling`, `rolloutRecreate`).
    Rollout,
}

/// kube's proportional scaling (`GetProportion`): how the pods a Deployment's new size
/// adds or removes are shared among its ReplicaSets with replicas.
struct Proportions {
    /// The Deployment's `replicas`.
    replicas: i32,
    /// Its `maxSurge` in pods.
    surge: i32,
    /// Its `status.replicas`: the size a ReplicaSet without a `max-replicas` annotation
    /// is taken to have been scaled for.
    observed: i32,
}

impl Proportions {
    /// The new sizes of `sets` (largest first) when `to_add` pods (negative: removed)
    /// are shared: each in proportion to its size over the size it was last scaled for,
    /// never past what is left to share, and what rounding leaves to the largest.
    fn sizes(&self, sets: &[ReplicaSet], to_add: i32) -> Vec<i32> {
        let mut added = 0;
        let mut sizes: Vec<i32> = sets
            .iter()
            .map(|rs| {
                let share = self.share(rs, to_add, added);
                added += share;
                spec_replicas(rs) + share
            })
            .collect();
        if to_add != 0
            && let Some(largest) = sizes.first_mut()
        {
            *largest = (*largest + to_add - added).max(0);
        }
        sizes
    }

    /// kube's `GetProportion`.
    fn share(&self, rs: &ReplicaSet, to_add: i32, added: i32) -> i32 {
        if spec_replicas(rs) == 0 || to_add == 0 || to_add == added {
            return 0;
        }
        let fraction = self.fraction(rs);
        let left = to_add - added;
        if to_add > 0 {
            fraction.min(left)
        } else {
            fraction.max(left)
        }
    }

    /// kube's `getReplicaSetFraction`: how far `rs` grows (or shrinks) to keep its
    /// share of the Deployment's pods.
    fn fraction(&self, rs: &ReplicaSet) -> i32 {
        let current = spec_replicas(rs);
        if self.replicas == 0 {
            return -current;
        }
        let scaled_for = replicas_annotation(rs, MAX_REPLICAS_ANNOTATION).unwrap_or(self.observed);
        if scaled_for <= 0 {
            // kube divides by zero here; a ReplicaSet with replicas never has it.
            return 0;
        }
        let total = f64::from(self.replicas) + f64::from(self.surge);
        let size = f64::from(current) * total / f64::from(scaled_for);
        // Rounded half away from zero, as Go's `math.Round`.
        size.round() as i32 - current
    }
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
        replicas_of(self.spec)
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

    fn paused(&self) -> bool {
        self.spec.paused.unwrap_or(false)
    }

    /// kube's `syncDeployment`: only the status while the Deployment is being deleted;
    /// only scaling while it is paused or its `replicas` changed; else the rollout.
    fn kind_of_sync(&self) -> Sync {
        if self.deployment.metadata.deletion_timestamp.is_some() {
            Sync::StatusOnly
        } else if self.paused() || self.is_scaling_event() {
            Sync::Scale
        } else {
            Sync::Rollout
        }
    }

    async fn run(mut self) -> Result<Action, Error> {
        let sync = self.kind_of_sync();
        match sync {
            Sync::StatusOnly => self.ensure_new_replica_set(false).await?,
            Sync::Scale => self.sync_scale().await?,
            Sync::Rollout if is_recreate(self.spec) => self.recreate().await?,
            Sync::Rollout => self.roll().await?,
        }
        let status = self.sync_status(sync).await?;
        if sync == Sync::StatusOnly {
            return Ok(Action::done());
        }
        Ok(match self.until_deadline(&status) {
            // A second past it, as kube requeues a stuck Deployment.
            Some(left) => Action::requeue_after(left + Duration::from_secs(1)),
            None => Action::done(),
        })
    }

    /// kube's `isScalingEvent`: a ReplicaSet with replicas was last scaled for another
    /// `replicas` than the Deployment's now.
    fn is_scaling_event(&self) -> bool {
        let replicas = self.replicas();
        self.sets
            .all()
            .filter(|rs| spec_replicas(rs) > 0)
            .filter_map(|rs| replicas_annotation(rs, DESIRED_REPLICAS_ANNOTATION))
            .any(|desired| desired != replicas)
    }

    /// kube's `sync`: scale the ReplicaSets to `replicas` (in proportion when a rollout
    /// is under way) without rolling out, and, while paused, clean up the history.
    async fn sync_scale(&mut self) -> Result<(), Error> {
        self.ensure_new_replica_set(false).await?;
        self.scale_to_replicas().await?;
        if self.paused() {
            self.clean_up().await?;
        }
        Ok(())
    }

    /// kube's `scale`: the only ReplicaSet with replicas (or, with none, the newest) takes
    /// all of them; old ones go to zero once the new one is saturated; otherwise, mid
    /// rollout, every ReplicaSet with replicas grows or shrinks in proportion to its size,
    /// so that scaling neither hastens nor holds back the rollout.
    async fn scale_to_replicas(&mut self) -> Result<(), Error> {
        let replicas = self.replicas();
        if let Some(only) = self.active_or_latest() {
            self.scale(&only, replicas).await?;
            return Ok(());
        }
        if self.is_saturated() {
            let active: Vec<ReplicaSet> = self.active(&self.sets.old);
            for old in &active {
                self.scale(old, 0).await?;
            }
            return Ok(());
        }
        if is_recreate(self.spec) {
            return Ok(());
        }
        let mut active = self.active(self.sets.old.iter().chain(&self.sets.new));
        let allowed = if replicas > 0 {
            replicas + max_surge(self.spec)
        } else {
            0
        };
        let to_add = allowed - active.iter().map(spec_replicas).sum::<i32>();
        // The largest first; of equal size, the newest first when growing and the oldest
        // first when shrinking.
        active.sort_by(|a, b| {
            let by_age = created_order(a, b);
            spec_replicas(b).cmp(&spec_replicas(a)).then(if to_add > 0 {
                by_age.reverse()
            } else {
                by_age
            })
        });
        let proportions = Proportions {
            replicas,
            surge: max_surge(self.spec),
            observed: self
                .deployment
                .status
                .as_ref()
                .map_or(0, |s| s.replicas.unwrap_or(0)),
        };
        let sizes = proportions.sizes(&active, to_add);
        for (rs, size) in active.iter().zip(sizes) {
            self.resize(rs, size).await?;
        }
        Ok(())
    }

    /// The ReplicaSets among `sets` with replicas.
    fn active<'s>(&self, sets: impl IntoIterator<Item = &'s ReplicaSet>) -> Vec<ReplicaSet> {
        sets.into_iter()
            .filter(|rs| spec_replicas(rs) > 0)
            .cloned()
            .collect()
    }

    /// kube's `FindActiveOrLatest`: the only ReplicaSet with replicas; with none, the new
    /// one or else the newest; with several, none.
    fn active_or_latest(&self) -> Option<ReplicaSet> {
        let mut active = self.sets.all().filter(|rs| spec_replicas(rs) > 0);
        match (active.next(), active.next()) {
            (Some(only), None) => Some(only.clone()),
            (None, _) => self
                .sets
                .new
                .clone()
                .or_else(|| self.sets.old.last().cloned()),
            _ => None,
        }
    }

    /// kube's `IsSaturated`: the new ReplicaSet was scaled for `replicas`, is at
    /// `replicas`, and all of them are available.
    fn is_saturated(&self) -> bool {
        let replicas = self.replicas();
        self.sets.new.as_ref().is_some_and(|rs| {
            spec_replicas(rs) == replicas
                && replicas_annotation(rs, DESIRED_REPLICAS_ANNOTATION) == Some(replicas)
                && status_of(rs, |s| s.available_replicas) == replicas
        })
    }

    /// `progressDeadlineSeconds`, when set (kube defaults it to 600).
    /// kube's `HasProgressDeadline`: `i32::MAX` seconds means none.
    fn deadline(&self) -> Option<Duration> {
        let seconds = self
            .spec
            .progress_deadline_seconds
            .filter(|&s| s != i32::MAX)?;
        Some(Duration::from_secs(u64::try_from(seconds).ok()?))
    }

    /// How long until a rollout still in progress passes its deadline.
    fn until_deadline(&self, status: &DeploymentStatus) -> Option<Duration> {
        let deadline = self.deadline()?;
        let progressing = find_condition(status, "Progressing")?;
        let stuck_for = |c: &DeploymentCondition| self.since(c.last_update_time.as_ref());
        // kube's `requeueStuckDeployment`, which a paused Deployment never reaches.
        let running = !self.paused()
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
        // One step at a time: old ones go down once the new pods are available (their
        // status change triggers the next reconcile).
        if self.scale_new().await? || self.scale_down_old().await? {
            return Ok(());
        }
        self.clean_up_if_complete().await
    }

    /// kube's `reconcileNewReplicaSet`: the new ReplicaSet down to `replicas`, or up as
    /// far as `maxSurge` allows. Whether it scaled.
    async fn scale_new(&mut self) -> Result<bool, Error> {
        let Some(new) = self.sets.new.clone() else {
            return Ok(false);
        };
        let current = spec_replicas(&new);
        let target = if current > self.replicas() {
            self.replicas()
        } else {
            self.new_replica_set_target(current)
        };
        self.scale(&new, target).await
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
        if let Some(new) = self.sets.new.clone() {
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
        let pods: i32 = self.sets.all().map(spec_replicas).sum();
        let room = replicas + max_surge(self.spec) - pods;
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
        let min_available = replicas - max_unavailable(self.spec);
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
                if self.deadline().is_some()
                    && self
                        .deployment
                        .status
                        .as_ref()
                        .and_then(|s| find_condition(s, "Progressing"))
                        .is_none()
                {
                    // kube's estimate of progress for a Deployment that had no deadline.
                    self.new_condition = Some(self.condition(
                        "Progressing",
                        "True",
                        "FoundNewReplicaSet",
                        format!("Found new replica set \"{}\"", name_of(&existing)),
                    ));
                }
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
        [
            (DESIRED_REPLICAS_ANNOTATION.into(), replicas.to_string()),
            (
                MAX_REPLICAS_ANNOTATION.into(),
                (replicas + max_surge(self.spec)).to_string(),
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
                if replicas > 0 {
                    self.record(format!("Scaled up replica set {name} to {replicas}"));
                }
                if self.deadline().is_some() {
                    self.new_condition = Some(self.condition(
                        "Progressing",
                        "True",
                        "NewReplicaSetCreated",
                        format!("Created new replica set \"{name}\""),
                    ));
                }
                self.sets.new = Some(created);
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => self.collided(&name).await,
            Err(error) => {
                let error = Error::from(error);
                self.failed_create(&name, &error).await;
                Err(error)
            }
        }
    }

    /// kube's report of a new ReplicaSet the API refused: a Warning `ReplicaSetCreateError`
    /// and, with a deadline, Progressing False for the same reason (written at once: the
    /// reconcile fails and is retried). Not while the namespace is terminating, where every
    /// create fails.
    async fn failed_create(&self, name: &str, error: &Error) {
        if crate::namespace_terminating(error) {
            return;
        }
        let message = crate::error_message(error);
        let message = format!("Failed to create new replica set \"{name}\": {message}");
        let events = &self.ctx.data().events;
        let owner = self.owner.as_ref();
        crate::publish(events, owner, EventType::Warning, CREATE_ERROR, &message).await;
        if self.deadline().is_none() {
            return;
        }
        let mut status = self.deployment.status.clone().unwrap_or_default();
        set_condition(
            &mut status,
            self.condition("Progressing", "False", CREATE_ERROR, message),
        );
        let api = self.ctx.api::<Deployment>(&self.id.namespace);
        let current = self.deployment.status.as_ref();
        if let Err(e) = crate::write_status(&api, &self.id.name, current, &status, &[]).await {
            tracing::debug!(deployment = %self.id.name, error = %e, "could not report the failed create");
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

    /// kube's `scaleReplicaSetAndRecordEvent`: scale `rs` to `replicas` unless it is
    /// there. Whether it scaled.
    async fn scale(&mut self, rs: &ReplicaSet, replicas: i32) -> Result<bool, Error> {
        if spec_replicas(rs) == replicas {
            return Ok(false);
        }
        self.resize(rs, replicas).await
    }

    /// kube's `scaleReplicaSet`: write `replicas` and the Deployment's size annotations
    /// onto `rs` if either differs. Whether its size changed.
    async fn resize(&mut self, rs: &ReplicaSet, replicas: i32) -> Result<bool, Error> {
        let annotations: BTreeMap<String, String> =
            self.replicas_annotations().into_iter().collect();
        let annotated = annotations.iter().all(|(key, value)| {
            rs.metadata.annotations.as_ref().and_then(|a| a.get(key)) == Some(value)
        });
        let from = spec_replicas(rs);
        if from == replicas && annotated {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"annotations": annotations},
            "spec": {"replicas": replicas},
        });
        let written = self
            .api()
            .patch(&name_of(rs), &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        if from != replicas {
            let direction = if replicas > from { "up" } else { "down" };
            let name = name_of(rs);
            self.record(format!(
                "Scaled {direction} replica set {name} to {replicas} from {from}"
            ));
        }
        self.sets.replace(written);
        Ok(from != replicas)
    }

    /// A `ScalingReplicaSet` event on the Deployment, as kube's deployment controller
    /// records for every scale.
    fn record(&self, message: String) {
        let events = self.ctx.data().events.clone();
        crate::publish_in_background(events, self.owner.clone(), "ScalingReplicaSet", message);
    }

    /// Clean up the history once the rollout is complete.
    async fn clean_up_if_complete(&self) -> Result<(), Error> {
        let complete = self
            .deployment
            .status
            .as_ref()
            .is_some_and(|status| is_complete(self.deployment, status));
        if complete {
            self.clean_up().await?;
        }
        Ok(())
    }

    /// kube's `cleanupDeployment`: of the old ReplicaSets not being deleted, the oldest
    /// revisions beyond `revisionHistoryLimit` are deleted, each only once scaled down
    /// with its pods gone (one still scaled counts towards the excess all the same).
    async fn clean_up(&self) -> Result<(), Error> {
        let Some(limit) = self.spec.revision_history_limit else {
            return Ok(());
        };
        let mut alive: Vec<&ReplicaSet> = self
            .sets
            .old
            .iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .collect();
        let excess = alive
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        // Stable: equal revisions stay oldest first.
        alive.sort_by_key(|rs| revision(rs));
        let drained = |rs: &ReplicaSet| {
            spec_replicas(rs) == 0
                && status_of(rs, |s| Some(s.replicas)) == 0
                && rs.status.as_ref().and_then(|s| s.observed_generation) >= rs.metadata.generation
        };
        let api = self.api();
        for doomed in alive.into_iter().take(excess).filter(|rs| drained(rs)) {
            pod_template::delete_exact(&api, doomed).await?;
        }
        Ok(())
    }

    /// Write the status the ReplicaSets give the Deployment, if it changed; returns it.
    async fn sync_status(&self, sync: Sync) -> Result<DeploymentStatus, Error> {
        let status = self.status(sync);
        let api = self.ctx.api::<Deployment>(&self.id.namespace);
        let current = self.deployment.status.as_ref();
        crate::write_status(&api, &self.id.name, current, &status, OMITTED_COUNTS).await?;
        Ok(status)
    }

    /// kube's `calculateStatus`, with `checkPausedConditions` unless the Deployment is
    /// being deleted, and, after a rollout step, `syncRolloutStatus`.
    fn status(&self, sync: Sync) -> DeploymentStatus {
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
        let availability = if available >= self.replicas() - max_unavailable(self.spec) {
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
        if sync != Sync::StatusOnly {
            self.check_paused(&mut status);
        }
        if sync == Sync::Rollout {
            if self.deadline().is_some() {
                self.update_progressing(&previous, &mut status);
            } else if let Some(conditions) = status.conditions.as_mut() {
                conditions.retain(|c| c.type_ != "Progressing");
            }
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
        let paused = self.paused();
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
    fn recreate_neither_surges_nor_allows_unavailability() {
        let mut recreate = DeploymentSpec {
            replicas: Some(4),
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            }),
            ..DeploymentSpec::default()
        };
        assert_eq!((max_surge(&recreate), max_unavailable(&recreate)), (0, 0));
        recreate.strategy = None;
        assert_eq!((max_surge(&recreate), max_unavailable(&recreate)), (1, 1));
    }

    #[test]
    fn unavailability_is_at_most_the_replicas_and_none_without_any() {
        let mut many = spec(IntOrString::Int(1), IntOrString::Int(5));
        many.replicas = Some(2);
        assert_eq!(max_unavailable(&many), 2);
        many.replicas = Some(0);
        assert_eq!(max_unavailable(&many), 0);
    }

    /// A ReplicaSet of `replicas`, last scaled for `max_replicas`.
    fn sized(name: &str, replicas: i32, max_replicas: Option<i32>) -> ReplicaSet {
        let annotations = max_replicas
            .map(|max| BTreeMap::from([(MAX_REPLICAS_ANNOTATION.to_string(), max.to_string())]));
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations,
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                ..ReplicaSetSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn replica_sets_grow_and_shrink_in_proportion_to_their_sizes() {
        // kube's e2e: 10 replicas with maxSurge 3 stuck at 8 old and 5 new, scaled to 30.
        let at = |replicas| Proportions {
            replicas,
            surge: 3,
            observed: 13,
        };
        let stuck = [sized("old", 8, Some(13)), sized("new", 5, Some(13))];
        assert_eq!(at(30).sizes(&stuck, 33 - 13), vec![20, 13]);
        // And back to 10: 33 pods to 13.
        let grown = [sized("old", 20, Some(33)), sized("new", 13, Some(33))];
        assert_eq!(at(10).sizes(&grown, 13 - 33), vec![8, 5]);
        // To zero, each its whole size.
        let none = Proportions {
            replicas: 0,
            surge: 0,
            observed: 33,
        };
        assert_eq!(none.sizes(&grown, -33), vec![0, 0]);
    }

    #[test]
    fn what_rounding_leaves_goes_to_the_largest() {
        let sets = [
            sized("a", 4, Some(10)),
            sized("b", 3, Some(10)),
            sized("c", 3, Some(10)),
        ];
        let eleven = Proportions {
            replicas: 11,
            surge: 0,
            observed: 10,
        };
        assert_eq!(eleven.sizes(&sets, 1), vec![5, 3, 3]);
    }

    #[test]
    fn without_its_annotation_a_replica_set_was_scaled_for_the_observed_replicas() {
        let sets = [sized("a", 6, None), sized("b", 4, None)];
        let twenty = Proportions {
            replicas: 20,
            surge: 0,
            observed: 10,
        };
        assert_eq!(twenty.sizes(&sets, 10), vec![12, 8]);
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
