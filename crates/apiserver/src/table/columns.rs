//! Built-in columns as data: per (group, kind) the columns kube-apiserver's
//! printers (`pkg/printers/internalversion/printers.go`) describe, and where
//! each cell's value comes from — a JSONPath where kube's printer reads a
//! field, a named function (in `computed` or `pod`) where it computes one.
//!
//! The column lists themselves live in `core_kinds` and `group_kinds`; this
//! file holds their shape, how a cell is evaluated and how a kind finds its
//! list. Kinds are keyed by (group, kind), so a kind that is not registered
//! costs nothing, and an unknown one prints NAME and AGE.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::format::{creation_age, format_labels, label_selector_string, value_text};
use super::jsonpath::JsonPath;
use super::{core_kinds, group_kinds};

pub(super) const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(super) const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
pub(super) const CONTAINERS_DESC: &str = "Names of each container in the template.";
pub(super) const IMAGES_DESC: &str = "Images referenced by each container in the template.";

/// A value kube's printer computes rather than reads.
pub(super) type Compute = fn(&Value, DateTime<Utc>) -> Value;

/// One column: its `TableColumnDefinition` and where its cells come from.
pub(super) struct Column {
    pub(super) name: &'static str,
    pub(super) ty: &'static str,
    pub(super) format: &'static str,
    pub(super) priority: i64,
    pub(super) description: &'static str,
    pub(super) cell: Cell,
}

/// Where a cell's value comes from. Paths are kube JSONPath (`.spec.x`).
pub(super) enum Cell {
    /// The first path whose first match is a non-empty text; `or` when none is.
    Text {
        paths: &'static [&'static str],
        or: &'static str,
    },
    /// The first match as an integer; `or` when there is none.
    Integer { path: &'static str, or: i64 },
    /// Every match as text, joined with `,` (kube's container and image lists).
    Joined(&'static str),
    /// The first match as a boolean; false when there is none.
    Bool(&'static str),
    /// The number of entries of the maps or lists at the paths, added up.
    Count(&'static [&'static str]),
    /// A label map as `k=v,k2=v2` (`<none>` when empty).
    Labels(&'static str),
    /// A `metav1.LabelSelector` as a selector string; `empty` when it selects
    /// everything.
    Selector {
        path: &'static str,
        empty: &'static str,
    },
    /// The object's age.
    Age,
    /// A value kube's printer computes.
    Computed(Compute),
}

/// The columns of one built-in kind, and the row conditions it reports.
pub(super) struct KindColumns {
    pub(super) group: &'static str,
    pub(super) kind: &'static str,
    pub(super) columns: &'static [Column],
    pub(super) row_conditions: Option<fn(&Value) -> Option<Value>>,
}

/// The columns of a kind without row conditions.
pub(super) const fn kind(
    group: &'static str,
    kind: &'static str,
    columns: &'static [Column],
) -> KindColumns {
    KindColumns {
        group,
        kind,
        columns,
        row_conditions: None,
    }
}

pub(super) const fn column(
    name: &'static str,
    ty: &'static str,
    description: &'static str,
    cell: Cell,
) -> Column {
    Column {
        name,
        ty,
        format: "",
        priority: 0,
        description,
        cell,
    }
}

/// A `priority: 1` column, which `kubectl get` shows only with `-o wide`.
pub(super) const fn wide(
    name: &'static str,
    ty: &'static str,
    description: &'static str,
    cell: Cell,
) -> Column {
    Column {
        priority: 1,
        ..column(name, ty, description, cell)
    }
}

pub(super) const fn text(path: &'static [&'static str], or: &'static str) -> Cell {
    Cell::Text { paths: path, or }
}

pub(super) const fn integer(path: &'static str) -> Cell {
    Cell::Integer { path, or: 0 }
}

pub(super) const NAME: Column = Column {
    format: "name",
    ..column("Name", "string", NAME_DESC, text(&[".metadata.name"], ""))
};
pub(super) const AGE: Column = column("Age", "string", AGE_DESC, Cell::Age);
pub(super) const CONTAINERS: Column = wide(
    "Containers",
    "string",
    CONTAINERS_DESC,
    Cell::Joined(".spec.template.spec.containers[*].name"),
);
pub(super) const IMAGES: Column = wide(
    "Images",
    "string",
    IMAGES_DESC,
    Cell::Joined(".spec.template.spec.containers[*].image"),
);

/// DESIRED and CURRENT of a ReplicaSet or ReplicationController.
pub(super) const DESIRED_REPLICAS: Column = column(
    "Desired",
    "integer",
    "Replicas is the number of desired replicas.",
    Cell::Integer {
        path: ".spec.replicas",
        or: 1,
    },
);
pub(super) const CURRENT_REPLICAS: Column = column(
    "Current",
    "integer",
    "Replicas is the most recently observed number of replicas.",
    integer(".status.replicas"),
);

const DEFAULT: KindColumns = KindColumns {
    group: "",
    kind: "",
    columns: &[NAME, AGE],
    row_conditions: None,
};

/// Every built-in kind with a printer.
pub(super) fn all_kinds() -> impl Iterator<Item = &'static KindColumns> {
    core_kinds::KINDS.iter().chain(group_kinds::KINDS)
}

/// The columns of a built-in kind; NAME and AGE for one without a printer.
pub(super) fn of_kind(group: &str, kind: &str) -> &'static KindColumns {
    let group = if group == "core" { "" } else { group };
    all_kinds()
        .find(|k| k.group == group && k.kind == kind)
        .unwrap_or(&DEFAULT)
}

/// A `TableColumnDefinition`.
pub(super) fn definition(
    name: &str,
    ty: &str,
    format: &str,
    description: &str,
    priority: i64,
) -> Value {
    json!({
        "name": name,
        "type": ty,
        "format": format,
        "description": description,
        "priority": priority,
    })
}

impl Column {
    pub(super) fn definition(&self) -> Value {
        definition(
            self.name,
            self.ty,
            self.format,
            self.description,
            self.priority,
        )
    }

    /// Parses the column's paths once per table, in the order `value` reads them.
    pub(super) fn compile(&self) -> Vec<JsonPath> {
        let paths: &[&str] = match &self.cell {
            Cell::Text { paths, .. } | Cell::Count(paths) => paths,
            Cell::Integer { path, .. }
            | Cell::Joined(path)
            | Cell::Bool(path)
            | Cell::Labels(path)
            | Cell::Selector { path, .. } => std::slice::from_ref(path),
            Cell::Age | Cell::Computed(_) => &[],
        };
        paths.iter().map(|p| JsonPath::parse(p)).collect()
    }

    /// The cell of `obj`, given the paths [`Column::compile`] returned.
    pub(super) fn value(&self, paths: &[JsonPath], obj: &Value, now: DateTime<Utc>) -> Value {
        let first = || paths.first().and_then(|p| p.first(obj));
        match &self.cell {
            Cell::Text { or, .. } => json!(
                paths
                    .iter()
                    .filter_map(|p| p.first(obj).map(value_text))
                    .find(|t| !t.is_empty())
                    .unwrap_or_else(|| or.to_string())
            ),
            Cell::Integer { or, .. } => json!(
                first()
                    .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
                    .unwrap_or(*or)
            ),
            Cell::Bool(_) => json!(first().and_then(Value::as_bool).unwrap_or(false)),
            Cell::Joined(_) => json!(
                paths
                    .iter()
                    .flat_map(|p| p.matches(obj))
                    .map(value_text)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Cell::Count(_) => json!(
                paths
                    .iter()
                    .filter_map(|p| p.first(obj))
                    .map(|v| match v {
                        Value::Object(map) => map.len(),
                        Value::Array(items) => items.len(),
                        _ => 0,
                    })
                    .sum::<usize>()
            ),
            Cell::Labels(_) => json!(format_labels(first())),
            Cell::Selector { empty, .. } => {
                let selector = label_selector_string(first());
                json!(if selector.is_empty() {
                    empty.to_string()
                } else {
                    selector
                })
            }
            Cell::Age => json!(creation_age(obj, now)),
            Cell::Computed(compute) => compute(obj, now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::test_support::{ago, builtin, now, single};

    #[test]
    fn every_kind_is_listed_once_with_a_name_column() {
        let all: Vec<&KindColumns> = core_kinds::KINDS.iter().chain(group_kinds::KINDS).collect();
        for (i, k) in all.iter().enumerate() {
            assert!(
                !all[..i]
                    .iter()
                    .any(|o| o.group == k.group && o.kind == k.kind),
                "{}/{} listed twice",
                k.group,
                k.kind
            );
            assert!(
                k.columns
                    .iter()
                    .any(|c| c.name == "Name" && c.format == "name"),
                "{}/{}",
                k.group,
                k.kind
            );
        }
    }

    #[test]
    fn cells_read_paths_with_fallbacks() {
        let obj = json!({
            "metadata": {"name": "n", "creationTimestamp": ago(30), "labels": {"b": "2", "a": "1"}},
            "spec": {"ips": ["", "10.0.0.1"], "ip": "10.0.0.2", "n": 2.0, "list": [1, 2], "map": {"x": 1}},
        });
        let cases = [
            (text(&[".spec.ips[0]", ".spec.ip"], "-"), json!("10.0.0.2")),
            (text(&[".spec.none"], "-"), json!("-")),
            (integer(".spec.n"), json!(2)),
            (integer(".spec.none"), json!(0)),
            (Cell::Joined(".spec.ips[*]"), json!(",10.0.0.1")),
            (Cell::Bool(".spec.none"), json!(false)),
            (
                Cell::Count(&[".spec.list", ".spec.map", ".spec.none"]),
                json!(3),
            ),
            (Cell::Labels(".metadata.labels"), json!("a=1,b=2")),
            (Cell::Labels(".spec.none"), json!("<none>")),
            (
                Cell::Selector {
                    path: ".spec.none",
                    empty: "<none>",
                },
                json!("<none>"),
            ),
            (Cell::Age, json!("30s")),
        ];
        for (cell, want) in cases {
            let col = column("C", "string", "", cell);
            assert_eq!(col.value(&col.compile(), &obj, now()), want, "{}", want);
        }
    }

    #[test]
    fn other_builtins_print_name_and_age() {
        for (group, kind) in [
            ("rbac.authorization.k8s.io", "Role"),
            ("", "Binding"),
            ("", "Lease"),
        ] {
            let (t, c) = single(
                &builtin(group, kind),
                json!({"metadata": {"name": "thing", "creationTimestamp": ago(7200)}}),
            );
            assert_eq!(
                crate::table::test_support::column_names(&t),
                ["Name", "Age"],
                "{group}/{kind}"
            );
            assert_eq!(c, [json!("thing"), json!("120m")]);
        }
    }
}
