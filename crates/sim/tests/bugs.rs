//! Does the simulator catch real bugs? Six deliberately wrong Cache reconcilers (see
//! `steady_sim::wrong` for each bug and why it is wrong). The last three show without any
//! fault (a write at the fixed point, a hot loop, a field the server does not keep); for
//! each of the first three:
//!
//! - without faults it converges and passes every property (the bug is dormant, so the
//!   simulator is not just flagging a different notion of "done");
//! - under the fault kinds that expose it, a generic property or the Cache invariant
//!   flags it within [`MAX_SEEDS`] seeds, naming the expected property;
//! - the reference reconciler passes every one of those seeds with the same faults (so
//!   the finding is about the bug, not the faults).
//!
//! Run with `--nocapture` to see which seed caught each bug and why.

use std::time::Duration;

use steady_sim::{FaultKind, FaultRates, Report, Scenario, Simulation, cache};

/// How many seeds the simulator may take to find a bug.
const MAX_SEEDS: u64 = 40;

fn simulation(faults: &[FaultKind]) -> Simulation {
    Simulation {
        faults: FaultRates::only(faults),
        ..Simulation::default()
    }
}

fn wrong(name: &str) -> Scenario {
    steady_sim::scenario(name).unwrap_or_else(|| panic!("no compiled-in scenario {name}"))
}

/// Run `bug` under `faults` from seed 0 until a seed fails; that seed must fail
/// `property`. Then the reference must pass every seed tried, with the same faults.
fn caught(bug: &Scenario, faults: &[FaultKind], property: &str) -> Report {
    let simulation = simulation(faults);
    let reference = simulation.reference(bug, 0);
    assert!(
        reference.passed(),
        "{}: dormant without faults:\n{}",
        bug.name(),
        simulation.failure(bug, &reference, true)
    );
    let Some(report) = (0..MAX_SEEDS)
        .map(|seed| simulation.run_against(bug, seed, &reference))
        .find(|r| !r.passed())
    else {
        panic!(
            "{}: not caught within {MAX_SEEDS} seeds with faults {faults:?}",
            bug.name()
        );
    };
    eprintln!("{}", simulation.failure(bug, &report, false));
    assert!(
        report.properties().contains(&property),
        "{}: seed {} should fail {property}, got {:?}",
        bug.name(),
        report.seed,
        report.properties()
    );
    let good = cache::scenario();
    let good_reference = simulation.reference(&good, 0);
    for seed in 0..=report.seed {
        let run = simulation.run_against(&good, seed, &good_reference);
        assert!(run.passed(), "{}", simulation.failure(&good, &run, false));
    }
    report
}

#[test]
fn generate_name_with_a_stale_read_breaks_the_cache_invariant() {
    let report = caught(
        &wrong("cache-generate-name"),
        &[FaultKind::StaleList],
        cache::ORDINALS,
    );
    let traced = report.trace.join("\n");
    assert!(
        traced.contains("is not one of its ordinals"),
        "the trace shows when the invariant broke"
    );
}

/// A dropped event alone does not expose this reconciler: when faults stop, the simulator
/// expires every watch and the runtime's relist turns each difference it finds into a
/// trigger naming the object, so a missed pod deletion still arrives as
/// `owned Pod default/sim-N`. What loses the edge for good is a reconcile that carried it
/// and did not act on it: a write refused with 409 (read as "already exists") or 500
/// (retried with a `backoff` trigger that names no pod).
#[test]
fn edge_triggered_reconciler_loses_the_edge() {
    caught(
        &wrong("cache-edge-triggered"),
        &[
            FaultKind::DropEvent,
            FaultKind::PodDeletion,
            FaultKind::Conflict,
            FaultKind::ServerError,
        ],
        "same-end-state",
    );
}

#[test]
fn record_before_create_is_not_crash_safe() {
    caught(
        &wrong("cache-record-then-create"),
        &[FaultKind::Crash, FaultKind::LostResponse],
        "same-end-state",
    );
}

#[test]
fn status_written_on_every_reconcile_is_not_idempotent() {
    fault_free_run_fails_only("cache-status-every-reconcile", "idempotent");
}

/// The fault-free run of the wrong scenario `name` fails `property` and nothing else: no
/// fault is needed to show the bug.
fn fault_free_run_fails_only(name: &str, property: &str) -> Report {
    let report = simulation(&[]).reference(&wrong(name), 0);
    assert_eq!(
        report.properties(),
        vec![property],
        "no faults are needed: the fault-free run shows it ({:?})",
        report.violations
    );
    report
}

/// The first property `report` fails is eventually-stable.
fn assert_unstable(report: &Report) {
    assert_eq!(
        report.properties().first(),
        Some(&"eventually-stable"),
        "{:?}",
        report.violations
    );
}

/// Without a debounce (the runtime's default) every write triggers the next reconcile at
/// the same simulated instant: the hot-loop guard stops it.
#[test]
fn a_hot_loop_is_caught_and_stopped() {
    let bug = cache::scenario_configured(
        "cache-status-counter-undebounced",
        steady_sim::wrong::status_counter_on_every_reconcile(),
        |launch| launch.config("cache"),
    );
    let report = simulation(&[]).reference(&bug, 0);
    assert_unstable(&report);
    assert!(
        report.trace.iter().any(|line| line.contains("hot loop")),
        "the trace says why the controller was stopped"
    );
}

/// With the operator's shipped debounce the same bug writes once per debounce window, so
/// simulated time passes: the controller never stops writing, and eventually-stable says
/// so when the settle bound runs out (shortened here to keep the test fast).
#[test]
fn a_debounced_write_loop_never_settles() {
    let bug = wrong("cache-status-counter");
    let simulation = Simulation {
        settle_bound: Duration::from_secs(20),
        ..simulation(&[])
    };
    let report = simulation.reference(&bug, 0);
    assert_unstable(&report);
    assert!(
        report.violations[0].message.contains("still writes"),
        "{:?}",
        report.violations
    );
}

#[test]
fn the_same_apply_on_every_reconcile_writes_nothing() {
    let control = wrong("cache-same-status-applied");
    let simulation = simulation(&[FaultKind::Crash, FaultKind::DropEvent]);
    for seed in 0..3 {
        let report = simulation.run(&control, seed);
        assert!(
            report.passed(),
            "{}",
            simulation.failure(&control, &report, true)
        );
    }
}

/// Bug 6 needs no fault: the server drops the empty list the operator compares against,
/// so each reconcile deletes the Service the one before created, and the churn never
/// stops.
#[test]
fn a_drift_check_on_a_field_the_server_drops_never_settles() {
    let report = fault_free_run_fails_only("cache-drift-on-dropped-field", "eventually-stable");
    let deletes = report
        .trace
        .iter()
        .filter(|line| line.contains("DELETE") && line.contains("services/"))
        .count();
    assert!(
        deletes >= 2,
        "the Service is deleted again and again: {deletes}"
    );
}
