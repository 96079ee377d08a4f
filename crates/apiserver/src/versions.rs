//! Built-in kinds served in two versions whose shapes differ: each is stored in one
//! version (kube-apiserver's storage version) and converted for a client of the other, as
//! kube's conversion functions do. The HorizontalPodAutoscaler is stored as
//! `autoscaling/v2` and served as `autoscaling/v1` too (`kubectl autoscale` writes v1,
//! `kubectl get hpa` reads v2); events.k8s.io/v1 Events are core/v1 Events under other
//! field names, stored as core Events (kube-rs's event recorder writes the former,
//! `kubectl describe` reads the latter).
//!
//! v1 has one metric field, `targetCPUUtilizationPercentage` (and its status twin); kube
//! keeps everything else v2 says in annotations on the v1 object (the metrics other than
//! CPU utilization, the current metrics, the conditions, the behavior), in v1's alpha
//! metric shapes, and takes them back from there on the way in, so a v1 client's
//! read-modify-write loses nothing. Every other kind's versions share one shape: only
//! `apiVersion` changes.
//! Must not know: HTTP, the store.

use serde_json::{Map, Value, json};

use crate::meta;

const HPA_STORAGE_VERSION: &str = "autoscaling/v2";
const CORE_EVENT_VERSION: &str = "v1";
const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// kube's `DefaultCPUUtilization`: an autoscaler that names no metric targets 80 % CPU.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// The version a built-in `kind` of `group` is stored in, when its versions differ in
/// shape (`None`: stored as written).
pub(crate) fn storage_version(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("autoscaling", "HorizontalPodAutoscaler") => Some(HPA_STORAGE_VERSION),
        ("events.k8s.io", "Event") => Some(CORE_EVENT_VERSION),
        _ => None,
    }
}

/// The group whose store keys hold the built-in resource `group`/`plural` (`core` for
/// the core group): its own, but for events.k8s.io Events, which kube-apiserver stores
/// as core Events, so both APIs list, watch and write the same objects.
pub(crate) fn storage_group<'g>(group: &'g str, plural: &str) -> &'g str {
    match (group, plural) {
        ("events.k8s.io", "events") | ("", _) => "core",
        (group, _) => group,
    }
}

/// The core Event field an events.k8s.io/v1 field selector names (`regarding.name` is
/// `involvedObject.name`): selectors are evaluated on the stored, core, shape.
pub(crate) fn stored_field(group: &str, field: &str) -> String {
    if group != "events.k8s.io" {
        return field.to_string();
    }
    let (head, rest) = field.split_once('.').unwrap_or((field, ""));
    let stored = EVENT_FIELDS
        .iter()
        .find(|(_, events)| *events == head)
        .map_or(head, |(core, _)| core);
    if rest.is_empty() {
        stored.to_string()
    } else {
        format!("{stored}.{rest}")
    }
}

/// `object` as `api_version` shapes it (the caller sets `apiVersion` itself); converted
/// to the storage version from itself, it gets that version's defaults.
pub(crate) fn convert(object: Value, api_version: &str) -> Value {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if kind == "Event" {
        return match (from, api_version) {
            ("events.k8s.io/v1", CORE_EVENT_VERSION) => rename_event_fields(object, true),
            (CORE_EVENT_VERSION, "events.k8s.io/v1") => rename_event_fields(object, false),
            _ => object,
        };
    }
    if kind != "HorizontalPodAutoscaler" {
        return object;
    }
    match (from, api_version) {
        ("autoscaling/v1", "autoscaling/v2") => hpa_v1_to_v2(object),
        ("autoscaling/v2", "autoscaling/v2") => {
            let mut hpa = object;
            hpa_v2_defaults(meta::object_mut(&mut hpa, "spec"));
            hpa
        }
        ("autoscaling/v2", "autoscaling/v1") => hpa_v2_to_v1(object),
        _ => object,
    }
}

/// v2's defaults: one replica at least, and 80 % CPU when no metric is named.
fn hpa_v2_defaults(spec: &mut Map<String, Value>) {
    let no_metric = spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_metric {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]),
        );
    }
    if spec.get("minReplicas").is_none_or(Value::is_null) {
        spec.insert("minReplicas".into(), json!(1));
    }
}

/// core/v1 Event fields and their events.k8s.io/v1 names (kube's
/// `Convert_v1_Event_To_core_Event` and back; `reportingComponent` is core's JSON name of
/// `ReportingController`). The other fields (eventTime, series, action, related,
/// reportingInstance, reason, type) are the same in both.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// An Event's fields renamed to core/v1's (`to_core`) or to events.k8s.io/v1's.
fn rename_event_fields(mut event: Value, to_core: bool) -> Value {
    let Some(fields) = event.as_object_mut() else {
        return event;
    };
    for (core, events) in EVENT_FIELDS {
        let (from, to) = if to_core {
            (events, core)
        } else {
            (core, events)
        };
        match fields.remove(*from) {
            Some(value) => {
                fields.insert((*to).to_string(), value);
            }
            None => {
                fields.remove(*to);
            }
        }
    }
    event
}

/// kube's `Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler`,
/// then v2's defaults.
fn hpa_v1_to_v2(mut hpa: Value) -> Value {
    let annotations = take_round_trip_annotations(&mut hpa);
    let spec = meta::object_mut(&mut hpa, "spec");
    let mut metrics = Vec::new();
    if let Some(target) = spec.remove("targetCPUUtilizationPercentage")
        && !target.is_null()
    {
        metrics.push(json!({"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}}));
    }
    let from_annotation = |key: &str| -> Vec<Value> {
        annotations
            .get(key)
            .and_then(Value::as_str)
            .and_then(|text| serde_json::from_str::<Vec<Value>>(text).ok())
            .unwrap_or_default()
    };
    metrics.extend(
        from_annotation(METRICS_ANNOTATION)
            .iter()
            .map(alpha_spec_to_v2),
    );
    spec.insert("metrics".into(), Value::Array(metrics));
    hpa_v2_defaults(spec);
    if let Some(behavior) = annotations
        .get(BEHAVIOR_ANNOTATION)
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
    {
        spec.insert("behavior".into(), behavior);
    }
    if hpa.get("status").is_some_and(Value::is_object) {
        let status = meta::object_mut(&mut hpa, "status");
        let current_cpu = status.remove("currentCPUUtilizationPercentage");
        let annotated = from_annotation(CURRENT_METRICS_ANNOTATION);
        let current: Vec<Value> = if annotated.is_empty() {
            current_cpu
                .filter(|v| !v.is_null())
                .map(|cpu| {
                    json!({"type": "Resource", "resource": {
                        "name": "cpu", "current": {"averageUtilization": cpu}}})
                })
                .into_iter()
                .collect()
        } else {
            annotated.iter().map(alpha_status_to_v2).collect()
        };
        if !current.is_empty() {
            status.insert("currentMetrics".into(), Value::Array(current));
        }
        let conditions = from_annotation(CONDITIONS_ANNOTATION);
        if !conditions.is_empty() {
            status.insert("conditions".into(), Value::Array(conditions));
        }
    }
    hpa
}

/// kube's `Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler`.
fn hpa_v2_to_v1(mut hpa: Value) -> Value {
    take_round_trip_annotations(&mut hpa);
    let mut annotations = Map::new();
    let spec = meta::object_mut(&mut hpa, "spec");
    let metrics = match spec.remove("metrics") {
        Some(Value::Array(metrics)) => metrics,
        _ => Vec::new(),
    };
    let is_cpu_utilization = |m: &Value| {
        m["type"] == "Resource"
            && m["resource"]["name"] == "cpu"
            && !m["resource"]["target"]["averageUtilization"].is_null()
    };
    if let Some(cpu) = metrics.iter().find(|m| is_cpu_utilization(m)) {
        spec.insert(
            "targetCPUUtilizationPercentage".into(),
            cpu["resource"]["target"]["averageUtilization"].clone(),
        );
    }
    let others: Vec<Value> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization(m))
        .map(v2_spec_to_alpha)
        .collect();
    annotate(&mut annotations, METRICS_ANNOTATION, others);
    if let Some(behavior) = spec.remove("behavior").filter(|b| !b.is_null()) {
        annotations.insert(BEHAVIOR_ANNOTATION.into(), json!(behavior.to_string()));
    }
    if hpa.get("status").is_some_and(Value::is_object) {
        let status = meta::object_mut(&mut hpa, "status");
        let current = match status.remove("currentMetrics") {
            Some(Value::Array(current)) => current,
            _ => Vec::new(),
        };
        let cpu = current.iter().find(|m| {
            m["type"] == "Resource"
                && m["resource"]["name"] == "cpu"
                && !m["resource"]["current"]["averageUtilization"].is_null()
        });
        if let Some(cpu) = cpu {
            status.insert(
                "currentCPUUtilizationPercentage".into(),
                cpu["resource"]["current"]["averageUtilization"].clone(),
            );
        }
        annotate(
            &mut annotations,
            CURRENT_METRICS_ANNOTATION,
            current.iter().map(v2_status_to_alpha).collect(),
        );
        if let Some(Value::Array(conditions)) = status.remove("conditions") {
            annotate(&mut annotations, CONDITIONS_ANNOTATION, conditions);
        }
        // v1's status has no omitempty on its counts.
        status.entry("currentReplicas").or_insert(json!(0));
        status.entry("desiredReplicas").or_insert(json!(0));
    }
    if !annotations.is_empty() {
        let metadata = meta::metadata_mut(&mut hpa);
        let existing = metadata.entry("annotations").or_insert_with(|| json!({}));
        if !existing.is_object() {
            *existing = json!({});
        }
        if let Value::Object(existing) = existing {
            existing.extend(annotations);
        }
    }
    hpa
}

/// Remove the annotations kube uses to carry v2 fields through v1 (so that only those the
/// conversion itself writes are ever present); returns them.
fn take_round_trip_annotations(hpa: &mut Value) -> Map<String, Value> {
    let mut taken = Map::new();
    let Some(Value::Object(annotations)) = hpa
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
    else {
        return taken;
    };
    for key in [
        METRICS_ANNOTATION,
        CURRENT_METRICS_ANNOTATION,
        CONDITIONS_ANNOTATION,
        BEHAVIOR_ANNOTATION,
    ] {
        if let Some(value) = annotations.remove(key) {
            taken.insert(key.into(), value);
        }
    }
    if annotations.is_empty()
        && let Some(Value::Object(metadata)) = hpa.get_mut("metadata")
    {
        metadata.remove("annotations");
    }
    taken
}

fn annotate(annotations: &mut Map<String, Value>, key: &str, list: Vec<Value>) {
    if !list.is_empty() {
        annotations.insert(key.into(), json!(Value::Array(list).to_string()));
    }
}

/// The lower-camel source field of a metric `type` (`Resource` → `resource`).
fn source_field(kind: &str) -> String {
    let mut chars = kind.chars();
    chars
        .next()
        .map(|first| first.to_ascii_lowercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// Copy the present fields `pairs` (`(from, to)`, dotted paths) of `from` into a new object.
fn remap(from: &Value, pairs: &[(&str, &str)]) -> Value {
    let mut out = json!({});
    for (source, target) in pairs {
        let pointer = format!("/{}", source.replace('.', "/"));
        let Some(value) = from.pointer(&pointer).filter(|v| !v.is_null()) else {
            continue;
        };
        let mut slot = &mut out;
        let mut parts = target.split('.').peekable();
        while let Some(part) = parts.next() {
            if parts.peek().is_none() {
                slot[part] = value.clone();
            } else {
                if !slot[part].is_object() {
                    slot[part] = json!({});
                }
                slot = &mut slot[part];
            }
        }
    }
    out
}

/// v2's fields of a metric source and v1's alpha names for them, per metric type: the
/// spec's targets. (v2 path, v1 alpha path.)
fn spec_fields(kind: &str) -> &'static [(&'static str, &'static str)] {
    match kind {
        "Resource" => &[
            ("name", "name"),
            ("target.averageUtilization", "targetAverageUtilization"),
            ("target.averageValue", "targetAverageValue"),
        ],
        "ContainerResource" => &[
            ("name", "name"),
            ("container", "container"),
            ("target.averageUtilization", "targetAverageUtilization"),
            ("target.averageValue", "targetAverageValue"),
        ],
        "Pods" => &[
            ("metric.name", "metricName"),
            ("metric.selector", "selector"),
            ("target.averageValue", "targetAverageValue"),
        ],
        "Object" => &[
            ("describedObject", "target"),
            ("metric.name", "metricName"),
            ("metric.selector", "selector"),
            ("target.value", "targetValue"),
            ("target.averageValue", "averageValue"),
        ],
        "External" => &[
            ("metric.name", "metricName"),
            ("metric.selector", "metricSelector"),
            ("target.value", "targetValue"),
            ("target.averageValue", "targetAverageValue"),
        ],
        _ => &[],
    }
}

/// The same for the status's current values.
fn status_fields(kind: &str) -> &'static [(&'static str, &'static str)] {
    match kind {
        "Resource" => &[
            ("name", "name"),
            ("current.averageUtilization", "currentAverageUtilization"),
            ("current.averageValue", "currentAverageValue"),
        ],
        "ContainerResource" => &[
            ("name", "name"),
            ("container", "container"),
            ("current.averageUtilization", "currentAverageUtilization"),
            ("current.averageValue", "currentAverageValue"),
        ],
        "Pods" => &[
            ("metric.name", "metricName"),
            ("metric.selector", "selector"),
            ("current.averageValue", "currentAverageValue"),
        ],
        "Object" => &[
            ("describedObject", "target"),
            ("metric.name", "metricName"),
            ("metric.selector", "selector"),
            ("current.value", "currentValue"),
            ("current.averageValue", "averageValue"),
        ],
        "External" => &[
            ("metric.name", "metricName"),
            ("metric.selector", "metricSelector"),
            ("current.value", "currentValue"),
            ("current.averageValue", "currentAverageValue"),
        ],
        _ => &[],
    }
}

fn v2_spec_to_alpha(metric: &Value) -> Value {
    convert_metric(metric, spec_fields, false, None)
}

fn v2_status_to_alpha(metric: &Value) -> Value {
    convert_metric(metric, status_fields, false, None)
}

fn alpha_spec_to_v2(metric: &Value) -> Value {
    convert_metric(metric, spec_fields, true, Some("target"))
}

fn alpha_status_to_v2(metric: &Value) -> Value {
    convert_metric(metric, status_fields, true, None)
}

/// One metric between v2 and v1's alpha shape, by `fields`' table for its type; toward
/// v2 (`to_v2`), a spec's target also gets the `type` v2 requires.
fn convert_metric(
    metric: &Value,
    fields: fn(&str) -> &'static [(&'static str, &'static str)],
    to_v2: bool,
    target: Option<&str>,
) -> Value {
    let kind = metric["type"].as_str().unwrap_or("");
    let field = source_field(kind);
    let pairs: Vec<(&str, &str)> = if to_v2 {
        fields(kind)
            .iter()
            .map(|(v2, alpha)| (*alpha, *v2))
            .collect()
    } else {
        fields(kind).to_vec()
    };
    let mut source = remap(&metric[field.as_str()], &pairs);
    if let Some(target) = target
        && let Some(spec) = source.get_mut(target).and_then(Value::as_object_mut)
    {
        let kind = if spec.contains_key("averageUtilization") {
            "Utilization"
        } else if spec.contains_key("averageValue") {
            "AverageValue"
        } else {
            "Value"
        };
        spec.insert("type".into(), json!(kind));
    }
    let mut out = json!({"type": kind});
    out[field] = source;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": "web"}, "spec": spec, "status": status})
    }

    #[test]
    fn a_cpu_target_becomes_a_resource_metric_and_back() {
        let written = v1(
            json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
                   "targetCPUUtilizationPercentage": 70}),
            json!({"currentReplicas": 2, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 40}),
        );
        let stored = convert(written, "autoscaling/v2");
        assert_eq!(
            stored["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 70}}}])
        );
        assert_eq!(stored["spec"]["minReplicas"], 1, "v2's default");
        assert_eq!(
            stored["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"],
            40
        );
        let mut stored = stored;
        stored["apiVersion"] = json!("autoscaling/v2");
        let read = convert(stored, "autoscaling/v1");
        assert_eq!(read["spec"]["targetCPUUtilizationPercentage"], 70);
        assert_eq!(read["status"]["currentCPUUtilizationPercentage"], 40);
        assert!(read["spec"].get("metrics").is_none());
        let annotations = &read["metadata"]["annotations"];
        assert!(annotations.get(METRICS_ANNOTATION).is_none(), "{read}");
        assert!(
            annotations[CURRENT_METRICS_ANNOTATION].is_string(),
            "kube keeps the raw status"
        );
    }

    #[test]
    fn no_metric_means_eighty_percent_cpu() {
        let written = v1(
            json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5}),
            Value::Null,
        );
        let stored = convert(written, "autoscaling/v2");
        assert_eq!(
            stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
    }

    #[test]
    fn other_metrics_conditions_and_behavior_travel_through_v1_in_annotations() {
        let stored = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "annotations": {"team": "a"}},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "memory",
                        "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                    {"type": "Pods", "pods": {"metric": {"name": "qps"},
                        "target": {"type": "AverageValue", "averageValue": "10"}}},
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
            },
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                       "conditions": [{"type": "AbleToScale", "status": "True"}]},
        });
        let read = convert(stored.clone(), "autoscaling/v1");
        assert!(read["spec"].get("targetCPUUtilizationPercentage").is_none());
        let annotations = &read["metadata"]["annotations"];
        assert_eq!(annotations["team"], "a");
        let metrics: Value =
            serde_json::from_str(annotations[METRICS_ANNOTATION].as_str().unwrap()).unwrap();
        assert_eq!(
            metrics,
            json!([
                {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "500Mi"}},
                {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10"}},
            ])
        );
        assert!(annotations[CONDITIONS_ANNOTATION].is_string());
        assert!(annotations[BEHAVIOR_ANNOTATION].is_string());

        // A v1 client writes what it read back: v2 loses nothing.
        let mut written = read;
        written["apiVersion"] = json!("autoscaling/v1");
        let again = convert(written, "autoscaling/v2");
        assert_eq!(again["spec"]["metrics"], stored["spec"]["metrics"]);
        assert_eq!(again["spec"]["behavior"], stored["spec"]["behavior"]);
        assert_eq!(
            again["status"]["conditions"],
            stored["status"]["conditions"]
        );
        assert_eq!(again["metadata"]["annotations"], json!({"team": "a"}));
    }
}
