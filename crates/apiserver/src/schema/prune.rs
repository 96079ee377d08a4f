//! Pruning: an object loses the fields its schema does not declare, as kube-apiserver
//! prunes custom resources before it stores them.

use serde_json::Value;

use super::{META_FIELDS, child, flag, index, props};

/// Remove fields not declared in the schema (unless under
/// `x-kubernetes-preserve-unknown-fields: true` or allowed by
/// `additionalProperties`). Top-level `apiVersion`, `kind` and `metadata` are
/// never touched. Returns the paths of removed fields (e.g. `spec.foo`,
/// `spec.ports[0].bar`) in traversal order.
pub fn prune(obj: &mut Value, schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    prune_value(obj, Some(schema), At::Root, true, &mut out);
    out
}

/// Where a value is in the object: rendered as a path (`spec.ports[0]`) only for a field
/// that is removed, which few writes have, instead of built for every field walked.
#[derive(Clone, Copy)]
enum At<'a> {
    Root,
    Field(&'a At<'a>, &'a str),
    Item(&'a At<'a>, usize),
}

impl At<'_> {
    fn path(&self) -> String {
        match self {
            At::Root => String::new(),
            At::Field(parent, key) => child(&parent.path(), key),
            At::Item(parent, i) => index(&parent.path(), *i),
        }
    }
}

fn prune_value(
    v: &mut Value,
    schema: Option<&Value>,
    at: At<'_>,
    root: bool,
    out: &mut Vec<String>,
) {
    if let Some(s) = schema
        && flag(s, "x-kubernetes-preserve-unknown-fields")
    {
        skip_prune(v, s, at, root, out);
        return;
    }
    match v {
        Value::Object(map) => {
            let Some(s) = schema else {
                for k in map.keys() {
                    out.push(At::Field(&at, k).path());
                }
                map.clear();
                return;
            };
            let embedded = root || flag(s, "x-kubernetes-embedded-resource");
            let properties = props(s);
            let additional = s.get("additionalProperties");
            map.retain(|k, val| {
                if root && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                if embedded {
                    match k.as_str() {
                        "apiVersion" | "kind" if val.is_string() => return true,
                        "metadata" if properties.is_none_or(|p| !p.contains_key("metadata")) => {
                            return true;
                        }
                        _ => {}
                    }
                }
                let here = At::Field(&at, k);
                match (properties.and_then(|p| p.get(k)), additional) {
                    (Some(ps), _) => prune_value(val, Some(ps), here, false, out),
                    (None, Some(Value::Bool(true))) => {}
                    (None, Some(a @ Value::Object(_))) => {
                        prune_value(val, Some(a), here, false, out)
                    }
                    (None, _) => {
                        out.push(here.path());
                        return false;
                    }
                }
                true
            });
        }
        Value::Array(items) => {
            let item_schema = schema
                .and_then(|s| s.get("items"))
                .filter(|i| i.is_object());
            for (i, x) in items.iter_mut().enumerate() {
                prune_value(x, item_schema, At::Item(&at, i), false, out);
            }
        }
        _ => {}
    }
}

/// Pruning below a node with `x-kubernetes-preserve-unknown-fields: true`:
/// unknown fields are kept, known ones are pruned against their schema.
fn skip_prune(v: &mut Value, s: &Value, at: At<'_>, root: bool, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let embedded = root || flag(s, "x-kubernetes-embedded-resource");
            let properties = props(s);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            for (k, val) in map.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let here = At::Field(&at, k);
                if let Some(ps) = properties.and_then(|p| p.get(k)) {
                    prune_value(val, Some(ps), here, false, out);
                } else if let Some(a) = additional {
                    prune_value(val, Some(a), here, false, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items").filter(|i| i.is_object()) {
                for (i, x) in items.iter_mut().enumerate() {
                    skip_prune(x, is, At::Item(&at, i), false, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::tests::schema;

    #[test]
    fn prune_nested_unknown() {
        let mut obj = json!({
            "apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "whatever": 1},
            "top": 1,
            "spec": {
                "replicas": 1, "foo": {"bar": 1},
                "ports": [{"port": 80, "extra": true}, {"port": 81}],
                "labels": {"a": "b", "c": "d"},
                "raw": {"anything": {"goes": 1}, "known": {"x": "y", "drop": 1}},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                             "spec": {"a": "b", "zzz": 1}, "other": 2}
            },
            "status": {"ok": true, "nope": {}}
        });
        let mut removed = prune(&mut obj, &schema());
        removed.sort();
        assert_eq!(
            removed,
            vec![
                "spec.foo",
                "spec.ports[0].extra",
                "spec.raw.known.drop",
                "spec.template.other",
                "spec.template.spec.zzz",
                "status.nope",
                "top",
            ]
        );
        assert_eq!(obj["metadata"], json!({"name": "n", "whatever": 1}));
        assert_eq!(obj["apiVersion"], "x/v1");
        assert_eq!(obj["spec"]["raw"]["anything"], json!({"goes": 1}));
        assert_eq!(obj["spec"]["labels"], json!({"a": "b", "c": "d"}));
        assert_eq!(obj["spec"]["template"]["metadata"], json!({"name": "p"}));
        assert_eq!(obj["spec"]["ports"][0], json!({"port": 80}));
        assert!(obj.get("top").is_none());
    }

    #[test]
    fn prune_preserve_root_and_object_without_properties() {
        let s = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                       "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}});
        let mut obj = json!({"kind": "K", "anything": 1, "spec": {"a": "x", "b": 2}});
        assert_eq!(prune(&mut obj, &s), vec!["spec.b"]);
        assert_eq!(obj, json!({"kind": "K", "anything": 1, "spec": {"a": "x"}}));

        let s = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let mut obj = json!({"spec": {"a": 1}});
        assert_eq!(prune(&mut obj, &s), vec!["spec.a"]);
        let s = json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": true}}});
        let mut obj = json!({"m": {"a": {"deep": 1}}});
        assert!(prune(&mut obj, &s).is_empty());
    }
}
