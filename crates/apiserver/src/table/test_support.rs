//! Shared fixtures for the table tests: a fixed clock, builders and readers.

use chrono::{DateTime, Duration, SecondsFormat, TimeZone, Utc};
use serde_json::{Value, json};

use super::{Columns, IncludeObject, table};

pub(super) fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 5, 10, 12, 0, 0)
        .single()
        .expect("valid time")
}

/// A timestamp `secs` seconds before `now()`.
pub(super) fn ago(secs: i64) -> String {
    (now() - Duration::seconds(secs)).to_rfc3339_opts(SecondsFormat::Secs, true)
}

pub(super) fn builtin(group: &'static str, kind: &'static str) -> Columns<'static> {
    Columns::Builtin { group, kind }
}

pub(super) fn render(columns: &Columns<'_>, objects: &[Value]) -> Value {
    table(
        columns,
        objects,
        now(),
        IncludeObject::None,
        json!({"resourceVersion": "42"}),
    )
}

pub(super) fn column_names(t: &Value) -> Vec<String> {
    t["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c["name"].as_str().expect("name").to_string())
        .collect()
}

pub(super) fn wide_names(t: &Value) -> Vec<String> {
    t["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter(|c| c["priority"] == json!(1))
        .map(|c| c["name"].as_str().expect("name").to_string())
        .collect()
}

pub(super) fn cells(t: &Value, row: usize) -> Vec<Value> {
    t["rows"][row]["cells"].as_array().expect("cells").clone()
}

pub(super) fn assert_shape(t: &Value) {
    let n = t["columnDefinitions"].as_array().expect("columns").len();
    for row in t["rows"].as_array().expect("rows") {
        assert_eq!(row["cells"].as_array().expect("cells").len(), n, "{row}");
    }
}

pub(super) fn single(columns: &Columns<'_>, obj: Value) -> (Value, Vec<Value>) {
    let t = render(columns, &[obj]);
    assert_shape(&t);
    let c = cells(&t, 0);
    (t, c)
}

pub(super) fn widget() -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": "w1",
            "namespace": "default",
            "creationTimestamp": ago(3 * 3600),
            "labels": {"app.kubernetes.io/name": "shop"}
        },
        "spec": {
            "replicas": 3,
            "ratio": 0.5,
            "paused": false,
            "size": "large",
            "items": [{"name": "a", "qty": 1}, {"name": "b", "qty": 2}, {"name": "c", "qty": 3}],
            "tags": ["x", "y"],
            "selector": {"tier": "front"}
        },
        "status": {
            "conditions": [
                {"type": "Synced", "status": "False", "lastTransitionTime": ago(60)},
                {"type": "Ready", "status": "True", "lastTransitionTime": ago(120)}
            ],
            "observedGeneration": 4
        }
    })
}

pub(super) fn configmap() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "default",
            "uid": "u-1",
            "resourceVersion": "7",
            "creationTimestamp": ago(3 * 86400),
            "labels": {"app": "web"}
        },
        "data": {"a": "1", "b": "2"},
        "binaryData": {"c": "AA=="}
    })
}
