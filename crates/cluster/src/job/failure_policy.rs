//! A Job's `podFailurePolicy`: which rule a failed pod matches, and what that does to
//! the Job (fail it or the pod's index at once, ignore the failure, or count it), as
//! kube's `matchPodFailurePolicy` decides.

use k8s_openapi::api::batch::v1::{
    JobSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern,
};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// What a failed pod does to its Job under the policy.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Verdict {
    /// No rule matched, or a `Count` rule did: the failure counts toward `backoffLimit`.
    Count,
    /// An `Ignore` rule matched: the failure does not count.
    Ignore,
    /// A `FailJob` rule matched: the Job fails with this message.
    FailJob(String),
    /// A `FailIndex` rule matched: the pod's index fails at once (the failure counts).
    FailIndex,
}

impl Verdict {
    /// Whether the failure counts toward `backoffLimit`.
    pub(super) fn counts(&self) -> bool {
        *self != Verdict::Ignore
    }
}

/// The verdict of `spec`'s policy on the failed `pod` (`Count` without a policy).
pub(super) fn judge(spec: &JobSpec, pod: &Pod) -> Verdict {
    match &spec.pod_failure_policy {
        Some(policy) => judge_by(policy, pod),
        None => Verdict::Count,
    }
}

/// The first rule that matches decides (a `FailIndex` rule is valid only with
/// `backoffLimitPerIndex`).
fn judge_by(policy: &PodFailurePolicy, pod: &Pod) -> Verdict {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = if let Some(requirement) = &rule.on_exit_codes {
            matching_exit(pod, requirement).map(|(container, code)| {
                format!(
                    "Container {container} for pod {namespace}/{name} failed with exit code \
                     {code} matching {} rule at index {index}",
                    rule.action
                )
            })
        } else if let Some(patterns) = &rule.on_pod_conditions {
            matching_condition(pod, patterns).map(|condition| {
                format!(
                    "Pod {namespace}/{name} has condition {condition} matching {} rule at index \
                     {index}",
                    rule.action
                )
            })
        } else {
            None
        };
        let Some(message) = matched else {
            continue;
        };
        match rule.action.as_str() {
            "Ignore" => return Verdict::Ignore,
            "Count" => return Verdict::Count,
            "FailIndex" => return Verdict::FailIndex,
            "FailJob" => return Verdict::FailJob(message),
            _ => {}
        }
    }
    Verdict::Count
}

/// The first terminated container (regular ones before init containers) whose non-zero
/// exit code the requirement matches: its name and code.
fn matching_exit(
    pod: &Pod,
    requirement: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<(String, i32)> {
    let status = pod.status.as_ref()?;
    let lists = [&status.container_statuses, &status.init_container_statuses];
    lists
        .into_iter()
        .flatten()
        .flatten()
        .find_map(|container| exit_matches(container, requirement))
}

fn exit_matches(
    container: &ContainerStatus,
    requirement: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<(String, i32)> {
    let code = container.state.as_ref()?.terminated.as_ref()?.exit_code;
    let named = requirement
        .container_name
        .as_ref()
        .is_none_or(|name| *name == container.name);
    let listed = requirement.values.contains(&code);
    let operator_matches = match requirement.operator.as_str() {
        "In" => listed,
        "NotIn" => !listed,
        _ => false,
    };
    (named && code != 0 && operator_matches).then(|| (container.name.clone(), code))
}

/// The type of the pod's first condition that one of `patterns` matches.
fn matching_condition(
    pod: &Pod,
    patterns: &[PodFailurePolicyOnPodConditionsPattern],
) -> Option<String> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| {
            patterns
                .iter()
                .any(|p| p.type_ == c.type_ && p.status == c.status)
        })
        .map(|c| c.type_.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failed_pod(exits: &[(&str, i32)], conditions: serde_json::Value) -> Pod {
        let statuses: Vec<_> = exits
            .iter()
            .map(|(name, code)| {
                json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": code}}})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "job-x1", "namespace": "ns"},
            "status": {"phase": "Failed", "containerStatuses": statuses, "conditions": conditions},
        }))
        .expect("pod")
    }

    fn policy(rules: serde_json::Value) -> JobSpec {
        serde_json::from_value(json!({
            "template": {},
            "podFailurePolicy": {"rules": rules},
        }))
        .expect("spec")
    }

    #[test]
    fn the_first_matching_rule_decides_with_kubes_message() {
        let spec = policy(json!([
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [42]}},
        ]));
        let exit_42 = failed_pod(&[("sidecar", 1), ("main", 42)], json!([]));
        assert_eq!(
            judge(&spec, &exit_42),
            Verdict::FailJob(
                "Container main for pod ns/job-x1 failed with exit code 42 matching FailJob \
                 rule at index 1"
                    .into()
            )
        );
        let evicted = failed_pod(
            &[("main", 42)],
            json!([{"type": "DisruptionTarget", "status": "True"}]),
        );
        assert_eq!(judge(&spec, &evicted), Verdict::Ignore);
        assert!(!judge(&spec, &evicted).counts());
        let exit_1 = failed_pod(&[("main", 1)], json!([]));
        assert_eq!(judge(&spec, &exit_1), Verdict::Count);
    }

    #[test]
    fn a_zero_exit_code_and_other_containers_never_match() {
        let spec = policy(json!([
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [1]}},
        ]));
        assert_eq!(
            judge(&spec, &failed_pod(&[("main", 0), ("other", 3)], json!([]))),
            Verdict::Count
        );
        let message =
            "Pod ns/job-x1 has condition DisruptionTarget matching FailJob rule at index 0";
        let on_condition = policy(json!([
            {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]));
        let evicted = failed_pod(&[], json!([{"type": "DisruptionTarget", "status": "True"}]));
        assert_eq!(
            judge(&on_condition, &evicted),
            Verdict::FailJob(message.into())
        );
    }
}
