//! The workload kinds' own spec fields, as kube's apps, batch and policy validation checks
//! them: counts and seconds not negative; a Deployment's, DaemonSet's and StatefulSet's
//! update strategy whole (rolling-update bounds as integers or percentages, not both zero,
//! not over 100%); a StatefulSet's pod management and claim retention policies; a Job's
//! completion mode, the indexed-only limits and (through `job_policies.rs`) its failure
//! and success policies; a PodDisruptionBudget's one bound. An
//! operator that computes a rolling update of `maxSurge: 0, maxUnavailable: 0` is refused
//! here as on a cluster.
//!
//! kube does not check a StatefulSet's pod template beyond its restart policy and
//! deadline (its `ValidatePodTemplateSpecForStatefulSet` leaves the pod spec to pod
//! creation), so neither does steady: such a StatefulSet is stored, and its pods are
//! refused when its controller creates them.

use serde_json::Value;

use super::job_policies;
use super::rbac::label_selector;
use super::{error, go_pointer, invalid, not_supported, required, text};
use crate::schema::{FieldError, FieldErrorReason, Path};

const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";
const NEGATIVE_MSG: &str = "must be greater than or equal to 0";

/// The spec fields of a workload `group`/`plural` object that are its own (its template's
/// pod spec is checked apart).
pub(super) fn spec(group: &str, plural: &str, obj: &Value, errors: &mut Vec<FieldError>) {
    let empty = Value::Null;
    let spec = obj.get("spec").unwrap_or(&empty);
    let at = Path::At("spec");
    match (group, plural) {
        ("apps", "deployments") => deployment(spec, &at, errors),
        ("apps", "replicasets") | ("", "replicationcontrollers") => {
            not_negative(spec, &["replicas", "minReadySeconds"], &at, errors);
            let kind = if plural == "replicasets" {
                "ReplicaSet"
            } else {
                "ReplicationController"
            };
            template_without_deadline(spec, kind, &at, errors);
        }
        ("apps", "statefulsets") => stateful_set(spec, &at, errors),
        ("apps", "daemonsets") => daemon_set(spec, &at, errors),
        ("batch", "jobs") => job(spec, &at, errors),
        ("batch", "cronjobs") => {
            if let Some(job_spec) = spec.pointer("/jobTemplate/spec") {
                let template_at = Path::Field(&at, "jobTemplate");
                job(job_spec, &Path::Field(&template_at, "spec"), errors);
            }
        }
        ("policy", "poddisruptionbudgets") => disruption_budget(spec, &at, errors),
        _ => {}
    }
}

fn deployment(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    not_negative(spec, &["replicas"], at, errors);
    template_without_deadline(spec, "ReplicaSet", at, errors);
    let strategy_at = Path::Field(at, "strategy");
    let strategy = spec.get("strategy").unwrap_or(&Value::Null);
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    // the strategy is defaulted: absent only where defaults did not run
    let Some(kind) = strategy.get("type").and_then(Value::as_str) else {
        return deployment_counts(spec, at, errors);
    };
    match kind {
        "Recreate" if rolling.is_some() => errors.push(error(
            &Path::Field(&strategy_at, "rollingUpdate"),
            FieldErrorReason::Forbidden,
            "Forbidden: may not be specified when strategy `type` is 'Recreate'".into(),
        )),
        "Recreate" => {}
        "RollingUpdate" => {
            if let Some(rolling) = rolling {
                deployment_rolling_update(rolling, &Path::Field(&strategy_at, "rollingUpdate"), errors);
            }
        }
        other => errors.push(error(
            &strategy_at,
            FieldErrorReason::NotSupported,
            format!(
                "Unsupported value: apps.DeploymentStrategy{{Type:{other:?}, RollingUpdate:{}}}: supported values: \"Recreate\", \"RollingUpdate\"",
                go_pointer("*apps.RollingUpdateDeployment", rolling)
            ),
        )),
    }
    deployment_counts(spec, at, errors);
}

/// A Deployment's history limit and seconds: not negative, and its progress deadline
/// longer than its minimum ready time.
fn deployment_counts(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    not_negative(
        spec,
        &["minReadySeconds", "revisionHistoryLimit"],
        at,
        errors,
    );
    if let Some(deadline) = spec.get("progressDeadlineSeconds").and_then(Value::as_i64) {
        not_negative(spec, &["progressDeadlineSeconds"], at, errors);
        let ready = spec
            .get("minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if deadline <= ready {
            errors.push(invalid(
                &Path::Field(at, "progressDeadlineSeconds"),
                &deadline.into(),
                "must be greater than minReadySeconds",
            ));
        }
    }
}

/// kube's `ValidateRollingUpdateDeployment`.
fn deployment_rolling_update(rolling: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let unavailable = rolling.get("maxUnavailable").unwrap_or(&Value::Null);
    let surge = rolling.get("maxSurge").unwrap_or(&Value::Null);
    let unavailable_at = Path::Field(at, "maxUnavailable");
    positive_int_or_percent(unavailable, &unavailable_at, errors);
    positive_int_or_percent(surge, &Path::Field(at, "maxSurge"), errors);
    if int_or_percent(unavailable) == 0 && int_or_percent(surge) == 0 {
        errors.push(go_int_or_string_invalid(
            &unavailable_at,
            unavailable,
            "may not be 0 when `maxSurge` is 0",
        ));
    }
    not_over_100_percent(unavailable, &unavailable_at, errors);
}

fn stateful_set(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let policy_at = Path::Field(at, "podManagementPolicy");
    // both policies are defaulted: absent only where defaults did not run
    match spec
        .get("podManagementPolicy")
        .and_then(Value::as_str)
        .unwrap_or("OrderedReady")
    {
        "" => errors.push(required(&policy_at)),
        "OrderedReady" | "Parallel" => {}
        other => errors.push(invalid(
            &policy_at,
            &Value::from(other),
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let strategy_at = Path::Field(at, "updateStrategy");
    let strategy = spec.get("updateStrategy").unwrap_or(&Value::Null);
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    let kind = strategy
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("RollingUpdate");
    match kind {
        "" => errors.push(required(&strategy_at)),
        "OnDelete" if rolling.is_some() => {
            let shown = go_stateful_rolling_update(rolling.unwrap_or(&Value::Null));
            errors.push(error(
                &Path::Field(&strategy_at, "rollingUpdate"),
                FieldErrorReason::Invalid,
                format!("Invalid value: {shown}: only allowed for updateStrategy 'RollingUpdate'"),
            ));
        }
        "OnDelete" => {}
        "RollingUpdate" => {
            if let Some(rolling) = rolling {
                stateful_rolling_update(rolling, &Path::Field(&strategy_at, "rollingUpdate"), errors);
            }
        }
        other => errors.push(error(
            &strategy_at,
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: apps.StatefulSetUpdateStrategy{{Type:{other:?}, RollingUpdate:{}}}: must be 'RollingUpdate' or 'OnDelete'",
                go_pointer("*apps.RollingUpdateStatefulSetStrategy", rolling)
            ),
        )),
    }
    if let Some(retention) = spec
        .get("persistentVolumeClaimRetentionPolicy")
        .filter(|r| r.is_object())
    {
        let retention_at = Path::Field(at, "persistentVolumeClaimRetentionPolicy");
        for field in ["whenDeleted", "whenScaled"] {
            let value = text(retention, field);
            if !matches!(value, "Retain" | "Delete") {
                errors.push(not_supported(
                    &Path::Field(&retention_at, field),
                    &Value::from(value),
                    &["Retain", "Delete"],
                ));
            }
        }
    }
    not_negative(spec, &["replicas", "minReadySeconds"], at, errors);
    if let Some(start) = spec.pointer("/ordinals/start").and_then(Value::as_i64)
        && start < 0
    {
        errors.push(invalid(
            &Path::Field(at, "ordinals.start"),
            &start.into(),
            NEGATIVE_MSG,
        ));
    }
    if let Some(selector) = spec.get("selector").filter(|s| !s.is_null()) {
        label_selector(selector, &Path::Field(at, "selector"), errors);
    }
    // kube checks a set's template only for what its pods must be
    let policy = spec.pointer("/template/spec/restartPolicy");
    if let Some(policy) = policy.filter(|p| p.as_str() != Some("Always")) {
        errors.push(not_supported(
            &Path::At("spec.template.spec.restartPolicy"),
            policy,
            &["Always"],
        ));
    }
    template_without_deadline(spec, "StatefulSet", at, errors);
}

/// kube's `validateRollingUpdateStatefulSet`.
fn stateful_rolling_update(rolling: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    not_negative(rolling, &["partition"], at, errors);
    if let Some(unavailable) = rolling.get("maxUnavailable").filter(|u| !u.is_null()) {
        let unavailable_at = Path::Field(at, "maxUnavailable");
        positive_int_or_percent(unavailable, &unavailable_at, errors);
        if int_or_percent(unavailable) == 0 {
            errors.push(go_int_or_string_invalid(
                &unavailable_at,
                unavailable,
                "cannot be 0",
            ));
        }
        not_over_100_percent(unavailable, &unavailable_at, errors);
    }
}

fn daemon_set(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    template_without_deadline(spec, "DaemonSet", at, errors);
    not_negative(spec, &["minReadySeconds", "templateGeneration"], at, errors);
    let strategy_at = Path::Field(at, "updateStrategy");
    let strategy = spec.get("updateStrategy").unwrap_or(&Value::Null);
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    let kind = strategy.get("type").and_then(Value::as_str);
    match (kind.unwrap_or("OnDelete"), rolling) {
        ("OnDelete", _) => {}
        ("RollingUpdate", None) => {
            errors.push(required(&Path::Field(&strategy_at, "rollingUpdate")));
        }
        ("RollingUpdate", Some(rolling)) => {
            daemon_rolling_update(rolling, &Path::Field(&strategy_at, "rollingUpdate"), errors);
        }
        (other, rolling) => errors.push(error(
            &strategy_at,
            FieldErrorReason::NotSupported,
            format!(
                "Unsupported value: apps.DaemonSetUpdateStrategy{{Type:{other:?}, RollingUpdate:{}}}: supported values: \"RollingUpdate\", \"OnDelete\"",
                go_pointer("*apps.RollingUpdateDaemonSet", rolling)
            ),
        )),
    }
    not_negative(spec, &["revisionHistoryLimit"], at, errors);
}

/// kube's `ValidateRollingUpdateDaemonSet`: exactly one of the bounds is not zero.
fn daemon_rolling_update(rolling: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let unavailable = rolling.get("maxUnavailable").unwrap_or(&Value::Null);
    let surge = rolling.get("maxSurge").unwrap_or(&Value::Null);
    let unavailable_at = Path::Field(at, "maxUnavailable");
    let surge_at = Path::Field(at, "maxSurge");
    positive_int_or_percent(unavailable, &unavailable_at, errors);
    positive_int_or_percent(surge, &surge_at, errors);
    not_over_100_percent(unavailable, &unavailable_at, errors);
    not_over_100_percent(surge, &surge_at, errors);
    match (int_or_percent(unavailable) != 0, int_or_percent(surge) != 0) {
        (true, true) => errors.push(go_int_or_string_invalid(
            &surge_at,
            surge,
            "may not be set when maxUnavailable is non-zero",
        )),
        (false, false) => errors.push(error(
            &unavailable_at,
            FieldErrorReason::Required,
            "Required value: cannot be 0 when maxSurge is 0".into(),
        )),
        _ => {}
    }
}

/// kube's `validateJobSpec` of the Job spec at `at` (a Job's, or a CronJob's job
/// template's); its failure and success policies are `job_policies.rs`'s.
fn job(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    not_negative(
        spec,
        &[
            "parallelism",
            "completions",
            "activeDeadlineSeconds",
            "backoffLimit",
            "ttlSecondsAfterFinished",
            "backoffLimitPerIndex",
            "maxFailedIndexes",
        ],
        at,
        errors,
    );
    let number = |field: &str| spec.get(field).and_then(Value::as_i64);
    let (completions, parallelism) = (number("completions"), number("parallelism"));
    let (per_index, max_failed) = (number("backoffLimitPerIndex"), number("maxFailedIndexes"));
    if max_failed.is_some() && per_index.is_none() {
        errors.push(error(
            &Path::Field(at, "backoffLimitPerIndex"),
            FieldErrorReason::Required,
            "Required value: when maxFailedIndexes is specified".into(),
        ));
    }
    let mode = spec.get("completionMode").and_then(Value::as_str);
    if let Some(mode) = mode.filter(|m| !matches!(*m, "NonIndexed" | "Indexed")) {
        errors.push(not_supported(
            &Path::Field(at, "completionMode"),
            &Value::from(mode),
            &["NonIndexed", "Indexed"],
        ));
    }
    if mode == Some("Indexed") {
        if completions.is_none() {
            errors.push(error(
                &Path::Field(at, "completions"),
                FieldErrorReason::Required,
                "Required value: when completion mode is Indexed".into(),
            ));
        }
        if let Some(parallelism) = parallelism.filter(|p| *p > 100_000) {
            errors.push(invalid(
                &Path::Field(at, "parallelism"),
                &parallelism.into(),
                "must be less than or equal to 100000 when completion mode is Indexed",
            ));
        }
        if let (Some(completions), Some(failed)) = (completions, max_failed)
            && failed > completions
        {
            errors.push(invalid(
                &Path::Field(at, "maxFailedIndexes"),
                &failed.into(),
                "must be less than or equal to completions",
            ));
        }
    } else {
        for (field, value) in [
            ("backoffLimitPerIndex", per_index),
            ("maxFailedIndexes", max_failed),
        ] {
            if let Some(value) = value {
                errors.push(invalid(
                    &Path::Field(at, field),
                    &value.into(),
                    "requires indexed completion mode",
                ));
            }
        }
    }
    job_policies::pod_failure_policy(spec, at, errors);
    job_policies::success_policy(spec, at, errors);
    pod_replacement_policy(spec, at, errors);
    // kube checks this after the template, which steady checks before the Job's fields
    job_policies::restart_policy_under_failure_policy(spec, at, errors);
}

/// kube's `validatePodReplacementPolicy`: only `Failed` under a pod failure policy.
fn pod_replacement_policy(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    if let Some(policy) = spec.get("podReplacementPolicy").and_then(Value::as_str) {
        let with_failure_policy = spec.get("podFailurePolicy").is_some_and(|p| !p.is_null());
        let allowed: &[&str] = if with_failure_policy {
            &["Failed"]
        } else {
            &["Failed", "TerminatingOrFailed"]
        };
        if !allowed.contains(&policy) {
            errors.push(not_supported(
                &Path::Field(at, "podReplacementPolicy"),
                &Value::from(policy),
                allowed,
            ));
        }
    }
}

/// kube's `ValidatePodDisruptionBudgetSpec`: one bound, each an integer or percentage of
/// at most 100%, a valid selector, a known eviction policy for unhealthy pods.
fn disruption_budget(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let min = spec.get("minAvailable").filter(|m| !m.is_null());
    let max = spec.get("maxUnavailable").filter(|m| !m.is_null());
    if min.is_some() && max.is_some() {
        let selector = spec.get("selector").filter(|s| !s.is_null());
        let policy = spec
            .get("unhealthyPodEvictionPolicy")
            .filter(|p| !p.is_null());
        let shown = format!(
            "policy.PodDisruptionBudgetSpec{{MinAvailable:{}, Selector:{}, MaxUnavailable:{}, UnhealthyPodEvictionPolicy:{}}}",
            go_pointer("*intstr.IntOrString", min),
            go_pointer("*v1.LabelSelector", selector),
            go_pointer("*intstr.IntOrString", max),
            go_pointer("*policy.UnhealthyPodEvictionPolicyType", policy),
        );
        errors.push(error(
            at,
            FieldErrorReason::Invalid,
            format!("Invalid value: {shown}: minAvailable and maxUnavailable cannot be both set"),
        ));
    }
    for (field, bound) in [("minAvailable", min), ("maxUnavailable", max)] {
        if let Some(bound) = bound {
            let bound_at = Path::Field(at, field);
            positive_int_or_percent(bound, &bound_at, errors);
            not_over_100_percent(bound, &bound_at, errors);
        }
    }
    if let Some(selector) = spec.get("selector").filter(|s| !s.is_null()) {
        label_selector(selector, &Path::Field(at, "selector"), errors);
    }
    if let Some(policy) = spec
        .get("unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
        && !matches!(policy, "AlwaysAllow" | "IfHealthyBudget")
    {
        errors.push(not_supported(
            &Path::Field(at, "unhealthyPodEvictionPolicy"),
            &Value::from(policy),
            &["AlwaysAllow", "IfHealthyBudget"],
        ));
    }
}

/// A template's pods may not have a deadline: `kind`'s controller keeps them running.
fn template_without_deadline(spec: &Value, kind: &str, at: &Path, errors: &mut Vec<FieldError>) {
    if spec
        .pointer("/template/spec/activeDeadlineSeconds")
        .is_some_and(|d| !d.is_null())
    {
        let template = Path::Field(at, "template");
        errors.push(error(
            &Path::Field(&Path::Field(&template, "spec"), "activeDeadlineSeconds"),
            FieldErrorReason::Forbidden,
            format!("Forbidden: activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
}

/// Each of `fields` of `holder`, when set, is not negative.
fn not_negative(holder: &Value, fields: &[&str], at: &Path, errors: &mut Vec<FieldError>) {
    for field in fields {
        if let Some(n) = holder
            .get(*field)
            .filter(|n| n.as_i64().is_some_and(|n| n < 0))
        {
            errors.push(invalid(&Path::Field(at, field), n, NEGATIVE_MSG));
        }
    }
}

/// kube's `ValidatePositiveIntOrPercent`.
fn positive_int_or_percent(value: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    match value {
        Value::String(text) if percent(text).is_none() => {
            errors.push(go_int_or_string_invalid(at, value, PERCENT_MSG));
        }
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => {
            errors.push(invalid(at, value, NEGATIVE_MSG));
        }
        _ => {}
    }
}

/// kube's `IsNotMoreThan100Percent`.
fn not_over_100_percent(value: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    if value.as_str().and_then(percent).is_some_and(|p| p > 100) {
        errors.push(go_int_or_string_invalid(
            at,
            value,
            "must not be greater than 100%",
        ));
    }
}

/// The number an int-or-percent holds (kube's `getIntOrPercentValue`: a malformed
/// percentage counts as 0).
fn int_or_percent(value: &Value) -> i64 {
    match value {
        Value::String(text) => percent(text).unwrap_or(0),
        other => other.as_i64().unwrap_or(0),
    }
}

/// `N%` as N, when it is one.
fn percent(text: &str) -> Option<i64> {
    let digits = text.strip_suffix('%')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `field.Invalid` of an `intstr.IntOrString`, which kube prints as Go's `%#v`.
fn go_int_or_string_invalid(at: &Path, value: &Value, why: &str) -> FieldError {
    let shown = match value {
        Value::String(text) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{text:?}}}"),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    };
    error(
        at,
        FieldErrorReason::Invalid,
        format!("Invalid value: {shown}: {why}"),
    )
}

/// A StatefulSet's rolling update as Go's `%#v` prints the pointer kube shows.
fn go_stateful_rolling_update(rolling: &Value) -> String {
    let partition = rolling.get("partition").filter(|p| !p.is_null());
    let unavailable = rolling.get("maxUnavailable").filter(|u| !u.is_null());
    format!(
        "&apps.RollingUpdateStatefulSetStrategy{{Partition:{}, MaxUnavailable:{}}}",
        partition.and_then(Value::as_i64).unwrap_or(0),
        go_pointer("*intstr.IntOrString", unavailable)
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::super::validate;
    use serde_json::{Value, json};

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "app:1"}]}})
    }

    fn errors(group: &str, plural: &str, mut spec: Value) -> Vec<String> {
        if spec.get("template").is_none() && plural != "poddisruptionbudgets" {
            spec["template"] = template();
        }
        messages(&validate(group, plural, &json!({"spec": spec})))
    }

    #[test]
    fn defaulted_workloads_pass() {
        let rolling = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}});
        assert_eq!(
            errors(
                "apps",
                "deployments",
                json!({"replicas": 2, "strategy": rolling,
                "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600})
            ),
            Vec::<String>::new()
        );
        let set = json!({"podManagementPolicy": "Parallel", "updateStrategy": {"type": "RollingUpdate",
            "rollingUpdate": {"partition": 0, "maxUnavailable": 1}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"}});
        assert_eq!(errors("apps", "statefulsets", set), Vec::<String>::new());
        let daemons = json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}});
        assert_eq!(errors("apps", "daemonsets", daemons), Vec::<String>::new());
        let job = json!({"completions": 3, "parallelism": 2, "completionMode": "Indexed",
            "backoffLimitPerIndex": 1, "maxFailedIndexes": 2, "podReplacementPolicy": "Failed"});
        assert_eq!(errors("batch", "jobs", job), Vec::<String>::new());
        assert_eq!(
            errors(
                "policy",
                "poddisruptionbudgets",
                json!({"maxUnavailable": "50%"})
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn workload_specs_kube_refuses_are_refused_with_its_messages() {
        let deployment = json!({"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}},
            "minReadySeconds": 30, "progressDeadlineSeconds": 30});
        assert_eq!(
            errors("apps", "deployments", deployment),
            [
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
                "spec.progressDeadlineSeconds: Invalid value: 30: must be greater than minReadySeconds",
            ]
        );
        let set = json!({"podManagementPolicy": "Sequential", "updateStrategy": {"type": "OnDelete",
            "rollingUpdate": {"partition": 1}}, "ordinals": {"start": -1},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Keep", "whenScaled": "Retain"},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c"}], "activeDeadlineSeconds": 10}}});
        assert_eq!(
            errors("apps", "statefulsets", set),
            [
                "spec.podManagementPolicy: Invalid value: \"Sequential\": must be 'OrderedReady' or 'Parallel'",
                "spec.updateStrategy.rollingUpdate: Invalid value: &apps.RollingUpdateStatefulSetStrategy{Partition:1, MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'",
                "spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\"",
                "spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported",
            ]
        );
        let daemons = json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "150%", "maxSurge": 1}}});
        assert_eq!(
            errors("apps", "daemonsets", daemons),
            [
                "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%",
                "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: may not be set when maxUnavailable is non-zero",
            ]
        );
        let job = json!({"completionMode": "Indexed", "maxFailedIndexes": 1, "backoffLimit": -1,
            "podReplacementPolicy": "Never", "template": {"spec": {"containers": [{"name": "c", "image": "app:1"}], "restartPolicy": "Never"}}});
        assert_eq!(
            errors("batch", "jobs", job),
            [
                "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
                "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
                "spec.completions: Required value: when completion mode is Indexed",
                "spec.podReplacementPolicy: Unsupported value: \"Never\": supported values: \"Failed\", \"TerminatingOrFailed\"",
            ]
        );
        assert_eq!(
            errors(
                "policy",
                "poddisruptionbudgets",
                json!({"minAvailable": 1, "maxUnavailable": "five"})
            ),
            [
                "spec: Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0xc000000000), Selector:(*v1.LabelSelector)(nil), MaxUnavailable:(*intstr.IntOrString)(0xc000000000), UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(nil)}: minAvailable and maxUnavailable cannot be both set",
                "spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"five\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            ]
        );
    }
}
