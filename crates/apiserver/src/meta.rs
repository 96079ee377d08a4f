//! Object metadata on JSON values: reading and setting `metadata` fields.

use serde_json::{Map, Value};

pub fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `into` with each of `fields` as `from` has it, or without it where `from` has none: what
/// an update keeps of the stored object. A field already equal is left as it is.
pub fn copy_fields(
    from: Option<&Map<String, Value>>,
    into: &mut Map<String, Value>,
    fields: &[&str],
) {
    for &field in fields {
        match from.and_then(|m| m.get(field)) {
            Some(value) if into.get(field) != Some(value) => {
                into.insert(field.into(), value.clone());
            }
            Some(_) => {}
            None => {
                into.remove(field);
            }
        }
    }
}

/// `metadata` as a mutable map, created if missing or not an object.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    object_mut(obj, "metadata")
}

/// The object at `obj[field]`, made an empty one first if it is not one.
pub fn object_mut<'v>(obj: &'v mut Value, field: &str) -> &'v mut Map<String, Value> {
    if !obj.get(field).is_some_and(Value::is_object) {
        obj[field] = Value::Object(Map::new());
    }
    match obj.get_mut(field) {
        Some(Value::Object(m)) => m,
        _ => unreachable!("{field} was just set to an object"),
    }
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    metadata(obj)?.get(field)?.as_str()
}

pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name").filter(|s| !s.is_empty())
}

pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace").filter(|s| !s.is_empty())
}

pub fn uid(obj: &Value) -> Option<&str> {
    meta_str(obj, "uid")
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion").filter(|s| !s.is_empty())
}

pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    meta_str(obj, "deletionTimestamp")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    string_list(metadata(obj).and_then(|m| m.get("finalizers")))
}

/// The string at JSON `pointer` in `value`, if there is one.
pub fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The strings of a JSON array (other items skipped); empty when `value` is missing or not an
/// array.
pub fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub fn set_finalizers(obj: &mut Value, finalizers: &[String]) {
    let meta = metadata_mut(obj);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), Value::from(finalizers.to_vec()));
    }
}

/// The value of annotation `key`, if the object has it.
pub fn annotation<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    metadata(obj)?.get("annotations")?.get(key)?.as_str()
}

/// The value of label `key`, if the object has it.
pub fn label<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    labels(obj)?.get(key)?.as_str()
}

pub fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    metadata(obj)?.get("labels")?.as_object()
}

pub fn owner_references(obj: &Value) -> &[Value] {
    metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub fn generation(obj: &Value) -> i64 {
    metadata(obj)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Whether two objects agree apart from `metadata` and `status`: what `generation`
/// tracks. Compared in place, as every update asks.
pub fn same_spec(old: &Value, new: &Value) -> bool {
    spec_fields(old).count() == spec_fields(new).count()
        && spec_fields(old).all(|(k, v)| new.get(k) == Some(v))
}

fn spec_fields(obj: &Value) -> impl Iterator<Item = (&String, &Value)> {
    obj.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
}

/// Equal apart from `resourceVersion`: a write of `new` would change nothing. A change of
/// field ownership alone is a change (kube-apiserver writes it); an unchanged write leaves
/// `managedFields`, timestamps included, as they were.
///
/// Compared in place: every write asks, and copies of both objects would cost more than
/// the comparison.
pub fn same_content(old: &Value, new: &Value) -> bool {
    match (old.as_object(), new.as_object()) {
        (Some(old), Some(new)) => same_fields(old, new, |name, old, new| {
            if name == "metadata" {
                same_metadata(old, new)
            } else {
                old == new
            }
        }),
        _ => old == new,
    }
}

fn same_metadata(old: &Value, new: &Value) -> bool {
    match (old.as_object(), new.as_object()) {
        (Some(old), Some(new)) => {
            let without_version =
                |m: &Map<String, Value>| m.len() - usize::from(m.contains_key("resourceVersion"));
            without_version(old) == without_version(new)
                && old
                    .iter()
                    .filter(|(name, _)| *name != "resourceVersion")
                    .all(|(name, value)| new.get(name) == Some(value))
        }
        _ => old == new,
    }
}

/// Whether two objects have the same field names, with each pair of values `same`.
fn same_fields(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    same: impl Fn(&str, &Value, &Value) -> bool,
) -> bool {
    old.len() == new.len()
        && old
            .iter()
            .all(|(name, value)| new.get(name).is_some_and(|other| same(name, value, other)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn copied_fields_are_restored_or_removed_as_in_the_source() {
        let from = serde_json::json!({"labels": {"a": "1"}});
        let mut into = serde_json::json!({"labels": {"b": "2"}, "annotations": {"x": "y"},
            "ownerReferences": [{"uid": "u"}]});
        let into_map = into.as_object_mut().unwrap();
        copy_fields(from.as_object(), into_map, &["labels", "ownerReferences"]);
        assert_eq!(
            into,
            serde_json::json!({"labels": {"a": "1"}, "annotations": {"x": "y"}})
        );
    }
    #[test]
    fn same_spec_ignores_metadata_and_status() {
        let a = json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"y": 1}});
        let b = json!({"metadata": {"name": "b"}, "spec": {"x": 1}, "status": {"y": 2}});
        assert!(same_spec(&a, &b));
        assert!(!same_spec(
            &a,
            &json!({"metadata": {"name": "a"}, "spec": {"x": 2}})
        ));
        assert!(!same_spec(&a, &json!({"spec": {"x": 1}, "data": {}})));
        assert!(!same_spec(&a, &json!({"metadata": {"name": "a"}})));
        assert!(same_spec(&json!({"status": {}}), &json!(null)));
    }

    #[test]
    fn same_content_ignores_resource_version() {
        let a = json!({"metadata": {"name": "a", "resourceVersion": "1"}, "data": {"k": "v"}});
        let b = json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"k": "v"}});
        let c = json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"k": "w"}});
        assert!(same_content(&a, &b));
        assert!(!same_content(&a, &c));
        let unversioned = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        assert!(same_content(&a, &unversioned));
        let renamed =
            json!({"metadata": {"name": "b", "resourceVersion": "1"}, "data": {"k": "v"}});
        assert!(!same_content(&a, &renamed));
        let extra = json!({"metadata": {"name": "a"}, "data": {"k": "v"}, "spec": {}});
        assert!(!same_content(&a, &extra));
    }
}
