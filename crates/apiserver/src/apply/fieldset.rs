//! Sets of field paths as a tree, and their `FieldsV1` JSON encoding.
//!
//! A path is a sequence of elements written as `FieldsV1` keys: `f:<name>` (a field of an
//! object), `k:<json object>` (an item of a list of objects, by its key fields),
//! `v:<json value>` (an item of a list of scalars) and `i:<index>`. A node is a member
//! when its own path is in the set; in the encoding a member with children carries a `.`
//! entry and a member without children is `{}`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The element of a path that names a field of an object.
pub fn field(name: &str) -> String {
    // Built for every field a write compares: `format!` costs several times this.
    let mut element = String::with_capacity(name.len() + 2);
    element.push_str("f:");
    element.push_str(name);
    element
}

/// The element naming an item of a list of objects by its key fields: their values as a
/// compact JSON object, keys sorted, written from borrowed values (an item's element is
/// built for every item of every list map a write compares).
pub fn key(keys: &BTreeMap<&str, &Value>) -> Option<String> {
    let json = serde_json::to_string(keys).ok()?;
    Some(["k:", &json].concat())
}

/// The element naming an item of a list of scalars by its value.
pub fn value(item: &Value) -> String {
    format!("v:{item}")
}

/// A set of field paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

/// Why a `FieldsV1` document could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid FieldsV1: {0}")]
pub struct FieldsV1Error(String);

impl FieldSet {
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// The set whose only member is its root (what a leaf's path holds below it).
    pub fn member() -> FieldSet {
        FieldSet {
            member: true,
            children: BTreeMap::new(),
        }
    }

    /// Takes the root out of the set (its members below stay).
    pub fn remove_root(&mut self) {
        self.member = false;
    }

    /// Adds `child`'s members below the element `element`.
    pub fn add_below(&mut self, element: String, child: FieldSet) {
        match self.children.get_mut(&element) {
            Some(mine) => mine.absorb(child),
            None => {
                self.children.insert(element, child);
            }
        }
    }

    /// Adds `set`'s members below `path`: one walk down for a whole subtree.
    pub fn graft(&mut self, path: &[String], set: FieldSet) {
        match path.split_first() {
            None => self.absorb(set),
            Some((head, rest)) => match self.children.get_mut(head) {
                Some(child) => child.graft(rest, set),
                None => self
                    .children
                    .entry(head.clone())
                    .or_default()
                    .graft(rest, set),
            },
        }
    }

    /// Adds `path` to the set.
    pub fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            // Most inserts share their prefix with earlier ones: clone an element only
            // when it is new.
            Some((head, rest)) => match self.children.get_mut(head) {
                Some(child) => child.insert(rest),
                None => self.children.entry(head.clone()).or_default().insert(rest),
            },
        }
    }

    #[cfg(test)]
    pub fn contains(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((head, rest)) => self.children.get(head).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Whether `path` or any path below it is in the set.
    pub fn has_at_or_below(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => !self.is_empty(),
            Some((head, rest)) => self
                .children
                .get(head)
                .is_some_and(|c| c.has_at_or_below(rest)),
        }
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (k, child) in &other.children {
            let merged = match out.children.get(k) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(k.clone(), merged);
        }
        out
    }

    /// [`Self::union`] in place, moving `other`'s elements instead of copying them.
    pub fn absorb(&mut self, other: FieldSet) {
        self.member |= other.member;
        for (k, child) in other.children {
            self.add_below(k, child);
        }
    }

    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        self.combine(other, |mine, theirs| mine && !theirs, true)
    }

    /// Removes `other`'s members in place: `difference` without copying what stays.
    pub fn subtract(&mut self, other: &FieldSet) {
        self.member &= !other.member;
        for (k, theirs) in &other.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.subtract(theirs);
                if mine.is_empty() {
                    self.children.remove(k);
                }
            }
        }
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        self.combine(other, |mine, theirs| mine && theirs, false)
    }

    /// Node-wise combination; `keep_unmatched` keeps children `other` lacks.
    fn combine(
        &self,
        other: &FieldSet,
        member: fn(bool, bool) -> bool,
        keep_unmatched: bool,
    ) -> FieldSet {
        let children = self
            .children
            .iter()
            .filter_map(|(k, mine)| {
                let child = match other.children.get(k) {
                    Some(theirs) => mine.combine(theirs, member, keep_unmatched),
                    None if keep_unmatched => mine.clone(),
                    None => return None,
                };
                (!child.is_empty()).then(|| (k.clone(), child))
            })
            .collect();
        FieldSet {
            member: member(self.member, other.member),
            children,
        }
    }

    /// Every member path, parents before their children.
    pub fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (k, child) in &self.children {
            prefix.push(k.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut map: Map<String, Value> = self
            .children
            .iter()
            .map(|(k, child)| (k.clone(), child.to_fields_v1()))
            .collect();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        Value::Object(map)
    }

    /// Adds the set's members to the set `fields` encodes (`FieldsV1` JSON, as
    /// [`Self::to_fields_v1`] writes it), editing the encoding in place: a write that takes
    /// a few fields into a manager's entry neither decodes nor re-encodes the rest of it.
    /// Gives `false`, changing nothing, when `fields` is not an object.
    pub fn union_into_encoded(&self, fields: &mut Value) -> bool {
        let Some(root) = fields.as_object_mut() else {
            return false;
        };
        let was_member = root.contains_key(".");
        self.union_into_node(root, was_member);
        true
    }

    fn union_into_node(&self, node: &mut Map<String, Value>, was_member: bool) {
        for (k, child) in &self.children {
            match node.get_mut(k).and_then(Value::as_object_mut) {
                Some(encoded) => {
                    let child_was_member = is_encoded_member(encoded);
                    child.union_into_node(encoded, child_was_member);
                }
                None => {
                    node.insert(k.clone(), child.to_fields_v1());
                }
            }
        }
        normalize_encoded(node, was_member || self.member);
    }

    /// Removes the set's members from the set `fields` encodes, in place (see
    /// [`Self::union_into_encoded`]). Gives whether the encoded set is now empty; a
    /// `fields` that is not an object is left as it is, and is not empty.
    pub fn subtract_from_encoded(&self, fields: &mut Value) -> bool {
        let Some(root) = fields.as_object_mut() else {
            return false;
        };
        let was_member = root.contains_key(".");
        self.subtract_from_node(root, was_member)
    }

    /// Gives whether `node` is now empty (no member left at or below it).
    fn subtract_from_node(&self, node: &mut Map<String, Value>, was_member: bool) -> bool {
        for (k, child) in &self.children {
            if let Some(encoded) = node.get_mut(k).and_then(Value::as_object_mut) {
                let child_was_member = is_encoded_member(encoded);
                if child.subtract_from_node(encoded, child_was_member) {
                    node.remove(k);
                }
            }
        }
        normalize_encoded(node, was_member && !self.member)
    }

    /// [`Self::to_fields_v1`], moving the elements into the JSON instead of copying them.
    pub fn into_fields_v1(self) -> Value {
        let has_children = !self.children.is_empty();
        let mut map: Map<String, Value> = self
            .children
            .into_iter()
            .map(|(k, child)| (k, child.into_fields_v1()))
            .collect();
        if self.member && has_children {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        Value::Object(map)
    }

    /// Whether `fields` is exactly [`Self::to_fields_v1`] of the set, checked without
    /// building it.
    pub fn is_encoded_by(&self, fields: &Value) -> bool {
        let Some(map) = fields.as_object() else {
            return false;
        };
        let has_dot = self.member && !self.children.is_empty();
        map.len() == self.children.len() + usize::from(has_dot)
            && (!has_dot
                || map
                    .get(".")
                    .is_some_and(|d| d.as_object().is_some_and(Map::is_empty)))
            && self
                .children
                .iter()
                .all(|(k, child)| map.get(k).is_some_and(|c| child.is_encoded_by(c)))
    }

    /// Whether the set and the set `fields` encodes (`FieldsV1` JSON) share a member,
    /// checked without decoding `fields`.
    pub fn meets_encoded(&self, fields: &Value) -> bool {
        fields.as_object().is_some_and(|map| {
            (self.member && map.contains_key(".")) || self.meets_encoded_children(map)
        })
    }

    fn meets_encoded_children(&self, encoded: &Map<String, Value>) -> bool {
        self.children.iter().any(|(k, child)| {
            encoded
                .get(k)
                .and_then(Value::as_object)
                .is_some_and(|node| {
                    (child.member && is_encoded_member(node)) || child.meets_encoded_children(node)
                })
        })
    }

    /// Whether every member of the set is a member of the set `fields` encodes, checked
    /// without decoding `fields`.
    pub fn is_within_encoded(&self, fields: &Value) -> bool {
        fields.as_object().is_some_and(|map| {
            (!self.member || map.contains_key(".")) && self.is_within_encoded_children(map)
        })
    }

    fn is_within_encoded_children(&self, encoded: &Map<String, Value>) -> bool {
        self.children.iter().all(|(k, child)| {
            encoded
                .get(k)
                .and_then(Value::as_object)
                .is_some_and(|node| {
                    (!child.member || is_encoded_member(node))
                        && child.is_within_encoded_children(node)
                })
        })
    }

    /// Reads `FieldsV1` JSON, checking every key is a well-formed path element.
    pub fn from_fields_v1(fields: &Value) -> Result<FieldSet, FieldsV1Error> {
        let map = fields
            .as_object()
            .ok_or_else(|| FieldsV1Error("expected an object".into()))?;
        let mut set = FieldSet::default();
        for (k, child) in map {
            if k == "." {
                set.member = true;
                continue;
            }
            check_element(k)?;
            let mut child_set = FieldSet::from_fields_v1(child)?;
            if child_set.children.is_empty() {
                child_set.member = true;
            }
            set.children.insert(k.clone(), child_set);
        }
        Ok(set)
    }
}

/// Whether a node below the root of `FieldsV1` JSON is a member: a leaf (`{}`), or a node
/// with children that carries `.`.
fn is_encoded_member(node: &Map<String, Value>) -> bool {
    node.is_empty() || node.contains_key(".")
}

/// Encodes a node's membership as [`FieldSet::to_fields_v1`] would, given its children:
/// `.` on a member with children, `{}` for a member without. Gives whether the node holds
/// nothing (not a member, no children), which its parent then drops.
fn normalize_encoded(node: &mut Map<String, Value>, member: bool) -> bool {
    let has_children = node.keys().any(|k| k != ".");
    if has_children && member {
        node.entry(".").or_insert_with(|| Value::Object(Map::new()));
    } else {
        node.remove(".");
    }
    !has_children && !member
}

fn check_element(element: &str) -> Result<(), FieldsV1Error> {
    let bad = || FieldsV1Error(format!("unexpected key {element:?}"));
    let (prefix, rest) = element.split_once(':').ok_or_else(bad)?;
    let well_formed = match prefix {
        "f" => true,
        "k" => rest.trim_start_matches(JSON_WHITESPACE).starts_with('{') && is_json(rest),
        "v" => is_json(rest),
        "i" => rest.parse::<usize>().is_ok(),
        _ => false,
    };
    if well_formed { Ok(()) } else { Err(bad()) }
}

const JSON_WHITESPACE: [char; 4] = [' ', '\t', '\n', '\r'];

/// Whether `text` is one JSON value. Every stored entry's `k:` and `v:` elements are checked
/// on every write, so they are validated without building the value.
fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// A path as kube-apiserver prints it in conflicts: `.spec.containers[name="app"].image`.
pub fn display_path(path: &[String]) -> String {
    path.iter().map(|e| display_element(e)).collect()
}

fn display_element(element: &str) -> String {
    let Some((prefix, rest)) = element.split_once(':') else {
        return element.to_owned();
    };
    match prefix {
        "f" => format!(".{rest}"),
        "k" => match serde_json::from_str::<Map<String, Value>>(rest) {
            Ok(keys) => {
                let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", parts.join(","))
            }
            Err(_) => format!("[{rest}]"),
        },
        "v" => format!("[={rest}]"),
        _ => format!("[{rest}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The managedFields sample of the Kubernetes server-side apply documentation.
    fn documented_sample() -> Value {
        json!({
            "f:data": {"f:key": {}},
            "f:metadata": {"f:labels": {"f:test-label": {}}}
        })
    }

    fn path(elements: &[&str]) -> Vec<String> {
        elements.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn sets_compare_with_an_encoding_as_with_the_set_it_decodes_to() {
        let sample = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}
                }}},
                "f:finalizers": {"v:\"a\"": {}},
            }
        });
        let paths = FieldSet::from_fields_v1(&sample).expect("valid").paths();
        let subset = |mask: u32| {
            let mut set = FieldSet::default();
            for (i, path) in paths.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    set.insert(path);
                }
            }
            set
        };
        // Every pair of subsets drawn by a fixed linear congruential sequence.
        let mut state: u32 = 7;
        let mut draw = || {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (state >> 8) & ((1 << paths.len()) - 1)
        };
        for _ in 0..2_000 {
            let (a, b) = (subset(draw()), subset(draw()));
            let encoded = b.to_fields_v1();
            assert_eq!(
                a.meets_encoded(&encoded),
                !a.intersection(&b).is_empty(),
                "{a:?} meets {encoded}"
            );
            assert_eq!(
                a.is_within_encoded(&encoded),
                a.difference(&b).is_empty(),
                "{a:?} within {encoded}"
            );
            let mut absorbed = b.clone();
            absorbed.absorb(a.clone());
            assert_eq!(absorbed, b.union(&a));
            // Edited in place, an encoding is the encoding of the edited set.
            let mut joined = encoded.clone();
            assert!(a.union_into_encoded(&mut joined));
            assert_eq!(joined, b.union(&a).to_fields_v1(), "{a:?} into {encoded}");
            let mut rest = encoded.clone();
            let emptied = a.subtract_from_encoded(&mut rest);
            let difference = b.difference(&a);
            assert_eq!(emptied, difference.is_empty(), "{a:?} from {encoded}");
            if !emptied {
                assert_eq!(rest, difference.to_fields_v1(), "{a:?} from {encoded}");
            }
        }
    }

    #[test]
    fn fields_v1_round_trip() {
        let deployment = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}
                }}},
                "f:finalizers": {"v:\"a\"": {}},
                "f:list": {"i:0": {}}
            }
        });
        for sample in [documented_sample(), deployment] {
            let set = FieldSet::from_fields_v1(&sample).unwrap();
            assert_eq!(set.to_fields_v1(), sample);
            assert!(set.is_encoded_by(&sample));
        }
        let redundant_dot = json!({"f:data": {".": {}}});
        let set = FieldSet::from_fields_v1(&redundant_dot).unwrap();
        assert_eq!(set.to_fields_v1(), json!({"f:data": {}}));
        assert!(!set.is_encoded_by(&redundant_dot));
        assert!(!set.is_encoded_by(&json!({"f:data": {}, "f:other": {}})));
    }

    #[test]
    fn decoded_members() {
        let set = FieldSet::from_fields_v1(&documented_sample()).unwrap();
        assert!(set.contains(&path(&["f:data", "f:key"])));
        assert!(!set.contains(&path(&["f:data"])));
        assert!(set.has_at_or_below(&path(&["f:data"])));
        assert_eq!(set.paths().len(), 2);
    }

    #[test]
    fn malformed_fields_v1() {
        for bad in [
            json!([]),
            json!({"spec": {}}),
            json!({"k:[1]": {}}),
            json!({"k: 1": {}}),
            json!({"k:{\"a\":1}x": {}}),
            json!({"k:{\"a\":}": {}}),
            json!({"v:": {}}),
            json!({"v:[1": {}}),
            json!({"i:x": {}}),
            json!({"f:a": 1}),
        ] {
            assert!(FieldSet::from_fields_v1(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::default();
        a.insert(&path(&["f:spec", "f:replicas"]));
        a.insert(&path(&["f:spec", "f:paused"]));
        let mut b = FieldSet::default();
        b.insert(&path(&["f:spec", "f:replicas"]));
        b.insert(&path(&["f:data"]));
        assert_eq!(
            a.intersection(&b).paths(),
            vec![path(&["f:spec", "f:replicas"])]
        );
        assert_eq!(
            a.difference(&b).paths(),
            vec![path(&["f:spec", "f:paused"])]
        );
        assert_eq!(a.union(&b).paths().len(), 3);
        let mut subtracted = a.clone();
        subtracted.subtract(&b);
        assert_eq!(subtracted, a.difference(&b));
        subtracted.subtract(&a);
        assert!(subtracted.is_empty() && subtracted == FieldSet::default());
        assert!(a.difference(&a).is_empty());
    }

    #[test]
    fn printed_paths() {
        let p = path(&[
            "f:spec",
            "f:containers",
            "k:{\"name\":\"app\"}",
            "f:ports",
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}",
        ]);
        assert_eq!(
            display_path(&p),
            ".spec.containers[name=\"app\"].ports[containerPort=80,protocol=\"TCP\"]"
        );
        assert_eq!(
            display_path(&path(&["f:finalizers", "v:\"x\""])),
            ".finalizers[=\"x\"]"
        );
    }
}
