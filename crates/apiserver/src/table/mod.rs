//! Server-side printing: `meta.k8s.io/v1` `Table` responses.
//!
//! `kubectl get` asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...`
//! and prints whatever columns the server describes. This module owns the
//! Table itself — its envelope, `includeObject`, one row per object — and
//! chooses the columns: kube-apiserver's printers for built-in kinds
//! (`columns`, as data), a CRD's `additionalPrinterColumns` (`custom`).
//!
//! Like kube-apiserver, every row carries the cells of *all* columns, including
//! the `priority: 1` ones; `kubectl get` hides those unless `-o wide` is given.
//!
//! Knows nothing of HTTP or the store: objects in, a Table out.

mod batch;
mod columns;
mod computed;
mod custom;
mod format;
#[cfg(test)]
mod golden;
mod jsonpath;
mod network;
mod pod;
mod policy;
mod storage;
#[cfg(test)]
mod test_support;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use jsonpath::JsonPath;

/// Which columns a kind prints.
#[derive(Clone, Copy, Debug)]
pub enum Columns<'a> {
    /// A built-in kind, by (group, kind): e.g. ("", "Pod").
    Builtin { group: &'a str, kind: &'a str },
    /// A custom resource: its CRD's additionalPrinterColumns (JSON array of
    /// {name,type,format?,description?,priority?,jsonPath}); empty = NAME + AGE.
    Custom { printer_columns: &'a [Value] },
}

/// `?includeObject=None|Metadata|Object`; kube-apiserver's default is `Metadata`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter; the empty string means the
    /// default (`Metadata`). Unknown values give `None` (kube answers 400).
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "" | "Metadata" => Some(Self::Metadata),
            "None" => Some(Self::None),
            "Object" => Some(Self::Object),
            _ => None,
        }
    }
}

/// Builds a Table of `objects` (full JSON objects).
///
/// `now` is used for AGE cells. `list_metadata` (`{"resourceVersion":..,"continue":..}`)
/// is copied into the Table's metadata; null and empty-string values are
/// dropped, as kube's `omitempty` would.
pub fn table(
    columns: &Columns<'_>,
    objects: &[Value],
    now: DateTime<Utc>,
    include: IncludeObject,
    list_metadata: Value,
) -> Value {
    let printer = Printer::new(columns);
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let (cells, conditions) = printer.cells(obj, now);
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            if let Some(conditions) = conditions {
                row.insert("conditions".into(), conditions);
            }
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row.insert(
                        "object".into(),
                        crate::negotiate::partial_object_metadata(obj, "v1"),
                    );
                }
                IncludeObject::Object => {
                    row.insert("object".into(), obj.clone());
                }
            }
            Value::Object(row)
        })
        .collect();

    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": table_metadata(list_metadata),
        "columnDefinitions": printer.column_definitions(),
        "rows": rows,
    })
}

fn table_metadata(list_metadata: Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(map) = list_metadata {
        for (key, value) in map {
            let empty = match &value {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                _ => false,
            };
            if !empty {
                out.insert(key, value);
            }
        }
    }
    Value::Object(out)
}

/// The columns of one table, with their paths parsed once.
enum Printer {
    Builtin {
        columns: &'static [columns::Column],
        row_conditions: Option<fn(&Value) -> Option<Value>>,
        paths: Vec<Vec<JsonPath>>,
    },
    Custom(Vec<custom::Column>),
}

impl Printer {
    fn new(columns: &Columns<'_>) -> Printer {
        match columns {
            Columns::Builtin { group, kind } => {
                let (columns, row_conditions) = columns::of_kind(group, kind);
                let paths = columns.iter().map(columns::Column::compile).collect();
                Printer::Builtin {
                    columns,
                    row_conditions,
                    paths,
                }
            }
            Columns::Custom { printer_columns } => {
                Printer::Custom(custom::columns(printer_columns))
            }
        }
    }

    fn column_definitions(&self) -> Vec<Value> {
        match self {
            Printer::Builtin { columns, .. } => {
                columns.iter().map(|c| c.definition.to_json()).collect()
            }
            Printer::Custom(cols) => {
                let mut defs: Vec<Value> = columns::shared("NAME")
                    .map(|name| name.definition.to_json())
                    .into_iter()
                    .collect();
                defs.extend(cols.iter().map(|c| c.definition.to_json()));
                defs
            }
        }
    }

    /// The row's cells and, for some kinds, its row conditions.
    fn cells(&self, obj: &Value, now: DateTime<Utc>) -> (Vec<Value>, Option<Value>) {
        match self {
            Printer::Builtin {
                columns,
                row_conditions,
                paths,
            } => {
                let cells = columns
                    .iter()
                    .zip(paths)
                    .map(|(column, paths)| column.value(paths, obj, now))
                    .collect();
                (cells, row_conditions.and_then(|conditions| conditions(obj)))
            }
            Printer::Custom(cols) => {
                let mut cells = vec![format::name_cell(obj)];
                cells.extend(cols.iter().map(|c| c.cell(obj, now)));
                (cells, None)
            }
        }
    }
}

/// The Table of stored objects of resource `rt` (the server's entry point).
pub fn of_resource(
    rt: &crate::registry::ResourceType,
    items: &[bytes::Bytes],
    now: DateTime<Utc>,
    include: IncludeObject,
    list_metadata: Value,
) -> Result<bytes::Bytes, crate::error::ApiError> {
    let objects = items
        .iter()
        .map(|b| serde_json::from_slice::<Value>(b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| crate::error::ApiError::internal(format!("stored object is corrupt: {e}")))?;
    let columns = if rt.builtin {
        Columns::Builtin {
            group: &rt.group,
            kind: &rt.kind,
        }
    } else {
        Columns::Custom {
            printer_columns: &rt.printer_columns,
        }
    };
    let table = table(&columns, &objects, now, include, list_metadata);
    serde_json::to_vec(&table)
        .map(bytes::Bytes::from)
        .map_err(|e| crate::error::ApiError::internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::{builtin, cells, column_names, configmap, now};

    /// kube's description of NAME, which `kinds.txt` must carry to the letter.
    const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

    #[test]
    fn envelope_and_include_modes() {
        let cols = builtin("", "ConfigMap");
        let objs = [configmap()];
        let meta = json!({"resourceVersion": "42", "continue": "", "remainingItemCount": null});

        let t = table(&cols, &objs, now(), IncludeObject::Metadata, meta.clone());
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], json!({"resourceVersion": "42"}));
        assert_eq!(
            t["columnDefinitions"][0],
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0})
        );
        assert_eq!(
            t["rows"][0]["object"],
            json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": objs[0]["metadata"].clone()
            })
        );
        assert!(t["rows"][0].get("conditions").is_none());

        let t = table(&cols, &objs, now(), IncludeObject::Object, meta.clone());
        assert_eq!(t["rows"][0]["object"], objs[0]);

        let t = table(&cols, &objs, now(), IncludeObject::None, meta);
        assert!(t["rows"][0].get("object").is_none());

        let t = table(
            &cols,
            &objs,
            now(),
            IncludeObject::None,
            json!({"resourceVersion": "9", "continue": "tok"}),
        );
        assert_eq!(
            t["metadata"],
            json!({"resourceVersion": "9", "continue": "tok"})
        );

        // Non-object metadata and empty lists.
        let t = table(&cols, &[], now(), IncludeObject::default(), Value::Null);
        assert_eq!(t["metadata"], json!({}));
        assert_eq!(t["rows"], json!([]));
        assert_eq!(column_names(&t), ["Name", "Data", "Age"]);
    }

    #[test]
    fn include_object_parse() {
        assert_eq!(IncludeObject::default(), IncludeObject::Metadata);
        assert_eq!(IncludeObject::parse(""), Some(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::parse("Metadata"),
            Some(IncludeObject::Metadata)
        );
        assert_eq!(IncludeObject::parse("None"), Some(IncludeObject::None));
        assert_eq!(IncludeObject::parse("Object"), Some(IncludeObject::Object));
        assert_eq!(IncludeObject::parse("object"), None);
    }

    #[test]
    fn partial_metadata_without_metadata() {
        let t = table(
            &builtin("", "ConfigMap"),
            &[json!({"data": {}})],
            now(),
            IncludeObject::Metadata,
            json!({}),
        );
        assert_eq!(t["rows"][0]["object"]["metadata"], json!({}));
        assert_eq!(cells(&t, 0), [json!(""), json!(0), json!("<unknown>")]);
    }
}
