//! Columns of a custom resource: its CRD's `additionalPrinterColumns`,
//! evaluated as apiextensions-apiserver's table convertor does.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::columns::{Definition, shared};
use super::format::{UNKNOWN, human_duration, int_at, nonempty, parse_time, str_at, value_text};
use super::jsonpath::JsonPath;

/// One printer column, its path parsed.
pub(super) struct Column {
    pub(super) definition: Definition,
    path: JsonPath,
}

/// The columns after NAME; entries without a name or a path are skipped.
pub(super) fn columns(defs: &[Value]) -> Vec<Column> {
    if defs.is_empty() {
        // apiextensions-apiserver's serveDefaultColumnsIfEmpty.
        return vec![Column {
            definition: Definition {
                name: "Age".to_string(),
                ty: "date".to_string(),
                format: String::new(),
                description: shared("AGE")
                    .map(|age| age.definition.description.clone())
                    .unwrap_or_default(),
                priority: 0,
            },
            path: JsonPath::parse(".metadata.creationTimestamp"),
        }];
    }
    defs.iter()
        .filter_map(|d| {
            let name = str_at(d, &["name"])?;
            let path = str_at(d, &["jsonPath"]).or_else(|| str_at(d, &["JSONPath"]))?;
            let description = nonempty(d, &["description"]).map_or_else(
                || format!("Custom resource definition column (in JSONPath format): {path}"),
                str::to_string,
            );
            Some(Column {
                definition: Definition {
                    name: name.to_string(),
                    ty: str_at(d, &["type"]).unwrap_or("string").to_string(),
                    format: str_at(d, &["format"]).unwrap_or("").to_string(),
                    description,
                    priority: int_at(d, &["priority"]).unwrap_or(0),
                },
                path: JsonPath::parse(path),
            })
        })
        .collect()
}

impl Column {
    /// One custom-column cell, following apiextensions' `cellForJSONValue`:
    /// nothing found (or JSON null) → null (kubectl prints an empty cell);
    /// "string" → text, all matches joined with ","; "integer"/"number"/"boolean"
    /// → the first match as a JSON number/bool (null on type mismatch);
    /// "date" → the first match as a human age like AGE ("<invalid>" if unparsable).
    pub(super) fn cell(&self, obj: &Value, now: DateTime<Utc>) -> Value {
        let results: Vec<&Value> = self
            .path
            .matches(obj)
            .into_iter()
            .filter(|v| !v.is_null())
            .collect();
        let Some(first) = results.first() else {
            return Value::Null;
        };
        match self.definition.ty.as_str() {
            "string" => Value::String(
                results
                    .iter()
                    .map(|v| value_text(v))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            "integer" => first
                .as_i64()
                .or_else(|| first.as_f64().map(|f| f as i64))
                .map_or(Value::Null, Value::from),
            "number" => first.as_f64().map_or(Value::Null, Value::from),
            "boolean" => first.as_bool().map_or(Value::Null, Value::Bool),
            "date" => match first.as_str() {
                Some("") => Value::String(UNKNOWN.to_string()),
                Some(s) => Value::String(match parse_time(s) {
                    Some(t) => human_duration(now - t),
                    None => "<invalid>".to_string(),
                }),
                None => Value::Null,
            },
            _ => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::table::Columns;
    use crate::table::test_support::{column_names, single, wide_names, widget};
    use serde_json::{Value, json};

    #[test]
    fn custom_printer_columns() {
        let printer_columns = [
            json!({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}),
            json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status", "description": "Readiness"}),
            json!({"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": 1}),
            json!({"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"}),
            json!({"name": "Items", "type": "string", "jsonPath": ".spec.items[*].name"}),
            json!({"name": "Tags", "type": "string", "jsonPath": ".spec.tags"}),
            json!({"name": "Selector", "type": "string", "jsonPath": ".spec.selector"}),
            json!({"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"}),
            json!({"name": "Generation", "type": "string", "format": "int32", "jsonPath": ".status.observedGeneration"}),
            json!({"name": "Transitioned", "type": "date", "jsonPath": ".status.conditions[?(@.type=='Ready')].lastTransitionTime"}),
            json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
            json!({"name": "WrongType", "type": "integer", "jsonPath": ".spec.size"}),
            json!({"name": "BadDate", "type": "date", "jsonPath": ".spec.size"}),
        ];
        let cols = Columns::Custom {
            printer_columns: &printer_columns,
        };
        let (t, c) = single(&cols, widget());
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Replicas",
                "Ready",
                "Ratio",
                "Paused",
                "Items",
                "Tags",
                "Selector",
                "Missing",
                "Generation",
                "Transitioned",
                "Age",
                "WrongType",
                "BadDate"
            ]
        );
        assert_eq!(wide_names(&t), ["Ratio"]);
        assert_eq!(
            t["columnDefinitions"][1],
            json!({
                "name": "Replicas",
                "type": "integer",
                "format": "",
                "description": "Custom resource definition column (in JSONPath format): .spec.replicas",
                "priority": 0
            })
        );
        assert_eq!(t["columnDefinitions"][2]["description"], "Readiness");
        assert_eq!(t["columnDefinitions"][9]["format"], "int32");
        assert_eq!(
            c,
            [
                json!("w1"),
                json!(3),
                json!("True"),
                json!(0.5),
                json!(false),
                json!("a,b,c"),
                json!("x,y"),
                json!("{\"tier\":\"front\"}"),
                Value::Null,
                json!("4"),
                json!("2m"),
                json!("3h"),
                Value::Null,
                json!("<invalid>")
            ]
        );
    }

    #[test]
    fn custom_without_printer_columns_prints_name_and_age() {
        let (t, c) = single(
            &Columns::Custom {
                printer_columns: &[],
            },
            widget(),
        );
        assert_eq!(column_names(&t), ["Name", "Age"]);
        assert_eq!(t["columnDefinitions"][1]["type"], "date");
        assert_eq!(c, [json!("w1"), json!("3h")]);

        let (_, c) = single(
            &Columns::Custom {
                printer_columns: &[],
            },
            json!({"metadata": {"name": "no-ts"}}),
        );
        assert_eq!(c, [json!("no-ts"), Value::Null]);
    }

    #[test]
    fn custom_columns_v1beta1_spelling_and_invalid_entries() {
        let printer_columns = [
            json!({"name": "Size", "type": "string", "JSONPath": ".spec.size"}),
            json!({"type": "string", "jsonPath": ".spec.size"}),
            json!({"name": "Broken", "type": "string", "jsonPath": ".spec[?(@.x"}),
        ];
        let (t, c) = single(
            &Columns::Custom {
                printer_columns: &printer_columns,
            },
            widget(),
        );
        assert_eq!(column_names(&t), ["Name", "Size", "Broken"]);
        assert_eq!(c, [json!("w1"), json!("large"), Value::Null]);
    }
}
