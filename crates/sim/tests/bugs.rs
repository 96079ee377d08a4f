//! Does the harness catch real bugs? Four deliberately wrong Cache reconcilers (see
//! `steady_sim::wrong` for each bug and why it is wrong), and for each:
//!
//! - without faults it converges and passes every property (the bug is dormant, so the
//!   harness is not just flagging a different notion of "done");
//! - under the fault kinds that expose it, the harness flags it within [`MAX_SEEDS`]
//!   seeds, and the first flagged seed names the right property (and only that one);
//! - the reference reconciler passes every one of those seeds with the same faults (so
//!   the finding is about the bug, not the faults).
//!
//! Run with `--nocapture` to see which seed caught each bug and why.

use steady_sim::wrong as reconcilers;

use steady_sim::harness::ReconcileFn;
use steady_sim::{FaultKind, FaultRates, Options, Report, cache_reconciler, run_seed};

/// How many seeds the harness may take to find a bug.
const MAX_SEEDS: u64 = 50;

fn options(faults: &[FaultKind]) -> Options {
    Options {
        faults: FaultRates::only(faults),
        ..Options::default()
    }
}

fn properties(report: &Report) -> Vec<&'static str> {
    report.violations.iter().map(|v| v.property).collect()
}

fn describe(report: &Report) -> String {
    let mut out = String::new();
    for v in &report.violations {
        out.push_str(&format!("\n  {}: {}", v.property, v.message));
    }
    out
}

/// Run `bug` under `faults` from seed 0 until the harness flags it; the first flagged
/// seed must name `property` and nothing else. Then the reference must pass every seed
/// tried, with the same faults. Returns the seed that caught the bug.
fn caught(name: &str, bug: &ReconcileFn, faults: &[FaultKind], property: &str) -> u64 {
    let options = options(faults);
    let Some(report) = (0..MAX_SEEDS)
        .map(|seed| run_seed(seed, &options, bug))
        .find(|r| !r.violations.is_empty())
    else {
        panic!("{name}: not caught within {MAX_SEEDS} seeds with faults {faults:?}");
    };
    let seed = report.seed;
    eprintln!(
        "{name}: caught at seed {seed} (faults {faults:?}, injected {:?}):{}",
        report.injected,
        describe(&report)
    );
    assert!(
        properties(&report).iter().all(|p| *p == property),
        "{name}: seed {seed} should fail only {property}, got:{}",
        describe(&report)
    );
    for s in 0..=seed {
        let reference = run_seed(s, &options, &cache_reconciler());
        assert!(
            reference.violations.is_empty(),
            "the reference reconciler fails seed {s} with faults {faults:?}:{}",
            describe(&reference)
        );
    }
    seed
}

/// Without faults the bug stays hidden: the wrong reconciler passes.
fn dormant(name: &str, bug: &ReconcileFn) {
    for seed in 0..2 {
        let report = run_seed(seed, &options(&[]), bug);
        assert!(
            report.violations.is_empty(),
            "{name}: without faults seed {seed} should pass:{}",
            describe(&report)
        );
    }
}

#[test]
fn generate_name_with_a_stale_read_creates_duplicates() {
    let bug = reconcilers::generate_name_trusting_stale_cache();
    dormant("generateName", &bug);
    let seed = caught(
        "generateName",
        &bug,
        &[FaultKind::StaleList],
        "no-duplicates",
    );
    // The duplicates are real extra creates, not a count the faults could explain.
    let report = run_seed(seed, &options(&[FaultKind::StaleList]), &bug);
    let fault_free = run_seed(seed, &options(&[]), &bug);
    assert!(report.pod_creates > fault_free.pod_creates);
}

/// A dropped event alone does not expose this reconciler: when faults stop, the harness
/// expires every watch and the runtime's relist turns each difference it finds into a
/// trigger naming the object, so a missed pod deletion still arrives as
/// `owned Pod default/sim-N`. What loses the edge for good is a reconcile that carried it
/// and did not act on it: a write refused with 409 (read as "already exists") or 500
/// (retried with a `backoff` trigger that names no pod).
#[test]
fn edge_triggered_reconciler_loses_the_edge() {
    let bug = reconcilers::edge_triggered();
    dormant("edge-triggered", &bug);
    caught(
        "edge-triggered",
        &bug,
        &[
            FaultKind::DropEvent,
            FaultKind::PodDeletion,
            FaultKind::Conflict,
            FaultKind::ServerError,
        ],
        "eventually-stable",
    );
}

#[test]
fn record_before_create_is_not_crash_safe() {
    let bug = reconcilers::record_then_create();
    dormant("record-then-create", &bug);
    caught(
        "record-then-create",
        &bug,
        &[FaultKind::Crash, FaultKind::LostResponse],
        "eventually-stable",
    );
}

#[test]
fn status_written_on_every_reconcile_is_not_idempotent() {
    let bug = reconcilers::status_on_every_reconcile();
    let seed = caught("status-every-reconcile", &bug, &[], "idempotent");
    assert_eq!(seed, 0, "no faults are needed: the first seed shows it");
}
