//! The fields an object sets, and the fields that differ between two objects, as
//! structured-merge-diff computes them: scalars, atomic lists and objects, and empty or
//! null values are leaves (an empty object is still compared field by field); items of set and map lists are members as well as their
//! fields; an object's fields are walked one by one.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::fieldset::{self, FieldSet};
use super::shape::{ListMapKey, ListType, Shape};

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

    /// [`Self::changed`] and the removed fields, moved out: a create adds every field of
    /// its object, which a copy would walk again.
    pub fn into_changed_and_removed(self) -> (FieldSet, FieldSet) {
        let mut changed = self.added;
        changed.absorb(self.modified);
        (changed, self.removed)
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

/// The `k:` element of a list-map item, or none when it lacks a key field that has no
/// default.
pub fn item_key(item: &Value, keys: &[ListMapKey]) -> Option<String> {
    let fields: BTreeMap<&str, &Value> = keys
        .iter()
        .map(|k| k.value_in(item).map(|v| (k.name.as_str(), v)))
        .collect::<Option<_>>()?;
    fieldset::key(&fields)
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
///
/// Walks both objects in place: server fields are skipped where they sit instead of being
/// stripped from copies, and a subtree equal on both sides is not walked at all.
pub fn compare(old: &Value, new: &Value, shape: Shape) -> Comparison {
    let mut out = Comparison::default();
    let mut walk = Walk {
        shape,
        names: Vec::new(),
        path: Vec::new(),
        out: &mut out,
    };
    walk.diff(Some(old), Some(new));
    out
}

/// The state of one comparison: where it is in both objects and what it found.
struct Walk<'v, 's, 'o> {
    shape: Shape<'s>,
    /// Field names from the root, list levels skipped (what [`Shape`] is asked with).
    names: Vec<&'v str>,
    /// Path elements from the root, list items included (what the field sets record).
    path: Vec<String>,
    out: &'o mut Comparison,
}

/// The children of a value the comparison descends into.
enum Children<'v> {
    Leaf,
    Object(&'v Map<String, Value>),
    List(Vec<Child<'v>>),
}

impl<'v> Walk<'v, '_, '_> {
    fn diff(&mut self, old: Option<&'v Value>, new: Option<&'v Value>) {
        let old_children = old.map(|v| self.children(v));
        let new_children = new.map(|v| self.children(v));
        match (old_children, new_children) {
            (Some(Children::Object(o)), Some(Children::Object(n))) => {
                self.diff_objects(Some(o), Some(n))
            }
            (Some(Children::List(o)), Some(Children::List(n))) => self.diff_lists(&o, &n),
            (None, Some(Children::Object(n))) => self.diff_objects(None, Some(n)),
            (Some(Children::Object(o)), None) => self.diff_objects(Some(o), None),
            (None, Some(Children::List(n))) => self.diff_lists(&[], &n),
            (Some(Children::List(o)), None) => self.diff_lists(&o, &[]),
            _ => {
                let target = match (old, new) {
                    (None, _) => &mut self.out.added,
                    (_, None) => &mut self.out.removed,
                    (Some(o), Some(n)) if o != n => &mut self.out.modified,
                    _ => return,
                };
                insert(target, &self.path);
            }
        }
    }

    fn children(&self, value: &'v Value) -> Children<'v> {
        match value {
            Value::Object(map) if !self.shape.atomic_object(&self.names) => Children::Object(map),
            Value::Object(_) => Children::Leaf,
            _ => match node(value, &self.names, self.shape) {
                Node::List(children) => Children::List(children),
                Node::Leaf | Node::Object(_) => Children::Leaf,
            },
        }
    }

    fn diff_objects(
        &mut self,
        old: Option<&'v Map<String, Value>>,
        new: Option<&'v Map<String, Value>>,
    ) {
        let unowned = server_fields_at(&self.path);
        let owned = |(name, _): &(&String, &Value)| !unowned.contains(&name.as_str());
        for (name, value) in new.into_iter().flatten().filter(owned) {
            let before = old.and_then(|o| o.get(name));
            self.child(name, before, Some(value));
        }
        for (name, value) in old.into_iter().flatten().filter(owned) {
            if !new.is_some_and(|n| n.contains_key(name)) {
                self.child(name, Some(value), None);
            }
        }
    }

    fn diff_lists(&mut self, old: &[Child<'v>], new: &[Child<'v>]) {
        // Lookups by element keep large lists linear-logarithmic, not quadratic.
        let old_by_element: BTreeMap<&str, &Value> =
            old.iter().map(|c| (c.element.as_str(), c.value)).collect();
        let new_elements: BTreeSet<&str> = new.iter().map(|c| c.element.as_str()).collect();
        for child in new {
            let before = old_by_element.get(child.element.as_str()).copied();
            self.item(&child.element, before, Some(child.value));
        }
        for child in old {
            if !new_elements.contains(child.element.as_str()) {
                self.item(&child.element, Some(child.value), None);
            }
        }
    }

    /// Compares a field of an object, unless it is equal on both sides.
    fn child(&mut self, name: &'v str, old: Option<&'v Value>, new: Option<&'v Value>) {
        self.names.push(name);
        if !self.unchanged(old, new) {
            self.path.push(fieldset::field(name));
            self.compare_here(old, new);
            self.path.pop();
        }
        self.names.pop();
    }

    /// Compares an item of a list, unless it is equal on both sides.
    fn item(&mut self, element: &str, old: Option<&'v Value>, new: Option<&'v Value>) {
        if !self.unchanged(old, new) {
            self.path.push(element.to_owned());
            self.compare_here(old, new);
            self.path.pop();
        }
    }

    /// Compares the values at `self.path`. A value new on this side is added whole: its
    /// set is built bottom-up and grafted once, instead of inserting each of its paths
    /// from the root (a create adds every field of its object).
    fn compare_here(&mut self, old: Option<&'v Value>, new: Option<&'v Value>) {
        match (old, new) {
            (None, Some(added)) => {
                let mut set = self.added(added);
                if self.path == ["f:metadata"] {
                    // As `insert` has it: `metadata` itself is never owned.
                    set.remove_root();
                }
                self.out.added.graft(&self.path, set);
            }
            _ => {
                self.diff(old, new);
                self.record_presence(old, new);
            }
        }
    }

    /// The fields of `value` at `self.path`, all of them added: every node a member, as
    /// [`Self::diff`] and [`Self::record_presence`] would find them with nothing on the
    /// other side.
    fn added(&mut self, value: &'v Value) -> FieldSet {
        let mut set = FieldSet::member();
        match self.children(value) {
            Children::Object(map) => {
                let unowned = server_fields_at(&self.path);
                for (name, child) in map.iter().filter(|(n, _)| !unowned.contains(&n.as_str())) {
                    self.names.push(name);
                    self.path.push(fieldset::field(name));
                    let below = self.added(child);
                    if let Some(element) = self.path.pop() {
                        set.add_below(element, below);
                    }
                    self.names.pop();
                }
            }
            Children::List(items) => {
                for item in items {
                    self.path.push(item.element);
                    let below = self.added(item.value);
                    if let Some(element) = self.path.pop() {
                        set.add_below(element, below);
                    }
                }
            }
            Children::Leaf => {}
        }
        set
    }

    /// A field or item present on one side only is itself added or removed.
    fn record_presence(&mut self, old: Option<&Value>, new: Option<&Value>) {
        match (old, new) {
            (None, Some(_)) => insert(&mut self.out.added, &self.path),
            (Some(_), None) => insert(&mut self.out.removed, &self.path),
            _ => {}
        }
    }

    /// Whether walking `old` and `new` (at `self.names`) would find nothing: they are
    /// equal and hold no list whose items share a key yet differ, which the walk pairs
    /// up by key and so reports even between equal values.
    fn unchanged(&mut self, old: Option<&'v Value>, new: Option<&'v Value>) -> bool {
        match (old, new) {
            (Some(o), Some(n)) => o == n && !self.has_ambiguous_items(n),
            _ => false,
        }
    }

    fn has_ambiguous_items(&mut self, value: &'v Value) -> bool {
        match value {
            Value::Object(map) if !self.shape.atomic_object(&self.names) => {
                map.iter().any(|(name, child)| {
                    self.names.push(name);
                    let found = self.has_ambiguous_items(child);
                    self.names.pop();
                    found
                })
            }
            // Items of a set are scalars (else the set is a leaf), one value per element.
            Value::Array(items) => match self.shape.list_type(&self.names) {
                ListType::Atomic | ListType::Set => false,
                ListType::Map(keys) => {
                    // An item without its key fields makes the list a leaf.
                    let Some(item_keys) = items
                        .iter()
                        .map(|item| key_values(item, &keys))
                        .collect::<Option<Vec<_>>>()
                    else {
                        return false;
                    };
                    items_share_a_key_yet_differ(items, &item_keys, &keys)
                        || items.iter().any(|item| self.has_ambiguous_items(item))
                }
            },
            _ => false,
        }
    }
}

/// The values of an item's key fields, or none when one is missing or null (as
/// [`item_key`] reads them, without formatting its element).
fn key_values<'a>(item: &'a Value, keys: &'a [ListMapKey]) -> Option<Vec<&'a Value>> {
    keys.iter().map(|k| k.value_in(item)).collect()
}

/// Lists longer than this compare their items' elements through a map, not pairwise.
const PAIRWISE_ITEMS: usize = 16;

/// Whether two items of a list map have the same key but different values. Equal key
/// values always give equal elements, so comparing values can only find more such pairs
/// than comparing elements, never fewer: a false alarm costs a walk, which finds nothing.
fn items_share_a_key_yet_differ(
    items: &[Value],
    item_keys: &[Vec<&Value>],
    keys: &[ListMapKey],
) -> bool {
    if items.len() > PAIRWISE_ITEMS {
        let mut seen: BTreeMap<String, &Value> = BTreeMap::new();
        return items.iter().any(|item| {
            item_key(item, keys)
                .and_then(|element| seen.insert(element, item))
                .is_some_and(|earlier| earlier != item)
        });
    }
    (0..items.len()).any(|i| (0..i).any(|j| item_keys[i] == item_keys[j] && items[i] != items[j]))
}

/// The fields of the object at `path` that no manager owns: `apiVersion` and `kind` at the
/// root, the server's metadata under `metadata`.
fn server_fields_at(path: &[String]) -> &'static [&'static str] {
    match path {
        [] => &["apiVersion", "kind"],
        [only] if only == "f:metadata" => SERVER_METADATA,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POD: Shape = Shape::POD;

    #[test]
    fn an_items_key_element_sorts_its_fields_and_needs_each_of_them() {
        let port = json!({"protocol": "TCP", "containerPort": 80, "name": "web"});
        let key = |name: &str, default: Option<Value>| ListMapKey {
            name: name.into(),
            default,
        };
        let keys = [key("protocol", None), key("containerPort", None)];
        assert_eq!(
            item_key(&port, &keys).as_deref(),
            Some(r#"k:{"containerPort":80,"protocol":"TCP"}"#)
        );
        let unnamed = json!({"protocol": "TCP", "containerPort": null});
        assert_eq!(item_key(&unnamed, &keys), None);
        // A key field with a default names the item that leaves it out.
        let defaulted = [
            key("protocol", Some(json!("TCP"))),
            key("containerPort", None),
        ];
        assert_eq!(
            item_key(&json!({"containerPort": 80}), &defaulted).as_deref(),
            Some(r#"k:{"containerPort":80,"protocol":"TCP"}"#)
        );
        assert_eq!(
            item_key(&json!({"containerPort": 53, "protocol": "UDP"}), &defaulted).as_deref(),
            Some(r#"k:{"containerPort":53,"protocol":"UDP"}"#)
        );
    }

    /// Every path of `value` inserted one by one: what a comparison with nothing on the
    /// other side must find, built the slow way.
    fn every_path(
        value: &Value,
        names: &mut Vec<String>,
        path: &mut Vec<String>,
        out: &mut FieldSet,
    ) {
        let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
        insert(out, path);
        if let Node::Object(children) | Node::List(children) = node(value, &name_refs, POD) {
            for child in children {
                descend(names, path, &child, |names, path| {
                    every_path(child.value, names, path, out)
                });
            }
        }
    }

    #[test]
    fn a_value_added_whole_owns_every_path_in_it() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u", "labels": {"app": "a"}, "annotations": {},
                         "ownerReferences": [{"uid": "o", "kind": "Cache", "name": "c"}],
                         "finalizers": ["x", "y"]},
            "spec": {"containers": [
                {"name": "c", "image": "i", "args": ["1"],
                 "ports": [{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 53}],
                 "env": [{"name": "A", "value": "1"}, {"value": "no key"}],
                 "resources": {"limits": {"memory": "1Gi"}}}],
                "tolerations": [{"key": "k"}], "nodeSelector": {}},
            "status": {"phase": "Pending"}
        });
        let mut expected = FieldSet::default();
        every_path(
            &without_server_fields(&pod),
            &mut Vec::new(),
            &mut Vec::new(),
            &mut expected,
        );
        assert_eq!(compare(&json!({}), &pod, POD).added, expected);
    }

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
    fn server_fields_are_skipped_only_where_the_server_sets_them() {
        let old = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "1", "resourceVersion": "1"},
            "spec": {"template": {"metadata": {"name": "a"}}}
        });
        let mut new = old.clone();
        new["apiVersion"] = json!("v2");
        new["metadata"]["uid"] = json!("2");
        new["metadata"]["resourceVersion"] = json!("2");
        assert!(compare(&old, &new, POD).is_same());
        new["spec"]["template"]["metadata"]["name"] = json!("b");
        assert_eq!(
            compare(&old, &new, POD).modified.to_fields_v1(),
            json!({"f:spec": {"f:template": {"f:metadata": {"f:name": {}}}}})
        );
    }

    #[test]
    fn equal_lists_whose_items_share_a_key_are_still_paired_by_key() {
        // Items are paired by key, the last of a key standing for all: skipping equal
        // subtrees must not hide what that pairing reports.
        let pod = json!({"spec": {"containers": [
            {"name": "a", "image": "1"}, {"name": "a", "image": "2"}
        ]}});
        let c = compare(&pod, &pod.clone(), POD);
        assert_eq!(
            c.modified.to_fields_v1(),
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {"f:image": {}}}}})
        );
        assert!(c.added.is_empty() && c.removed.is_empty());
    }

    #[test]
    fn shared_keys_are_found_in_short_and_long_lists() {
        for others in [0, 2 * PAIRWISE_ITEMS] {
            let mut containers: Vec<Value> = (0..others)
                .map(|i| json!({"name": format!("c{i}"), "image": "x"}))
                .collect();
            containers.insert(0, json!({"name": "a", "image": "1"}));
            let equal_twins = json!({"spec": {"containers": containers.clone()}});
            containers.push(json!({"name": "a", "image": "2"}));
            let different_twins = json!({"spec": {"containers": containers}});
            assert!(
                compare(&different_twins, &different_twins.clone(), POD)
                    .modified
                    .has_at_or_below(&["f:spec".to_string()])
            );
            let mut with_equal_twin = equal_twins.clone();
            let first = with_equal_twin["spec"]["containers"][0].clone();
            if let Some(items) = with_equal_twin["spec"]["containers"].as_array_mut() {
                items.push(first);
            }
            assert!(compare(&with_equal_twin, &with_equal_twin.clone(), POD).is_same());
        }
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
