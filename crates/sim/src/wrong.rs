//! Six deliberately wrong Cache reconcilers, each carrying one classic operator bug, and
//! one control that looks like a bug and is not.
//!
//! Three of them share a small "mini operator" (Service, pruning, status) written the
//! plain way an operator author would, and differ only in how they decide to create pods —
//! that is where each bug lives. Without faults every one of them converges to exactly
//! the world the reference reconciler builds (pods `<cache>-<ordinal>`, Ready, on the
//! current template, the Service, the status), so what the harness finds is the bug, not a
//! different notion of "done". The fourth and fifth wrap the reference reconciler itself,
//! as does the control.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::cache::{ReconcileFn, Subject, operator_context};
use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use steady_cache_operator::resources::{
    PodSummary, ServiceSummary, desired_pod, desired_service, hash_of, is_controlled_by, is_failed,
    is_ready, is_terminating, ordinal_of, pod_name, pod_of, selector, template_hash,
};
use steady_cache_operator::types::CONDITION_READY;
use steady_cache_operator::{Cache, OperatorContext};
use steady_runtime::conditions::{Condition, set_condition};
use steady_runtime::{Action, Context, ObjectKey, Trigger};

type Ctx = Arc<Context<Subject>>;
type Outcome<T> = Result<T, String>;

/// Bug 1 — `generateName` trusting a stale read (duplicates).
///
/// Lists its pods through the client on every reconcile (in controller-runtime that read
/// is served by the informer cache; here the fault layer's stale-list serves it from an
/// older revision), counts them and creates the difference, taking the lowest free
/// ordinal name. When the server answers 409 AlreadyExists ("the name is taken") it
/// "fixes" that by creating the pod with `generateName: <cache>-` instead. It does not
/// remember its own writes, so a pod it created a moment ago that the lagging read does
/// not show yet looks missing: the ordinal name collides, and the fallback creates an
/// extra pod. Extra pods are removed once a read shows more pods than `replicas`, so the
/// world ends right — but while it lasted a live pod was not one of the Cache's ordinals:
/// the Cache invariant, **cache-ordinals**.
pub fn generate_name_trusting_stale_cache() -> ReconcileFn {
    Arc::new(|cache, ctx| {
        Box::pin(async move {
            let world = World::list(&cache, &ctx).await?;
            ensure_service(&cache, &ctx).await?;
            let mut wrote = !prune(&world, &ctx, StrayPolicy::OnlyWhenTooMany)
                .await?
                .is_empty();
            let present = world.pods.len() + world.strays.len();
            let wanted = usize::try_from(world.replicas).unwrap_or(0);
            if present < wanted {
                let free: Vec<i32> = (0..world.replicas)
                    .filter(|o| !world.pods.contains_key(o))
                    .take(wanted - present)
                    .collect();
                for ordinal in free {
                    let pod = desired_pod(&cache, ordinal, &world.hash);
                    if !create_pod(&ctx, &world.namespace, &pod).await? {
                        // "Name taken? Let the server pick one."
                        let mut pod = pod;
                        pod.metadata.name = None;
                        pod.metadata.generate_name = Some(format!("{}-", world.name));
                        create_pod(&ctx, &world.namespace, &pod).await?;
                    }
                    wrote = true;
                }
            }
            report_status(&cache, &ctx).await?;
            Ok(next(&world, wrote))
        })
    })
}

/// Bug 2 — edge-triggered: acts on the event, not on the state.
///
/// Pods are created only on edges: when it first sees a Cache (its "on create/resume"
/// handler) it creates every pod; on a `Primary` trigger it compares `spec.replicas` with
/// the value it remembers from the last time (in memory, lost on restart) and creates the
/// ordinals that were added; on an `Owned Pod <name>` trigger for a pod that is gone it
/// recreates exactly that pod. Everything else (Service, deleting extra, failed and
/// outdated pods, status) is done from the observed state. When the one reconcile that
/// carried the edge does not act on it — its create is refused with 409 (read as "it
/// exists already") or fails with 500 and is retried on a `backoff` trigger, which names
/// no pod — nothing will ever say "recreate sim-1" again (the cache is right, so no
/// relist or resync brings a trigger naming it), and the pod stays missing: the writes
/// stop, but the world ends unlike the fault-free run's: **same-end-state**.
pub fn edge_triggered() -> ReconcileFn {
    let memory = Arc::new(Memory::default());
    Arc::new(move |cache, ctx| {
        let memory = memory.clone();
        Box::pin(async move {
            let key = ObjectKey::of(cache.as_ref());
            let triggers: Vec<Trigger> = ctx
                .data()
                .last_triggers
                .lock()
                .map_err(|e| e.to_string())?
                .get(&key.to_string())
                .cloned()
                .unwrap_or_default();
            let world = World::observe(&cache, &ctx)?;
            ensure_service(&cache, &ctx).await?;
            let mut wrote = !prune(&world, &ctx, StrayPolicy::Always).await?.is_empty();
            // The replicas seen last time, and now this time (remembered before acting).
            let previous = memory.swap(&ctx, &key, world.replicas);
            let mut create: BTreeSet<i32> = BTreeSet::new();
            match previous {
                // "On create": make every pod.
                None => create.extend(0..world.replicas),
                // "On update": scaled up from `before`.
                Some(before) if triggers.contains(&Trigger::Primary) => {
                    create.extend(before.max(0)..world.replicas);
                }
                Some(_) => {}
            }
            // "On pod deleted": recreate exactly that pod.
            for trigger in &triggers {
                if let Trigger::Owned { kind, name } = trigger
                    && kind == "Pod"
                    && let Some((_, pod)) = name.split_once('/')
                    && let Some(ordinal) = ordinal_of(&world.name, pod)
                    && ordinal < world.replicas
                    && !world.pods.contains_key(&ordinal)
                {
                    create.insert(ordinal);
                }
            }
            for ordinal in create {
                if world.pods.contains_key(&ordinal) {
                    continue;
                }
                let pod = desired_pod(&cache, ordinal, &world.hash);
                create_pod(&ctx, &world.namespace, &pod).await?;
                wrote = true;
            }
            report_status(&cache, &ctx).await?;
            Ok(next(&world, wrote))
        })
    })
}

/// The annotation in which [`record_then_create`] keeps the pods it has created.
pub const CREATED_ANNOTATION: &str = "steady.dev/created-pods";

/// Bug 3 — not crash-safe between two writes.
///
/// To avoid creating a pod twice when its cache is behind, it records on the Cache (an
/// annotation listing the pods it has created) *before* creating each pod, and skips any
/// pod the record lists ("already created; the cache just hasn't seen it yet"); deleting a
/// pod removes it from the record *after* the delete. Both are two writes with a window in
/// between: a crash after the record write and before the create (or a committed record
/// write whose response is lost, so the reconcile fails and retries) leaves a pod the
/// record says exists and the world does not. Every later reconcile trusts the record and
/// never creates it: **same-end-state**.
pub fn record_then_create() -> ReconcileFn {
    Arc::new(|cache, ctx| {
        Box::pin(async move {
            let world = World::observe(&cache, &ctx)?;
            let mut record = recorded(&cache);
            ensure_service(&cache, &ctx).await?;
            let deleted = prune(&world, &ctx, StrayPolicy::Always).await?;
            let mut wrote = !deleted.is_empty();
            // Write 2 of a delete: forget the pods just deleted.
            let before = record.len();
            for name in &deleted {
                record.remove(name);
            }
            if record.len() != before {
                write_record(&ctx, &world, &record).await?;
            }
            for ordinal in 0..world.replicas {
                let name = pod_name(&world.name, ordinal);
                if world.pods.contains_key(&ordinal) || record.contains(&name) {
                    continue;
                }
                // Write 1: "sim-N is created" …
                record.insert(name);
                write_record(&ctx, &world, &record).await?;
                // … write 2: create it.
                create_pod(
                    &ctx,
                    &world.namespace,
                    &desired_pod(&cache, ordinal, &world.hash),
                )
                .await?;
                wrote = true;
            }
            report_status(&cache, &ctx).await?;
            Ok(next(&world, wrote))
        })
    })
}

/// Bug 4 — not idempotent: stamps status with the time of every reconcile.
///
/// Runs the reference reconciler, then ends every reconcile by applying a `Reconciled`
/// condition whose `lastTransitionTime` is "now" — the classic `lastReconciled` stamp.
/// Timestamps have whole seconds, so the watch event of its own write brings a reconcile
/// that stamps the same second and changes nothing: no hot loop, the writes stop. But at
/// the fixed point every resync, and a cold restart, stamp a new second: a write with
/// nothing to converge (**idempotent**).
pub fn status_on_every_reconcile() -> ReconcileFn {
    let first_reconcile = Arc::new(std::sync::OnceLock::new());
    reference_then_apply_condition(move || {
        let since = *first_reconcile.get_or_init(tokio::time::Instant::now);
        let seconds = i64::try_from(since.elapsed().as_secs()).unwrap_or(i64::MAX);
        let now = chrono::DateTime::from_timestamp(seconds, 0).unwrap_or_default();
        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    })
}

/// Bug 5 — a hot loop: counts its reconciles in status.
///
/// As bug 4, but the condition's message counts reconciles, so every reconcile changes the
/// object and its own watch event triggers the next one, with no time passing between
/// them: the writes never stop (**eventually-stable**, caught as a hot loop).
pub fn status_counter_on_every_reconcile() -> ReconcileFn {
    let reconciles = Arc::new(std::sync::atomic::AtomicU64::new(0));
    reference_then_apply_condition(move || {
        let count = reconciles.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let stamp = chrono::DateTime::from_timestamp(i64::try_from(count).unwrap_or(0), 0);
        stamp
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    })
}

/// Bug 6 — drift detection on a field the server does not keep.
///
/// Before the reference reconciler runs, it keeps its Service the plain way: the Service it
/// wants says `externalIPs: []` (its author spelt out "none"); it creates that Service when
/// there is none, and when the live Service's `externalIPs` differ from it, deletes it so
/// that the next reconcile creates it afresh. kube-apiserver stores what Go encodes, and
/// an empty `omitempty` list is not encoded: the live Service never has `externalIPs: []`,
/// so a reconcile deletes the Service the one before created, and the Service's events
/// wake the next, for ever (**eventually-stable**), without any fault. (Until the runtime
/// stopped taking the reference reconcile's create of the Service as explaining a change
/// that began with this delete, the next run was skipped and the churn showed only at
/// each resync, as an **idempotent** violation.)
/// Before steady dropped such fields as kube does, it stored the empty list, the check
/// passed every property, and this operator looked correct here and churned on a cluster.
pub fn drift_check_on_a_dropped_field() -> ReconcileFn {
    Arc::new(|cache, ctx| {
        Box::pin(async move {
            let (name, namespace) = names(&cache)?;
            let mut desired = desired_service(&cache);
            if let Some(spec) = desired.spec.as_mut() {
                spec.external_ips = Some(Vec::new());
            }
            let external_ips = |s: &Service| s.spec.as_ref().and_then(|s| s.external_ips.clone());
            let services = Api::<Service>::namespaced(ctx.client(), &namespace);
            let live = services
                .get_opt(&name)
                .await
                .map_err(|e| format!("reading the Service: {e}"))?;
            let kept = match live {
                None => services
                    .create(&PostParams::default(), &desired)
                    .await
                    .map(drop),
                Some(live) if external_ips(&live) != external_ips(&desired) => {
                    // Its delete event brings the reconcile that creates it again.
                    services
                        .delete(&name, &DeleteParams::default())
                        .await
                        .map(drop)
                }
                Some(_) => Ok(()),
            };
            match kept {
                Err(e) if !matches!(api_code(&e), Some(404 | 409)) => {
                    return Err(format!("keeping the Service: {e}"));
                }
                _ => {}
            }
            steady_cache_operator::reconcile(cache, operator_context(&ctx))
                .await
                .map_err(|e| e.to_string())
        })
    })
}

/// Not a bug — the control for bugs 4 and 5: applies the same condition on every
/// reconcile, as kube-rs operators that server-side apply everything do. The server stores
/// nothing new, so nothing was written: it passes every property.
pub fn same_status_applied_every_reconcile() -> ReconcileFn {
    reference_then_apply_condition(|| "1970-01-01T00:00:00Z".to_string())
}

/// The reference reconciler, then a server-side apply of a `Reconciled` condition with the
/// `lastTransitionTime` that `stamp` gives for this reconcile.
fn reference_then_apply_condition(
    stamp: impl Fn() -> String + Send + Sync + 'static,
) -> ReconcileFn {
    Arc::new(move |cache, ctx| {
        let stamp = stamp();
        Box::pin(async move {
            let action = steady_cache_operator::reconcile(cache.clone(), operator_context(&ctx))
                .await
                .map_err(|e| e.to_string())?;
            let (name, namespace) = names(&cache)?;
            let condition = serde_json::json!({
                "apiVersion": "steady.dev/v1alpha1",
                "kind": "Cache",
                "metadata": {"name": name},
                "status": {"conditions": [{
                    "type": "Reconciled",
                    "status": "True",
                    "reason": "Reconciled",
                    "message": "reconciled",
                    "lastTransitionTime": stamp,
                }]}
            });
            Api::<Cache>::namespaced(ctx.client(), &namespace)
                .patch_status(
                    &name,
                    &PatchParams::apply("cache-status-stamp").force(),
                    &Patch::Apply(condition),
                )
                .await
                .map_err(|e| format!("reporting status: {e}"))?;
            Ok(action)
        })
    })
}

// ---------------------------------------------------------------------------------------
// The mini operator the first three share.

/// What the caches show of one Cache's pods.
struct World {
    name: String,
    namespace: String,
    replicas: i32,
    hash: String,
    /// Pods named `<cache>-<ordinal>`, by ordinal (terminating ones included).
    pods: BTreeMap<i32, Arc<Pod>>,
    /// Pods it controls under any other name.
    strays: Vec<Arc<Pod>>,
}

fn names(cache: &Cache) -> Outcome<(String, String)> {
    let name = cache.metadata.name.clone().ok_or("the Cache has no name")?;
    let namespace = cache
        .metadata
        .namespace
        .clone()
        .ok_or("the Cache has no namespace")?;
    Ok((name, namespace))
}

impl World {
    /// From the runtime's Pod cache.
    fn observe(cache: &Cache, ctx: &Ctx) -> Outcome<World> {
        let uid = cache.metadata.uid.clone().unwrap_or_default();
        let pod_cache = ctx.projected::<PodSummary>().map_err(|e| e.to_string())?;
        let owned = pod_cache.owned_by(&uid);
        World::of(cache, owned.iter().map(|p| Arc::new(pod_of(p))).collect())
    }

    /// From a List through the client.
    async fn list(cache: &Cache, ctx: &Ctx) -> Outcome<World> {
        let (name, namespace) = names(cache)?;
        let listed = Api::<Pod>::namespaced(ctx.client(), &namespace)
            .list(&ListParams::default().labels(&selector(&name)))
            .await
            .map_err(|e| format!("listing pods: {e}"))?;
        World::of(cache, listed.items.into_iter().map(Arc::new).collect())
    }

    fn of(cache: &Cache, owned: Vec<Arc<Pod>>) -> Outcome<World> {
        let (name, namespace) = names(cache)?;
        let uid = cache.metadata.uid.clone().unwrap_or_default();
        let mut pods = BTreeMap::new();
        let mut strays = Vec::new();
        for pod in owned {
            if pod.metadata.namespace.as_deref() != Some(namespace.as_str())
                || !is_controlled_by(&pod.metadata, &uid)
            {
                continue;
            }
            match ordinal_of(&name, pod.metadata.name.as_deref().unwrap_or("")) {
                Some(ordinal) => {
                    pods.insert(ordinal, pod);
                }
                None => strays.push(pod),
            }
        }
        Ok(World {
            name,
            namespace,
            replicas: cache.spec.replicas.max(0),
            hash: template_hash(&cache.spec),
            pods,
            strays,
        })
    }

    /// Every desired pod is there, Ready, current, and nothing else is.
    fn converged(&self) -> bool {
        self.strays.is_empty()
            && self.pods.len() == usize::try_from(self.replicas).unwrap_or(0)
            && self.pods.iter().all(|(o, p)| {
                *o < self.replicas
                    && !is_terminating(p)
                    && is_ready(p)
                    && hash_of(p) == Some(self.hash.as_str())
            })
    }
}

/// Look again soon while anything is in motion.
fn next(world: &World, wrote: bool) -> Action {
    if wrote || !world.converged() {
        Action::requeue_after(Duration::from_secs(2))
    } else {
        Action::done()
    }
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Create `pod`; `Ok(false)` when the name is taken (409).
async fn create_pod(ctx: &Ctx, namespace: &str, pod: &Pod) -> Outcome<bool> {
    match Api::<Pod>::namespaced(ctx.client(), namespace)
        .create(&PostParams::default(), pod)
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if api_code(&e) == Some(409) => Ok(false),
        Err(e) => Err(format!("creating a pod: {e}")),
    }
}

/// Delete exactly this incarnation of `pod`; gone or replaced already is fine.
async fn delete_pod(ctx: &Ctx, namespace: &str, pod: &Pod) -> Outcome<()> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match Api::<Pod>::namespaced(ctx.client(), namespace)
        .delete(&name, &params)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if matches!(api_code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(format!("deleting pod {name}: {e}")),
    }
}

async fn ensure_service(cache: &Cache, ctx: &Ctx) -> Outcome<()> {
    let (name, namespace) = names(cache)?;
    let services = ctx
        .projected::<ServiceSummary>()
        .map_err(|e| e.to_string())?;
    if services
        .get(&ObjectKey::new(Some(&namespace), &name))
        .is_some()
    {
        return Ok(());
    }
    match Api::<Service>::namespaced(ctx.client(), &namespace)
        .create(&PostParams::default(), &desired_service(cache))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if api_code(&e) == Some(409) => Ok(()),
        Err(e) => Err(format!("creating the Service: {e}")),
    }
}

enum StrayPolicy {
    Always,
    /// Only while more pods are live than `replicas` (a pod-counting operator).
    OnlyWhenTooMany,
}

/// Delete failed pods, pods on an old template, pods beyond `replicas` and strays (all at
/// once: no rolling update, the world only has to end right). Returns the deleted names.
async fn prune(world: &World, ctx: &Ctx, strays: StrayPolicy) -> Outcome<Vec<String>> {
    let mut doomed: Vec<&Arc<Pod>> = world
        .pods
        .iter()
        .filter(|(o, p)| {
            !is_terminating(p)
                && (is_failed(p) || **o >= world.replicas || hash_of(p) != Some(&world.hash))
        })
        .map(|(_, p)| p)
        .collect();
    let live_strays = world.strays.iter().filter(|p| !is_terminating(p));
    match strays {
        StrayPolicy::Always => doomed.extend(live_strays),
        StrayPolicy::OnlyWhenTooMany => {
            let live = world.pods.values().filter(|p| !is_terminating(p)).count()
                + world.strays.iter().filter(|p| !is_terminating(p)).count();
            let too_many = live.saturating_sub(usize::try_from(world.replicas).unwrap_or(0));
            doomed.extend(live_strays.take(too_many));
        }
    }
    let mut deleted = Vec::new();
    for pod in doomed {
        delete_pod(ctx, &world.namespace, pod).await?;
        deleted.push(pod.metadata.name.clone().unwrap_or_default());
    }
    Ok(deleted)
}

/// Condition timestamps: the wrong reconcilers have no clock of their own (the harness's
/// simulated clock is private to `OperatorContext`), so they stamp the harness's epoch.
fn epoch() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default()
}

/// Status from the pod cache as it is now; written only when it differs.
async fn report_status(cache: &Cache, ctx: &Ctx) -> Outcome<()> {
    let world = World::observe(cache, ctx)?;
    let generation = cache.metadata.generation;
    let mut status = cache.status.clone().unwrap_or_default();
    status.replicas = i32::try_from(world.pods.len() + world.strays.len()).unwrap_or(i32::MAX);
    status.ready_replicas = i32::try_from(
        world
            .pods
            .range(..world.replicas)
            .filter(|(_, p)| {
                !is_terminating(p) && is_ready(p) && hash_of(p) == Some(world.hash.as_str())
            })
            .count(),
    )
    .unwrap_or(i32::MAX);
    status.observed_generation = generation;
    status.selector = selector(&world.name);
    let ready = status.ready_replicas == world.replicas;
    let condition = Condition::from_bool(
        CONDITION_READY,
        ready,
        if ready {
            "AllReplicasReady"
        } else {
            "ReplicasNotReady"
        },
        format!(
            "{} of {} replicas are Ready",
            status.ready_replicas, world.replicas
        ),
    )
    .with_observed_generation(generation);
    set_condition(&mut status.conditions, condition, epoch());
    if cache.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let patch = serde_json::json!({
        "status": serde_json::to_value(&status).map_err(|e| e.to_string())?
    });
    // Through the context: the cache sees the write at once (read-your-own-writes).
    ctx.api::<Cache>(&world.namespace)
        .patch_status(&world.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| format!("writing status: {e}"))?;
    Ok(())
}

/// The pods [`record_then_create`] has recorded as created.
fn recorded(cache: &Cache) -> BTreeSet<String> {
    cache
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CREATED_ANNOTATION))
        .map(|v| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

async fn write_record(ctx: &Ctx, world: &World, record: &BTreeSet<String>) -> Outcome<()> {
    let value = record.iter().cloned().collect::<Vec<_>>().join(",");
    let patch = serde_json::json!({"metadata": {"annotations": {CREATED_ANNOTATION: value}}});
    ctx.api::<Cache>(&world.namespace)
        .patch(&world.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| format!("recording created pods: {e}"))?;
    Ok(())
}

/// What [`edge_triggered`] remembers between reconciles: the last `spec.replicas` it saw
/// per Cache, per controller incarnation (a restarted controller starts with nothing, as
/// a real process would). Incarnations are told apart by their `OperatorContext`; the
/// `Weak` keeps its address from being reused while the entry exists.
#[derive(Default)]
struct Memory {
    seen: Mutex<Vec<Incarnation>>,
}

/// One controller incarnation and the replicas it last saw per Cache.
type Incarnation = (Weak<OperatorContext>, BTreeMap<ObjectKey, i32>);

impl Memory {
    /// Remember `replicas` for `key`; returns what was remembered before.
    fn swap(&self, ctx: &Ctx, key: &ObjectKey, replicas: i32) -> Option<i32> {
        let operator = Arc::downgrade(&ctx.data().operator);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|(incarnation, _)| incarnation.strong_count() > 0);
        let index = match seen
            .iter()
            .position(|(incarnation, _)| Weak::ptr_eq(incarnation, &operator))
        {
            Some(i) => i,
            None => {
                seen.push((operator, BTreeMap::new()));
                seen.len() - 1
            }
        };
        seen[index].1.insert(key.clone(), replicas)
    }
}
