//! The disruption controller: each PodDisruptionBudget's status, as kube-controller-manager
//! 1.32 computes it — the pods its selector matches, how many are expected (the count of
//! matching pods for an integer `minAvailable`, else the sum of their controllers'
//! `spec.replicas`), how many must stay healthy, how many are healthy (ready, not
//! terminating, not just evicted), and so how many disruptions are allowed, with the
//! `DisruptionAllowed` condition. The eviction subresource (crates/apiserver) reads that
//! status and spends it; a pod it evicted is kept in `status.disruptedPods` until it is
//! gone or two minutes pass.
//!
//! Level-triggered: a reconcile computes the status from the budget, the cached pods and
//! the controllers' scale, and writes it (a replace, so an eviction's concurrent spending
//! is never overwritten: the conflict retries) only when it differs. Pods are mapped to
//! the budgets of their namespace that select them, before and after a change.
//! A budget whose pods' controllers cannot be found gets kube's fail-safe status: no
//! disruption allowed, `DisruptionAllowed=False` with reason `SyncFailed`.
//! Deliberately left out: kube's `NoPods` event on every sync of an empty budget, and the
//! stale `DisruptionTarget` condition cleanup of pods an eviction marked but never deleted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};
use kube::core::{GroupVersionKind, Selector, SelectorExt};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use steady_runtime::conditions;
use steady_runtime::object_cache::OwnerView;
use steady_runtime::projection::{Projected, Projection};
use steady_runtime::{Action, Context, ObjectCache, ObjectKey};

use crate::clock::Clock;
use crate::{Error, Running, Setup, Shutdown};

/// kube's `DeletionTimeout`: how long an evicted pod is not counted healthy while it goes.
const DELETION_TIMEOUT: Duration = Duration::from_secs(120);
const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

/// Start the controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let mut controller = crate::controller_for::<PodDisruptionBudget>(&client, config);
    let budgets = controller.primary_cache();
    let pods = controller.watches_projected_with(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        move |pod: &Projected<BudgetedPod>| budgets_of(pod, &budgets),
    );
    let data = Budgets { pods, clock };
    controller.run(reconcile, Arc::new(data), shutdown).boxed()
}

struct Budgets {
    pods: ObjectCache<Projected<BudgetedPod>>,
    clock: Clock,
}

/// What a budget reads of a pod besides its name, owners and deletion.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetedPod {
    labels: BTreeMap<String, String>,
    ready: bool,
}

impl Projection for BudgetedPod {
    type Kind = Pod;

    const UNREAD: &'static [&'static str] = &[
        "metadata.managedFields",
        "metadata.annotations",
        "spec",
        "status.containerStatuses",
        "status.initContainerStatuses",
    ];

    fn project(pod: &Pod) -> Self {
        BudgetedPod {
            labels: pod.labels().clone(),
            ready: crate::pod_template::is_ready(pod),
        }
    }
}

/// The budget's pod selector: a missing one matches no pod, an empty one every pod of
/// its namespace (`metav1.LabelSelectorAsSelector`).
fn selector_of(budget: &PodDisruptionBudget) -> Option<Selector> {
    let selector: LabelSelector = budget.spec.as_ref()?.selector.clone()?;
    Selector::try_from(selector).ok()
}

fn selects(selector: &Selector, pod: &Projected<BudgetedPod>) -> bool {
    selector.matches(&pod.labels)
}

/// The budgets of `pod`'s namespace that select it.
fn budgets_of(
    pod: &Projected<BudgetedPod>,
    budgets: &ObjectCache<PodDisruptionBudget>,
) -> Vec<ObjectKey> {
    let namespace = pod.meta().namespace();
    budgets
        .list()
        .into_iter()
        .filter(|budget| budget.metadata.namespace.as_deref() == namespace)
        .filter(|budget| selector_of(budget).is_some_and(|s| selects(&s, pod)))
        .map(|budget| ObjectKey::of(budget.as_ref()))
        .collect()
}

async fn reconcile(
    budget: Arc<PodDisruptionBudget>,
    ctx: Arc<Context<Budgets>>,
) -> Result<Action, Error> {
    let namespace = budget
        .namespace()
        .ok_or_else(|| Error::Incomplete("a PodDisruptionBudget without a namespace".into()))?;
    let pods = matching_pods(&budget, &namespace, &ctx.data().pods);
    let now = (ctx.data().clock)();
    let computed = match expected_and_desired(&budget, &pods, &ctx.client(), &namespace).await {
        Ok(counts) => Computed::status(&budget, &pods, counts, now),
        Err(why) => Computed::fail_safe(&budget, &why, now),
    };
    if computed.status != budget.status.clone().unwrap_or_default() {
        let mut written = (*budget).clone();
        written.status = Some(computed.status);
        ctx.api::<PodDisruptionBudget>(&namespace)
            .replace_status(&budget.name_any(), &PostParams::default(), &written)
            .await?;
    }
    Ok(match computed.recheck_after {
        Some(after) => Action::requeue_after(after),
        None => Action::done(),
    })
}

/// The cached pods of `namespace` the budget selects.
fn matching_pods(
    budget: &PodDisruptionBudget,
    namespace: &str,
    pods: &ObjectCache<Projected<BudgetedPod>>,
) -> Vec<Arc<Projected<BudgetedPod>>> {
    let Some(selector) = selector_of(budget) else {
        return Vec::new();
    };
    pods.list()
        .into_iter()
        .filter(|pod| pod.meta().namespace() == Some(namespace) && selects(&selector, pod))
        .collect()
}

/// How many pods the budget expects, and how many of them must stay healthy.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Counts {
    expected: i32,
    desired_healthy: i32,
}

/// kube's `getExpectedPodCount`.
async fn expected_and_desired(
    budget: &PodDisruptionBudget,
    pods: &[Arc<Projected<BudgetedPod>>],
    client: &Client,
    namespace: &str,
) -> Result<Counts, String> {
    let spec = budget.spec.clone().unwrap_or_default();
    if let Some(max_unavailable) = &spec.max_unavailable {
        let expected = expected_scale(pods, client, namespace).await?;
        let unavailable = scaled(max_unavailable, expected)?;
        return Ok(Counts {
            expected,
            desired_healthy: (expected - unavailable).max(0),
        });
    }
    match &spec.min_available {
        Some(IntOrString::Int(min)) => Ok(Counts {
            expected: i32::try_from(pods.len()).unwrap_or(i32::MAX),
            desired_healthy: *min,
        }),
        Some(percent @ IntOrString::String(_)) => {
            let expected = expected_scale(pods, client, namespace).await?;
            Ok(Counts {
                expected,
                desired_healthy: scaled(percent, expected)?,
            })
        }
        None => Ok(Counts {
            expected: 0,
            desired_healthy: 0,
        }),
    }
}

/// `intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)`.
fn scaled(value: &IntOrString, total: i32) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(text) => {
            let percent: i64 = text
                .strip_suffix('%')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {text:?}"))?;
            let scaled = (percent * i64::from(total) + 99).div_euclid(100);
            Ok(i32::try_from(scaled).unwrap_or(i32::MAX))
        }
    }
}

/// kube's `getExpectedScale`: the sum of `spec.replicas` over the distinct controllers of
/// the pods (pods without a controller are left out, as kube does, which warns).
async fn expected_scale(
    pods: &[Arc<Projected<BudgetedPod>>],
    client: &Client,
    namespace: &str,
) -> Result<i32, String> {
    let mut scales: BTreeMap<String, i32> = BTreeMap::new();
    for pod in pods {
        let Some(owner) = pod.meta().owners().find(|o| o.controller) else {
            continue;
        };
        if scales.contains_key(owner.uid) {
            continue;
        }
        let (uid, scale) = controller_scale(&owner, client, namespace)
            .await?
            .ok_or_else(|| format!("found no controllers for pod {:?}", pod.meta().name()))?;
        scales.insert(uid, scale);
    }
    Ok(scales.values().sum())
}

/// The controller `owner` names and its `spec.replicas`, as kube's finders look it up: a
/// ReplicaSet a Deployment controls counts as the Deployment; a ReplicationController,
/// ReplicaSet or StatefulSet as itself; any other kind through its scale subresource.
/// `None` when it is gone or is not the object the reference names (another uid).
async fn controller_scale(
    owner: &OwnerView<'_>,
    client: &Client,
    namespace: &str,
) -> Result<Option<(String, i32)>, String> {
    let found = |name: &str, uid: &str| Named {
        client,
        namespace,
        name: name.to_string(),
        uid: uid.to_string(),
    };
    let scale = |uid: &str, replicas: Option<i32>| Some((uid.to_string(), replicas.unwrap_or(1)));
    let owner_ref = found(owner.name, owner.uid);
    match (owner.api_version, owner.kind) {
        ("apps/v1", "ReplicaSet") => {
            let Some(set) = owner_ref.get::<ReplicaSet>().await? else {
                return Ok(None);
            };
            let deployment = set
                .owner_references()
                .iter()
                .find(|r| r.controller == Some(true) && r.kind == "Deployment")
                .map(|r| found(&r.name, &r.uid));
            match deployment {
                Some(deployment) => Ok(deployment
                    .get::<Deployment>()
                    .await?
                    .and_then(|d| scale(&deployment.uid, d.spec.and_then(|s| s.replicas)))),
                None => Ok(scale(owner.uid, set.spec.and_then(|s| s.replicas))),
            }
        }
        ("apps/v1", "StatefulSet") => Ok(owner_ref
            .get::<StatefulSet>()
            .await?
            .and_then(|s| scale(owner.uid, s.spec.and_then(|s| s.replicas)))),
        ("v1", "ReplicationController") => Ok(owner_ref
            .get::<ReplicationController>()
            .await?
            .and_then(|c| scale(owner.uid, c.spec.and_then(|s| s.replicas)))),
        (api_version, kind) => scale_subresource(owner, api_version, kind, client, namespace).await,
    }
}

/// A controller an ownerReference names: its name and uid in the pod's namespace.
struct Named<'c> {
    client: &'c Client,
    namespace: &'c str,
    name: String,
    uid: String,
}

impl Named<'_> {
    /// The object, unless it is gone or another object now holds the name (another uid).
    async fn get<K>(&self) -> Result<Option<K>, String>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), self.namespace);
        let found = api.get_opt(&self.name).await.map_err(|e| e.to_string())?;
        Ok(found.filter(|o| o.meta().uid.as_deref() == Some(self.uid.as_str())))
    }
}

/// Any other controller through its `scale` subresource (a custom resource that declares
/// one, like the Cache): `spec.replicas` of the Scale, if the object is the one named.
async fn scale_subresource(
    owner: &OwnerView<'_>,
    api_version: &str,
    kind: &str,
    client: &Client,
    namespace: &str,
) -> Result<Option<(String, i32)>, String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let Ok((resource, _)) = kube::discovery::pinned_kind(client, &gvk).await else {
        return Ok(None);
    };
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource);
    let request = kube::core::Request::new(api.resource_url())
        .get_subresource("scale", owner.name)
        .map_err(|e| e.to_string())?;
    let scale: Scale = match client.request(request).await {
        Ok(scale) => scale,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if scale.metadata.uid.as_deref() != Some(owner.uid) {
        return Ok(None);
    }
    let replicas = scale.spec.and_then(|s| s.replicas).unwrap_or(0);
    Ok(Some((owner.uid.to_string(), replicas)))
}

/// A budget's status as a reconcile computed it, and when to look again.
struct Computed {
    status: PodDisruptionBudgetStatus,
    recheck_after: Option<Duration>,
}

impl Computed {
    /// kube's `trySync`: the disrupted pods still going, the healthy ones, the allowance.
    fn status(
        budget: &PodDisruptionBudget,
        pods: &[Arc<Projected<BudgetedPod>>],
        counts: Counts,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Computed {
        let previous = budget.status.clone().unwrap_or_default();
        let (disrupted, recheck_after) = still_disrupted(&previous, pods, now);
        let current_healthy = pods
            .iter()
            .filter(|pod| pod.meta().deletion_timestamp().is_none())
            .filter(|pod| !disrupted.contains_key(pod.meta().name()))
            .filter(|pod| pod.ready)
            .count();
        let current_healthy = i32::try_from(current_healthy).unwrap_or(i32::MAX);
        let allowed = current_healthy - counts.desired_healthy;
        let disruptions_allowed = if counts.expected <= 0 || allowed <= 0 {
            0
        } else {
            allowed
        };
        let observed_generation = budget.metadata.generation;
        let mut status = PodDisruptionBudgetStatus {
            current_healthy,
            desired_healthy: counts.desired_healthy,
            expected_pods: counts.expected,
            disruptions_allowed,
            disrupted_pods: Some(disrupted),
            observed_generation,
            conditions: previous.conditions,
        };
        set_allowed_condition(&mut status, now);
        Computed {
            status,
            recheck_after,
        }
    }

    /// kube's `failSafe`: nothing may be disrupted while the budget cannot be computed.
    fn fail_safe(
        budget: &PodDisruptionBudget,
        why: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Computed {
        let mut status = budget.status.clone().unwrap_or_default();
        status.disruptions_allowed = 0;
        let failed = condition("False", "SyncFailed", why, status.observed_generation);
        set_condition(&mut status, failed, now);
        Computed {
            status,
            recheck_after: None,
        }
    }
}

/// kube's `buildDisruptedPodMap`: the evicted pods still present, not yet terminating,
/// whose two minutes are not over; and when the first of those runs out.
fn still_disrupted(
    previous: &PodDisruptionBudgetStatus,
    pods: &[Arc<Projected<BudgetedPod>>],
    now: chrono::DateTime<chrono::Utc>,
) -> (BTreeMap<String, Time>, Option<Duration>) {
    let mut kept = BTreeMap::new();
    let mut recheck: Option<Duration> = None;
    let Some(disrupted) = &previous.disrupted_pods else {
        return (kept, recheck);
    };
    let now_ms = now.timestamp_millis();
    for pod in pods {
        if pod.meta().deletion_timestamp().is_some() {
            continue;
        }
        let Some(since) = disrupted.get(pod.meta().name()) else {
            continue;
        };
        let deadline_ms = since.0.as_millisecond()
            + i64::try_from(DELETION_TIMEOUT.as_millis()).unwrap_or(i64::MAX);
        if deadline_ms < now_ms {
            continue;
        }
        let left = Duration::from_millis(u64::try_from(deadline_ms - now_ms).unwrap_or(0));
        recheck = Some(recheck.map_or(left, |r| r.min(left)));
        kept.insert(pod.meta().name().to_string(), since.clone());
    }
    (kept, recheck)
}

/// pdbhelper's `UpdateDisruptionAllowedCondition`.
fn set_allowed_condition(
    status: &mut PodDisruptionBudgetStatus,
    now: chrono::DateTime<chrono::Utc>,
) {
    let (value, reason) = if status.disruptions_allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let allowed = condition(value, reason, "", status.observed_generation);
    set_condition(status, allowed, now);
}

/// `meta.SetStatusCondition` on the budget's conditions.
fn set_condition(
    status: &mut PodDisruptionBudgetStatus,
    new: conditions::Condition,
    now: chrono::DateTime<chrono::Utc>,
) {
    let mut list: Vec<conditions::Condition> = status
        .conditions
        .take()
        .unwrap_or_default()
        .into_iter()
        .map(Into::into)
        .collect();
    conditions::set_condition(&mut list, new, now);
    status.conditions = Some(list.into_iter().map(Into::into).collect());
}

/// The `DisruptionAllowed` condition (its transition time is `set_condition`'s to set).
fn condition(
    status: &str,
    reason: &str,
    message: &str,
    observed: Option<i64>,
) -> conditions::Condition {
    let mut condition = conditions::Condition::new(DISRUPTION_ALLOWED, status, reason, message);
    condition.observed_generation = observed;
    condition
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_up_as_kube_scales_them() {
        let percent = |p: &str| IntOrString::String(p.into());
        assert_eq!(scaled(&percent("50%"), 3), Ok(2));
        assert_eq!(scaled(&percent("34%"), 3), Ok(2));
        assert_eq!(scaled(&percent("0%"), 3), Ok(0));
        assert_eq!(scaled(&IntOrString::Int(1), 3), Ok(1));
        assert!(scaled(&percent("half"), 3).is_err());
    }
}
