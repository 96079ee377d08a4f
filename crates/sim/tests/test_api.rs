//! What a failing `Simulation::check` tells its reader: the property, the seed, a short
//! trace and a one-line replay command (`steady sim` for a compiled-in scenario, the test
//! itself with `STEADY_SIM_SEED` for the author's own).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use steady_sim::{FaultRates, Scenario, Simulation, Step, cache};

fn quiet() -> Simulation {
    Simulation {
        faults: FaultRates::none(),
        ..Simulation::default()
    }
}

fn panic_message(run: impl FnOnce()) -> String {
    let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) else {
        panic!("check should have failed");
    };
    payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_compiled_in_scenario_replays_with_steady_sim() {
    let bug = steady_sim::scenario("cache-status-every-reconcile").expect("compiled in");
    let message = panic_message(|| quiet().check(&bug, 0..3));
    assert!(
        message.contains("failed at seed 0 without faults"),
        "{message}"
    );
    assert!(message.contains("idempotent: "), "{message}");
    assert!(message.contains("write PATCH"), "a short trace: {message}");
    assert!(
        !message.contains("  reconcile "),
        "reconcile lines are left out: {message}"
    );
    assert!(
        message.contains(
            "replay: steady sim --scenario cache-status-every-reconcile --seed 0 --faults none"
        ),
        "{message}"
    );
}

#[test]
fn an_authors_scenario_replays_with_its_own_test() {
    // The author's scenario: the Cache operator, an invariant of their own, and a step
    // that breaks it.
    let scenario = Scenario::new("my-operator")
        .crd(steady_cache_operator::crd())
        .invariant("at-most-one-pod", |world| match world.list::<Pod>().len() {
            0 | 1 => Ok(()),
            n => Err(format!("{n} pods")),
        });
    let scale = Step::scale::<steady_cache_operator::Cache>(cache::NAMESPACE, cache::NAME, 2);
    let scenario = cache_like(scenario).at(Duration::from_secs(3), scale);
    let message = panic_message(|| quiet().check(&scenario, 5..6));
    assert!(
        message.contains("scenario my-operator failed at seed 5"),
        "{message}"
    );
    assert!(message.contains("at-most-one-pod: 2 pods"), "{message}");
    assert!(
        message.contains("replay: STEADY_SIM_SEED=5 cargo test an_authors_scenario_replays_with_its_own_test -- --exact --nocapture"),
        "{message}"
    );
}

/// The Cache operator's objects and controller, as an author would wire their own.
fn cache_like(scenario: Scenario) -> Scenario {
    let cache: steady_cache_operator::Cache = serde_json::from_value(serde_json::json!({
        "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
        "metadata": {"name": cache::NAME, "namespace": cache::NAMESPACE}, "spec": {"replicas": 1}
    }))
    .expect("a Cache");
    scenario
        .create(&cache)
        .controller(|client, launch| async move {
            let (controller, data) =
                steady_cache_operator::controller(client, launch.config("cache"), launch.clock());
            let _ = launch
                .run(controller, steady_cache_operator::reconcile, data)
                .await;
        })
}

/// A cluster's ValidatingAdmissionPolicy and its binding, refusing Pods for which
/// `expression` does not hold.
fn pod_policy(scenario: Scenario, name: &str, expression: &str) -> Scenario {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
            "validations": [{"expression": expression}],
        },
    }))
    .expect("a policy");
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }))
    .expect("a binding");
    scenario.create(&policy).create(&binding)
}

fn pods_running(world: &steady_sim::World) -> Result<(), String> {
    match world.list::<Pod>().len() {
        1 => Ok(()),
        n => Err(format!("{n} pods, the Cache asks for 1")),
    }
}

#[test]
fn an_operator_is_proved_under_the_admission_policies_of_its_cluster() {
    // The Cache operator sets a memory limit on every container: under every fault, the
    // cluster's policy never refuses its pods.
    let limited =
        "object.spec.containers.all(c, has(c.resources.limits) && 'memory' in c.resources.limits)";
    let scenario = Scenario::new("cache-under-policy")
        .crd(steady_cache_operator::crd())
        .goal("pods-running", pods_running);
    let scenario = cache_like(pod_policy(scenario, "memory-limits", limited));
    Simulation::default().check(&scenario, 0..8);

    // A policy it does not meet (a label it never sets) refuses every pod, and the
    // scenario's goal reports it.
    let scenario = Scenario::new("cache-under-team-policy")
        .crd(steady_cache_operator::crd())
        .goal("pods-running", pods_running);
    let labelled = "has(object.metadata.labels) && 'team' in object.metadata.labels";
    let scenario = cache_like(pod_policy(scenario, "team-label", labelled));
    let message = panic_message(|| quiet().check(&scenario, 0..1));
    assert!(message.contains("pods-running: 0 pods"), "{message}");
    assert!(
        message.contains("write POST /api/v1/namespaces/default/pods → 422"),
        "the refusals are in the trace: {message}"
    );
}
