//! `POST pods/<name>/eviction`: a pod is deleted only if the PodDisruptionBudget covering
//! it allows one more disruption, decided as kube-apiserver 1.32's EvictionREST decides.
//!
//! A pod that is finished, pending or already terminating is deleted at once. Otherwise
//! the budgets of its namespace whose selector matches its labels are consulted: none
//! lets the eviction through, more than one is refused (500, as kube does). With one, a
//! ready pod needs `status.disruptionsAllowed > 0`, which the eviction decrements (and
//! records the pod under `status.disruptedPods`, so the disruption controller does not
//! count it healthy while it goes); an unready pod may go without spending a disruption
//! when the budget is met anyway (or its `unhealthyPodEvictionPolicy` is `AlwaysAllow`),
//! pinned to the pod's resourceVersion so it cannot have become ready meanwhile. A budget
//! the disruption controller has not caught up with (`observedGeneration` behind), or one
//! with no disruption left, answers 429 TooManyRequests, which `kubectl drain` retries.
//! Every evicted pod first gets the `DisruptionTarget` condition, then is deleted with the
//! Eviction's delete options.
//! Must not know: how budgets' status is computed (crates/cluster's disruption controller).

use serde_json::{Value, json};

use crate::ApiServer;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::objects::{Target, attempts_until_applied};
use crate::registry::ResourceType;
use crate::request::{DeleteOptions, Params, WriteOptions};
use crate::selector::LabelSelector;

/// kube's `MaxDisruptedPodSize`: evictions the disruption controller has not confirmed yet.
const MAX_DISRUPTED_PODS: usize = 2000;
/// The `metav1.StatusCause` type kube-apiserver gives a budget's refusal.
const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";

/// Evict the pod `name`: see the module's documentation. `Ok` is the `Status` to answer.
pub(crate) async fn evict(
    server: &ApiServer,
    ns: Option<&str>,
    name: &str,
    body: &Value,
) -> ApiResult<Value> {
    if let Some(named) = meta::name(body)
        && named != name
    {
        return Err(ApiError::bad_request(format!(
            "name in URL does not match name in Eviction object: {name} != {named}"
        )));
    }
    let pods = server
        .registry()
        .builtin("", "pods")
        .ok_or_else(ApiError::path_not_found)?;
    let options = DeleteOptions::parse(body.get("deleteOptions"), &Params::parse(None))?;
    let eviction = Eviction {
        server,
        pods: &pods,
        ns,
        name,
        options: &options,
    };
    eviction.run().await.map(|()| crate::review::success())
}

struct Eviction<'a> {
    server: &'a ApiServer,
    pods: &'a ResourceType,
    ns: Option<&'a str>,
    name: &'a str,
    options: &'a DeleteOptions,
}

impl Eviction<'_> {
    /// Whether the caller pinned the pod's resourceVersion: then conflicts are theirs to
    /// see, never retried.
    fn caller_pinned_version(&self) -> bool {
        self.options.precondition_resource_version.is_some()
    }

    async fn run(&self) -> ApiResult<()> {
        let (pod, revision) = match self.delete_if_unprotected().await? {
            Some(protected) => protected,
            None => return Ok(()),
        };
        let Some(budget) = self.covering_budget(&pod)? else {
            return self.delete(self.options.clone()).await;
        };
        let unhealthy_may_go = !is_ready(&pod) && budget.lets_unhealthy_pods_go();
        if !unhealthy_may_go {
            self.spend_disruption(&budget.name).await?;
            return self.delete(self.options.clone()).await;
        }
        // The pod is unready and its going costs the budget nothing: pinned to the state
        // judged, so that it cannot have become ready (and counted) meanwhile.
        let mut pinned = self.options.clone();
        if !self.caller_pinned_version() {
            pinned.precondition_resource_version = Some(revision.to_string());
        }
        match self.delete(pinned).await {
            Err(e) if e.code == 409 && !self.caller_pinned_version() => {
                Err(still_processing(&budget.name))
            }
            other => other,
        }
    }

    /// kube's first loop: a pod no budget protects (finished, pending, terminating) is
    /// deleted at once, pinned to the version judged unless it can no longer change
    /// (conflicts retried). `Some`: the pod, which its budget must be asked about.
    async fn delete_if_unprotected(&self) -> ApiResult<Option<(Value, u64)>> {
        for () in attempts_until_applied() {
            let (pod, revision) = self.server.get_value(self.pods, self.ns, self.name)?;
            if !can_ignore_budget(&pod) {
                return Ok(Some((pod, revision)));
            }
            let mut options = self.options.clone();
            if may_still_change(&pod) && !self.caller_pinned_version() {
                options.precondition_resource_version = Some(revision.to_string());
            }
            match self.delete(options).await {
                Err(e) if e.code == 409 && !self.caller_pinned_version() => continue,
                other => return other.map(|()| None),
            }
        }
        Err(ApiError::modified(&self.pods.qualified_name(), self.name))
    }

    /// The one budget of the pod's namespace whose selector matches it, if any.
    fn covering_budget(&self, pod: &Value) -> ApiResult<Option<Budget>> {
        let Some(budgets) = self
            .server
            .registry()
            .builtin("policy", "poddisruptionbudgets")
        else {
            return Ok(None);
        };
        let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
        let listed = self
            .server
            .store()
            .list(
                &budgets.list_prefix(self.ns),
                &steady_store::ListOptions::default(),
                &|_| true,
            )
            .map_err(|e| ApiError::from_store(e, &budgets.qualified_name(), ""))?;
        let mut covering = Vec::new();
        for stored in listed.items {
            let Ok(budget) = serde_json::from_slice::<Value>(&stored.value) else {
                continue;
            };
            if selects(&budget, labels) {
                covering.push(budget);
            }
        }
        match covering.len() {
            0 => Ok(None),
            1 => Ok(covering.pop().map(Budget::of)),
            _ => Err(ApiError::failure(
                500,
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )),
        }
    }

    /// kube's `checkAndDecrement`, retried on conflicts with a fresh read of the budget.
    async fn spend_disruption(&self, budget_name: &str) -> ApiResult<()> {
        let budgets = self
            .server
            .registry()
            .builtin("policy", "poddisruptionbudgets")
            .ok_or_else(ApiError::path_not_found)?;
        let modified = ApiError::modified(&budgets.qualified_name(), budget_name);
        for () in attempts_until_applied() {
            let (mut budget, revision) = self.server.get_value(&budgets, self.ns, budget_name)?;
            check_budget_allows(&budget, budget_name)?;
            let status = status_mut(&mut budget);
            let allowed = status
                .get("disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                - 1;
            status.insert("disruptionsAllowed".into(), json!(allowed));
            if allowed == 0 {
                set_disruption_allowed_condition(&mut budget, &self.server.timestamp());
            }
            if self.options.dry_run {
                return Ok(());
            }
            let disrupted = status_mut(&mut budget)
                .entry("disruptedPods")
                .or_insert_with(|| json!({}));
            if !disrupted.is_object() {
                *disrupted = json!({});
            }
            disrupted[self.name] = json!(self.server.timestamp());
            meta::metadata_mut(&mut budget)
                .insert("resourceVersion".into(), json!(revision.to_string()));
            let target = Target::object(&budgets, self.ns, budget_name).subresource(Some("status"));
            match self
                .server
                .update(target, budget, &WriteOptions::default())
                .await
            {
                Err(e) if e == modified => continue,
                written => return written.map(drop),
            }
        }
        Err(ApiError::timeout(format!(
            "couldn't update PodDisruptionBudget {budget_name:?} due to conflicts"
        )))
    }

    /// kube's `addConditionAndDeletePod`: mark the pod `DisruptionTarget` (checking the
    /// delete's preconditions against it), then delete it with `options` (its pinned
    /// version moved to the marked state's).
    async fn delete(&self, mut options: DeleteOptions) -> ApiResult<()> {
        if !options.dry_run {
            let marked = self.mark_disruption_target(&options).await?;
            if options.precondition_resource_version.is_some() {
                options.precondition_resource_version = Some(marked);
            }
        }
        self.server
            .delete(self.pods, self.ns, self.name, &options)
            .await
            .map(drop)
    }

    /// Set `DisruptionTarget=True` (reason `EvictionByEvictionAPI`) on the latest pod;
    /// the resourceVersion of the written state.
    async fn mark_disruption_target(&self, options: &DeleteOptions) -> ApiResult<String> {
        let modified = ApiError::modified(&self.pods.qualified_name(), self.name);
        for () in attempts_until_applied() {
            let (mut pod, revision) = self.server.get_value(self.pods, self.ns, self.name)?;
            crate::objects::check_uid_and_revision(
                self.pods,
                self.name,
                &pod,
                revision,
                options.precondition_uid.as_deref(),
                options.precondition_resource_version.as_deref(),
            )?;
            set_condition(
                &mut pod,
                json!({
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                }),
                &self.server.timestamp(),
            );
            meta::metadata_mut(&mut pod)
                .insert("resourceVersion".into(), json!(revision.to_string()));
            let target = Target::object(self.pods, self.ns, self.name).subresource(Some("status"));
            match self
                .server
                .update(target, pod, &WriteOptions::default())
                .await
            {
                Err(e) if e == modified => continue,
                Err(e) => return Err(e),
                Ok(written) => {
                    let written: Value = serde_json::from_slice(&written.object)
                        .map_err(|e| ApiError::internal(format!("written pod: {e}")))?;
                    return Ok(meta::resource_version(&written).unwrap_or("").to_string());
                }
            }
        }
        Err(modified)
    }
}

/// What an eviction reads of the budget covering its pod.
struct Budget {
    name: String,
    current_healthy: i64,
    desired_healthy: i64,
    always_allow_unhealthy: bool,
}

impl Budget {
    fn of(budget: Value) -> Budget {
        let status = |field: &str| {
            budget
                .pointer(&format!("/status/{field}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        Budget {
            name: meta::name(&budget).unwrap_or("").to_string(),
            current_healthy: status("currentHealthy"),
            desired_healthy: status("desiredHealthy"),
            always_allow_unhealthy: meta::str_at(&budget, "/spec/unhealthyPodEvictionPolicy")
                == Some("AlwaysAllow"),
        }
    }

    /// Whether an unready pod may be evicted without spending a disruption: always under
    /// `AlwaysAllow`; under the default `IfHealthyBudget`, while the budget is met.
    fn lets_unhealthy_pods_go(&self) -> bool {
        self.always_allow_unhealthy
            || (self.current_healthy >= self.desired_healthy && self.desired_healthy > 0)
    }
}

/// Whether the budget's selector matches pods with `labels`. A missing or empty selector
/// matches nothing here, as in kube's eviction handler.
fn selects(budget: &Value, labels: Option<&serde_json::Map<String, Value>>) -> bool {
    let Some(selector) = budget.pointer("/spec/selector") else {
        return false;
    };
    match LabelSelector::from_label_selector_json(selector) {
        Ok(selector) => !selector.is_empty() && selector.matches(labels),
        Err(_) => false,
    }
}

/// kube's refusals before a disruption is spent.
fn check_budget_allows(budget: &Value, name: &str) -> ApiResult<()> {
    let number = |pointer: &str| budget.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
    if number("/status/observedGeneration") < number("/metadata/generation") {
        return Err(still_processing(name));
    }
    let forbidden = |why: &str| {
        ApiError::forbidden(format!(
            "poddisruptionbudget.policy \"{name}\" is forbidden: {why}"
        ))
        .with_details(json!({"name": name, "group": "policy", "kind": "poddisruptionbudget"}))
    };
    let allowed = number("/status/disruptionsAllowed");
    if allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    let disrupted = budget
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(budget_refusal(
            None,
            format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                number("/status/desiredHealthy"),
                number("/status/currentHealthy")
            ),
        ));
    }
    Ok(())
}

/// The 429 of a budget the disruption controller has not processed since it changed.
fn still_processing(name: &str) -> ApiError {
    budget_refusal(
        Some(10),
        format!("The disruption budget {name} is still being processed by the server."),
    )
}

fn budget_refusal(retry_after_seconds: Option<u64>, cause: String) -> ApiError {
    let mut details = json!({"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]});
    if let Some(seconds) = retry_after_seconds {
        details["retryAfterSeconds"] = json!(seconds);
    }
    ApiError::too_many_requests("Cannot evict pod as it would violate the pod's disruption budget.")
        .with_details(details)
}

/// kube's `canIgnorePDB`: the pod's going disrupts nothing a budget counts.
fn can_ignore_budget(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending")
        || meta::deletion_timestamp(pod).is_some()
}

/// kube's `shouldEnforceResourceVersion`: a pod that may yet become ready.
fn may_still_change(pod: &Value) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && meta::deletion_timestamp(pod).is_none()
}

fn phase(pod: &Value) -> &str {
    meta::str_at(pod, "/status/phase").unwrap_or("")
}

/// Whether the pod's `Ready` condition is `True`.
fn is_ready(pod: &Value) -> bool {
    condition(pod, "Ready")
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some("True")
}

fn condition<'v>(obj: &'v Value, kind: &str) -> Option<&'v Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn status_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    meta::object_mut(obj, "status")
}

/// `podutil.UpdatePodCondition` / `meta.SetStatusCondition`: replace the condition of the
/// same type, its `lastTransitionTime` kept unless the status changed.
fn set_condition(obj: &mut Value, mut condition: Value, now: &str) {
    let kind = condition["type"].as_str().unwrap_or("").to_string();
    let status = status_mut(obj);
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Value::Array(conditions) = conditions else {
        return;
    };
    let existing = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(kind.as_str()));
    let unchanged_since = existing
        .map(|i| &conditions[i])
        .filter(|c| c.get("status") == condition.get("status"))
        .and_then(|c| c.get("lastTransitionTime").cloned());
    condition["lastTransitionTime"] = unchanged_since.unwrap_or_else(|| json!(now));
    match existing {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

/// pdbhelper's `UpdateDisruptionAllowedCondition`, which kube-apiserver applies when an
/// eviction spends a budget's last disruption.
fn set_disruption_allowed_condition(budget: &mut Value, now: &str) {
    let allowed = budget
        .pointer("/status/disruptionsAllowed")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let observed = budget
        .pointer("/status/observedGeneration")
        .cloned()
        .unwrap_or(json!(0));
    let (status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    set_condition(
        budget,
        json!({
            "type": "DisruptionAllowed",
            "status": status,
            "reason": reason,
            "message": "",
            "observedGeneration": observed,
        }),
        now,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(selector: Value) -> Value {
        json!({"metadata": {"name": "b"}, "spec": {"selector": selector}})
    }

    #[test]
    fn a_budget_without_a_selector_or_with_an_empty_one_covers_no_pod() {
        let pod = json!({"app": "web"});
        let labels = pod.as_object();
        assert!(selects(
            &budget(json!({"matchLabels": {"app": "web"}})),
            labels
        ));
        assert!(!selects(
            &budget(json!({"matchLabels": {"app": "db"}})),
            labels
        ));
        assert!(!selects(&budget(json!({})), labels));
        assert!(!selects(&json!({"spec": {}}), labels));
    }

    #[test]
    fn unready_pods_go_free_only_while_the_budget_is_met_or_always_allowed() {
        let of = |current: i64, desired: i64, policy: &str| {
            Budget::of(json!({
                "metadata": {"name": "b"},
                "spec": {"unhealthyPodEvictionPolicy": policy},
                "status": {"currentHealthy": current, "desiredHealthy": desired},
            }))
        };
        assert!(of(2, 2, "IfHealthyBudget").lets_unhealthy_pods_go());
        assert!(!of(1, 2, "IfHealthyBudget").lets_unhealthy_pods_go());
        assert!(
            !of(0, 0, "").lets_unhealthy_pods_go(),
            "desiredHealthy 0 is not a budget"
        );
        assert!(of(0, 2, "AlwaysAllow").lets_unhealthy_pods_go());
    }

    #[test]
    fn a_budget_refuses_while_unprocessed_negative_or_spent() {
        let with = |generation: i64, observed: i64, allowed: i64| {
            json!({
                "metadata": {"generation": generation},
                "status": {"observedGeneration": observed, "disruptionsAllowed": allowed,
                           "desiredHealthy": 2, "currentHealthy": 2},
            })
        };
        assert!(check_budget_allows(&with(1, 1, 1), "b").is_ok());
        let behind = check_budget_allows(&with(2, 1, 1), "b").unwrap_err();
        assert_eq!((behind.code, behind.reason), (429, "TooManyRequests"));
        assert_eq!(behind.details.as_ref().unwrap()["retryAfterSeconds"], 10);
        assert_eq!(
            check_budget_allows(&with(1, 1, -1), "b").unwrap_err().code,
            403
        );
        let spent = check_budget_allows(&with(1, 1, 0), "b").unwrap_err();
        assert_eq!(spent.code, 429);
        assert_eq!(
            spent.details.as_ref().unwrap()["causes"][0]["message"],
            "The disruption budget b needs 2 healthy pods and has 2 currently"
        );
    }
}
