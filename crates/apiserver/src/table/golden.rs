//! Golden tables: every built-in kind's Table, rendered from the fixture objects in
//! `golden/fixtures.json` (keyed `group/Kind`), must equal `golden/tables.json` byte for
//! byte — column definitions, cells and row conditions. The golden file was captured from
//! the renderer before the columns became data; set `STEADY_UPDATE_GOLDEN=1` to rewrite it
//! after a deliberate change.

use serde_json::{Map, Value};

use super::test_support::{builtin, render};

const FIXTURES: &str = include_str!("golden/fixtures.json");
const GOLDEN_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/table/golden/tables.json");

fn rendered() -> String {
    let fixtures: Map<String, Value> = serde_json::from_str(FIXTURES).expect("fixtures parse");
    let tables: Map<String, Value> = fixtures
        .iter()
        .map(|(key, objects)| {
            let (group, kind) = key.split_once('/').expect("group/Kind");
            let objects = objects.as_array().expect("a list of objects");
            let columns = builtin(leak(group), leak(kind));
            (key.clone(), render(&columns, objects))
        })
        .collect();
    serde_json::to_string_pretty(&Value::Object(tables)).expect("serializes") + "\n"
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

#[test]
fn every_builtin_kind_renders_its_golden_table() {
    let got = rendered();
    if std::env::var_os("STEADY_UPDATE_GOLDEN").is_some() {
        std::fs::write(GOLDEN_PATH, &got).expect("write golden");
    }
    let want = std::fs::read_to_string(GOLDEN_PATH).expect("golden file");
    assert!(got == want, "tables differ from {GOLDEN_PATH}");
}

#[test]
fn every_builtin_kind_has_fixtures() {
    let fixtures: Map<String, Value> = serde_json::from_str(FIXTURES).expect("fixtures parse");
    for kind in super::columns::all_kinds() {
        let key = format!("{}/{}", kind.group, kind.kind);
        assert!(fixtures.contains_key(&key), "no fixture for {key}");
    }
}
