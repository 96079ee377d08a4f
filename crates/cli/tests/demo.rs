//! `steady demo` tells the seed scenario end to end and proves its last claim: a restarted
//! operator on a converged world makes zero writes; each reconcile line says what it did.

mod common;

use common::{stdout_of, steady};

/// What `steady demo <args>` prints; panics with its output unless it succeeds.
fn demo(args: &[&str]) -> String {
    stdout_of(steady(&["demo"]).args(args))
}

#[test]
fn demo_converges_after_missed_events_and_restarts_without_writes() {
    let stdout = demo(&[]);
    for expected in [
        "step 1",
        "step 2",
        "step 3",
        "step 4",
        "step 5",
        "owned Pod default/demo-1",
        // What each reconcile did, from the runtime's records, beside its triggers.
        "→ no change",
        "pods [demo-0 Running, demo-1 Running, demo-2 Running]; status replicas=3 ready=3 observedGeneration=2 (generation 2)",
        "writes by the restarted operator: 0; store revisions since: 0",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|line| line.contains("owned Pod default/demo-1")
                && line.contains("→ created pod demo-1")),
        "no reconcile woken by demo-1 that recreated it:\n{stdout}"
    );
}

#[test]
fn compare_shows_edge_triggered_unconverged_and_level_triggered_converged() {
    let stdout = demo(&["--compare"]);
    let columns = stdout
        .lines()
        .find(|l| l.contains("UNCONVERGED"))
        .expect("an outcome line");
    let (left, right) = columns.split_at(
        columns
            .find("CONVERGED: all properties hold")
            .expect("the level-triggered run converged"),
    );
    assert!(
        left.contains("UNCONVERGED"),
        "the edge-triggered run (left column) ends unconverged: {columns}"
    );
    assert!(right.starts_with("CONVERGED"), "{columns}");
    assert!(
        stdout.contains("edge-triggered (acts on the event)")
            && stdout.contains("level-triggered (the Cache reconciler)")
    );
    assert!(stdout.contains("events lost:") && stdout.contains("crashes:"));
}
