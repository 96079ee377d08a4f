//! What an update may not change in a built-in object, as kube-apiserver's
//! `Validate*Update` functions decide: a pod's spec (`pods.rs`), the selector of a
//! Deployment, ReplicaSet or DaemonSet, most of a StatefulSet's spec, a Job's selector and
//! template, a Service's cluster IP, a PersistentVolumeClaim's spec (`claims.rs`), the
//! data of a ConfigMap or Secret marked `immutable`, and a binding's `roleRef`. An operator that changes these in place must fail on steady as it would
//! on a cluster, with kube's messages.
//!
//! Runs on the main resource only (subresources write what they own). Only JSON (the
//! stored object and the defaulted update): knows nothing of storage or HTTP.

mod claims;
mod pods;

pub(crate) use claims::beta_storage_class;

use serde_json::{Map, Value};

use crate::go_text::quote;
use crate::rbac::RBAC_GROUP;
use crate::schema::{FieldError, FieldErrorReason};

/// The errors of updating `old` to `new`, an object of the built-in `group`/`plural`.
pub(crate) fn validate(group: &str, plural: &str, old: &Value, new: &Value) -> Vec<FieldError> {
    match (group, plural) {
        ("", "pods") => pods::validate(old, new),
        ("", "persistentvolumeclaims") => claims::validate(old, new),
        ("apps", "deployments" | "replicasets" | "daemonsets") => {
            immutable_selector(old, new).into_iter().collect()
        }
        ("apps", "statefulsets") => statefulset_spec(old, new).into_iter().collect(),
        ("batch", "jobs") => job(old, new),
        ("", "services") => service_cluster_ip(old, new).into_iter().collect(),
        ("", "configmaps") => immutable_data(old, new, &["data", "binaryData"]),
        (RBAC_GROUP, "rolebindings" | "clusterrolebindings") => {
            immutable_role_ref(old, new).into_iter().collect()
        }
        ("", "secrets") => {
            let mut errors = immutable_type(old, new);
            errors.extend(immutable_data(old, new, &["data"]));
            errors
        }
        _ => Vec::new(),
    }
}

/// A binding's `roleRef` never changes; kube names the new one as Go prints its struct.
fn immutable_role_ref(old: &Value, new: &Value) -> Option<FieldError> {
    let role_ref = |obj: &Value| {
        ["apiGroup", "kind", "name"].map(|field| {
            at(obj, &format!("/roleRef/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
    };
    let [group, kind, name] = role_ref(new);
    (role_ref(old) != [group.clone(), kind.clone(), name.clone()]).then(|| FieldError {
        field: "roleRef".into(),
        reason: FieldErrorReason::Invalid,
        message: format!(
            "Invalid value: rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}: cannot change roleRef",
            quote(&group),
            quote(&kind),
            quote(&name)
        ),
    })
}

fn forbidden(field: &str, message: &str) -> FieldError {
    FieldError {
        field: field.into(),
        reason: FieldErrorReason::Forbidden,
        message: format!("Forbidden: {message}"),
    }
}

/// How many differing fields a `spec: Forbidden` message lists.
const LISTED_DIFFERENCES: usize = 8;

/// The `spec: Forbidden` error with kube's `message`, listing the fields that changed
/// where kube appends Go's diff of the two specs.
fn spec_forbidden(
    message: &str,
    old_spec: &Map<String, Value>,
    munged: Map<String, Value>,
) -> FieldError {
    let mut differences = Vec::new();
    differing_fields(
        "spec",
        &Value::Object(old_spec.clone()),
        &Value::Object(munged),
        &mut differences,
    );
    let mut message = message.to_owned();
    for field in differences.iter().take(LISTED_DIFFERENCES) {
        message.push_str("\n  ");
        message.push_str(field);
    }
    let more = differences.len().saturating_sub(LISTED_DIFFERENCES);
    if more > 0 {
        message.push_str(&format!("\n  … and {more} more"));
    }
    FieldError {
        field: "spec".into(),
        reason: FieldErrorReason::Forbidden,
        message,
    }
}

/// The paths where `old` and `new` differ, deepest first found, objects by field and lists
/// by index.
fn differing_fields(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            for (name, value) in n {
                let child = format!("{path}.{name}");
                match o.get(name) {
                    Some(before) => differing_fields(&child, before, value, out),
                    None => out.push(format!("{child}: added")),
                }
            }
            for name in o.keys().filter(|k| !n.contains_key(*k)) {
                out.push(format!("{path}.{name}: removed"));
            }
        }
        (Value::Array(o), Value::Array(n)) if o.len() == n.len() => {
            for (i, (before, after)) in o.iter().zip(n).enumerate() {
                differing_fields(&format!("{path}[{i}]"), before, after, out);
            }
        }
        _ if old != new => out.push(format!("{path}: {old} → {new}")),
        _ => {}
    }
}

/// `ValidateImmutableField`: kube names the new value, as Go prints it.
fn field_is_immutable(field: &str, shown: String) -> FieldError {
    FieldError {
        field: field.into(),
        reason: FieldErrorReason::Invalid,
        message: format!("Invalid value: {shown}: field is immutable"),
    }
}

fn at<'v>(obj: &'v Value, pointer: &str) -> Option<&'v Value> {
    obj.pointer(pointer).filter(|v| !v.is_null())
}

/// A field set to `{}` and one left out are the same to Go once decoded (both empty).
fn same_ignoring_empty(old: Option<&Value>, new: Option<&Value>) -> bool {
    let empty = |v: Option<&Value>| {
        v.is_none_or(|v| {
            v.as_object().is_some_and(Map::is_empty) || v.as_array().is_some_and(Vec::is_empty)
        })
    };
    old == new || (empty(old) && empty(new))
}

/// apps/v1 forbids changing a workload's selector: its pods would be orphaned.
fn immutable_selector(old: &Value, new: &Value) -> Option<FieldError> {
    let new_selector = at(new, "/spec/selector");
    (at(old, "/spec/selector") != new_selector)
        .then(|| field_is_immutable("spec.selector", go_label_selector(new_selector)))
}

/// The fields of a StatefulSet's spec an update may change; the rest is fixed.
const STATEFULSET_MUTABLE: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

fn statefulset_spec(old: &Value, new: &Value) -> Option<FieldError> {
    let fixed = |obj: &Value| -> Map<String, Value> {
        let mut spec = obj
            .get("spec")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        spec.retain(|field, _| !STATEFULSET_MUTABLE.contains(&field.as_str()));
        spec
    };
    (fixed(old) != fixed(new)).then(|| {
        forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', \
             'template', 'updateStrategy', 'revisionHistoryLimit', \
             'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        )
    })
}

/// What a suspended Job that never started may still change in its template: where its
/// pods will run (kube's mutable scheduling directives).
const JOB_SCHEDULING_DIRECTIVES: &[&str] = &[
    "/metadata/labels",
    "/metadata/annotations",
    "/spec/nodeSelector",
    "/spec/affinity",
    "/spec/tolerations",
    "/spec/schedulingGates",
];

/// A Job's selector and template are fixed, and the policies that say how it completes.
fn job(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors: Vec<FieldError> = Vec::new();
    if at(old, "/spec/selector") != at(new, "/spec/selector") {
        errors.push(field_is_immutable(
            "spec.selector",
            go_label_selector(at(new, "/spec/selector")),
        ));
    }
    let mut template = at(new, "/spec/template").cloned().unwrap_or(Value::Null);
    let old_template = at(old, "/spec/template").cloned().unwrap_or(Value::Null);
    let suspended = at(old, "/spec/suspend").and_then(Value::as_bool) == Some(true);
    if suspended && at(old, "/status/startTime").is_none() {
        for pointer in JOB_SCHEDULING_DIRECTIVES {
            take_from(&old_template, &mut template, pointer);
        }
    }
    if template != old_template {
        errors.push(field_is_immutable(
            "spec.template",
            at(new, "/spec/template").map_or("null".into(), Value::to_string),
        ));
    }
    for field in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ] {
        let pointer = format!("/spec/{field}");
        if at(old, &pointer) != at(new, &pointer) {
            let shown = at(new, &pointer).map_or("null".into(), Value::to_string);
            errors.push(field_is_immutable(&format!("spec.{field}"), shown));
        }
    }
    errors
}

/// Sets `pointer` (a field of an object) in `into` as it is in `from`, or removes it.
fn take_from(from: &Value, into: &mut Value, pointer: &str) {
    let Some((parent, field)) = pointer.rsplit_once('/') else {
        return;
    };
    let value = from.pointer(pointer).cloned();
    match (
        into.pointer_mut(parent).and_then(Value::as_object_mut),
        value,
    ) {
        (Some(map), Some(value)) => {
            map.insert(field.into(), value);
        }
        (Some(map), None) => {
            map.remove(field);
        }
        (None, Some(value)) => crate::defaults::set_pointer(into, pointer, value),
        (None, None) => {}
    }
}

/// A Service keeps the cluster IP it was given (an `ExternalName` Service has none).
fn service_cluster_ip(old: &Value, new: &Value) -> Option<FieldError> {
    let external =
        |svc: &Value| at(svc, "/spec/type").and_then(Value::as_str) == Some("ExternalName");
    let (before, after) = (cluster_ip(old)?, cluster_ip(new)?);
    (before != after && !external(old) && !external(new)).then(|| FieldError {
        field: "spec.clusterIPs[0]".into(),
        reason: FieldErrorReason::Invalid,
        message: format!("Invalid value: []string{{{after:?}}}: may not change once set"),
    })
}

fn cluster_ip(service: &Value) -> Option<&str> {
    at(service, "/spec/clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
}

const WHEN_IMMUTABLE: &str = "field is immutable when `immutable` is set";

/// A ConfigMap or Secret marked `immutable` keeps its data and the mark.
fn immutable_data(old: &Value, new: &Value, fields: &[&str]) -> Vec<FieldError> {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return Vec::new();
    }
    let mut errors = Vec::new();
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errors.push(forbidden("immutable", WHEN_IMMUTABLE));
    }
    for field in fields {
        if !same_ignoring_empty(old.get(*field), new.get(*field)) {
            errors.push(forbidden(field, WHEN_IMMUTABLE));
        }
    }
    errors
}

/// A Secret's type is fixed when it is created.
fn immutable_type(old: &Value, new: &Value) -> Vec<FieldError> {
    let new_type = new.get("type");
    if old.get("type") == new_type {
        return Vec::new();
    }
    let shown = new_type.map_or("\"\"".into(), Value::to_string);
    vec![field_is_immutable("type", shown)]
}

/// A `LabelSelector` as Go's `%#v` prints it in kube's messages.
fn go_label_selector(selector: Option<&Value>) -> String {
    let labels = selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty());
    let labels = match labels {
        Some(map) => crate::defaults::go_map(map),
        None => "map[string]string(nil)".into(),
    };
    let expressions = selector
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
        .filter(|e| !e.is_empty());
    let expressions = match expressions {
        Some(list) => {
            let items: Vec<String> = list.iter().map(go_requirement).collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
        None => "[]v1.LabelSelectorRequirement(nil)".into(),
    };
    match selector {
        None => "(*v1.LabelSelector)(nil)".into(),
        Some(_) => {
            format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}")
        }
    }
}

fn go_requirement(requirement: &Value) -> String {
    let text = |field: &str| {
        requirement
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let values: Vec<String> = requirement
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| format!("{:?}", v.as_str().unwrap_or_default()))
        .collect();
    let values = if values.is_empty() {
        "[]string(nil)".into()
    } else {
        format!("[]string{{{}}}", values.join(", "))
    };
    format!(
        "v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:{values}}}",
        text("key"),
        text("operator")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(labels: Value) -> Value {
        json!({"spec": {"replicas": 1, "selector": {"matchLabels": labels}}})
    }

    #[test]
    fn a_workload_selector_is_fixed_and_named_as_go_prints_it() {
        let old = deployment(json!({"app": "a"}));
        assert!(validate("apps", "deployments", &old, &old).is_empty());
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(3);
        assert!(validate("apps", "deployments", &old, &scaled).is_empty());
        let errors = validate(
            "apps",
            "replicasets",
            &old,
            &deployment(json!({"app": "b"})),
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "spec.selector");
        assert_eq!(
            errors[0].message,
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"b\"}, \
             MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        );
        let expressions = json!({"spec": {"selector": {"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["x"]}
        ]}}});
        assert_eq!(
            validate("apps", "daemonsets", &old, &expressions)[0].message,
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), \
             MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{\
             Key:\"tier\", Operator:\"In\", Values:[]string{\"x\"}}}}: field is immutable"
        );
    }

    #[test]
    fn a_statefulset_changes_its_replicas_and_template_only() {
        let old = json!({"spec": {"replicas": 1, "serviceName": "db", "template": {"a": 1},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}});
        let mut ok = old.clone();
        ok["spec"]["replicas"] = json!(3);
        ok["spec"]["template"] = json!({"a": 2});
        ok["spec"]["minReadySeconds"] = json!(5);
        assert!(validate("apps", "statefulsets", &old, &ok).is_empty());
        let mut bigger = old.clone();
        bigger["spec"]["volumeClaimTemplates"][0]["spec"] = json!({"resources": {}});
        let errors = validate("apps", "statefulsets", &old, &bigger);
        assert_eq!(errors[0].field, "spec");
        assert!(
            errors[0]
                .message
                .starts_with("Forbidden: updates to statefulset spec")
        );
    }

    #[test]
    fn a_job_keeps_its_template_unless_suspended_before_it_started() {
        let old = json!({"spec": {"selector": {"matchLabels": {"id": "1"}},
            "template": {"spec": {"containers": [{"name": "c"}]}}}});
        let mut placed = old.clone();
        placed["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        let errors = validate("batch", "jobs", &old, &placed);
        assert_eq!(errors[0].field, "spec.template");
        assert!(errors[0].message.ends_with("field is immutable"));
        let mut suspended = old.clone();
        suspended["spec"]["suspend"] = json!(true);
        let mut placed_suspended = placed.clone();
        placed_suspended["spec"]["suspend"] = json!(true);
        assert!(validate("batch", "jobs", &suspended, &placed_suspended).is_empty());
        let mut started = suspended.clone();
        started["status"] = json!({"startTime": "2026-01-01T00:00:00Z"});
        assert_eq!(
            validate("batch", "jobs", &started, &placed_suspended).len(),
            1
        );
        let mut other_image = suspended.clone();
        other_image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("x");
        assert_eq!(validate("batch", "jobs", &suspended, &other_image).len(), 1);
    }

    #[test]
    fn a_service_keeps_its_cluster_ip() {
        let old = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.7"}});
        let headless = json!({"spec": {"type": "ClusterIP", "clusterIP": "None"}});
        let errors = validate("", "services", &old, &headless);
        assert_eq!(errors[0].field, "spec.clusterIPs[0]");
        assert_eq!(
            errors[0].message,
            "Invalid value: []string{\"None\"}: may not change once set"
        );
        assert!(validate("", "services", &old, &old).is_empty());
        let external = json!({"spec": {"type": "ExternalName", "clusterIP": "x"}});
        assert!(validate("", "services", &old, &external).is_empty());
    }

    #[test]
    fn immutable_configmaps_and_secrets_keep_their_data() {
        let old = json!({"immutable": true, "data": {"k": "v"}});
        assert!(validate("", "configmaps", &old, &old).is_empty());
        let changed = json!({"immutable": true, "data": {"k": "w"}});
        let errors = validate("", "configmaps", &old, &changed);
        assert_eq!(
            (errors[0].field.as_str(), errors[0].message.as_str()),
            (
                "data",
                "Forbidden: field is immutable when `immutable` is set"
            )
        );
        let unmarked = json!({"immutable": false, "data": {"k": "v"}});
        assert_eq!(
            validate("", "configmaps", &old, &unmarked)[0].field,
            "immutable"
        );
        let mutable = json!({"data": {"k": "v"}});
        assert!(validate("", "configmaps", &mutable, &changed).is_empty());
        let secret = json!({"type": "Opaque", "data": {}});
        let retyped = json!({"type": "kubernetes.io/tls", "data": {}});
        assert_eq!(
            validate("", "secrets", &secret, &retyped)[0].message,
            "Invalid value: \"kubernetes.io/tls\": field is immutable"
        );
    }
}
