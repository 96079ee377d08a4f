//! Defaulting: a schema's `default`s filled into an object where fields are missing.

use serde_json::Value;

use super::{flag, props};

/// Fill in `default` values from the schema for every object present in `obj`
/// (recursively, including inside freshly defaulted values and array items).
/// A `null` in a non-nullable field that has a default is replaced by it.
pub fn apply_defaults(obj: &mut Value, schema: &Value) {
    match obj {
        Value::Object(map) => {
            let properties = props(schema);
            if let Some(properties) = properties {
                for (k, ps) in properties {
                    let Some(d) = ps.get("default") else { continue };
                    if d.is_null() {
                        continue;
                    }
                    let missing = match map.get(k) {
                        None => true,
                        Some(Value::Null) => !flag(ps, "nullable"),
                        Some(_) => false,
                    };
                    if missing {
                        map.insert(k.clone(), d.clone());
                    }
                }
            }
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in map.iter_mut() {
                if let Some(ps) = properties.and_then(|p| p.get(k)) {
                    apply_defaults(v, ps);
                } else if let Some(a) = additional {
                    apply_defaults(v, a);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = schema.get("items").filter(|i| i.is_object()) {
                for x in items {
                    apply_defaults(x, is);
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
    fn defaults_nested_and_items() {
        let mut obj = json!({"spec": {"ports": [{"port": 80}, {"port": 81, "protocol": "UDP"}]}, "status": null});
        apply_defaults(&mut obj, &schema());
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["mode"], "a");
        assert_eq!(obj["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(obj["spec"]["ports"][1]["protocol"], "UDP");
        // status has no default: left alone
        assert_eq!(obj["status"], Value::Null);

        // inside defaulted values, and null replaced for non-nullable
        let s = json!({"type": "object", "properties": {
            "a": {"type": "object", "default": {}, "properties": {"b": {"type": "integer", "default": 5}}},
            "c": {"type": "string", "default": "x"},
            "d": {"type": "string", "nullable": true, "default": "y"},
            "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"z": {"type": "string", "default": "z"}}}}
        }});
        let mut obj = json!({"c": null, "d": null, "m": {"k1": {}, "k2": {"z": "q"}}});
        apply_defaults(&mut obj, &s);
        assert_eq!(
            obj,
            json!({"a": {"b": 5}, "c": "x", "d": null, "m": {"k1": {"z": "z"}, "k2": {"z": "q"}}})
        );
    }
}
