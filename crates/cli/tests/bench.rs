//! `steady bench … --quick` runs every measurement at small sizes: this checks the
//! harness works end to end (it times nothing and asserts no speed).

use std::process::Command;

fn quick(target: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_steady"))
        .args(["bench", target, "--quick"])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run steady bench");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "steady bench {target} --quick failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The value cell of the table row whose measurement starts with `name`.
fn cell(table: &str, name: &str) -> String {
    table
        .lines()
        .find(|l| l.starts_with(&format!("| {name}")))
        .and_then(|l| l.split('|').nth(2))
        .map(|c| c.trim().to_string())
        .unwrap_or_else(|| panic!("no row {name:?} in:\n{table}"))
}

#[test]
fn server_bench_quick_reports_every_measurement() {
    let out = quick("server");
    for row in [
        "creates/s, HTTPS",
        "creates/s, in-process",
        "list of",
        "watch delivery",
    ] {
        let value = cell(&out, row);
        assert!(
            value.chars().any(|c| c.is_ascii_digit()),
            "{row}: {value:?}"
        );
    }
}

#[test]
fn runtime_bench_quick_reports_every_measurement() {
    let out = quick("runtime");
    for row in [
        "work queue: add",
        "work queue: 10 adds",
        "write → reconcile",
    ] {
        let value = cell(&out, row);
        assert!(
            value.chars().any(|c| c.is_ascii_digit()),
            "{row}: {value:?}"
        );
    }
}

#[test]
fn operators_bench_quick_compares_steady_with_kube_runtime() {
    let out = quick("operators");
    let header = out
        .lines()
        .find(|l| l.starts_with("| scenario |"))
        .expect("a table");
    assert!(
        header.contains("steady") && header.contains("kube-runtime"),
        "{header}"
    );
    let row = out
        .lines()
        .find(|l| l.contains("seconds until all Ready"))
        .expect("a cold-start row");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert!(
        cells[3].parse::<f64>().is_ok() && cells[4].parse::<f64>().is_ok(),
        "{row}"
    );
    let steady_state = out
        .lines()
        .find(|l| l.contains("steady state") && l.contains("| writes |"))
        .expect("a steady-state row");
    assert!(
        steady_state.contains("| writes | 0 |"),
        "steady makes no writes at the fixed point: {steady_state}"
    );
}
