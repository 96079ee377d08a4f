//! The Web scenario: an operator that owns a Deployment, simulated with the cluster's
//! workload controllers ([`Scenario::with_workloads`]). The user scales the Web up and
//! down; under faults the Deployment rolls out and becomes Available with the replicas
//! asked for, and the Web's status says so. Its wrong variant treats every annotation on
//! the Deployment as its own and fights the Deployment controller over its revision
//! annotation — a fight that exists only because the cluster's controllers run.
//!
//! Owns: the `Web` kind (`test.steady.dev/v1`), its reconciler and the scenario's goal.
//! Must not know how the Deployment controller works: it reads the Deployment's status.

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

use crate::scenario::{Launch, Scenario, Step};
use crate::world::World;

/// The Web's namespace in the scenario.
pub const NAMESPACE: &str = "default";
/// The Web's (and its Deployment's) name in the scenario.
pub const NAME: &str = "web";
/// The name of the scenario's goal.
pub const AVAILABLE: &str = "deployment-available";
/// The field manager of the operator's writes.
const MANAGER: &str = "test.steady.dev/web";

/// `replicas` nginx pods, run by a Deployment the operator owns.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "test.steady.dev", version = "v1", kind = "Web", namespaced)]
#[kube(status = "WebStatus", derive = "PartialEq")]
pub struct WebSpec {
    /// Pods wanted.
    pub replicas: i32,
}

/// What the operator last saw of its Deployment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebStatus {
    /// The Deployment's `availableReplicas`.
    pub available_replicas: i32,
}

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
    let _ = launch.run(controller, reconcile, Arc::new(state)).await;
}

fn web(replicas: i32) -> Web {
    let mut web = Web::new(NAME, WebSpec { replicas });
    web.metadata.namespace = Some(NAMESPACE.into());
    web
}

/// The Deployment is Available with all of the Web's replicas available, and the Web's
/// status says so.
fn deployment_available(world: &World) -> Result<(), String> {
    let web = world.get::<Web>(NAMESPACE, NAME).ok_or("no Web")?;
    let deployment = world
        .get::<Deployment>(NAMESPACE, NAME)
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

/// The operator and the user's script (2 replicas, 4 at 5 s, 3 at 15 s), without the
/// cluster's controllers: nothing runs the Deployment.
pub fn operator_alone(name: &str, owns_all_annotations: bool) -> Scenario {
    let at = Duration::from_secs;
    Scenario::new(name)
        .crd(Web::crd())
        .create(&web(2))
        .at(at(5), Step::scale::<Web>(NAMESPACE, NAME, 4))
        .at(at(15), Step::scale::<Web>(NAMESPACE, NAME, 3))
        .controller(move |client, launch| run_operator(client, launch, owns_all_annotations))
}

/// The Web scenario called `name`, with the cluster's workload controllers and the
/// Deployment's availability as its goal; `owns_all_annotations` picks the wrong variant.
pub fn scenario_with(name: &str, owns_all_annotations: bool) -> Scenario {
    operator_alone(name, owns_all_annotations)
        .with_workloads()
        .goal(AVAILABLE, deployment_available)
}

/// The Web scenario with the correct operator (`steady sim --scenario web`).
pub fn scenario() -> Scenario {
    scenario_with(NAME, false)
}

/// The Web scenario whose operator fights the Deployment controller over the
/// Deployment's annotations (`steady sim --scenario web-owns-all-annotations`).
pub fn fighting_scenario() -> Scenario {
    scenario_with("web-owns-all-annotations", true)
}
