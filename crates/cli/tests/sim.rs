//! `steady sim` as a user runs it: a short campaign, a replay (the same trace as the test
//! API's, by hash), a wrong reconciler caught, a bad fault list or scenario, and the
//! workload scenario (an operator owning a Deployment, with the cluster's controllers).

use std::process::Command;

fn steady(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_steady"))
        .args(args)
        .output()
        .expect("run steady");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_short_campaign_reports_seeds_faults_and_no_violation() {
    let (code, stdout, stderr) = steady(&["sim", "--seeds", "5"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("seeds run:            5"), "{stdout}");
    assert!(
        stdout.contains(
            "properties checked:   eventually-stable, idempotent, same-end-state, \
             runtime-invariants, cache-ordinals, cache-converged"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("violations:           0"), "{stdout}");
    assert!(stderr.contains("5/5 seeds"), "a progress bar: {stderr}");
}

#[test]
fn a_seed_replays_with_the_same_trace() {
    let (code, first, stderr) = steady(&["sim", "--seed", "11", "--faults", "drop-event,crash"]);
    assert_eq!(code, 0, "{first}\n{stderr}");
    assert!(
        first.contains("reconcile default/sim"),
        "the trace shows reconciles: {first}"
    );
    let (_, second, _) = steady(&["sim", "--seed", "11", "--faults", "drop-event,crash"]);
    let trace = |out: &str| {
        out.lines()
            .filter(|l| l.contains('s') && l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(trace(&first), trace(&second), "same seed, same trace");
}

/// The trace hash a replay prints.
fn printed_trace_hash(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("trace hash:"))
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|| panic!("no trace hash in {stdout}"))
}

#[test]
fn an_unknown_fault_kind_is_a_one_line_error() {
    let (code, _, stderr) = steady(&["sim", "--faults", "gremlins"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown fault kind \"gremlins\""),
        "{stderr}"
    );
}

/// The nondeterminism once seen between the test binary and `steady sim` is gone: one seed
/// has one trace hash in both.
#[test]
fn a_seed_has_the_same_trace_hash_in_steady_sim_and_in_the_test_api() {
    let seed = 4;
    let (code, stdout, stderr) = steady(&["sim", "--seed", &seed.to_string()]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let printed = printed_trace_hash(&stdout);
    let simulation = steady_sim::Simulation::default();
    let report = simulation.run(&steady_sim::cache::scenario(), seed);
    assert_eq!(printed, format!("{:016x}", report.trace_hash()));
}

#[test]
fn a_wrong_reconciler_fails_with_its_property_and_a_replay_command() {
    let (code, stdout, _) = steady(&[
        "sim",
        "--scenario",
        "cache-status-every-reconcile",
        "--seeds",
        "1",
        "--faults",
        "none",
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("seed 0: idempotent"), "{stdout}");
    assert!(
        stdout.contains(
            "replay: steady sim --scenario cache-status-every-reconcile --seed 0 --faults none"
        ),
        "{stdout}"
    );
}

#[test]
fn an_unknown_scenario_is_a_one_line_error() {
    let (code, _, stderr) = steady(&["sim", "--scenario", "nope"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("unknown scenario \"nope\""), "{stderr}");
}

/// The workload scenario runs from the CLI with the cluster's controllers, and its seed
/// has one trace hash in `steady sim` and in the test API (another process, another
/// moment: the controllers' timestamps are on the simulated clock).
#[test]
fn the_workload_scenario_runs_and_replays_with_the_test_apis_hash() {
    let (code, stdout, stderr) = steady(&["sim", "--scenario", "web", "--seeds", "2"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("scenario web under faults"), "{stdout}");
    assert!(stdout.contains("deployment-available"), "{stdout}");
    assert!(stdout.contains("violations:           0"), "{stdout}");
    let seed = 3;
    let (code, stdout, stderr) = steady(&["sim", "--scenario", "web", "--seed", &seed.to_string()]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let printed = printed_trace_hash(&stdout);
    let report = steady_sim::Simulation::default().run(&steady_sim::web::scenario(), seed);
    assert_eq!(printed, format!("{:016x}", report.trace_hash()));
}
