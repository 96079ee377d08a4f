//! Defaulting of the built-in kinds, and validation of the workload kinds where clients
//! depend on it: the defaults kube-apiserver 1.32 fills in (Deployment strategy, replicas,
//! history limits, Job completions and parallelism, pod template defaults, a pod's service
//! account, a service's cluster IP and ports, a namespace's finalizer, a secret's
//! `stringData`, ...), the selector a Job generates for itself, and the rule that a
//! controller's selector matches its template.
//!
//! The defaults are a table of (JSON pointer, value) per kind, applied where the field is
//! missing. Only JSON: this module knows nothing of storage or HTTP.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use crate::rbac::RBAC_GROUP;
use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::schema::{FieldError, FieldErrorReason};

mod pod_spec;
use pod_spec::{pod_spec, service_account_alias};

/// Set `value` (JSON text) at `at` when nothing is there, and when `when` (pointer, value)
/// holds.
struct Default {
    at: &'static str,
    value: &'static str,
    when: Option<(&'static str, &'static str)>,
}

const fn set(at: &'static str, value: &'static str) -> Default {
    Default {
        at,
        value,
        when: None,
    }
}

const fn set_when(
    at: &'static str,
    value: &'static str,
    when: (&'static str, &'static str),
) -> Default {
    Default {
        at,
        value,
        when: Some(when),
    }
}

const DEPLOYMENT: &[Default] = &[
    set("/spec/replicas", "1"),
    set("/spec/strategy/type", r#""RollingUpdate""#),
    set_when(
        "/spec/strategy/rollingUpdate",
        r#"{"maxUnavailable":"25%","maxSurge":"25%"}"#,
        ("/spec/strategy/type", "RollingUpdate"),
    ),
    set("/spec/revisionHistoryLimit", "10"),
    set("/spec/progressDeadlineSeconds", "600"),
];
const STATEFUL_SET: &[Default] = &[
    set("/spec/replicas", "1"),
    set("/spec/podManagementPolicy", r#""OrderedReady""#),
    set("/spec/updateStrategy/type", r#""RollingUpdate""#),
    set_when(
        "/spec/updateStrategy/rollingUpdate",
        r#"{"partition":0}"#,
        ("/spec/updateStrategy/type", "RollingUpdate"),
    ),
    set("/spec/revisionHistoryLimit", "10"),
    set(
        "/spec/persistentVolumeClaimRetentionPolicy",
        r#"{"whenDeleted":"Retain","whenScaled":"Retain"}"#,
    ),
];
const DAEMON_SET: &[Default] = &[
    set("/spec/updateStrategy/type", r#""RollingUpdate""#),
    set_when(
        "/spec/updateStrategy/rollingUpdate",
        r#"{"maxUnavailable":1,"maxSurge":0}"#,
        ("/spec/updateStrategy/type", "RollingUpdate"),
    ),
    set("/spec/revisionHistoryLimit", "10"),
];
const REPLICAS: &[Default] = &[set("/spec/replicas", "1")];
const JOB: &[Default] = &[
    // Both unset: a non-parallel job, one completion.
    set_when("/spec/completions", "1", ("/spec/parallelism", "")),
    set("/spec/parallelism", "1"),
    // kube: no limit beyond each index's when backoffLimitPerIndex is set.
    set_when(
        "/spec/backoffLimit",
        "6",
        ("/spec/backoffLimitPerIndex", ""),
    ),
    set("/spec/backoffLimit", "2147483647"),
    set("/spec/completionMode", r#""NonIndexed""#),
    set("/spec/suspend", "false"),
    // kube: Failed under a podFailurePolicy, else TerminatingOrFailed.
    set_when(
        "/spec/podReplacementPolicy",
        r#""TerminatingOrFailed""#,
        ("/spec/podFailurePolicy", ""),
    ),
    set("/spec/podReplacementPolicy", r#""Failed""#),
];
const CRON_JOB: &[Default] = &[
    set("/spec/concurrencyPolicy", r#""Allow""#),
    set("/spec/suspend", "false"),
    set("/spec/successfulJobsHistoryLimit", "3"),
    set("/spec/failedJobsHistoryLimit", "1"),
];

/// Where a kind keeps its pod template, and its defaults.
struct Workload {
    group: &'static str,
    plural: &'static str,
    defaults: &'static [Default],
    template: &'static str,
    /// Its `spec.selector` is a LabelSelector that must select the template's labels.
    label_selector: bool,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        group: "apps",
        plural: "deployments",
        defaults: DEPLOYMENT,
        template: "/spec/template",
        label_selector: true,
    },
    Workload {
        group: "apps",
        plural: "statefulsets",
        defaults: STATEFUL_SET,
        template: "/spec/template",
        label_selector: true,
    },
    Workload {
        group: "apps",
        plural: "replicasets",
        defaults: REPLICAS,
        template: "/spec/template",
        label_selector: true,
    },
    Workload {
        group: "apps",
        plural: "daemonsets",
        defaults: DAEMON_SET,
        template: "/spec/template",
        label_selector: true,
    },
    Workload {
        group: "",
        plural: "replicationcontrollers",
        defaults: REPLICAS,
        template: "/spec/template",
        label_selector: false,
    },
    Workload {
        group: "batch",
        plural: "jobs",
        defaults: JOB,
        template: "/spec/template",
        label_selector: true,
    },
    Workload {
        group: "batch",
        plural: "cronjobs",
        defaults: CRON_JOB,
        template: "/spec/jobTemplate/spec/template",
        label_selector: false,
    },
    Workload {
        group: "",
        plural: "podtemplates",
        defaults: &[],
        template: "/template",
        label_selector: false,
    },
];

/// Where an object of a built-in workload kind keeps its pod template (a JSON pointer).
pub(crate) fn pod_template_of(group: &str, plural: &str) -> Option<&'static str> {
    WORKLOADS
        .iter()
        .find(|w| w.group == group && w.plural == plural)
        .map(|w| w.template)
}

/// Default and validate an object of a built-in workload kind; other kinds pass untouched.
fn workload(
    group: &str,
    plural: &str,
    kind: &str,
    creating: bool,
    obj: &mut Value,
) -> ApiResult<()> {
    let Some(w) = WORKLOADS
        .iter()
        .find(|w| w.group == group && w.plural == plural)
    else {
        return Ok(());
    };
    for d in w.defaults {
        apply(d, obj);
    }
    pod_specs(group, plural, obj);
    if plural == "replicationcontrollers" {
        default_from_template_labels(obj, "/spec/selector");
    }
    if plural == "jobs" {
        if creating {
            generate_job_selector(obj);
        }
        default_from_template_labels(obj, "");
        default_condition_pattern_status(obj);
    }
    let mut errors = Vec::new();
    if w.label_selector {
        errors.extend(selector_matches_template(obj, w.template, plural));
    }
    if plural == "replicationcontrollers" {
        errors.extend(map_selector_matches_template(obj));
    }
    if matches!(plural, "jobs" | "cronjobs") {
        errors.extend(job_restart_policy(obj, w.template));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &crate::registry::qualified_kind(kind, group),
            meta::name(obj).unwrap_or(""),
            &errors,
        ))
    }
}

fn apply(d: &Default, obj: &mut Value) {
    if let Some((pointer, expected)) = d.when {
        let holds = match obj.pointer(pointer) {
            // An empty expectation means "unset" (a null is unset in Go too).
            None | Some(Value::Null) => expected.is_empty(),
            Some(v) => v.as_str() == Some(expected),
        };
        if !holds {
            return;
        }
    }
    if obj.pointer(d.at).is_some_and(|v| !v.is_null()) {
        return;
    }
    if let Some(value) = DEFAULT_VALUES.get(d.value) {
        set_pointer(obj, d.at, value.clone());
    }
}

/// Every default's value by its JSON text, parsed once rather than on every write.
static DEFAULT_VALUES: LazyLock<BTreeMap<&'static str, Value>> = LazyLock::new(|| {
    WORKLOADS
        .iter()
        .flat_map(|w| w.defaults)
        .filter_map(|d| Some((d.value, serde_json::from_str(d.value).ok()?)))
        .collect()
});

/// Set `value` at the JSON pointer `at`, creating objects on the way.
pub(crate) fn set_pointer(obj: &mut Value, at: &str, value: Value) {
    let mut cursor = obj;
    let mut segments = at.trim_start_matches('/').split('/').peekable();
    while let Some(segment) = segments.next() {
        if !cursor.is_object() {
            *cursor = json!({});
        }
        let Some(map) = cursor.as_object_mut() else {
            return;
        };
        // RFC 6901 escapes, as `Value::pointer` reads them.
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if segments.peek().is_none() {
            map.insert(segment, value);
            return;
        }
        cursor = map.entry(segment).or_insert_with(|| json!({}));
    }
}

fn default_if_missing(map: &mut Value, field: &str, value: Value) {
    if let Some(m) = map.as_object_mut() {
        m.entry(field).or_insert(value);
    }
}

fn template_labels(obj: &Value, template: &str) -> Map<String, Value> {
    obj.pointer(&format!("{template}/metadata/labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// A ReplicationController without a selector selects its template's labels, and a
/// controller (RC or Job) without labels takes its template's. `selector` "" only labels.
fn default_from_template_labels(obj: &mut Value, selector: &str) {
    let labels = template_labels(obj, "/spec/template");
    if labels.is_empty() {
        return;
    }
    if !selector.is_empty()
        && obj
            .pointer(selector)
            .is_none_or(|s| s.as_object().is_none_or(Map::is_empty))
    {
        set_pointer(obj, selector, Value::Object(labels.clone()));
    }
    let own = meta::metadata_mut(obj)
        .entry("labels")
        .or_insert_with(|| json!({}));
    if own.as_object().is_none_or(Map::is_empty) {
        *own = Value::Object(labels);
    }
}

/// A Job selects its pods by its own uid (unless `manualSelector`), as kube's job strategy
/// generates it, and labels its template to match.
fn generate_job_selector(obj: &mut Value) {
    if obj.pointer("/spec/manualSelector") == Some(&json!(true)) {
        return;
    }
    let uid = meta::uid(obj).unwrap_or("").to_string();
    let name = meta::name(obj).unwrap_or("").to_string();
    set_pointer(
        obj,
        "/spec/selector",
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
    );
    for (label, value) in [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ] {
        set_pointer(
            obj,
            &format!(
                "/spec/template/metadata/labels/{}",
                label.replace('/', "~1")
            ),
            json!(value),
        );
    }
}

/// A Job's pod failure rule matches a pod condition that is `True` unless it says
/// otherwise (kube's `SetDefaults_Job`; a CronJob's job template is not defaulted so).
fn default_condition_pattern_status(obj: &mut Value) {
    let Some(rules) = obj
        .pointer_mut("/spec/podFailurePolicy/rules")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let patterns = rules
        .iter_mut()
        .filter_map(|rule| rule.get_mut("onPodConditions")?.as_array_mut())
        .flatten();
    for pattern in patterns {
        let unset = pattern
            .get("status")
            .is_none_or(|s| s.as_str().is_none_or(str::is_empty));
        if unset && let Some(pattern) = pattern.as_object_mut() {
            pattern.insert("status".into(), json!("True"));
        }
    }
}

fn field_error(field: &str, reason: FieldErrorReason, message: String) -> FieldError {
    FieldError {
        field: field.to_string(),
        reason,
        message,
    }
}

/// Go's `%#v` of a `map[string]string`, as kube's messages print label sets.
pub(crate) fn go_map(labels: &Map<String, Value>) -> String {
    let sorted: BTreeMap<&String, &str> = labels
        .iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or("")))
        .collect();
    let entries: Vec<String> = sorted.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
    format!("map[string]string{{{}}}", entries.join(", "))
}

fn mismatch(template: &str, labels: &Map<String, Value>) -> FieldError {
    field_error(
        &format!(
            "{}.metadata.labels",
            template.trim_start_matches('/').replace('/', ".")
        ),
        FieldErrorReason::Invalid,
        format!(
            "Invalid value: {}: `selector` does not match template `labels`",
            go_map(labels)
        ),
    )
}

/// kube's check that a workload's `spec.selector` (a LabelSelector) is set, not empty,
/// and selects its template's labels; `plural` names the kind in the empty-selector message as kube does (a
/// ReplicaSet's says "deployment").
fn selector_matches_template(obj: &Value, template: &str, plural: &str) -> Option<FieldError> {
    let Some(selector) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return Some(field_error(
            "spec.selector",
            FieldErrorReason::Required,
            "Required value".into(),
        ));
    };
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(Map::is_empty) && expressions.is_none_or(Vec::is_empty) {
        return Some(field_error(
            "spec.selector",
            FieldErrorReason::Invalid,
            format!(
                "Invalid value: \"null\": empty selector is invalid for {}",
                match plural {
                    "statefulsets" => "statefulset",
                    "daemonsets" => "daemonset",
                    _ => "deployment",
                }
            ),
        ));
    }
    let labels = template_labels(obj, template);
    let labels_match = match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions_match = expressions
        .into_iter()
        .flatten()
        .all(|e| expression_matches(e, &labels));
    (!(labels_match && expressions_match)).then(|| mismatch(template, &labels))
}

fn expression_matches(expression: &Value, labels: &Map<String, Value>) -> bool {
    let key = expression.get("key").and_then(Value::as_str).unwrap_or("");
    let values: Vec<&str> = expression
        .get("values")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let value = labels.get(key).and_then(Value::as_str);
    match expression
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => value.is_none_or(|v| !values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

/// A ReplicationController's selector is a plain map that must match its template.
fn map_selector_matches_template(obj: &Value) -> Option<FieldError> {
    let selector = obj.pointer("/spec/selector").and_then(Value::as_object)?;
    let labels = template_labels(obj, "/spec/template");
    let matches = selector.iter().all(|(k, v)| labels.get(k) == Some(v));
    (!matches).then(|| mismatch("/spec/template", &labels))
}

/// A Job's pods must not restart in place: `Never` or `OnFailure`.
fn job_restart_policy(obj: &Value, template: &str) -> Option<FieldError> {
    let policy = obj
        .pointer(&format!("{template}/spec/restartPolicy"))
        .and_then(Value::as_str)?;
    (!matches!(policy, "Never" | "OnFailure")).then(|| {
        field_error(
            &format!(
                "{}.spec.restartPolicy",
                template.trim_start_matches('/').replace('/', ".")
            ),
            FieldErrorReason::NotSupported,
            format!("Unsupported value: {policy:?}: supported values: \"OnFailure\", \"Never\""),
        )
    })
}

/// The defaults of every pod spec `obj` holds (a pod's own, a workload's template) and of
/// a StatefulSet's claim templates.
fn pod_specs(group: &str, plural: &str, obj: &mut Value) {
    if (group, plural) == ("", "pods") {
        if let Some(spec) = obj.get_mut("spec") {
            pod_spec(spec);
            pod_spec::host_network_ports(spec);
        }
        return;
    }
    let Some(template) = pod_template_of(group, plural) else {
        return;
    };
    if let Some(spec) = obj.pointer_mut(&format!("{template}/spec")) {
        pod_spec(spec);
    }
    if plural == "statefulsets" {
        let claims = obj.pointer_mut("/spec/volumeClaimTemplates");
        for claim in claims.and_then(Value::as_array_mut).into_iter().flatten() {
            pod_spec::claim_template(claim);
        }
    }
}

/// kube defaults every object it decodes from etcd, so one stored before a default existed
/// is compared, on its next write, as if it had it. steady serves stored objects as they
/// are, but defaults the pod specs of one parsed from storage for a write (where later
/// versions added defaults), so a write that leaves a pod's spec alone does not change it
/// (a pod's spec may not change) nor bump a workload's generation.
pub(crate) fn as_decoded(group: &str, plural: &str, obj: &mut Value) {
    pod_specs(group, plural, obj);
}

/// The defaults kube-apiserver fills in for the built-in kinds steady serves: the workloads'
/// ([`workload`]), pods', services', namespaces' and secrets'. `old` is the stored object on
/// an update.
pub(crate) fn builtin(
    group: &str,
    plural: &str,
    kind: &str,
    old: Option<&Value>,
    obj: &mut Value,
) -> ApiResult<()> {
    workload(group, plural, kind, old.is_none(), obj)?;
    match (group, plural) {
        ("", "pods") => default_pod(obj, old.is_none()),
        ("", "services") => default_service(obj),
        ("", "namespaces") => default_namespace(obj, old.is_none()),
        ("", "secrets") => default_secret(obj),
        ("", "limitranges") => default_limit_range(obj),
        (RBAC_GROUP, "rolebindings" | "clusterrolebindings") => default_binding(obj),
        ("", "persistentvolumeclaims") => {
            default_volume(obj, None);
            if old.is_none() {
                normalize_data_sources(obj);
            }
        }
        ("", "persistentvolumes") => default_volume(obj, Some("Retain")),
        _ => {}
    }
    Ok(())
}

/// core/v1's defaults of a claim or (with its default reclaim policy) a volume: a
/// Filesystem volume mode, and the Pending phase until the binder says otherwise.
fn default_volume(obj: &mut Value, reclaim_policy: Option<&str>) {
    let spec = meta::object_mut(obj, "spec");
    spec.entry("volumeMode")
        .or_insert_with(|| json!("Filesystem"));
    if let Some(policy) = reclaim_policy {
        spec.entry("persistentVolumeReclaimPolicy")
            .or_insert_with(|| json!(policy));
    }
    let status = meta::object_mut(obj, "status");
    if status
        .get("phase")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        status.insert("phase".into(), json!("Pending"));
    }
}

/// kube's claim strategy (`NormalizeDataSources`, on create): a claim that names its data
/// source one way gets the other too (`dataSourceRef` from `dataSource`, and back unless
/// the reference reaches another namespace).
fn normalize_data_sources(claim: &mut Value) {
    let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let set = |v: Option<&Value>| v.filter(|v| v.is_object()).cloned();
    let local_fields = |source: &Value| -> Value {
        let mut copied = serde_json::Map::new();
        for field in ["apiGroup", "kind", "name"] {
            if let Some(value) = source.get(field) {
                copied.insert(field.into(), value.clone());
            }
        }
        Value::Object(copied)
    };
    match (set(spec.get("dataSource")), set(spec.get("dataSourceRef"))) {
        (Some(source), None) => {
            spec.insert("dataSourceRef".into(), local_fields(&source));
        }
        (None, Some(reference))
            if reference
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty() =>
        {
            spec.insert("dataSource".into(), local_fields(&reference));
        }
        _ => {}
    }
}

/// rbac/v1's defaults: a roleRef's API group, and a User's or Group's.
fn default_binding(binding: &mut Value) {
    let unset = |v: &Value, field: &str| {
        v.get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
    };
    // Go's roleRef is a struct, never absent: an empty one still gets the group.
    if !binding.get("roleRef").is_some_and(Value::is_object) {
        binding["roleRef"] = json!({});
    }
    if unset(&binding["roleRef"], "apiGroup") {
        binding["roleRef"]["apiGroup"] = json!(RBAC_GROUP);
    }
    let subjects = binding.get_mut("subjects").and_then(Value::as_array_mut);
    for subject in subjects.into_iter().flatten().filter(|s| s.is_object()) {
        let kind = subject.get("kind").and_then(Value::as_str);
        if matches!(kind, Some("User" | "Group")) && unset(subject, "apiGroup") {
            subject["apiGroup"] = json!(RBAC_GROUP);
        }
    }
}

fn default_pod(pod: &mut Value, creating: bool) {
    if !pod.get("spec").is_some_and(Value::is_object) {
        pod["spec"] = json!({});
    }
    let spec = &mut pod["spec"];
    service_account_alias(spec);
    default_if_missing(spec, "serviceAccountName", json!("default"));
    pod_specs("", "pods", pod);
    let spec = &mut pod["spec"];
    default_if_missing(spec, "enableServiceLinks", json!(true));
    requests_from_limits(spec);
    if creating {
        pod["status"] = json!({"phase": "Pending"});
    }
}

/// kube's `SetDefaults_Pod` (pods only, not templates): a container that limits a
/// resource without requesting it requests its limit.
fn requests_from_limits(spec: &mut Value) {
    for list in ["containers", "initContainers"] {
        let containers = spec.get_mut(list).and_then(Value::as_array_mut);
        for resources in containers
            .into_iter()
            .flatten()
            .filter_map(|c| c.get_mut("resources"))
        {
            let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            let requests = meta::object_mut(resources, "requests");
            for (name, limit) in limits {
                requests.entry(name).or_insert(limit);
            }
        }
    }
}

/// kube's `SetDefaults_LimitRangeItem`, for `Container` items: the default limit is the
/// max where unset, the default request the default limit, else the min.
fn default_limit_range(range: &mut Value) {
    let items = range
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut);
    for item in items.into_iter().flatten() {
        if item.get("type").and_then(Value::as_str) != Some("Container") || !item.is_object() {
            continue;
        }
        let entries = |item: &Value, field: &str| -> Vec<(String, Value)> {
            let map = item.get(field).and_then(Value::as_object);
            map.into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        for (from, to) in [
            ("max", "default"),
            ("default", "defaultRequest"),
            ("min", "defaultRequest"),
        ] {
            let inherited = entries(item, from);
            if inherited.is_empty() {
                continue;
            }
            let target = meta::object_mut(item, to);
            for (name, quantity) in inherited {
                target.entry(name).or_insert(quantity);
            }
        }
    }
}

/// A new pod's `status.qosClass`, once admission set its resources (kube's
/// `PrepareForCreate`, after the mutating plugins and webhooks).
pub(crate) fn set_qos_class(pod: &mut Value) {
    let class = qos_class(&pod["spec"]);
    meta::object_mut(pod, "status").insert("qosClass".into(), json!(class.as_str()));
}

/// kube's `applySchedulingGatedCondition` (its pod strategy's `PrepareForCreate`): a new
/// pod with scheduling gates says why it waits, `PodScheduled=False` with reason
/// `SchedulingGated`, unless it already states a `PodScheduled` condition.
pub(crate) fn set_scheduling_gated(pod: &mut Value, now: &str) {
    let gated = pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gates| !gates.is_empty());
    if !gated {
        return;
    }
    let status = meta::object_mut(pod, "status");
    let conditions = status
        .entry("conditions")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(conditions) = conditions.as_array_mut() else {
        return;
    };
    let stated = conditions
        .iter()
        .any(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"));
    if !stated {
        conditions.push(json!({
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": null,
            "lastTransitionTime": now,
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }));
    }
}

/// kube's `applyMatchLabelKeysAndMismatchLabelKeys`, which its pod strategy's
/// `PrepareForCreate` (`mutatePodAffinity`) runs on every inter-pod affinity and
/// anti-affinity term of a new pod, required and preferred, before the pod is validated;
/// never on an update or a template. Each key of a term's `matchLabelKeys` the pod has a
/// label for appends `{key, In, [value]}` to its selector's `matchExpressions`, then each
/// of its `mismatchLabelKeys` appends `{key, NotIn, [value]}`. A term without a selector
/// is left alone, and the keys stay in the term.
pub(crate) fn merge_affinity_label_keys(pod: &mut Value) {
    let labels = match pod.pointer("/metadata/labels") {
        Some(Value::Object(labels)) if !labels.is_empty() => labels.clone(),
        _ => return,
    };
    let lists = [
        ("requiredDuringSchedulingIgnoredDuringExecution", ""),
        (
            "preferredDuringSchedulingIgnoredDuringExecution",
            "/podAffinityTerm",
        ),
    ];
    for kind in ["podAffinity", "podAntiAffinity"] {
        for (list, term_at) in lists {
            let at = format!("/spec/affinity/{kind}/{list}");
            let Some(Value::Array(entries)) = pod.pointer_mut(&at) else {
                continue;
            };
            for term in entries.iter_mut().filter_map(|e| e.pointer_mut(term_at)) {
                merge_label_keys(term, &labels);
            }
        }
    }
}

fn merge_label_keys(term: &mut Value, labels: &Map<String, Value>) {
    let added: Vec<Value> = [("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")]
        .into_iter()
        .flat_map(|(field, operator)| {
            let keys = term
                .get(field)
                .and_then(Value::as_array)
                .into_iter()
                .flatten();
            keys.filter_map(Value::as_str).filter_map(move |key| {
                let value = labels.get(key)?;
                Some(json!({"key": key, "operator": operator, "values": [value]}))
            })
        })
        .collect();
    let selector = term.get_mut("labelSelector").and_then(Value::as_object_mut);
    let Some(selector) = selector.filter(|_| !added.is_empty()) else {
        return;
    };
    match selector.get_mut("matchExpressions") {
        Some(Value::Array(expressions)) => expressions.extend(added),
        _ => {
            selector.insert("matchExpressions".into(), Value::Array(added));
        }
    }
}

/// The pod's QoS class (`qos.GetPodQOS`) from its containers' canonical quantities.
fn qos_class(spec: &Value) -> steady_quota::QosClass {
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|field| spec.get(*field).and_then(Value::as_array))
        .flatten();
    steady_quota::QosClass::of_containers(containers.map(|container| {
        let pick = |which: &str| {
            let list = container.get("resources").and_then(|r| r.get(which));
            steady_quota::QOS_RESOURCES.map(|name| {
                let quantity = list.and_then(|l| l.get(name)).and_then(Value::as_str);
                quantity.and_then(|q| steady_quota::Quantity::parse(q).ok())
            })
        };
        steady_quota::ComputeResources {
            requests: pick("requests"),
            limits: pick("limits"),
        }
    }))
}

/// kube's `SetDefaults_Service`. The cluster IP, IP families and node ports are the
/// registry's to allocate (`service_allocation.rs`), after these defaults.
fn default_service(svc: &mut Value) {
    if !svc.get("spec").is_some_and(Value::is_object) {
        svc["spec"] = json!({});
    }
    let spec = &mut svc["spec"];
    default_if_empty(spec, "type", json!("ClusterIP"));
    default_if_empty(spec, "sessionAffinity", json!("None"));
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            if let Some(spec) = spec.as_object_mut() {
                spec.remove("sessionAffinityConfig");
            }
        }
        Some("ClientIP")
            if spec
                .pointer("/sessionAffinityConfig/clientIP/timeoutSeconds")
                .is_none_or(Value::is_null) =>
        {
            spec["sessionAffinityConfig"] =
                json!({"clientIP": {"timeoutSeconds": CLIENT_IP_AFFINITY_SECONDS}});
        }
        _ => {}
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            default_if_empty(p, "protocol", json!("TCP"));
            let unset = p
                .get("targetPort")
                .is_none_or(|t| t.is_null() || *t == json!(0) || *t == json!(""));
            if unset
                && let Some(port) = p.get("port").cloned()
                && let Some(p) = p.as_object_mut()
            {
                p.insert("targetPort".into(), port);
            }
        }
    }
    let service_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if spec.as_object().is_some_and(externally_accessible) {
        default_if_empty(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if service_type != "ExternalName" {
        default_if_missing(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if service_type == "LoadBalancer" {
        default_if_missing(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    default_if_missing(svc, "status", json!({"loadBalancer": {}}));
}

/// kube's `DefaultClientIPServiceAffinitySeconds`: three hours.
const CLIENT_IP_AFFINITY_SECONDS: u32 = 10_800;

/// A Service reached from outside the cluster (kube's `ExternallyAccessible`): by node
/// port, load balancer, or external IPs.
pub(crate) fn externally_accessible(spec: &Map<String, Value>) -> bool {
    let has_external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|ips| !ips.is_empty());
    match spec.get("type").and_then(Value::as_str) {
        Some("NodePort" | "LoadBalancer") => true,
        Some("ClusterIP") => has_external_ips,
        _ => false,
    }
}

/// [`default_if_missing`], also over a null or `""` (Go's zero string).
fn default_if_empty(map: &mut Value, field: &str, value: Value) {
    if let Some(m) = map.as_object_mut() {
        let entry = m.entry(field).or_insert(Value::Null);
        if entry.is_null() || entry.as_str() == Some("") {
            *entry = value;
        }
    }
}

fn default_secret(secret: &mut Value) {
    default_if_missing(secret, "type", json!("Opaque"));
    if let Some(Value::Object(string_data)) =
        secret.as_object_mut().and_then(|o| o.remove("stringData"))
    {
        if !secret.get("data").is_some_and(Value::is_object) {
            secret["data"] = json!({});
        }
        for (k, v) in string_data {
            let s = v.as_str().unwrap_or("");
            secret["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
        }
    }
}

fn default_namespace(namespace: &mut Value, creating: bool) {
    let name = meta::name(namespace).unwrap_or("").to_string();
    let labels = meta::metadata_mut(namespace)
        .entry("labels")
        .or_insert_with(|| json!({}));
    if let Some(l) = labels.as_object_mut() {
        l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
    }
    if creating {
        namespace["spec"] = json!({"finalizers": ["kubernetes"]});
        namespace["status"] = json!({"phase": "Active"});
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(selector: Value, labels: Value) -> Value {
        json!({
            "metadata": {"name": "web"},
            "spec": {"selector": selector, "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}},
        })
    }

    #[test]
    fn every_default_value_is_json() {
        for d in WORKLOADS.iter().flat_map(|w| w.defaults) {
            assert!(
                DEFAULT_VALUES.contains_key(d.value),
                "{} = {}",
                d.at,
                d.value
            );
        }
    }

    #[test]
    fn a_deployment_gets_kubes_defaults() {
        let mut d = deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web"}),
        );
        workload("apps", "deployments", "Deployment", true, &mut d).expect("valid");
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
    }

    #[test]
    fn a_recreate_strategy_gets_no_rolling_update() {
        let mut d = deployment(
            json!({"matchLabels": {"app": "web"}}),
            json!({"app": "web"}),
        );
        d["spec"]["strategy"] = json!({"type": "Recreate"});
        workload("apps", "deployments", "Deployment", true, &mut d).expect("valid");
        assert!(d.pointer("/spec/strategy/rollingUpdate").is_none());
    }

    #[test]
    fn a_selector_that_misses_the_template_is_invalid() {
        let mut d = deployment(
            json!({"matchLabels": {"app": "other"}}),
            json!({"app": "web"}),
        );
        let err = workload("apps", "deployments", "Deployment", true, &mut d).expect_err("invalid");
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
        );
        let mut expr = deployment(
            json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}),
            json!({"tier": "a"}),
        );
        workload("apps", "deployments", "Deployment", true, &mut expr).expect("In matches");
    }

    #[test]
    fn job_completions_follow_parallelism() {
        let template = json!({"spec": {"restartPolicy": "Never", "containers": []}});
        let mut job =
            json!({"metadata": {"name": "j", "uid": "u1"}, "spec": {"template": template}});
        workload("batch", "jobs", "Job", true, &mut job).expect("valid");
        assert_eq!(
            (
                job["spec"]["completions"].clone(),
                job["spec"]["parallelism"].clone()
            ),
            (json!(1), json!(1))
        );
        assert_eq!(
            job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
            "u1"
        );
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"]["job-name"],
            "j"
        );
        let mut parallel = json!({"metadata": {"name": "p", "uid": "u2"}, "spec": {"parallelism": 3, "template": template}});
        workload("batch", "jobs", "Job", true, &mut parallel).expect("valid");
        assert!(parallel.pointer("/spec/completions").is_none());
        assert_eq!(job["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
    }

    #[test]
    fn a_job_with_a_backoff_limit_per_index_has_no_global_limit() {
        let template = json!({"spec": {"restartPolicy": "Never", "containers": []}});
        let mut job = json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"completionMode": "Indexed",
            "completions": 2, "backoffLimitPerIndex": 1, "template": template}});
        workload("batch", "jobs", "Job", true, &mut job).expect("valid");
        assert_eq!(job["spec"]["backoffLimit"], i32::MAX);
        let mut plain =
            json!({"metadata": {"name": "p", "uid": "u2"}, "spec": {"template": template}});
        workload("batch", "jobs", "Job", true, &mut plain).expect("valid");
        assert_eq!(plain["spec"]["backoffLimit"], 6);
    }

    #[test]
    fn a_job_with_a_pod_failure_policy_replaces_failed_pods_only() {
        let rules = json!({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]});
        let mut job = json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"podFailurePolicy": rules,
            "template": {"spec": {"restartPolicy": "Never", "containers": []}}}});
        workload("batch", "jobs", "Job", true, &mut job).expect("valid");
        assert_eq!(job["spec"]["podReplacementPolicy"], "Failed");
    }

    #[test]
    fn a_jobs_pod_failure_rules_match_true_conditions_unless_told_otherwise() {
        let rules = json!({"rules": [{"action": "Ignore", "onPodConditions": [
            {"type": "DisruptionTarget"}, {"type": "Ready", "status": "False"}]}]});
        let spec = json!({"podFailurePolicy": rules,
            "template": {"spec": {"restartPolicy": "Never", "containers": []}}});
        let mut job = json!({"metadata": {"name": "j", "uid": "u"}, "spec": spec});
        workload("batch", "jobs", "Job", true, &mut job).expect("valid");
        let patterns = &job["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"];
        assert_eq!(
            (&patterns[0]["status"], &patterns[1]["status"]),
            (&json!("True"), &json!("False"))
        );
        let mut cron = json!({"metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": spec}}});
        workload("batch", "cronjobs", "CronJob", true, &mut cron).expect("valid");
        let template_rules = &cron["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"];
        assert!(
            template_rules[0]["onPodConditions"][0]
                .get("status")
                .is_none()
        );
    }

    #[test]
    fn a_job_that_restarts_always_is_invalid() {
        let mut job = json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"template": {"spec": {"containers": []}}}});
        let err = workload("batch", "jobs", "Job", true, &mut job).expect_err("Always");
        assert!(
            err.message
                .contains("spec.template.spec.restartPolicy: Unsupported value: \"Always\""),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_new_pods_affinity_terms_get_their_label_keys_as_expressions() {
        let term = |selector: Value| {
            json!({"topologyKey": "zone", "labelSelector": selector,
                "matchLabelKeys": ["version", "missing"], "mismatchLabelKeys": ["team"]})
        };
        let existing = json!({"key": "app", "operator": "Exists"});
        let mut pod = json!({
            "metadata": {"labels": {"version": "v2", "team": "red"}},
            "spec": {"affinity": {
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": term(json!({"matchExpressions": [existing]}))}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    term(json!({"matchLabels": {"app": "db"}})),
                    {"topologyKey": "zone", "matchLabelKeys": ["version"]}]}}}
        });
        merge_affinity_label_keys(&mut pod);
        let version = json!({"key": "version", "operator": "In", "values": ["v2"]});
        let team = json!({"key": "team", "operator": "NotIn", "values": ["red"]});
        let affinity = &pod["spec"]["affinity"];
        let preferred = &affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            [0]["podAffinityTerm"];
        assert_eq!(
            preferred["labelSelector"],
            json!({"matchExpressions": [existing, version, team]})
        );
        assert_eq!(preferred["matchLabelKeys"], json!(["version", "missing"]));
        let required =
            &affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        assert_eq!(
            required[0]["labelSelector"],
            json!({"matchLabels": {"app": "db"}, "matchExpressions": [version, team]})
        );
        assert_eq!(
            required[1],
            json!({"topologyKey": "zone", "matchLabelKeys": ["version"]})
        );
    }
}
