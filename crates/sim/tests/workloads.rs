//! An operator that owns a Deployment, simulated with the cluster's workload controllers
//! (`Scenario::with_workloads`): under faults the Deployment rolls out, becomes Available
//! with the replicas the operator asked for, and every generic property holds; a reconciler
//! that fights the Deployment controller over the Deployment's annotations is caught — a
//! fight that exists only because the cluster's controllers run.

use k8s_openapi::api::apps::v1::Deployment;
use steady_sim::web::{NAME, NAMESPACE, fighting_scenario, operator_alone, scenario};
use steady_sim::{Simulation, World};

#[test]
fn an_owned_deployment_becomes_available_under_faults() {
    Simulation::default().check(&scenario(), 0..6);
}

#[test]
fn a_seed_of_a_workload_scenario_replays_the_same_trace() {
    let scenario = scenario();
    let simulation = Simulation::default();
    let a = simulation.run(&scenario, 7);
    let b = simulation.run(&scenario, 7);
    assert!(a.passed(), "{}", simulation.failure(&scenario, &a, false));
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.end_state, b.end_state);
}

/// Every condition time on the Deployment is at most this long after its creation.
const RUN_LENGTH_BOUND_SECONDS: i64 = 600;

/// The Deployment's condition times are on the run's clock, as its `creationTimestamp`
/// (the API server's) is: minutes after it, not the day the test ran.
fn conditions_on_the_simulated_clock(world: &World) -> Result<(), String> {
    let deployment = world
        .get::<Deployment>(NAMESPACE, NAME)
        .ok_or("no Deployment")?;
    let created = deployment
        .metadata
        .creation_timestamp
        .ok_or("no creationTimestamp")?
        .0;
    let conditions = deployment.status.and_then(|s| s.conditions);
    for condition in conditions.into_iter().flatten() {
        let times = [condition.last_update_time, condition.last_transition_time];
        for time in times.into_iter().flatten() {
            let after = time.0.as_second() - created.as_second();
            if !(0..=RUN_LENGTH_BOUND_SECONDS).contains(&after) {
                return Err(format!(
                    "{} stamped {after} s after the Deployment's creation",
                    condition.type_
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn the_cluster_stamps_conditions_on_the_simulated_clock() {
    let scenario = scenario().goal(
        "conditions-on-the-simulated-clock",
        conditions_on_the_simulated_clock,
    );
    let report = Simulation::default().reference(&scenario, 1);
    assert!(report.passed(), "{:?}", report.violations);
}

#[test]
fn a_reconciler_fighting_the_deployment_controller_is_caught() {
    // The fight needs no fault: the fault-free run (itself checked) shows it, fast.
    let simulation = Simulation::default();
    let fights = simulation.reference(&fighting_scenario(), 1);
    assert!(
        fights.properties().contains(&"eventually-stable"),
        "{:?}",
        fights.violations
    );
    let without_the_cluster =
        simulation.reference(&operator_alone("web-annotations-alone", true), 1);
    assert!(
        without_the_cluster.passed(),
        "nothing to fight without the Deployment controller: {:?}",
        without_the_cluster.violations
    );
}
