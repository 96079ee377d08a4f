//! A Job's pod failure and success policies, as kube's batch validation checks them
//! (`validatePodFailurePolicy`, `validateSuccessPolicy` and the checks `validateJobSpec`
//! ties to them): rules few enough, each with a known action and one kind of requirement;
//! exit codes given, unique, ordered, not 0 under `In`, of a container the template has; pod
//! condition patterns with a qualified type and a known status; `FailIndex` only with a
//! per-index backoff limit, and the pods of a Job with a failure policy never restarted in
//! place. A success policy needs indexed completion, and each of its rules names indexes
//! within `completions` (kube's interval syntax, `1,3-5`) or a count it can reach.
//!
//! A Job's controller acts on these policies; one kube refuses must not reach it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{error, go_pointer, invalid, list, not_supported, present, qualified_name, text};
use crate::schema::{FieldError, FieldErrorReason, Path};

const MAX_FAILURE_RULES: usize = 20;
const MAX_EXIT_CODES: usize = 255;
const MAX_CONDITION_PATTERNS: usize = 20;
const MAX_SUCCESS_RULES: usize = 20;
const MAX_SUCCEEDED_INDEXES_BYTES: usize = 64 * 1024;

/// kube lists each set of supported values sorted (its `sets.List`).
const ACTIONS: &[&str] = &["Count", "FailIndex", "FailJob", "Ignore"];
const OPERATORS: &[&str] = &["In", "NotIn"];
const CONDITION_STATUSES: &[&str] = &["False", "True", "Unknown"];

/// kube's `validatePodFailurePolicy` of the Job spec at `at`.
pub(super) fn pod_failure_policy(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let Some(policy) = present(spec, "podFailurePolicy") else {
        return;
    };
    let policy_at = Path::Field(at, "podFailurePolicy");
    let rules_at = Path::Field(&policy_at, "rules");
    let rules = list(policy, "rules");
    if rules.len() > MAX_FAILURE_RULES {
        errors.push(too_many(&rules_at, rules.len(), MAX_FAILURE_RULES));
    }
    let job = FailureContext {
        containers: template_container_names(spec),
        per_index_backoff: present(spec, "backoffLimitPerIndex").is_some(),
    };
    for (i, rule) in rules.iter().enumerate() {
        failure_rule(rule, &Path::Item(&rules_at, i), &job, errors);
    }
}

/// kube's check, after the template's, that a Job with a pod failure policy lets its pods
/// fail rather than restart them in place: the policy could not see those failures.
/// `Always` and unknown policies are refused for every Job while defaulting.
pub(super) fn restart_policy_under_failure_policy(
    spec: &Value,
    at: &Path,
    errors: &mut Vec<FieldError>,
) {
    if present(spec, "podFailurePolicy").is_none() {
        return;
    }
    let policy = spec.pointer("/template/spec/restartPolicy");
    if let Some(policy) = policy.filter(|p| p.as_str() == Some("OnFailure")) {
        let template_at = Path::Field(at, "template");
        let pod_at = Path::Field(&template_at, "spec");
        errors.push(invalid(
            &Path::Field(&pod_at, "restartPolicy"),
            policy,
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
}

/// kube's success policy checks of the Job spec at `at`: indexed completion, then
/// `validateSuccessPolicy`.
pub(super) fn success_policy(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let Some(policy) = present(spec, "successPolicy") else {
        return;
    };
    let policy_at = Path::Field(at, "successPolicy");
    if spec.get("completionMode").and_then(Value::as_str) != Some("Indexed") {
        errors.push(error(
            &policy_at,
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: {}: requires indexed completion mode",
                go_success_policy(policy)
            ),
        ));
        return;
    }
    let rules_at = Path::Field(&policy_at, "rules");
    let rules = list(policy, "rules");
    if rules.is_empty() {
        errors.push(error(
            &rules_at,
            FieldErrorReason::Required,
            "Required value: at least one rules must be specified when the successPolicy is specified"
                .into(),
        ));
    }
    if rules.len() > MAX_SUCCESS_RULES {
        errors.push(too_many(&rules_at, rules.len(), MAX_SUCCESS_RULES));
    }
    let completions = spec.get("completions").and_then(Value::as_i64);
    for (i, rule) in rules.iter().enumerate() {
        success_rule(rule, &Path::Item(&rules_at, i), completions, errors);
    }
}

/// What a failure policy's rules are checked against.
struct FailureContext {
    /// The template's container and init container names.
    containers: BTreeSet<String>,
    per_index_backoff: bool,
}

fn template_container_names(spec: &Value) -> BTreeSet<String> {
    let pod = spec.pointer("/template/spec").unwrap_or(&Value::Null);
    ["containers", "initContainers"]
        .iter()
        .flat_map(|kind| list(pod, kind))
        .map(|container| text(container, "name").to_owned())
        .collect()
}

/// kube's `validatePodFailurePolicyRule`.
fn failure_rule(rule: &Value, at: &Path, job: &FailureContext, errors: &mut Vec<FieldError>) {
    let action_at = Path::Field(at, "action");
    match text(rule, "action") {
        "" => errors.push(required_one_of(&action_at, ACTIONS)),
        "FailIndex" if !job.per_index_backoff => errors.push(invalid(
            &action_at,
            &Value::from("FailIndex"),
            "requires the backoffLimitPerIndex to be set",
        )),
        action if !ACTIONS.contains(&action) => {
            errors.push(not_supported(&action_at, &Value::from(action), ACTIONS));
        }
        _ => {}
    }
    let on_exit_codes = present(rule, "onExitCodes");
    let on_conditions = list(rule, "onPodConditions");
    if let Some(requirement) = on_exit_codes {
        exit_codes(
            requirement,
            &Path::Field(at, "onExitCodes"),
            &job.containers,
            errors,
        );
    }
    if !on_conditions.is_empty() {
        condition_patterns(on_conditions, &Path::Field(at, "onPodConditions"), errors);
    }
    match (on_exit_codes.is_some(), on_conditions.is_empty()) {
        (true, false) => errors.push(invalid_without_value(
            at,
            "specifying both OnExitCodes and OnPodConditions is not supported",
        )),
        (false, true) => errors.push(invalid_without_value(
            at,
            "specifying one of OnExitCodes and OnPodConditions is required",
        )),
        _ => {}
    }
}

/// kube's `validatePodFailurePolicyRuleOnExitCodes`.
fn exit_codes(
    requirement: &Value,
    at: &Path,
    containers: &BTreeSet<String>,
    errors: &mut Vec<FieldError>,
) {
    let operator_at = Path::Field(at, "operator");
    let operator = text(requirement, "operator");
    if operator.is_empty() {
        errors.push(required_one_of(&operator_at, OPERATORS));
    } else if !OPERATORS.contains(&operator) {
        errors.push(not_supported(
            &operator_at,
            &Value::from(operator),
            OPERATORS,
        ));
    }
    if let Some(name) = present(requirement, "containerName").and_then(Value::as_str)
        && !containers.contains(name)
    {
        errors.push(invalid(
            &Path::Field(at, "containerName"),
            &Value::from(name),
            "must be one of the container or initContainer names in the pod template",
        ));
    }
    exit_code_values(
        requirement,
        operator == "In",
        &Path::Field(at, "values"),
        errors,
    );
}

/// The exit codes of one requirement: some, not too many, each once, in order, and not 0
/// where 0 would match a container that succeeded.
fn exit_code_values(
    requirement: &Value,
    operator_in: bool,
    at: &Path,
    errors: &mut Vec<FieldError>,
) {
    let listed = present(requirement, "values").and_then(Value::as_array);
    // Go reads a null item of an int32 list as 0
    let codes: Vec<i64> = listed
        .into_iter()
        .flatten()
        .map(|code| code.as_i64().unwrap_or(0))
        .collect();
    if codes.is_empty() {
        errors.push(go_int32s_invalid(
            at,
            listed.map(|_| codes.as_slice()),
            "at least one value is required",
        ));
    } else if codes.len() > MAX_EXIT_CODES {
        errors.push(too_many(at, codes.len(), MAX_EXIT_CODES));
    }
    let mut seen = BTreeSet::new();
    for (j, &code) in codes.iter().enumerate() {
        let code_at = Path::Item(at, j);
        if operator_in && code == 0 {
            errors.push(invalid(
                &code_at,
                &code.into(),
                "must not be 0 for the In operator",
            ));
        }
        if !seen.insert(code) {
            errors.push(error(
                &code_at,
                FieldErrorReason::Duplicate,
                format!("Duplicate value: {code}"),
            ));
        }
    }
    if codes.windows(2).any(|pair| pair[0] > pair[1]) {
        errors.push(go_int32s_invalid(at, Some(&codes), "must be ordered"));
    }
}

/// kube's `validatePodFailurePolicyRuleOnPodConditions`.
fn condition_patterns(patterns: &[Value], at: &Path, errors: &mut Vec<FieldError>) {
    if patterns.len() > MAX_CONDITION_PATTERNS {
        errors.push(too_many(at, patterns.len(), MAX_CONDITION_PATTERNS));
    }
    for (j, pattern) in patterns.iter().enumerate() {
        let pattern_at = Path::Item(at, j);
        qualified_name(
            text(pattern, "type"),
            &Path::Field(&pattern_at, "type"),
            errors,
        );
        let status_at = Path::Field(&pattern_at, "status");
        match text(pattern, "status") {
            "" => errors.push(required_one_of(&status_at, CONDITION_STATUSES)),
            status if !CONDITION_STATUSES.contains(&status) => errors.push(not_supported(
                &status_at,
                &Value::from(status),
                CONDITION_STATUSES,
            )),
            _ => {}
        }
    }
}

/// kube's `validateSuccessPolicyRule`. kube reads `completions` here without looking: an
/// Indexed Job without it (already refused as Required) makes kube-apiserver panic, so
/// steady reports that one error and skips what needs the count.
fn success_rule(rule: &Value, at: &Path, completions: Option<i64>, errors: &mut Vec<FieldError>) {
    let indexes = present(rule, "succeededIndexes").and_then(Value::as_str);
    let count = present(rule, "succeededCount").and_then(Value::as_i64);
    if indexes.is_none() && count.is_none() {
        errors.push(error(
            at,
            FieldErrorReason::Required,
            "Required value: at least one of succeededCount or succeededIndexes must be specified"
                .into(),
        ));
    }
    let Some(completions) = completions else {
        return;
    };
    let mut indexed = 0;
    if let Some(indexes) = indexes {
        let indexes_at = Path::Field(at, "succeededIndexes");
        if indexes.len() > MAX_SUCCEEDED_INDEXES_BYTES {
            errors.push(error(
                &indexes_at,
                FieldErrorReason::TooLong,
                format!("Too long: may not be more than {MAX_SUCCEEDED_INDEXES_BYTES} bytes"),
            ));
        }
        match count_indexes(indexes, completions) {
            Ok(total) => indexed = total,
            Err(why) => errors.push(invalid(
                &indexes_at,
                &Value::from(indexes),
                &format!("error parsing succeededIndexes: {why}"),
            )),
        }
    }
    if let Some(count) = count {
        let count_at = Path::Field(at, "succeededCount");
        if count < 0 {
            errors.push(invalid(
                &count_at,
                &count.into(),
                "must be greater than or equal to 0",
            ));
        }
        if count > completions {
            errors.push(invalid(
                &count_at,
                &count.into(),
                &format!(
                    "must be less than or equal to {completions} (the number of specified completions)"
                ),
            ));
        }
        if indexes.is_some() && count > indexed {
            errors.push(invalid(
                &count_at,
                &count.into(),
                &format!(
                    "must be less than or equal to {indexed} (the number of indexes in the specified succeededIndexes field)"
                ),
            ));
        }
    }
}

/// How many indexes `indexes` names (kube's `validateIndexesFormat`): comma-separated
/// intervals, each below `completions` and after the one before; kube's words when not.
fn count_indexes(indexes: &str, completions: i64) -> Result<i64, String> {
    if indexes.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0;
    for interval in indexes.split(',') {
        let (first, end) = index_interval(interval, completions)?;
        if let Some(last) = last.filter(|last| *last >= first) {
            return Err(format!(
                "non-increasing order, previous: {last}, current: {first}"
            ));
        }
        total += end - first + 1;
        last = Some(end);
    }
    Ok(total)
}

/// One interval, `x` or `x-y` (kube's `parseIndexInterval`).
fn index_interval(interval: &str, completions: i64) -> Result<(i64, i64), String> {
    let limits: Vec<&str> = interval.split('-').collect();
    match limits.as_slice() {
        [single] => {
            let index = index_below(single, completions)?;
            Ok((index, index))
        }
        [first, end] => {
            let first = index_below(first, completions)?;
            let end = index_below(end, completions)?;
            if first >= end {
                return Err(format!(
                    "non-increasing order, previous: {first}, current: {end}"
                ));
            }
            Ok((first, end))
        }
        _ => Err(format!(
            "the fragment {interval:?} violates the requirement that an index interval can have at most two parts separated by '-'"
        )),
    }
}

/// An index as Go's `strconv.Atoi` reads it (an optional sign, decimal digits), below
/// `completions`.
fn index_below(text: &str, completions: i64) -> Result<i64, String> {
    let index: i64 = text
        .parse()
        .map_err(|_| format!("cannot convert string to integer for index: {text:?}"))?;
    if index >= completions {
        return Err(format!("too large index: {text:?}"));
    }
    Ok(index)
}

/// `field.Required` listing the valid values as kube formats them (Go's `%q` of a list).
fn required_one_of(at: &Path, supported: &[&str]) -> FieldError {
    let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    error(
        at,
        FieldErrorReason::Required,
        format!("Required value: valid values: [{}]", quoted.join(" ")),
    )
}

/// `field.TooMany`.
fn too_many(at: &Path, actual: usize, max: usize) -> FieldError {
    error(
        at,
        FieldErrorReason::TooMany,
        format!("Too many: {actual}: must have at most {max} items"),
    )
}

/// `field.Invalid` with kube's `field.OmitValueType`: the message names no value.
fn invalid_without_value(at: &Path, why: &str) -> FieldError {
    error(
        at,
        FieldErrorReason::Invalid,
        format!("Invalid value: {why}"),
    )
}

/// `field.Invalid` of an exit code list, which kube prints as Go's `%#v` of `[]int32`
/// (`None`: the list was never given).
fn go_int32s_invalid(at: &Path, codes: Option<&[i64]>, why: &str) -> FieldError {
    let shown = match codes {
        None => "[]int32(nil)".to_owned(),
        Some(codes) => {
            let codes: Vec<String> = codes.iter().map(i64::to_string).collect();
            format!("[]int32{{{}}}", codes.join(", "))
        }
    };
    error(
        at,
        FieldErrorReason::Invalid,
        format!("Invalid value: {shown}: {why}"),
    )
}

/// A success policy as Go's `%#v` prints kube's internal `batch.SuccessPolicy`.
fn go_success_policy(policy: &Value) -> String {
    let rules = match present(policy, "rules").and_then(Value::as_array) {
        None => "[]batch.SuccessPolicyRule(nil)".to_owned(),
        Some(rules) => {
            let shown: Vec<String> = rules
                .iter()
                .map(|rule| {
                    format!(
                        "batch.SuccessPolicyRule{{SucceededIndexes:{}, SucceededCount:{}}}",
                        go_pointer("*string", present(rule, "succeededIndexes")),
                        go_pointer("*int32", present(rule, "succeededCount")),
                    )
                })
                .collect();
            format!("[]batch.SuccessPolicyRule{{{}}}", shown.join(", "))
        }
    };
    format!("batch.SuccessPolicy{{Rules:{rules}}}")
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::super::validate;
    use serde_json::{Value, json};

    /// The errors of a Job (a CronJob's job template with `cron`) whose spec is `spec`
    /// with a valid template that restarts `Never`, and a container and an init container.
    fn job_errors(spec: Value) -> Vec<String> {
        let mut spec = spec;
        if spec.get("template").is_none() {
            spec["template"] = json!({"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "app:1"}],
                "initContainers": [{"name": "setup", "image": "app:1"}]}});
        }
        messages(&validate("batch", "jobs", &json!({"spec": spec})))
    }

    fn failure_policy(rules: Value) -> Value {
        json!({"podFailurePolicy": {"rules": rules}, "podReplacementPolicy": "Failed"})
    }

    fn indexed(completions: i64, success: Value) -> Value {
        json!({"completionMode": "Indexed", "completions": completions, "parallelism": 1,
            "successPolicy": success})
    }

    #[test]
    fn valid_failure_and_success_policies_pass() {
        let mut spec = failure_policy(json!([
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [1, 2, 42]}},
            {"action": "Ignore", "onExitCodes": {"containerName": "setup", "operator": "NotIn", "values": [0]}},
            {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailIndex", "onPodConditions": [{"type": "example.com/Evicted", "status": "Unknown"}]},
        ]));
        spec.as_object_mut().expect("object").extend(
            json!({"completionMode": "Indexed", "completions": 10, "backoffLimitPerIndex": 1,
                "successPolicy": {"rules": [{"succeededIndexes": "0,2-4,+9"},
                    {"succeededIndexes": "1-3", "succeededCount": 3}, {"succeededCount": 10},
                    {"succeededIndexes": ""}]}})
            .as_object()
            .expect("object")
            .clone(),
        );
        assert_eq!(job_errors(spec), Vec::<String>::new());
    }

    #[test]
    fn a_failure_rule_needs_a_known_action_and_one_kind_of_requirement() {
        let rules = json!([
            {"onExitCodes": {"operator": "In", "values": [1]}},
            {"action": "Restart", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]},
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob"},
        ]);
        let at = "spec.podFailurePolicy.rules";
        assert_eq!(
            job_errors(failure_policy(rules)),
            [
                format!(
                    "{at}[0].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]"
                ),
                format!(
                    "{at}[1].action: Unsupported value: \"Restart\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\""
                ),
                format!(
                    "{at}[2].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set"
                ),
                format!(
                    "{at}[2]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported"
                ),
                format!(
                    "{at}[3]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required"
                ),
            ]
        );
    }

    #[test]
    fn exit_codes_are_given_unique_ordered_and_not_0_under_in() {
        let rules = json!([
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 3, 3, 2]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "sidecar", "operator": "Equals", "values": []}},
            {"action": "FailJob", "onExitCodes": {"values": [0]}},
            {"action": "FailJob", "onExitCodes": {"operator": "NotIn"}},
        ]);
        let at = "spec.podFailurePolicy.rules";
        assert_eq!(
            job_errors(failure_policy(rules)),
            [
                format!(
                    "{at}[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator"
                ),
                format!("{at}[0].onExitCodes.values[2]: Duplicate value: 3"),
                format!(
                    "{at}[0].onExitCodes.values: Invalid value: []int32{{0, 3, 3, 2}}: must be ordered"
                ),
                format!(
                    "{at}[1].onExitCodes.operator: Unsupported value: \"Equals\": supported values: \"In\", \"NotIn\""
                ),
                format!(
                    "{at}[1].onExitCodes.containerName: Invalid value: \"sidecar\": must be one of the container or initContainer names in the pod template"
                ),
                format!(
                    "{at}[1].onExitCodes.values: Invalid value: []int32{{}}: at least one value is required"
                ),
                format!(
                    "{at}[2].onExitCodes.operator: Required value: valid values: [\"In\" \"NotIn\"]"
                ),
                format!(
                    "{at}[3].onExitCodes.values: Invalid value: []int32(nil): at least one value is required"
                ),
            ]
        );
    }

    #[test]
    fn rules_exit_codes_and_patterns_are_bounded() {
        let codes: Vec<i64> = (1..=256).collect();
        let patterns: Vec<Value> = (0..21)
            .map(|i| json!({"type": format!("C{i}"), "status": "True"}))
            .collect();
        let mut rules = vec![
            json!({"action": "Count", "onExitCodes": {"operator": "In", "values": codes}}),
            json!({"action": "Count", "onPodConditions": patterns}),
        ];
        let cheap = json!({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]});
        rules.extend(std::iter::repeat_n(cheap, 19));
        assert_eq!(
            job_errors(failure_policy(Value::from(rules))),
            [
                "spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items",
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Too many: 256: must have at most 255 items",
                "spec.podFailurePolicy.rules[1].onPodConditions: Too many: 21: must have at most 20 items",
            ]
        );
    }

    #[test]
    fn condition_patterns_need_a_qualified_type_and_a_known_status() {
        let rules = json!([{"action": "Ignore", "onPodConditions": [
            {"type": "Disruption Target", "status": "True"},
            {"type": "DisruptionTarget", "status": "Maybe"},
            {"type": "DisruptionTarget"},
        ]}]);
        let at = "spec.podFailurePolicy.rules[0].onPodConditions";
        let found = job_errors(failure_policy(rules));
        assert!(
            found[0].starts_with(&format!(
                "{at}[0].type: Invalid value: \"Disruption Target\": name part must consist of"
            )),
            "{found:#?}"
        );
        assert_eq!(
            found[1..],
            [
                format!(
                    "{at}[1].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\""
                ),
                format!(
                    "{at}[2].status: Required value: valid values: [\"False\" \"True\" \"Unknown\"]"
                ),
            ]
        );
    }

    #[test]
    fn a_failure_policy_needs_pods_that_are_never_restarted_in_place() {
        let mut spec = failure_policy(json!([
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}
        ]));
        spec["podReplacementPolicy"] = json!("TerminatingOrFailed");
        spec["template"] = json!({"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "main", "image": "app:1"}]}});
        assert_eq!(
            job_errors(spec),
            [
                "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"",
                "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
            ]
        );
    }

    #[test]
    fn a_success_policy_needs_indexed_completion() {
        let spec = json!({"completionMode": "NonIndexed", "successPolicy": {"rules": [
            {"succeededIndexes": "0"}, {"succeededCount": 1}]}});
        assert_eq!(
            job_errors(spec),
            [
                "spec.successPolicy: Invalid value: batch.SuccessPolicy{Rules:[]batch.SuccessPolicyRule{batch.SuccessPolicyRule{SucceededIndexes:(*string)(0xc000000000), SucceededCount:(*int32)(nil)}, batch.SuccessPolicyRule{SucceededIndexes:(*string)(nil), SucceededCount:(*int32)(0xc000000000)}}}: requires indexed completion mode",
            ]
        );
        assert_eq!(
            job_errors(json!({"successPolicy": {}})),
            [
                "spec.successPolicy: Invalid value: batch.SuccessPolicy{Rules:[]batch.SuccessPolicyRule(nil)}: requires indexed completion mode",
            ]
        );
    }

    #[test]
    fn success_rules_name_indexes_and_counts_the_job_can_reach() {
        let rules = json!({"rules": [
            {},
            {"succeededIndexes": "1-3,5", "succeededCount": 5},
            {"succeededCount": -1},
            {"succeededCount": 11},
            {"succeededIndexes": "1-2-3"},
            {"succeededIndexes": "x"},
            {"succeededIndexes": "10"},
            {"succeededIndexes": "4-2"},
            {"succeededIndexes": "1-4,3", "succeededCount": 1},
        ]});
        let at = "spec.successPolicy.rules";
        assert_eq!(
            job_errors(indexed(10, rules)),
            [
                format!(
                    "{at}[0]: Required value: at least one of succeededCount or succeededIndexes must be specified"
                ),
                format!(
                    "{at}[1].succeededCount: Invalid value: 5: must be less than or equal to 4 (the number of indexes in the specified succeededIndexes field)"
                ),
                format!(
                    "{at}[2].succeededCount: Invalid value: -1: must be greater than or equal to 0"
                ),
                format!(
                    "{at}[3].succeededCount: Invalid value: 11: must be less than or equal to 10 (the number of specified completions)"
                ),
                format!(
                    "{at}[4].succeededIndexes: Invalid value: \"1-2-3\": error parsing succeededIndexes: the fragment \"1-2-3\" violates the requirement that an index interval can have at most two parts separated by '-'"
                ),
                format!(
                    "{at}[5].succeededIndexes: Invalid value: \"x\": error parsing succeededIndexes: cannot convert string to integer for index: \"x\""
                ),
                format!(
                    "{at}[6].succeededIndexes: Invalid value: \"10\": error parsing succeededIndexes: too large index: \"10\""
                ),
                format!(
                    "{at}[7].succeededIndexes: Invalid value: \"4-2\": error parsing succeededIndexes: non-increasing order, previous: 4, current: 2"
                ),
                format!(
                    "{at}[8].succeededIndexes: Invalid value: \"1-4,3\": error parsing succeededIndexes: non-increasing order, previous: 4, current: 3"
                ),
                format!(
                    "{at}[8].succeededCount: Invalid value: 1: must be less than or equal to 0 (the number of indexes in the specified succeededIndexes field)"
                ),
            ]
        );
    }

    #[test]
    fn success_rules_are_given_and_bounded() {
        assert_eq!(
            job_errors(indexed(3, json!({"rules": []}))),
            [
                "spec.successPolicy.rules: Required value: at least one rules must be specified when the successPolicy is specified"
            ]
        );
        let rules: Vec<Value> = (0..21).map(|_| json!({"succeededCount": 1})).collect();
        assert_eq!(
            job_errors(indexed(3, json!({"rules": rules}))),
            ["spec.successPolicy.rules: Too many: 21: must have at most 20 items"]
        );
        let long = format!("0{}", ",".repeat(65_536));
        let found = job_errors(indexed(3, json!({"rules": [{"succeededIndexes": long}]})));
        assert_eq!(
            found[0],
            "spec.successPolicy.rules[0].succeededIndexes: Too long: may not be more than 65536 bytes"
        );
        assert!(
            found[1].ends_with(
                "error parsing succeededIndexes: cannot convert string to integer for index: \"\""
            ),
            "{found:#?}"
        );
    }

    #[test]
    fn an_indexed_job_without_completions_reports_only_that() {
        let spec = json!({"completionMode": "Indexed", "parallelism": 2,
            "successPolicy": {"rules": [{"succeededCount": 5}]}});
        assert_eq!(
            job_errors(spec),
            ["spec.completions: Required value: when completion mode is Indexed"]
        );
    }

    #[test]
    fn a_cron_jobs_template_is_checked_at_its_own_path() {
        let cron = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {
            "podFailurePolicy": {"rules": [{"action": "FailIndex",
                "onExitCodes": {"operator": "In", "values": [1]}}]},
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "app:1"}]}}}}}});
        assert_eq!(
            messages(&validate("batch", "cronjobs", &cron)),
            [
                "spec.jobTemplate.spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set"
            ]
        );
    }
}
