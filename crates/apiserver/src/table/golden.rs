//! Golden tables: built-in kinds' Tables rendered from fixture objects must equal the
//! golden files byte for byte — column definitions, cells and row conditions.
//!
//! - `testdata/table/fixtures.json` (keyed `group/Kind`, every kind with a printer) →
//!   `testdata/table/tables.json`, captured from the renderer before the columns became data;
//! - `testdata/table/cases.json` (named cases: what each shows, and the tables it renders) →
//!   `testdata/table/cases_tables.json`: the per-kind tests of the printers (pod status reasons,
//!   job durations, endpoint lists, ...), their objects and cells as data.
//!
//! Set `STEADY_UPDATE_GOLDEN=1` to rewrite the golden files after a deliberate change.

use serde_json::{Map, Value};

use super::test_support::{builtin, render};

const GOLDEN_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/table");

/// The Table of `objects` of the built-in kind `group/Kind`.
fn render_kind(key: &str, objects: &Value) -> Value {
    let (group, kind) = key.split_once('/').expect("group/Kind");
    let objects = objects.as_array().expect("a list of objects");
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    render(&builtin(leak(group), leak(kind)), objects)
}

fn by_kind(fixtures: &Map<String, Value>) -> Map<String, Value> {
    fixtures
        .iter()
        .map(|(key, objects)| (key.clone(), render_kind(key, objects)))
        .collect()
}

fn by_case(cases: &Map<String, Value>) -> Map<String, Value> {
    cases
        .iter()
        .map(|(name, case)| {
            let tables = case["tables"].as_array().expect("tables");
            let rendered = tables
                .iter()
                .map(|t| render_kind(t["kind"].as_str().expect("kind"), &t["objects"]))
                .collect();
            (name.clone(), Value::Array(rendered))
        })
        .collect()
}

fn fixtures(file: &str) -> Map<String, Value> {
    let text = std::fs::read_to_string(format!("{GOLDEN_DIR}/{file}")).expect("fixtures");
    serde_json::from_str(&text).expect("fixtures parse")
}

/// Compares `rendered` with the golden file (rewriting it first when asked).
fn assert_golden(file: &str, rendered: Map<String, Value>) {
    let path = format!("{GOLDEN_DIR}/{file}");
    let got = serde_json::to_string_pretty(&Value::Object(rendered)).expect("serializes") + "\n";
    if std::env::var_os("STEADY_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).expect("write golden");
    }
    let want = std::fs::read_to_string(&path).expect("golden file");
    assert!(got == want, "tables differ from {path}");
}

#[test]
fn every_builtin_kind_renders_its_golden_table() {
    assert_golden("tables.json", by_kind(&fixtures("fixtures.json")));
}

#[test]
fn every_case_renders_its_golden_tables() {
    assert_golden("cases_tables.json", by_case(&fixtures("cases.json")));
}

#[test]
fn every_builtin_kind_has_fixtures() {
    let fixtures = fixtures("fixtures.json");
    for kind in super::columns::all_kinds() {
        let key = format!("{}/{}", kind.group, kind.kind);
        assert!(fixtures.contains_key(&key), "no fixture for {key}");
    }
}
