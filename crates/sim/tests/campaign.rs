//! The CI campaign: the Cache operator under every fault kind, hundreds of seeds, no
//! violation; and every crash-between-two-writes of a fault-free run, systematically.

use std::collections::BTreeMap;

use steady_sim::{
    FaultKind, Options, cache_reconciler, reference_run, run_seed_against, systematic_crashes,
};

#[test]
fn five_hundred_seeds_across_all_fault_kinds_without_a_violation() {
    let reconciler = cache_reconciler();
    let options = Options::default();
    let mut injected: BTreeMap<FaultKind, u64> = BTreeMap::new();
    let reference = reference_run(0, &options, &reconciler);
    for seed in 0..500 {
        let report = run_seed_against(seed, &options, &reconciler, &reference);
        assert!(
            report.violations.is_empty(),
            "seed {seed}: {:?}\nreplay: steady sim --seed {seed}\n{}",
            report.violations,
            report.trace.join("\n")
        );
        for (kind, n) in report.injected {
            *injected.entry(kind).or_default() += n;
        }
    }
    for kind in FaultKind::ALL {
        assert!(
            injected.get(&kind).copied().unwrap_or(0) > 0,
            "the campaign never injected {kind}"
        );
    }
}

#[test]
fn a_crash_after_any_write_of_the_reference_run_still_converges() {
    let reports = systematic_crashes(7, &Options::default(), &cache_reconciler());
    assert!(
        reports.len() >= 10,
        "the reference run makes at least 10 writes, got {}",
        reports.len()
    );
    for (i, report) in reports.iter().enumerate() {
        assert!(
            report.violations.is_empty(),
            "crash after write {}: {:?}\n{}",
            i + 1,
            report.violations,
            report.trace.join("\n")
        );
        assert_eq!(
            report.injected.get(&FaultKind::Crash),
            Some(&1),
            "exactly one crash, after write {}",
            i + 1
        );
    }
}
