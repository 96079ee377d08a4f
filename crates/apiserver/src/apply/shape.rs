//! How lists and objects of a kind merge and are owned: `x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys` and `x-kubernetes-map-type` from a CRD schema, or the
//! strategic-merge table for built-in kinds (whose merge keys become list-map keys, every
//! other list atomic).
//!
//! Paths are field names from the object root, list levels skipped (as in
//! [`crate::patch::strategic_merge_key`]).

use serde_json::Value;

use crate::meta;
use crate::patch::{strategic_merge_key, strategic_set_list};

/// How the items of a list are told apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole; owned as one field.
    Atomic,
    /// Scalars, each owned on its own (`v:` keys).
    Set,
    /// Objects identified by these key fields (`k:` keys).
    Map(Vec<ListMapKey>),
}

/// A key field of a list map, and the value an item that omits it is identified by
/// (structured-merge-diff takes it from the schema's `default`, so an applied
/// configuration that leaves a defaulted key out still names the item it means).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListMapKey {
    pub name: String,
    pub default: Option<Value>,
}

impl ListMapKey {
    fn named(name: &str) -> ListMapKey {
        ListMapKey {
            name: name.to_owned(),
            default: None,
        }
    }

    /// The key's value in `item`: its own (not null), else the default.
    pub fn value_in<'a>(&'a self, item: &'a Value) -> Option<&'a Value> {
        item.get(&self.name)
            .filter(|v| !v.is_null())
            .or(self.default.as_ref())
    }
}

/// The shape of one kind: its name and, for custom resources, its structural schema.
#[derive(Clone, Copy, Debug)]
pub struct Shape<'a> {
    pub kind: &'a str,
    pub schema: Option<&'a Value>,
}

impl Shape<'static> {
    /// A Pod, known by its built-in rules alone: the shape the apply unit tests work on.
    #[cfg(test)]
    pub const POD: Shape<'static> = Shape {
        kind: "Pod",
        schema: None,
    };
}

/// Workload kinds whose `spec.selector` is a `LabelSelector`, an atomic struct.
const LABEL_SELECTOR_KINDS: &[&str] = &["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"];

impl Shape<'_> {
    pub fn list_type(&self, path: &[&str]) -> ListType {
        let from_schema = match (path.first(), self.schema) {
            (Some(&"metadata"), _) | (_, None) => None,
            (_, Some(schema)) => {
                Some(schema_at(schema, path).map_or(ListType::Atomic, schema_list_type))
            }
        };
        from_schema.unwrap_or_else(|| self.builtin_list_type(path))
    }

    fn builtin_list_type(&self, path: &[&str]) -> ListType {
        if let Some(key) = strategic_merge_key(self.kind, path) {
            ListType::Map(builtin_list_map_keys(key))
        } else if strategic_set_list(self.kind, path) {
            ListType::Set
        } else {
            ListType::Atomic
        }
    }

    /// Whether the object at `path` is replaced and owned as a whole.
    pub fn atomic_object(&self, path: &[&str]) -> bool {
        match self.schema {
            Some(schema) if path.first() != Some(&"metadata") => schema_at(schema, path)
                .and_then(|s| s.get("x-kubernetes-map-type"))
                .is_some_and(|t| t == "atomic"),
            _ => path == ["spec", "selector"] && LABEL_SELECTOR_KINDS.contains(&self.kind),
        }
    }
}

/// The list-map keys of a built-in list, from its strategic merge key. Most lists are
/// keyed by their merge key alone; three carry a second `+listMapKey` in kube's Go types,
/// and only server-side apply and managed fields use it (a strategic merge patch still
/// merges on the first: kubernetes/kubernetes#108255). Each of those merge keys names
/// that one list in the table, so the merge key is enough to tell them apart.
fn builtin_list_map_keys(merge_key: &str) -> Vec<ListMapKey> {
    let tcp_by_default = || ListMapKey {
        name: "protocol".into(),
        default: Some(Value::String("TCP".into())),
    };
    match merge_key {
        // A container's ports, and a Service's: `protocol` defaults to TCP.
        "containerPort" | "port" => vec![ListMapKey::named(merge_key), tcp_by_default()],
        "topologyKey" => vec![
            ListMapKey::named(merge_key),
            ListMapKey::named("whenUnsatisfiable"),
        ],
        _ => vec![ListMapKey::named(merge_key)],
    }
}

fn schema_list_type(node: &Value) -> ListType {
    match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListType::Set,
        Some("map") => {
            let item_fields = node.get("items").and_then(|i| i.get("properties"));
            let keys: Vec<ListMapKey> = meta::string_list(node.get("x-kubernetes-list-map-keys"))
                .into_iter()
                .map(|name| ListMapKey {
                    default: item_fields
                        .and_then(|f| f.get(&name))
                        .and_then(|f| f.get("default"))
                        .cloned(),
                    name,
                })
                .collect();
            if keys.is_empty() {
                ListType::Atomic
            } else {
                ListType::Map(keys)
            }
        }
        _ => ListType::Atomic,
    }
}

/// The schema node of the field at `path`, descending through list items on the way.
fn schema_at<'s>(schema: &'s Value, path: &[&str]) -> Option<&'s Value> {
    let mut node = schema;
    for name in path {
        while node.get("type").and_then(Value::as_str) == Some("array") {
            node = node.get("items")?;
        }
        node = node
            .get("properties")
            .and_then(|p| p.get(*name))
            .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?;
    }
    Some(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_lists() {
        let pod = Shape {
            kind: "Pod",
            schema: None,
        };
        assert_eq!(
            pod.list_type(&["spec", "containers"]),
            ListType::Map(vec![ListMapKey::named("name")])
        );
        let tcp = Some(json!("TCP"));
        let protocol = ListMapKey {
            name: "protocol".into(),
            default: tcp,
        };
        assert_eq!(
            pod.list_type(&["spec", "initContainers", "ports"]),
            ListType::Map(vec![ListMapKey::named("containerPort"), protocol.clone()])
        );
        let service = Shape {
            kind: "Service",
            schema: None,
        };
        assert_eq!(
            service.list_type(&["spec", "ports"]),
            ListType::Map(vec![ListMapKey::named("port"), protocol])
        );
        assert_eq!(
            pod.list_type(&["spec", "topologySpreadConstraints"]),
            ListType::Map(vec![
                ListMapKey::named("topologyKey"),
                ListMapKey::named("whenUnsatisfiable")
            ])
        );
        assert_eq!(pod.list_type(&["metadata", "finalizers"]), ListType::Set);
        assert_eq!(
            pod.list_type(&["spec", "containers", "args"]),
            ListType::Atomic
        );
        let deployment = Shape {
            kind: "Deployment",
            schema: None,
        };
        assert!(deployment.atomic_object(&["spec", "selector"]));
        assert!(!deployment.atomic_object(&["spec", "template"]));
    }

    #[test]
    fn schema_lists() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["port", "protocol"],
                      "items": {"type": "object", "properties": {
                          "protocol": {"type": "string", "default": "TCP"},
                          "tags": {"type": "array",
                          "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
            "args": {"type": "array", "items": {"type": "string"}},
            "sel": {"type": "object", "x-kubernetes-map-type": "atomic"}
        }}}});
        let shape = Shape {
            kind: "Thing",
            schema: Some(&schema),
        };
        let protocol = ListMapKey {
            name: "protocol".into(),
            default: Some(json!("TCP")),
        };
        assert_eq!(
            shape.list_type(&["spec", "ports"]),
            ListType::Map(vec![ListMapKey::named("port"), protocol])
        );
        assert_eq!(shape.list_type(&["spec", "ports", "tags"]), ListType::Set);
        assert_eq!(shape.list_type(&["spec", "args"]), ListType::Atomic);
        assert_eq!(shape.list_type(&["metadata", "finalizers"]), ListType::Set);
        assert!(shape.atomic_object(&["spec", "sel"]));
    }
}
