//! kube-scheduler's DefaultPreemption for the simulated nodes: a pod no node fits may
//! evict pods of lower priority from a node where that makes it fit. On each node whose
//! refusal evicting could change, every lower-priority pod is taken away; if the pod then
//! fits, they are given back one at a time, the most important first (higher priority,
//! then earlier start), and those without which it no longer fits are the victims. Of
//! the nodes that work, the one whose most important victim matters least wins, then
//! the smallest sum of priorities, the fewest victims, the latest start. The victims get
//! `DisruptionTarget` (`PreemptionByScheduler`) and are deleted, each with a `Preempted`
//! Event, and the pod is nominated to the node (`status.nominatedNodeName`), whose room
//! later decisions then keep for it from pods of lower priority.
//!
//! Not done: PodDisruptionBudgets are not weighed (kube prefers victims whose eviction
//! violates none), nominated pods count only for resources and host ports (kube adds
//! them for every filter), and a lower-priority pod nominated to the node keeps its
//! nomination.
//!
//! Must not know: what the filters decide (the scheduler's [`Cycle`] asks them).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use steady_runtime::{Context, ObjectCache, ObjectKey};

use super::placed::Placed;
use super::scheduler::{self, Cycle, Refusal};
use super::{ByUid, Nodes};

pub(super) const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
pub(super) const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
const NEVER: &str = "not eligible due to preemptionPolicy=Never.";
const TERMINATING: &str = "not eligible due to a terminating pod on the nominated node.";
const REASON: &str = "PreemptionByScheduler";

/// What preemption made of a pod no node fits.
pub(super) enum Plan {
    /// Nothing to evict: preemption's note for the message (after `preemption: `).
    Refused(String),
    /// Evict `victims` from `node` and nominate the pod there.
    Evict {
        node: String,
        victims: Vec<Arc<Pod>>,
    },
}

/// The pod's priority (what admission resolved from its class; 0 without one).
fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// Why the pod may not preempt at all, whatever the nodes (kube's
/// `PodEligibleToPreemptOthers`' first rule).
pub(super) fn never(pod: &Pod) -> Option<String> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref());
    (policy == Some("Never")).then(|| NEVER.to_string())
}

/// Preemption's note when a pre-filter refused every node at once.
pub(super) fn note_for_all(pod: &Pod, total: usize) -> String {
    never(pod).unwrap_or_else(|| format!("0/{total} nodes are available: {total} {NOT_HELPFUL}."))
}

/// kube's `podTerminatingByPreemption`.
fn terminating_by_preemption(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let disrupted = conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget");
    pod.metadata.deletion_timestamp.is_some()
        && disrupted.is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some(REASON))
}

/// What evicting pods could do for the pod, given each node's refusal, over `placed`
/// (every placed pod).
pub(super) fn plan(cycle: &Cycle, refusals: &[(String, Refusal)], placed: &Placed) -> Plan {
    let pod = cycle.pod.as_ref();
    if let Some(note) = never(pod) {
        return Plan::Refused(note);
    }
    let own = priority(pod);
    let nominated = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty());
    if let Some(node) = nominated {
        let resolvable = refusals
            .iter()
            .any(|(name, refusal)| name == node && refusal.preemptible);
        let waiting_for_victims = placed
            .on(node)
            .iter()
            .any(|p| priority(p) < own && terminating_by_preemption(p));
        if resolvable && waiting_for_victims {
            return Plan::Refused(TERMINATING.to_string());
        }
    }
    let mut outcomes: Vec<String> = Vec::new();
    let mut candidates: Vec<(String, Vec<Arc<Pod>>)> = Vec::new();
    for (name, refusal) in refusals {
        if !refusal.preemptible {
            outcomes.push(NOT_HELPFUL.to_string());
            continue;
        }
        match victims_on(cycle, name, placed, own) {
            Ok(victims) => candidates.push((name.clone(), victims)),
            Err(reasons) => outcomes.extend(reasons),
        }
    }
    match pick(candidates) {
        Some((node, victims)) => Plan::Evict { node, victims },
        None => {
            let histogram = scheduler::histogram(outcomes.iter().map(String::as_str));
            Plan::Refused(format!(
                "0/{} nodes are available: {histogram}.",
                refusals.len()
            ))
        }
    }
}

/// kube's `SelectVictimsOnNode`: the fewest lower-priority pods of `node` without which
/// the pod fits, or why it does not fit even without all of them.
fn victims_on(
    cycle: &Cycle,
    node: &str,
    placed: &Placed,
    own: i32,
) -> Result<Vec<Arc<Pod>>, Vec<String>> {
    let mut potential: Vec<Arc<Pod>> = placed
        .on(node)
        .iter()
        .filter(|p| priority(p) < own)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(vec![NO_VICTIMS.to_string()]);
    }
    if let Some(refusal) = cycle.refusal_without(node, placed, &potential) {
        return Err(refusal.reasons);
    }
    // The most important first: they are the first given back.
    potential.sort_by(|a, b| {
        priority(b)
            .cmp(&priority(a))
            .then_with(|| start_time(a).cmp(&start_time(b)))
    });
    let mut removed = potential.clone();
    let mut victims = Vec::new();
    for pod in potential {
        removed.retain(|r| !Arc::ptr_eq(r, &pod));
        if cycle.refusal_without(node, placed, &removed).is_some() {
            removed.push(pod.clone());
            victims.push(pod);
        }
    }
    Ok(victims)
}

/// When the pod started (RFC 3339 sorts as time), or never.
fn start_time(pod: &Pod) -> String {
    let started = pod.status.as_ref().and_then(|s| s.start_time.as_ref());
    started.map(|t| t.0.to_string()).unwrap_or_default()
}

/// kube's `pickOneNodeForPreemption` (PodDisruptionBudgets aside): the lowest highest
/// victim priority, then the lowest sum of priorities, the fewest victims, the latest
/// start among the highest-priority victims, then the first.
fn pick(candidates: Vec<(String, Vec<Arc<Pod>>)>) -> Option<(String, Vec<Arc<Pod>>)> {
    let rank = |victims: &[Arc<Pod>]| {
        let highest = victims
            .iter()
            .map(|p| priority(p))
            .max()
            .unwrap_or(i32::MIN);
        // kube shifts each priority by 2^31 so that the sum grows with every victim.
        let sum: i64 = victims
            .iter()
            .map(|p| i64::from(priority(p)) + i64::from(i32::MAX) + 1)
            .sum();
        let earliest_of_highest = victims
            .iter()
            .filter(|p| priority(p) == highest)
            .map(|p| start_time(p))
            .min()
            .unwrap_or_default();
        (
            highest,
            sum,
            victims.len(),
            std::cmp::Reverse(earliest_of_highest),
        )
    };
    let mut ranked: Vec<_> = candidates
        .into_iter()
        .enumerate()
        .map(|(order, (node, victims))| (rank(&victims), order, node, victims))
        .collect();
    ranked.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    ranked
        .into_iter()
        .next()
        .map(|(_, _, node, victims)| (node, victims))
}

/// kube's `prepareCandidate`: each victim marked `DisruptionTarget` and deleted, with a
/// `Preempted` Event naming the pod it made room for.
pub(super) async fn evict(
    pod: &Pod,
    node: &str,
    victims: &[Arc<Pod>],
    ctx: &Context<Nodes>,
) -> Result<(), kube::Error> {
    let nodes = ctx.data();
    for victim in victims {
        let why = format!(
            "{}: preempting to accommodate a higher priority pod",
            scheduler::SCHEDULER
        );
        super::tolerate_races(super::disrupt(victim, REASON, &why, ctx).await)?;
        let message = format!(
            "Preempted by pod {} on node {node}",
            pod.metadata.uid.as_deref().unwrap_or_default()
        );
        let event = nodes.event(victim, "Normal", "Preempted", &message, scheduler::source());
        nodes.scheduler_events.record(vec![event]);
    }
    Ok(())
}

/// The pods nominated to a node and not yet bound there, by uid: the room later
/// decisions keep for them (kube's nominator).
#[derive(Default)]
pub(super) struct Nominated(ByUid<ObjectKey>);

impl Nominated {
    pub(super) fn observe(&mut self, pod: &Pod) {
        super::track(&mut self.0, pod, nominated_node(pod).is_some());
    }

    /// By node, the pods nominated there that `pod` must leave room for: of its
    /// priority or above, other than itself.
    pub(super) fn ahead_of(
        &mut self,
        pod: &Pod,
        pods: &ObjectCache<Pod>,
    ) -> BTreeMap<String, Vec<Arc<Pod>>> {
        let mut ahead: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
        if self.0.is_empty() {
            return ahead;
        }
        let own = priority(pod);
        self.0.retain(|uid, key| {
            let Some(cached) = pods
                .get(key)
                .filter(|c| c.metadata.uid.as_deref() == Some(uid))
            else {
                return false;
            };
            let Some(node) = nominated_node(&cached).map(str::to_string) else {
                return false;
            };
            if pod.metadata.uid.as_deref() != Some(uid) && priority(&cached) >= own {
                ahead.entry(node).or_default().push(cached);
            }
            true
        });
        ahead
    }
}

/// The node a pending pod is nominated to, while it waits for it.
fn nominated_node(pod: &Pod) -> Option<&str> {
    let pending = scheduler::node_of(pod).is_empty()
        && pod.metadata.deletion_timestamp.is_none()
        && !crate::pod_template::is_finished(pod);
    let node = pod.status.as_ref()?.nominated_node_name.as_deref()?;
    (pending && !node.is_empty()).then_some(node)
}
