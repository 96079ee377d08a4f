//! The disruption controller against steady's API server and simulated node: a budget's
//! status from the pods it selects (integer and percentage budgets, controllers' scale),
//! evictions spending it and the controller giving it back once the pod is gone, the
//! fail-safe status when a pod's controller cannot be found, nothing written at the
//! fixed point.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use kube::api::EvictParams;
use serde_json::{Value, json};
use steady_test_support::{api_code, create_json};

async fn disruption_cluster() -> Cluster {
    controller_cluster(steady_cluster::disruption::start, "disruption").await
}

/// Every controller of the cluster (Deployments and ReplicaSets make the pods).
async fn whole_cluster() -> Cluster {
    cluster(|client, stopped| async move {
        let setup = steady_cluster::Setup {
            client,
            config: steady_runtime::Config::default(),
            clock: steady_cluster::clock::starting_now(),
        };
        steady_cluster::run_with(setup, until(stopped))
            .await
            .map_err(|stopped| stopped.source)
    })
    .await
}

/// A pod labelled `app=web` (never Ready with `never_ready`), owned as `owners` says.
async fn web_pod(cluster: &Cluster, name: &str, never_ready: bool, owners: Value) -> Pod {
    let annotations = if never_ready {
        json!({"steady.dev/simulate": "never-ready"})
    } else {
        json!({})
    };
    let pod = json!({
        "metadata": {"name": name, "labels": {"app": "web"}, "annotations": annotations,
                     "ownerReferences": owners},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
    });
    create_json(&cluster.api(), pod).await
}

async fn budget(cluster: &Cluster, spec: Value) -> PodDisruptionBudget {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": "web"}});
    create_json(
        &cluster.api(),
        json!({"metadata": {"name": "web"}, "spec": spec}),
    )
    .await
}

/// Wait until the budget's status says `(expected, healthy, desired, allowed)`.
async fn budget_at(
    cluster: &Cluster,
    counts: (i32, i32, i32, i32),
) -> (PodDisruptionBudget, PodDisruptionBudgetStatus) {
    let budget = cluster
        .wait_for::<PodDisruptionBudget>("web", "the budget's status", |b| {
            b.status.as_ref().is_some_and(|s| {
                (
                    s.expected_pods,
                    s.current_healthy,
                    s.desired_healthy,
                    s.disruptions_allowed,
                ) == counts
                    && s.observed_generation == b.metadata.generation
            })
        })
        .await;
    let status = budget.status.clone().expect("status");
    (budget, status)
}

fn allowed_condition(status: &PodDisruptionBudgetStatus) -> (String, String) {
    let conditions = status.conditions.clone().unwrap_or_default();
    let found = conditions
        .iter()
        .find(|c| c.type_ == "DisruptionAllowed")
        .expect("the DisruptionAllowed condition");
    (found.status.clone(), found.reason.clone())
}

#[tokio::test(start_paused = true)]
async fn evictions_spend_an_integer_budget_and_the_controller_settles_it_again() {
    let cluster = disruption_cluster().await;
    for name in ["web-0", "web-1", "web-2"] {
        web_pod(&cluster, name, false, json!([])).await;
    }
    budget(&cluster, json!({"minAvailable": 2})).await;
    let (_, status) = budget_at(&cluster, (3, 3, 2, 1)).await;
    assert_eq!(
        allowed_condition(&status),
        ("True".into(), "SufficientPods".into())
    );

    let pods = cluster.api::<Pod>();
    pods.evict("web-0", &EvictParams::default())
        .await
        .expect("one disruption allowed");
    assert_eq!(
        api_code(pods.evict("web-1", &EvictParams::default()).await),
        (429, "TooManyRequests".into())
    );
    // Once web-0 is gone, the controller counts two healthy pods of two: still none
    // allowed, and the eviction's record of web-0 is dropped.
    let (settled, status) = budget_at(&cluster, (2, 2, 2, 0)).await;
    assert!(status.disrupted_pods.clone().unwrap_or_default().is_empty());
    assert_eq!(
        allowed_condition(&status),
        ("False".into(), "InsufficientPods".into())
    );
    cluster.assert_left_alone(&settled).await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn unready_pods_are_not_healthy() {
    let cluster = disruption_cluster().await;
    web_pod(&cluster, "ready", false, json!([])).await;
    web_pod(&cluster, "stuck", true, json!([])).await;
    budget(&cluster, json!({"minAvailable": 1})).await;
    budget_at(&cluster, (2, 1, 1, 0)).await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_percentage_counts_the_replicas_of_the_pods_controller() {
    let cluster = whole_cluster().await;
    let deployment = json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}},
        },
    });
    create_json::<k8s_openapi::api::apps::v1::Deployment>(&cluster.api(), deployment).await;
    budget(&cluster, json!({"maxUnavailable": "25%"})).await;
    budget_at(&cluster, (4, 4, 3, 1)).await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_whose_controller_has_no_scale_fails_safe() {
    let cluster = disruption_cluster().await;
    let owner: ConfigMap =
        create_json(&cluster.api(), json!({"metadata": {"name": "owner"}})).await;
    let reference = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
        "uid": owner.metadata.uid, "controller": true,
    }]);
    web_pod(&cluster, "web-0", false, reference).await;
    budget(&cluster, json!({"maxUnavailable": 1})).await;
    let failed = cluster
        .wait_for::<PodDisruptionBudget>("web", "the fail-safe status", |b| {
            b.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.reason == "SyncFailed"))
        })
        .await;
    let status = failed.status.expect("status");
    assert_eq!(status.disruptions_allowed, 0);
    assert_eq!(allowed_condition(&status).0, "False");
    cluster.stop().await;
}
