//! An operator that owns a Deployment, simulated with the cluster's workload controllers
//! (`Scenario::with_workloads`): under faults the Deployment rolls out, becomes Available
//! with the replicas the operator asked for, and every generic property holds; a reconciler
//! that fights the Deployment controller over the Deployment's annotations is caught — a
//! fight that exists only because the cluster's controllers run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use steady_runtime::{Action, Context, Controller};
use steady_sim::{Launch, Scenario, Simulation, Step, World};

/// `replicas` nginx pods, run by a Deployment the operator owns.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "test.steady.dev", version = "v1", kind = "Web", namespaced)]
#[kube(status = "WebStatus", derive = "PartialEq")]
struct WebSpec {
    replicas: i32,
}

/// What the operator last saw of its Deployment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct WebStatus {
    available_replicas: i32,
}

const MANAGER: &str = "test.steady.dev/web";

struct State {
    /// Also treat the Deployment's annotations as the operator's own: the wrong variant.
    owns_all_annotations: bool,
}

async fn reconcile(web: Arc<Web>, ctx: Arc<Context<State>>) -> Result<Action, kube::Error> {
    let name = web.name_any();
    let labels = json!({ "app": name });
    let spec = json!({ "replicas": web.spec.replicas, "selector": { "matchLabels": labels },
        "template": { "metadata": { "labels": labels },
            "spec": { "containers": [{ "name": "nginx", "image": "nginx:1.27" }] } } });
    let deployment: Deployment = ctx
        .apply_owned(web.as_ref(), &name, MANAGER, json!({ "spec": spec }))
        .await?;
    if ctx.data().owns_all_annotations {
        overwrite_annotations(&ctx, deployment.clone()).await?;
    }
    let available = deployment.status.and_then(|s| s.available_replicas);
    let status = WebStatus {
        available_replicas: available.unwrap_or(0),
    };
    ctx.apply_status(web.as_ref(), MANAGER, status).await?;
    Ok(Action::done())
}

/// Read, set the annotations to exactly the operator's, update: it drops the revision
/// annotation the Deployment controller keeps on the Deployment, which puts it back.
async fn overwrite_annotations(
    ctx: &Context<State>,
    mut deployment: Deployment,
) -> Result<(), kube::Error> {
    let name = deployment.name_any();
    let ours = BTreeMap::from([(MANAGER.to_string(), name.clone())]);
    if deployment.metadata.annotations.as_ref() == Some(&ours) {
        return Ok(());
    }
    deployment.metadata.annotations = Some(ours);
    let namespace = deployment.namespace().unwrap_or_default();
    ctx.api::<Deployment>(&namespace)
        .replace(&name, &PostParams::default(), &deployment)
        .await
        .map(drop)
}

async fn run_operator(client: Client, launch: Launch, owns_all_annotations: bool) {
    let mut controller = Controller::new(Api::all(client.clone()), launch.config("web"));
    controller.owns(Api::<Deployment>::all(client));
    let state = State {
        owns_all_annotations,
    };
    launch
        .run(controller, reconcile, Arc::new(state))
        .await
        .ok();
}

fn web(replicas: i32) -> Web {
    let mut web = Web::new("web", WebSpec { replicas });
    web.metadata.namespace = Some("default".into());
    web
}

/// The Deployment is Available with all of the Web's replicas available, and the Web's
/// status says so.
fn deployment_available(world: &World) -> Result<(), String> {
    let web = world.get::<Web>("default", "web").ok_or("no Web")?;
    let deployment = world
        .get::<Deployment>("default", "web")
        .ok_or("no Deployment")?;
    let status = deployment.status.unwrap_or_default();
    let available = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Available" && c.status == "True");
    let wanted = web.spec.replicas;
    if !available || status.available_replicas != Some(wanted) {
        return Err(format!(
            "{wanted} replicas wanted, Deployment status {status:?}"
        ));
    }
    match web.status {
        Some(WebStatus { available_replicas }) if available_replicas == wanted => Ok(()),
        other => Err(format!("the Web's status is {other:?}")),
    }
}

/// The operator and the user's script, without the cluster's controllers.
fn operator_alone(name: &str, owns_all_annotations: bool) -> Scenario {
    let at = Duration::from_secs;
    Scenario::new(name)
        .crd(Web::crd())
        .create(&web(2))
        .at(at(5), Step::scale::<Web>("default", "web", 4))
        .at(at(15), Step::scale::<Web>("default", "web", 3))
        .controller(move |client, launch| run_operator(client, launch, owns_all_annotations))
}

fn scenario(name: &str, owns_all_annotations: bool) -> Scenario {
    operator_alone(name, owns_all_annotations)
        .with_workloads()
        .goal("deployment-available", deployment_available)
}

#[test]
fn an_owned_deployment_becomes_available_under_faults() {
    Simulation::default().check(&scenario("web", false), 0..6);
}

#[test]
fn a_seed_of_a_workload_scenario_replays_the_same_trace() {
    let scenario = scenario("web", false);
    let simulation = Simulation::default();
    let a = simulation.run(&scenario, 7);
    let b = simulation.run(&scenario, 7);
    assert!(a.passed(), "{}", simulation.failure(&scenario, &a, false));
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.end_state, b.end_state);
}

#[test]
fn a_reconciler_fighting_the_deployment_controller_is_caught() {
    // The fight needs no fault: the fault-free run (itself checked) shows it, fast.
    let simulation = Simulation::default();
    let fights = simulation.reference(&scenario("web-owns-all-annotations", true), 1);
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
