//! Built-in columns as data: `kinds.txt` lists, per (group, kind), the columns
//! kube-apiserver's printers (`pkg/printers/internalversion/printers.go`)
//! describe and where each cell's value comes from — a JSONPath where kube's
//! printer reads a field, a named function (in `computed`, `pod`, `batch`,
//! `network` or `storage`) where it computes one.
//!
//! This file parses that table once, names the computed cells, and evaluates a
//! cell. Kinds are keyed by (group, kind), so a kind that is not registered
//! costs nothing, and an unknown one prints NAME and AGE.

use std::collections::HashMap;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::format::{creation_age, format_labels, label_selector_string, value_text};
use super::jsonpath::JsonPath;
use super::{batch, computed, network, pod, policy, storage};

const KINDS: &str = include_str!("kinds.txt");

/// A value kube's printer computes rather than reads.
pub(super) type Compute = fn(&Value, DateTime<Utc>) -> Value;

/// The row conditions a kind reports.
type RowConditions = fn(&Value) -> Option<Value>;

/// The computed cells `kinds.txt` may name.
fn compute(name: &str) -> Option<Compute> {
    Some(match name {
        "pod_ready" => pod::ready,
        "pod_status" => pod::status,
        "pod_restarts" => pod::restarts,
        "pod_readiness_gates" => pod::readiness_gates,
        "ready_of_desired" => computed::ready_of_desired,
        "namespace_status" => computed::namespace_status,
        "created_at" => computed::created_at,
        "hpa_reference" => policy::hpa_reference,
        "hpa_targets" => policy::hpa_targets,
        "hpa_min_pods" => policy::hpa_min_pods,
        "binding_role" => policy::binding_role,
        "binding_users" => policy::binding_users,
        "binding_groups" => policy::binding_groups,
        "binding_service_accounts" => policy::binding_service_accounts,
        "quota_request" => policy::quota_request,
        "quota_limit" => policy::quota_limit,
        "revision_controller" => policy::revision_controller,
        "policy_param_kind" => policy::policy_param_kind,
        "binding_param_ref" => policy::binding_param_ref,
        "service_external_ip" => computed::service_external_ip,
        "service_ports" => computed::service_ports,
        "node_status" => computed::node_status,
        "node_roles" => computed::node_roles,
        "event_last_seen" => computed::event_last_seen,
        "event_first_seen" => computed::event_first_seen,
        "event_count" => computed::event_count,
        "event_object" => computed::event_object,
        "event_source" => computed::event_source,
        "event_message" => computed::event_message,
        "job_status" => batch::job_status,
        "job_completions" => batch::job_completions,
        "job_duration" => batch::job_duration,
        "cron_job_suspend" => batch::cron_job_suspend,
        "cron_job_last_schedule" => batch::cron_job_last_schedule,
        "endpoints" => network::endpoints,
        "endpoint_slice_ports" => network::endpoint_slice_ports,
        "endpoint_slice_endpoints" => network::endpoint_slice_endpoints,
        "ingress_hosts" => network::ingress_hosts,
        "ingress_address" => network::ingress_address,
        "ingress_ports" => network::ingress_ports,
        "ingress_class_parameters" => network::ingress_class_parameters,
        "storage_class_name" => storage::storage_class_name,
        "phase_or_terminating" => storage::phase_or_terminating,
        "volume_access_modes" => storage::volume_access_modes,
        "volume_claim" => storage::volume_claim,
        "claim_capacity" => storage::claim_capacity,
        "claim_access_modes" => storage::claim_access_modes,
        _ => return None,
    })
}

/// A `TableColumnDefinition`, of a built-in or a custom column.
#[derive(Clone)]
pub(super) struct Definition {
    pub(super) name: String,
    pub(super) ty: String,
    pub(super) format: String,
    pub(super) priority: i64,
    pub(super) description: String,
}

impl Definition {
    pub(super) fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.ty,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// One column: its definition and where its cells come from.
#[derive(Clone)]
pub(super) struct Column {
    pub(super) definition: Definition,
    pub(super) cell: Cell,
}

/// Where a cell's value comes from. Paths are kube JSONPath (`.spec.x`).
#[derive(Clone)]
pub(super) enum Cell {
    /// The first path whose first match is a non-empty text; `or` when none is.
    Text { paths: Vec<String>, or: String },
    /// The first match as an integer; `or` when there is none.
    Integer { path: String, or: i64 },
    /// Every match as text, joined with `,` (kube's container and image lists).
    Joined(String),
    /// The first match as a boolean; false when there is none.
    Bool(String),
    /// The number of entries of the maps or lists at the paths, added up.
    Count(Vec<String>),
    /// A label map as `k=v,k2=v2` (`<none>` when empty).
    Labels(String),
    /// A `metav1.LabelSelector` as a selector string; `empty` when it selects
    /// everything.
    Selector { path: String, empty: String },
    /// The object's age.
    Age,
    /// A value kube's printer computes.
    Computed(Compute),
}

/// The columns of one built-in kind, and the row conditions it reports.
pub(super) struct KindColumns {
    pub(super) group: String,
    pub(super) kind: String,
    pub(super) columns: Vec<Column>,
    pub(super) row_conditions: Option<RowConditions>,
}

/// `kinds.txt`, parsed.
#[derive(Default)]
struct Printers {
    kinds: Vec<KindColumns>,
    /// The `define`d columns, by name.
    shared: HashMap<String, Column>,
    /// NAME and AGE, for a kind without a printer.
    default: Vec<Column>,
}

static PRINTERS: LazyLock<Result<Printers, String>> = LazyLock::new(|| parse(KINDS));

/// The parsed table; an empty one if `kinds.txt` did not parse (a unit test
/// keeps it parsing), so a table then still lists its rows.
fn printers() -> &'static Printers {
    static EMPTY: LazyLock<Printers> = LazyLock::new(Printers::default);
    PRINTERS.as_ref().unwrap_or(&EMPTY)
}

/// Every built-in kind with a printer.
pub(super) fn all_kinds() -> impl Iterator<Item = &'static KindColumns> {
    printers().kinds.iter()
}

/// The columns of a built-in kind and its row conditions; NAME and CREATED AT (kube's
/// default table convertor) for one without a printer.
pub(super) fn of_kind(group: &str, kind: &str) -> (&'static [Column], Option<RowConditions>) {
    let group = if group == "core" { "" } else { group };
    match all_kinds().find(|k| k.group == group && k.kind == kind) {
        Some(k) => (&k.columns, k.row_conditions),
        None => (&printers().default, None),
    }
}

/// A `define`d column of `kinds.txt` (e.g. `NAME`, which custom resources print too).
pub(super) fn shared(name: &str) -> Option<&'static Column> {
    printers().shared.get(name)
}

fn parse(text: &str) -> Result<Printers, String> {
    let mut printers = Printers::default();
    // The kinds of the latest `kind` header, which the columns below it extend.
    let mut current = 0..0;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let context = |e: String| format!("kinds.txt:{}: {e}: {line:?}", index + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(define) = line.strip_prefix("define ") {
            let (name, column) = define
                .split_once(" = ")
                .ok_or_else(|| context("not `define NAME = column`".into()))?;
            let column = parse_column(column, &printers.shared).map_err(context)?;
            printers.shared.insert(name.to_string(), column);
        } else if let Some(header) = line.strip_prefix("kind ") {
            let start = printers.kinds.len();
            let mut row_conditions = None;
            for word in header.split_whitespace() {
                match word.strip_prefix("conditions=") {
                    Some("pod") => row_conditions = Some(pod::row_conditions as RowConditions),
                    Some(_) => return Err(context("unknown row conditions".into())),
                    None => printers.kinds.push(kind_of(word).map_err(context)?),
                }
            }
            current = start..printers.kinds.len();
            for kind in &mut printers.kinds[current.clone()] {
                kind.row_conditions = row_conditions;
            }
        } else {
            let column = parse_column(line, &printers.shared).map_err(context)?;
            if current.is_empty() {
                return Err(context("a column before any kind".into()));
            }
            for kind in &mut printers.kinds[current.clone()] {
                kind.columns.push(column.clone());
            }
        }
    }
    // kube-apiserver's default table convertor, for the kinds without a printer.
    printers.default = ["NAME", "CREATED_AT"]
        .iter()
        .map(|name| printers.shared.get(*name).cloned())
        .collect::<Option<_>>()
        .ok_or("kinds.txt defines no NAME or CREATED_AT")?;
    Ok(printers)
}

/// `group/Kind`, the core group written `core`.
fn kind_of(word: &str) -> Result<KindColumns, String> {
    let (group, kind) = word.split_once('/').ok_or("a kind is group/Kind")?;
    Ok(KindColumns {
        group: if group == "core" { "" } else { group }.to_string(),
        kind: kind.to_string(),
        columns: Vec::new(),
        row_conditions: None,
    })
}

/// `@NAME`, or `name | type[:format] | priority | cell | description`.
fn parse_column(text: &str, shared: &HashMap<String, Column>) -> Result<Column, String> {
    let lookup = |name: &str| {
        shared
            .get(name)
            .ok_or_else(|| format!("no column {name} is defined"))
    };
    if let Some(name) = text.strip_prefix('@') {
        return lookup(name).cloned();
    }
    let [name, ty, priority, cell, description] = text
        .split(" | ")
        .collect::<Vec<_>>()
        .try_into()
        .map_err(|_| "a column has five parts")?;
    let (ty, format) = ty.split_once(':').unwrap_or((ty, ""));
    let description = match description.strip_prefix('@') {
        Some(name) => lookup(name)?.definition.description.clone(),
        None => description.replace("\\n", "\n"),
    };
    Ok(Column {
        definition: Definition {
            name: name.to_string(),
            ty: ty.to_string(),
            format: format.to_string(),
            priority: priority.parse().map_err(|_| "priority is a number")?,
            description,
        },
        cell: parse_cell(cell)?,
    })
}

/// A cell: its kind, then paths and an optional `or=<default>`.
fn parse_cell(text: &str) -> Result<Cell, String> {
    let mut words = text.split_whitespace();
    let kind = words.next().unwrap_or("");
    let (defaults, paths): (Vec<&str>, Vec<&str>) = words.partition(|w| w.starts_with("or="));
    let or = defaults
        .first()
        .map_or("", |d| &d["or=".len()..])
        .to_string();
    let paths: Vec<String> = paths.into_iter().map(str::to_string).collect();
    let one = || match paths.as_slice() {
        [path] => Ok(path.clone()),
        _ => Err(format!("{kind} reads one path")),
    };
    Ok(match kind {
        "text" if !paths.is_empty() => Cell::Text { paths, or },
        "integer" => Cell::Integer {
            path: one()?,
            or: if or.is_empty() {
                0
            } else {
                or.parse().map_err(|_| "integer or=")?
            },
        },
        "joined" => Cell::Joined(one()?),
        "bool" => Cell::Bool(one()?),
        "count" if !paths.is_empty() => Cell::Count(paths),
        "labels" => Cell::Labels(one()?),
        "selector" => Cell::Selector {
            path: one()?,
            empty: or,
        },
        "age" => Cell::Age,
        "computed" => Cell::Computed(compute(&one()?).ok_or("unknown computed cell")?),
        _ => return Err(format!("unknown cell {text:?}")),
    })
}

impl Column {
    /// Parses the column's paths once per table, in the order `value` reads them.
    pub(super) fn compile(&self) -> Vec<JsonPath> {
        let paths: &[String] = match &self.cell {
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
                    .unwrap_or_else(|| or.clone())
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
                    empty.clone()
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
    fn the_table_parses_and_lists_every_kind_once_with_a_name_column() {
        if let Err(err) = &*PRINTERS {
            panic!("{err}");
        }
        let all: Vec<&KindColumns> = all_kinds().collect();
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
                    .any(|c| c.definition.name == "Name" && c.definition.format == "name"),
                "{}/{}",
                k.group,
                k.kind
            );
        }
    }

    #[test]
    fn malformed_lines_are_refused() {
        for text in [
            "  Name | string | 0 | age | d",
            "kind core/X\n  Name | string | 0 | age",
            "kind core/X\n  Name | string | x | age | d",
            "kind core/X\n  Name | string | 0 | computed nothing | d",
            "kind core/X\n  Name | string | 0 | joined .a .b | d",
            "kind core/X conditions=job",
            "kind X",
            "define NAME",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn cells_read_paths_with_fallbacks() {
        let obj = json!({
            "metadata": {"name": "n", "creationTimestamp": ago(30), "labels": {"b": "2", "a": "1"}},
            "spec": {"ips": ["", "10.0.0.1"], "ip": "10.0.0.2", "n": 2.0, "list": [1, 2], "map": {"x": 1}},
        });
        let cases = [
            ("text .spec.ips[0] .spec.ip or=-", json!("10.0.0.2")),
            ("text .spec.none or=-", json!("-")),
            ("integer .spec.n", json!(2)),
            ("integer .spec.none", json!(0)),
            ("joined .spec.ips[*]", json!(",10.0.0.1")),
            ("bool .spec.none", json!(false)),
            ("count .spec.list .spec.map .spec.none", json!(3)),
            ("labels .metadata.labels", json!("a=1,b=2")),
            ("labels .spec.none", json!("<none>")),
            ("selector .spec.none or=<none>", json!("<none>")),
            ("age", json!("30s")),
        ];
        for (cell, want) in cases {
            let col = match parse_column(&format!("C | string | 0 | {cell} | "), &HashMap::new()) {
                Ok(col) => col,
                Err(err) => panic!("{cell}: {err}"),
            };
            assert_eq!(col.value(&col.compile(), &obj, now()), want, "{}", want);
        }
    }

    #[test]
    fn other_builtins_print_name_and_created_at() {
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
                ["Name", "Created At"],
                "{group}/{kind}"
            );
            assert_eq!(c, [json!("thing"), json!(ago(7200))]);
        }
    }
}
