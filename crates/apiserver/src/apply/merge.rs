//! Merging an applied configuration into the live object, and removing the fields an
//! applier gave up. Objects merge field by field, set and map lists item by item (live
//! items keep their place, new ones follow), everything else is replaced.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::fields::item_key;
use super::fieldset::{self, FieldSet};
use super::shape::{ListType, Shape};

/// `live` with `config` merged in; `config` wins where both set a value.
pub fn merge(live: &Value, config: &Value, shape: Shape) -> Value {
    let mut names = Vec::new();
    let mut merged = merge_at(Some(live), config, &mut names, shape);
    drop_nulls(&mut merged);
    merged
}

fn merge_at(live: Option<&Value>, config: &Value, names: &mut Vec<String>, shape: Shape) -> Value {
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    match (live, config) {
        (Some(Value::Object(live)), Value::Object(config)) if !shape.atomic_object(&name_refs) => {
            let mut out = live.clone();
            for (k, v) in config {
                names.push(k.clone());
                let merged = merge_at(live.get(k), v, names, shape);
                names.pop();
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Some(Value::Array(live)), Value::Array(config)) => match shape.list_type(&name_refs) {
            ListType::Atomic => Value::Array(config.clone()),
            ListType::Set => merge_items(
                live,
                config,
                |item| Some(fieldset::value(item)),
                |_, c, _| c.clone(),
                names,
            ),
            ListType::Map(keys) => merge_items(
                live,
                config,
                |item| item_key(item, &keys),
                |l, c, names| merge_at(Some(l), c, names, shape),
                names,
            ),
        },
        _ => config.clone(),
    }
}

/// Items of `live` (merged with `config`'s item of the same key) then `config`'s new items.
/// Items without a key make the list atomic.
fn merge_items(
    live: &[Value],
    config: &[Value],
    key_of: impl Fn(&Value) -> Option<String>,
    merge_item: impl Fn(&Value, &Value, &mut Vec<String>) -> Value,
    names: &mut Vec<String>,
) -> Value {
    let keyed = |items: &[Value]| -> Option<Vec<String>> { items.iter().map(&key_of).collect() };
    let (Some(live_keys), Some(config_keys)) = (keyed(live), keyed(config)) else {
        return Value::Array(config.to_vec());
    };
    let config_index: BTreeMap<&String, usize> = config_keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k, i))
        .collect();
    let live_set: BTreeSet<&String> = live_keys.iter().collect();
    let mut out: Vec<Value> = live
        .iter()
        .zip(&live_keys)
        .map(|(item, key)| match config_index.get(key) {
            Some(&i) => merge_item(item, &config[i], names),
            None => item.clone(),
        })
        .collect();
    out.extend(
        config
            .iter()
            .zip(&config_keys)
            .filter(|(_, key)| !live_set.contains(key))
            .map(|(item, _)| item.clone()),
    );
    Value::Array(out)
}

/// A null in an applied configuration owns the field but leaves it unset.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Removes from `obj` every member of `given_up` that no set in `owned` has at or below
/// it, except the key fields of a list item that stays.
pub fn remove_unowned(obj: &mut Value, given_up: &FieldSet, owned: &FieldSet) {
    for path in given_up.paths() {
        if !path.is_empty() && !owned.has_at_or_below(&path) && !is_key_of_kept_item(&path, owned) {
            remove_path(obj, &path);
        }
    }
}

fn is_key_of_kept_item(path: &[String], owned: &FieldSet) -> bool {
    let [parent @ .., item, field] = path else {
        return false;
    };
    let Some(keys) = item.strip_prefix("k:") else {
        return false;
    };
    let mut item_path = parent.to_vec();
    item_path.push(item.clone());
    let name = field.strip_prefix("f:").unwrap_or(field);
    serde_json::from_str::<serde_json::Map<String, Value>>(keys).is_ok_and(|k| k.contains_key(name))
        && owned.has_at_or_below(&item_path)
}

/// Removes the value at `path` (path elements as in `FieldsV1`), if there is one.
pub fn remove_path(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = obj;
    for element in parents {
        match child_mut(node, element) {
            Some(child) => node = child,
            None => return,
        }
    }
    match (node, last.split_once(':')) {
        (Value::Object(map), Some(("f", name))) => {
            map.remove(name);
        }
        (Value::Array(items), Some((_, _))) => {
            if let Some(i) = position(items, last) {
                items.remove(i);
            }
        }
        _ => {}
    }
}

fn child_mut<'v>(node: &'v mut Value, element: &str) -> Option<&'v mut Value> {
    match (node, element.split_once(':')?) {
        (Value::Object(map), ("f", name)) => map.get_mut(name),
        (Value::Array(items), _) => {
            let i = position(items, element)?;
            items.get_mut(i)
        }
        _ => None,
    }
}

/// The index of the list item a `k:`, `v:` or `i:` element names.
fn position(items: &[Value], element: &str) -> Option<usize> {
    let (kind, rest) = element.split_once(':')?;
    match kind {
        "i" => rest.parse().ok().filter(|i| *i < items.len()),
        "v" => {
            let wanted: Value = serde_json::from_str(rest).ok()?;
            items.iter().position(|item| *item == wanted)
        }
        "k" => {
            let keys: serde_json::Map<String, Value> = serde_json::from_str(rest).ok()?;
            items
                .iter()
                .position(|item| keys.iter().all(|(k, v)| item.get(k) == Some(v)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::fields::field_set;
    use serde_json::json;

    const POD: Shape = Shape::POD;

    #[test]
    fn merges_by_list_type() {
        let live = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1"}},
            "spec": {"containers": [{"name": "a", "image": "1", "args": ["x"]}, {"name": "b"}]}});
        let config = json!({"metadata": {"finalizers": ["b", "a"], "labels": {"y": "2", "gone": null}},
            "spec": {"containers": [{"name": "c"}, {"name": "a", "image": "2", "args": ["y"]}]}});
        assert_eq!(
            merge(&live, &config, POD),
            json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
                "spec": {"containers": [{"name": "a", "image": "2", "args": ["y"]}, {"name": "b"}, {"name": "c"}]}})
        );
    }

    #[test]
    fn removes_what_nobody_else_owns() {
        let mut obj = json!({"data": {"a": "1", "b": "2", "c": "3"},
            "spec": {"containers": [{"name": "a", "image": "1"}]}});
        let given_up = field_set(&obj, POD);
        let mut others = field_set(&json!({"data": {"c": "3"}}), POD);
        others.insert(&[
            "f:spec".into(),
            "f:containers".into(),
            "k:{\"name\":\"a\"}".into(),
            "f:image".into(),
        ]);
        let still_applied = field_set(&json!({"data": {"a": "1"}}), POD);
        remove_unowned(
            &mut obj,
            &given_up.difference(&still_applied),
            &others.union(&still_applied),
        );
        assert_eq!(
            obj,
            json!({"data": {"a": "1", "c": "3"}, "spec": {"containers": [{"name": "a", "image": "1"}]}})
        );
    }

    #[test]
    fn removes_list_items() {
        let mut obj = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        remove_path(
            &mut obj,
            &["f:metadata".into(), "f:finalizers".into(), "v:\"a\"".into()],
        );
        remove_path(
            &mut obj,
            &[
                "f:spec".into(),
                "f:containers".into(),
                "k:{\"name\":\"b\"}".into(),
            ],
        );
        remove_path(
            &mut obj,
            &["f:spec".into(), "f:missing".into(), "f:x".into()],
        );
        assert_eq!(
            obj,
            json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "a"}]}})
        );
    }
}
