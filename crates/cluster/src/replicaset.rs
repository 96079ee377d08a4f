//! The ReplicaSet controller: keeps `spec.replicas` active pods made from the template,
//! each controlled by the ReplicaSet, and writes the status kube-controller-manager does
//! (`replicas`, `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`,
//! `observedGeneration`).
//!
//! It counts the pods it controls (ownerReference with `controller: true`), adopts active
//! orphans its selector matches and releases the pods it no longer matches. Reads come from the runtime's pod cache, which
//! its own creates and deletes update at once, so a reconcile never creates a pod twice
//! for one missing replica.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use steady_runtime::events::Recorder;
use steady_runtime::{Action, Context, ObjectCache};

use crate::claim::{self, Claim};
use crate::clock;
use crate::pod_template::{self, Availability, Identity, PodName};
use crate::{Clock, Error, Running, Setup, Shutdown};

/// At most this many pods are created or deleted by one reconcile (kube's `burstReplicas`);
/// the next reconcile continues.
const BURST: usize = 500;
/// The component its events name, as kube-controller-manager's.
const MANAGER: &str = "replicaset-controller";
/// The condition a failed create or delete sets, and the create's reason.
pub(crate) const REPLICA_FAILURE: &str = "ReplicaFailure";
const FAILED_CREATE: &str = "FailedCreate";

/// Start the ReplicaSet controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let mut controller = crate::controller_for::<ReplicaSet>(&client, config);
    let events = crate::recorder(&client, MANAGER, &clock);
    // An active orphan wakes every ReplicaSet of its namespace whose selector matches it,
    // which may adopt it.
    let pods = controller.owns_or_adopts(Api::<Pod>::all(client), |rs, pod: &Pod| {
        pod_template::is_active(pod) && selects(rs, pod)
    });
    controller.trim(pod_template::trim_for_counting);
    let data = Pods {
        cache: pods,
        clock,
        events,
    };
    controller.run(reconcile, Arc::new(data), shutdown).boxed()
}

/// What the ReplicaSet controller reads: the pods, and the time their readiness is
/// judged at (`minReadySeconds`); and where it records its events.
pub struct Pods {
    cache: ObjectCache<Pod>,
    clock: Clock,
    events: Recorder,
}

/// Whether the ReplicaSet's selector matches the pod's labels.
fn selects(rs: &ReplicaSet, pod: &Pod) -> bool {
    claim::selects(
        rs.spec.as_ref().map(|s| &s.selector),
        pod.metadata.labels.as_ref(),
    )
}

/// Adopt the active orphans the selector matches and release the active pods it no
/// longer matches (kube's ReplicaSet controller claims only active pods).
async fn claim(rs: &ReplicaSet, id: &Identity, ctx: &Context<Pods>) -> Result<(), Error> {
    let active: Vec<Arc<Pod>> = ctx
        .data()
        .cache
        .in_namespace(Some(&id.namespace))
        .into_iter()
        .filter(|pod| pod_template::is_active(pod))
        .collect();
    Claim::new(rs, ctx)
        .run(&active, rs.spec.as_ref().map(|s| &s.selector), |_| true)
        .await
}

/// Bring the ReplicaSet's pods to `spec.replicas`, then write its status if it changed.
pub async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Context<Pods>>) -> Result<Action, Error> {
    if rs.metadata.deletion_timestamp.is_some() {
        // The garbage collector removes its pods; creating more would race it.
        return Ok(Action::done());
    }
    let id = Identity::of(rs.as_ref())?;
    claim(&rs, &id, &ctx).await?;
    let pods = &ctx.data().cache;
    let active = active_pods(pods, &id.uid);
    let wanted =
        usize::try_from(rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)).unwrap_or(0);
    let scaled = if active.len() < wanted {
        create_pods(&rs, &id, &ctx, (wanted - active.len()).min(BURST)).await
    } else {
        delete_pods(&rs, &id, &ctx, doomed(active.clone(), wanted)).await
    };
    let now = clock::timestamp(&ctx.data().clock);
    let failure = scaled.as_ref().err().map(|error| {
        let reason = if active.len() < wanted {
            FAILED_CREATE
        } else {
            "FailedDelete"
        };
        (reason, crate::error_message(error))
    });
    let (mut status, next_available) = status(&rs, &active_pods(pods, &id.uid), now);
    report_failure(&mut status, failure, now);
    let api = ctx.api::<ReplicaSet>(&id.namespace);
    crate::write_status(&api, &id.name, rs.status.as_ref(), &status, OMITTED_COUNTS).await?;
    scaled?;
    Ok(match next_available {
        Some(after) => Action::requeue_after(after),
        None => Action::done(),
    })
}

/// The active pods the ReplicaSet `uid` controls.
fn active_pods(pods: &ObjectCache<Pod>, uid: &str) -> Vec<Arc<Pod>> {
    pods.owned_by(uid)
        .into_iter()
        .filter(|p| pod_template::is_controlled_by(&p.metadata, uid) && pod_template::is_active(p))
        .collect()
}

/// Create `count` pods from the template: in batches of 1, 2, 4, … (kube's slow start),
/// so a template the API rejects fails once, not `count` times.
async fn create_pods(
    rs: &Arc<ReplicaSet>,
    id: &Identity,
    ctx: &Context<Pods>,
    count: usize,
) -> Result<(), Error> {
    let pod = pod_from_template(rs, id);
    let api = ctx.api::<Pod>(&id.namespace);
    let params = PostParams::default();
    let (mut created, mut batch) = (0, 1);
    while created < count {
        let size = batch.min(count - created);
        let results = futures::future::join_all((0..size).map(|_| api.create(&params, &pod))).await;
        created += size;
        batch *= 2;
        let mut failed = None;
        for result in results {
            match result {
                Ok(pod) => {
                    let message = format!("Created pod: {}", pod.metadata.name.unwrap_or_default());
                    record(ctx, rs, "SuccessfulCreate", message);
                }
                Err(error) => failed = Some(error),
            }
        }
        if let Some(error) = failed {
            let creating = |why: &str| format!("Error creating: {why}");
            let events = &ctx.data().events;
            return Err(crate::failed_create(events, rs.as_ref(), creating, error).await);
        }
    }
    Ok(())
}

/// A pod of the ReplicaSet: its template's metadata and spec, a generated name
/// `<replicaset>-xxxxx`, controlled by the ReplicaSet.
fn pod_from_template(rs: &ReplicaSet, id: &Identity) -> Pod {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let owner = pod_template::controller_ref(rs);
    let name = PodName::Prefix(format!("{}-", id.name));
    pod_template::pod_from_template(&template, owner, &id.namespace, name)
}

/// The `active.len() - wanted` pods to delete, the least useful first (kube's ranking,
/// abridged): unscheduled before scheduled, pending before running, unready before
/// ready, recently ready before long ready, newer before older.
fn doomed(mut active: Vec<Arc<Pod>>, wanted: usize) -> Vec<Arc<Pod>> {
    let excess = active.len().saturating_sub(wanted).min(BURST);
    if excess == 0 {
        // Most reconciles: nothing to rank (each used to sort every pod it had).
        return Vec::new();
    }
    active.sort_by_key(|pod| {
        let scheduled = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some();
        let running = pod_template::phase(pod) == "Running";
        let ready_since = pod_template::ready_since(pod);
        let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (
            scheduled,
            running,
            ready_since.is_some(),
            Reverse(ready_since.flatten()),
            Reverse(created),
        )
    });
    active.truncate(excess);
    active
}

/// Delete `pods` (each only if it is still the pod we saw: uid precondition).
async fn delete_pods(
    rs: &Arc<ReplicaSet>,
    id: &Identity,
    ctx: &Context<Pods>,
    pods: Vec<Arc<Pod>>,
) -> Result<(), Error> {
    let api = &ctx.api::<Pod>(&id.namespace);
    let deletes = pods.iter().map(|pod| pod_template::delete_exact(api, pod));
    for (deleted, pod) in futures::future::join_all(deletes)
        .await
        .into_iter()
        .zip(&pods)
    {
        // Not deleted: already gone (or replaced), which is what we wanted.
        if deleted? {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            record(ctx, rs, "SuccessfulDelete", format!("Deleted pod: {name}"));
        }
    }
    Ok(())
}

fn record(ctx: &Context<Pods>, rs: &Arc<ReplicaSet>, reason: &str, message: String) {
    crate::publish_in_background(ctx.data().events.clone(), rs.clone(), reason, message);
}

/// The status the ReplicaSet's pods give it at `now`, and when a pod that is Ready but not
/// yet for `minReadySeconds` becomes available (so the count is written then).
fn status(
    rs: &ReplicaSet,
    active: &[Arc<Pod>],
    now: Timestamp,
) -> (ReplicaSetStatus, Option<Duration>) {
    let spec = rs.spec.as_ref();
    let min_ready_seconds = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let template_labels = spec
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let fully_labeled = active.iter().filter(|pod| {
        let labels = pod.metadata.labels.as_ref();
        template_labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    });
    let mut next_available: Option<Duration> = None;
    let mut available = 0;
    for pod in active {
        match pod_template::availability(pod, min_ready_seconds, now) {
            Availability::Available => available += 1,
            Availability::ReadyFor(left) => {
                next_available = Some(next_available.map_or(left, |n| n.min(left)));
            }
            Availability::Unready => {}
        }
    }
    let previous = rs.status.as_ref();
    let status = ReplicaSetStatus {
        replicas: count(active.len()),
        fully_labeled_replicas: nonzero(count(fully_labeled.count())),
        ready_replicas: nonzero(count(
            active.iter().filter(|p| pod_template::is_ready(p)).count(),
        )),
        available_replicas: nonzero(available),
        observed_generation: rs.metadata.generation,
        // `ReplicaFailure` is set or cleared by the reconcile (`report_failure`).
        conditions: previous.and_then(|s| s.conditions.clone()),
        terminating_replicas: previous.and_then(|s| s.terminating_replicas),
    };
    (status, next_available)
}

/// kube's `calculateStatus` for conditions: a failed create or delete sets
/// `ReplicaFailure` (once: an existing one is kept as it is), a successful pass clears it.
fn report_failure(status: &mut ReplicaSetStatus, failure: Option<(&str, String)>, now: Timestamp) {
    let existing = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == REPLICA_FAILURE);
    match failure {
        Some((reason, message)) if !existing => {
            status
                .conditions
                .get_or_insert_with(Vec::new)
                .push(ReplicaSetCondition {
                    type_: REPLICA_FAILURE.into(),
                    status: "True".into(),
                    reason: Some(reason.into()),
                    message: Some(message),
                    last_transition_time: Some(Time(now)),
                });
        }
        None if existing => {
            if let Some(conditions) = status.conditions.as_mut() {
                conditions.retain(|c| c.type_ != REPLICA_FAILURE);
            }
            if status.conditions.as_ref().is_some_and(Vec::is_empty) {
                status.conditions = None;
            }
        }
        _ => {}
    }
}

/// `n` as an API count (saturating).
pub(crate) fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// `None` for zero: kube omits zero counts (`omitempty`), so `kubectl get -o yaml` shows
/// the same fields.
pub(crate) fn nonzero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// The status fields kube omits when zero or empty (a merge patch clears them with null).
const OMITTED_COUNTS: &[&str] = &[
    "fullyLabeledReplicas",
    "readyReplicas",
    "availableReplicas",
    "conditions",
];
