//! The fields an object sets, and the fields that differ between two objects, as
//! structured-merge-diff computes them: scalars, atomic lists and objects, and empty or
//! null values are leaves (an empty object is still compared field by field); items of set and map lists are members as well as their
//! fields; an object's fields are walked one by one.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::fieldset::{self, FieldSet};
use super::shape::{ListType, Shape};

/// Metadata the server sets: never owned by a manager (kube-apiserver's stripped fields).
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// What changed from one object to another.
#[derive(Debug, Default, PartialEq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    /// Fields whose value is new or different (what an owner of them would lose).
    pub fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// One step below a value: its path element, the field name it adds (none for list
/// items), and the child value.
struct Child<'v> {
    element: String,
    name: Option<&'v str>,
    value: &'v Value,
}

enum Node<'v> {
    Leaf,
    Object(Vec<Child<'v>>),
    List(Vec<Child<'v>>),
}

fn node<'v>(value: &'v Value, names: &[&str], shape: Shape) -> Node<'v> {
    match value {
        Value::Object(map) if !shape.atomic_object(names) => Node::Object(
            map.iter()
                .map(|(k, v)| Child {
                    element: fieldset::field(k),
                    name: Some(k),
                    value: v,
                })
                .collect(),
        ),
        Value::Array(items) => match shape.list_type(names) {
            ListType::Atomic => Node::Leaf,
            ListType::Set => list_node(items, |item| {
                (!item.is_object() && !item.is_array()).then(|| fieldset::value(item))
            }),
            ListType::Map(keys) => list_node(items, |item| item_key(item, &keys)),
        },
        _ => Node::Leaf,
    }
}

/// A list whose items all have an element; else the list is a leaf.
fn list_node<'v>(items: &'v [Value], element: impl Fn(&Value) -> Option<String>) -> Node<'v> {
    items
        .iter()
        .map(|value| {
            element(value).map(|element| Child {
                element,
                name: None,
                value,
            })
        })
        .collect::<Option<Vec<_>>>()
        .map_or(Node::Leaf, Node::List)
}

/// The `k:` element of a list-map item, or none when it lacks a key field.
pub fn item_key(item: &Value, keys: &[String]) -> Option<String> {
    let map: Map<String, Value> = keys
        .iter()
        .map(|k| {
            item.get(k)
                .filter(|v| !v.is_null())
                .map(|v| (k.clone(), v.clone()))
        })
        .collect::<Option<_>>()?;
    Some(fieldset::key(&map))
}

/// `obj` without the fields no manager owns.
pub fn without_server_fields(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Value::Object(map) = &mut obj {
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            for field in SERVER_METADATA {
                meta.remove(*field);
            }
        }
    }
    obj
}

/// The fields `obj` sets (an applied configuration's fields).
pub fn field_set(obj: &Value, shape: Shape) -> FieldSet {
    let mut out = FieldSet::default();
    collect(
        &without_server_fields(obj),
        &mut Vec::new(),
        &mut Vec::new(),
        shape,
        &mut out,
    );
    out
}

fn collect(
    value: &Value,
    names: &mut Vec<String>,
    path: &mut Vec<String>,
    shape: Shape,
    out: &mut FieldSet,
) {
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    match node(value, &name_refs, shape) {
        Node::Leaf => insert(out, path),
        Node::Object(children) if children.is_empty() => insert(out, path),
        Node::Object(children) | Node::List(children) => {
            for child in children {
                descend(names, path, &child, |names, path| {
                    collect(child.value, names, path, shape, out);
                    if child.name.is_none() {
                        insert(out, path);
                    }
                });
            }
        }
    }
}

fn descend(
    names: &mut Vec<String>,
    path: &mut Vec<String>,
    child: &Child,
    f: impl FnOnce(&mut Vec<String>, &mut Vec<String>),
) {
    path.push(child.element.clone());
    if let Some(name) = child.name {
        names.push(name.to_owned());
    }
    f(names, path);
    if child.name.is_some() {
        names.pop();
    }
    path.pop();
}

/// Adds `path`, unless it is the root or `metadata` itself (never owned, as in kube).
fn insert(set: &mut FieldSet, path: &[String]) {
    if !path.is_empty() && path != ["f:metadata"] {
        set.insert(path);
    }
}

/// The fields added, modified and removed from `old` to `new`.
pub fn compare(old: &Value, new: &Value, shape: Shape) -> Comparison {
    let mut out = Comparison::default();
    let (old, new) = (without_server_fields(old), without_server_fields(new));
    diff(
        Some(&old),
        Some(&new),
        &mut Vec::new(),
        &mut Vec::new(),
        shape,
        &mut out,
    );
    out
}

fn diff(
    old: Option<&Value>,
    new: Option<&Value>,
    names: &mut Vec<String>,
    path: &mut Vec<String>,
    shape: Shape,
    out: &mut Comparison,
) {
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let old_node = old.map(|v| node(v, &name_refs, shape));
    let new_node = new.map(|v| node(v, &name_refs, shape));
    let (old_children, new_children) = match (old_node, new_node) {
        (Some(Node::Object(o)), Some(Node::Object(n)))
        | (Some(Node::List(o)), Some(Node::List(n))) => (o, n),
        (None, Some(Node::Object(n) | Node::List(n))) => (Vec::new(), n),
        (Some(Node::Object(o) | Node::List(o)), None) => (o, Vec::new()),
        _ => {
            let target = match (old, new) {
                (None, _) => &mut out.added,
                (_, None) => &mut out.removed,
                (Some(o), Some(n)) if o != n => &mut out.modified,
                _ => return,
            };
            insert(target, path);
            return;
        }
    };
    // Lookups by element keep large maps and lists linear-logarithmic, not quadratic.
    let old_by_element: BTreeMap<&str, &Value> = old_children
        .iter()
        .map(|c| (c.element.as_str(), c.value))
        .collect();
    let new_elements: BTreeSet<&str> = new_children.iter().map(|c| c.element.as_str()).collect();
    for child in &new_children {
        let before = old_by_element.get(child.element.as_str()).copied();
        descend(names, path, child, |names, path| {
            diff(before, Some(child.value), names, path, shape, out);
            if before.is_none() {
                insert(&mut out.added, path);
            }
        });
    }
    for child in &old_children {
        if !new_elements.contains(child.element.as_str()) {
            descend(names, path, child, |names, path| {
                diff(Some(child.value), None, names, path, shape, out);
                insert(&mut out.removed, path);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POD: Shape = Shape::POD;

    #[test]
    fn applied_fields_of_a_pod() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "a"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c", "image": "i", "args": ["1"]}]}
        });
        let expected = json!({
            "f:metadata": {"f:labels": {"f:app": {}}, "f:finalizers": {"v:\"x\"": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {
                ".": {}, "f:args": {}, "f:image": {}, "f:name": {}
            }}}
        });
        assert_eq!(field_set(&pod, POD).to_fields_v1(), expected);
    }

    #[test]
    fn comparison_marks_added_objects() {
        let old = json!({"metadata": {"name": "c"}});
        let new = json!({"metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"k": "v"}});
        let c = compare(&old, &new, POD);
        assert_eq!(
            c.added.to_fields_v1(),
            json!({
                "f:data": {".": {}, "f:k": {}},
                "f:metadata": {"f:labels": {".": {}, "f:a": {}}}
            })
        );
        assert!(c.modified.is_empty() && c.removed.is_empty());
    }

    #[test]
    fn comparison_of_lists_and_scalars() {
        let old = json!({"spec": {"replicas": 1, "containers": [{"name": "a", "image": "1"}, {"name": "b"}], "args": [1]}});
        let new = json!({"spec": {"replicas": 2, "containers": [{"name": "a", "image": "2"}], "args": [1]}});
        let c = compare(&old, &new, POD);
        assert_eq!(
            c.modified.to_fields_v1(),
            json!({"f:spec": {"f:replicas": {}, "f:containers": {"k:{\"name\":\"a\"}": {"f:image": {}}}}})
        );
        assert_eq!(
            c.removed.to_fields_v1(),
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"b\"}": {".": {}, "f:name": {}}}}})
        );
        assert!(compare(&old, &old, POD).is_same());
    }

    #[test]
    fn list_items_without_their_key_make_the_list_atomic() {
        let pod = json!({"spec": {"containers": [{"image": "i"}]}});
        assert_eq!(
            field_set(&pod, POD).to_fields_v1(),
            json!({"f:spec": {"f:containers": {}}})
        );
    }
}
