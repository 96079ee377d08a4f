//! `steady bench … --quick` runs every measurement at small sizes: this checks the
//! harness works end to end (it times nothing and asserts no speed).

mod common;

use common::{stdout_of, steady};

fn quick(target: &str, extra: &[&str]) -> String {
    stdout_of(
        steady(&["bench", target, "--quick"])
            .args(extra)
            .env("RUST_LOG", "warn"),
    )
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

/// Panics unless each of `rows` has a number in its value cell.
fn assert_measured(table: &str, rows: &[&str]) {
    for row in rows {
        let value = cell(table, row);
        assert!(
            value.chars().any(|c| c.is_ascii_digit()),
            "{row}: {value:?}"
        );
    }
}

#[test]
fn server_bench_quick_reports_every_measurement() {
    let out = quick("server", &[]);
    assert_measured(
        &out,
        &[
            "creates/s, HTTPS",
            "creates/s, in-process",
            "list of",
            "watch delivery",
        ],
    );
}

#[test]
fn runtime_bench_quick_reports_every_measurement() {
    let out = quick("runtime", &[]);
    assert_measured(
        &out,
        &[
            "work queue: add",
            "work queue: 10 adds",
            "write → reconcile",
        ],
    );
}

#[test]
fn workloads_bench_quick_reports_every_measurement() {
    let out = quick("workloads", &[]);
    assert_measured(
        &out,
        &[
            "raw writes/s",
            "50 pods Running and Ready through the Deployment",
            "writes during the rollout",
            "writes per pod",
            "rollout writes/s ÷ raw writes/s",
            "  writes to core/pods",
        ],
    );
}

/// The cells of the operators table row with this scenario prefix and measurement.
fn row<'a>(table: &'a str, scenario: &str, measurement: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .find(|cells| cells.len() > 5 && cells[1].starts_with(scenario) && cells[2] == measurement)
        .unwrap_or_else(|| panic!("no row {scenario:?} / {measurement:?} in:\n{table}"))
}

fn number(cell: &str) -> f64 {
    cell.parse()
        .unwrap_or_else(|_| panic!("{cell:?} is not a number"))
}

#[test]
fn operators_bench_quick_runs_every_scenario_for_both_runtimes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plot = dir.path().join("plot.svg");
    let out = quick("operators", &["--plot", plot.to_str().expect("utf-8 path")]);
    let header = out
        .lines()
        .find(|l| l.starts_with("| scenario |"))
        .expect("a table");
    assert!(header.contains("| steady | kube-runtime |"), "{header}");
    // Every scenario produced numbers for both runtimes.
    for (scenario, measurement) in [
        (
            "1. cold start",
            "seconds until all Ready at their generation",
        ),
        ("1. cold start", "operator peak RSS (MiB)"),
        ("1. cold start", "operator CPU seconds"),
        ("6. the limit", "cold start ÷ the limit"),
        ("2. steady state", "reconciles"),
        ("2. forced relist", "LIST"),
        ("3. self-heal", "p99 delete → replacement (ms)"),
        ("4. churn", "p99 update → status (ms)"),
        ("4. churn", "reconciles per update"),
        ("4. churn", "writes committed per update, all writers"),
        ("5. memory", "operator RSS, converged (MiB)"),
        ("5. memory", "operator peak RSS during relist (MiB)"),
        ("5. memory", "relist peak ÷ converged RSS"),
    ] {
        let cells = row(&out, scenario, measurement);
        assert!(
            number(cells[3]) >= 0.0 && number(cells[4]) >= 0.0,
            "{cells:?}"
        );
    }
    // Every update is a write itself, before any the operator and the node make for it.
    let writes = row(&out, "4. churn", "writes committed per update, all writers");
    assert!(
        number(writes[3]) >= 1.0 && number(writes[4]) >= 1.0,
        "{writes:?}"
    );
    // The slope between two small memory points may be negative (RSS noise): a number.
    let slope = row(
        &out,
        "5. memory",
        "bytes per pod (RSS slope, 100 → 200 pods)",
    );
    assert!(
        number(slope[3]).is_finite() && number(slope[4]).is_finite(),
        "{slope:?}"
    );
    // Both converged and resynced: every resync period reconciles every Cache.
    let reconciles = row(&out, "2. steady state", "reconciles");
    assert!(
        number(reconciles[3]) > 0.0 && number(reconciles[4]) > 0.0,
        "{reconciles:?}"
    );
    // At the fixed point steady writes nothing and, reading its caches, asks nothing;
    // after a forced relist it re-lists each kind once and still writes nothing.
    assert_eq!(row(&out, "2. steady state", "writes")[3], "0");
    assert_eq!(row(&out, "2. steady state", "GET + LIST")[3], "0");
    assert_eq!(row(&out, "2. forced relist", "writes")[3], "0");
    assert_eq!(row(&out, "2. forced relist", "GET")[3], "0");
    assert_eq!(row(&out, "2. forced relist", "LIST")[3], "3");
    let svg = std::fs::read_to_string(&plot).expect("the plot was written");
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{svg:.80}"
    );
    assert!(svg.contains("steady") && svg.contains("kube-runtime"));
}
