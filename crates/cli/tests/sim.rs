//! `steady sim` as a user runs it: a short campaign, a replay, a bad fault list.

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
    assert!(stdout.contains("properties checked:   eventually-stable, idempotent, no-duplicates, same-end-state, runtime-invariants"));
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

#[test]
fn an_unknown_fault_kind_is_a_one_line_error() {
    let (code, _, stderr) = steady(&["sim", "--faults", "gremlins"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown fault kind \"gremlins\""),
        "{stderr}"
    );
}
