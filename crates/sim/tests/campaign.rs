//! The CI campaign: the Cache operator under every fault kind, many seeds, no violation;
//! and every crash-between-two-writes of a fault-free run, systematically.

mod common;

use std::collections::BTreeMap;

use steady_sim::{FaultKind, Simulation, cache};

/// Seeds of the campaign: enough that every fault kind fires many times, few enough for
/// CI's debug build.
const SEEDS: u64 = 60;

#[test]
fn every_fault_kind_across_many_seeds_without_a_violation() {
    let (scenario, simulation, reference) = common::cache_reference(0);
    let mut injected: BTreeMap<FaultKind, u64> = BTreeMap::new();
    for seed in 0..SEEDS {
        let report = simulation.run_against(&scenario, seed, &reference);
        assert!(
            report.passed(),
            "{}",
            simulation.failure(&scenario, &report, false)
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
fn the_test_api_runs_seeds_of_a_scenario_in_one_call() {
    Simulation::default().check(&cache::scenario(), 1000..1010);
}

#[test]
fn a_crash_after_any_write_of_the_reference_run_still_converges() {
    let scenario = cache::scenario();
    let simulation = Simulation::default();
    let reports = simulation.systematic_crashes(&scenario, 7);
    assert!(
        reports.len() >= 10,
        "the reference run makes at least 10 writes, got {}",
        reports.len()
    );
    for (i, report) in reports.iter().enumerate() {
        assert!(
            report.passed(),
            "crash after write {}: {}",
            i + 1,
            simulation.failure(&scenario, report, false)
        );
        assert_eq!(
            report.injected.get(&FaultKind::Crash),
            Some(&1),
            "exactly one crash, after write {}",
            i + 1
        );
    }
}

/// The Cache scaled 4 → 1 → 3 twice, so pods are created again under the names of pods
/// just deleted, converges under every fault. The listed seeds broke before two fixes:
/// a run woken by a spec change that reached the cache during a status write was skipped
/// as "settled" (the runtime's `skip_unchanged`), and a watch cut at the instant faults
/// stopped resumed without the relist that recovers its dropped events (the harness).
#[test]
fn scaling_down_and_back_up_under_faults_converges() {
    let once_broken = [941, 1352, 1447, 1731, 1901, 2443, 2669, 3102];
    Simulation::default().check(&cache::rescale_scenario(), (0..20).chain(once_broken));
}

/// The API refuses the scale-up (the namespace's pod quota) until the quota is raised, an
/// event the operator does not watch: under every fault, its backoff retries still
/// converge, and the refusals are in the trace.
#[test]
fn a_quota_refusal_lifted_without_an_event_still_converges() {
    let scenario = cache::quota_scenario();
    let simulation = Simulation::default();
    simulation.check(&scenario, 0..20);
    let reference = simulation.reference(&scenario, 0);
    let refused = reference
        .trace
        .iter()
        .filter(|line| line.contains("pods → 403"))
        .count();
    assert!(refused > 0, "no refused pod create in the reference run");
}

/// The operator runs as its service account, held by RBAC to the ClusterRole its manifests
/// ship: under every fault it converges, so the shipped rules are enough.
#[test]
fn the_operator_converges_with_only_the_rbac_its_manifests_grant() {
    let rules = steady_cache_operator::manifests::cluster_role_rules();
    Simulation::default().check(&cache::rbac_scenario(rules), 0..10);
}

/// Take one rule out (writing the Cache's status) and the simulator says so: the fault-free
/// run already breaks the Cache's goal, and the trace shows the 403s that broke it.
#[test]
fn a_rule_missing_from_the_operators_rbac_is_caught() {
    let mut rules = steady_cache_operator::manifests::cluster_role_rules();
    let rules_list = rules.as_array_mut().expect("a list of rules");
    rules_list.retain(|rule| rule["resources"] != serde_json::json!(["caches/status"]));
    let scenario = cache::rbac_scenario(rules);
    let report = Simulation::default().reference(&scenario, 0);
    assert!(!report.passed(), "the missing rule went unnoticed");
    assert!(
        report.properties().contains(&cache::CONVERGED),
        "{:?}",
        report.violations
    );
    assert!(
        report.trace.iter().any(|line| line.contains("→ 403")),
        "the refusals are in the trace"
    );
}
