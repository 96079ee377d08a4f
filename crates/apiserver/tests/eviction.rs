//! The eviction subresource against PodDisruptionBudgets, through kube-rs's `Api::evict`
//! as kubectl drain and operators use it. No disruption controller runs here: each test
//! writes the budget's status as the controller would have, so the eviction's own rules
//! are what is tested (crates/cluster tests the controller).

mod common;

use common::{api_code, create_json, get_existing, merge_patch_subresource, server};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams};
use serde_json::{Value, json};
use steady_apiserver::ApiServer;

/// A server and its `default` pods and budgets.
async fn apis() -> (ApiServer, Api<Pod>, Api<PodDisruptionBudget>) {
    let server = server().await;
    let pods = Api::default_namespaced(server.client());
    let budgets = Api::default_namespaced(server.client());
    (server, pods, budgets)
}

/// A pod labelled `app=web`, its status `phase` (and `Ready` as `ready` says).
async fn web_pod(pods: &Api<Pod>, name: &str, phase: &str, ready: bool) {
    create_json(
        pods,
        json!({
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
        }),
    )
    .await;
    let ready = if ready { "True" } else { "False" };
    let status = json!({"status": {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": ready}],
    }});
    let _: Pod = merge_patch_subresource(pods, "status", name, status)
        .await
        .expect("pod status");
}

/// A budget over `app=web` whose status is `status`, as the disruption controller
/// would have written it for generation 1.
async fn web_budget(budgets: &Api<PodDisruptionBudget>, name: &str, status: Value) {
    create_json(
        budgets,
        json!({
            "metadata": {"name": name},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        }),
    )
    .await;
    let mut status = status;
    status["observedGeneration"] = json!(1);
    let _: PodDisruptionBudget =
        merge_patch_subresource(budgets, "status", name, json!({ "status": status }))
            .await
            .expect("budget status");
}

fn healthy(current: i32, desired: i32) -> Value {
    json!({
        "currentHealthy": current, "desiredHealthy": desired, "expectedPods": current,
        "disruptionsAllowed": (current - desired).max(0),
    })
}

async fn evict(pods: &Api<Pod>, name: &str) -> kube::Result<()> {
    pods.evict(name, &EvictParams::default()).await.map(drop)
}

/// The eviction's refusal, as kube-rs reports it: code, reason and the budget's cause.
async fn refusal(pods: &Api<Pod>, name: &str) -> (u16, String, String) {
    match evict(pods, name).await {
        Err(kube::Error::Api(status)) => {
            let cause = status
                .details
                .and_then(|d| d.causes.into_iter().next())
                .map(|c| format!("{}: {}", c.reason, c.message))
                .unwrap_or_default();
            (status.code, status.reason, cause)
        }
        other => panic!("expected the eviction of {name} refused, got {other:?}"),
    }
}

fn condition<'p>(pod: &'p Pod, kind: &str) -> Option<&'p str> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let found = conditions.iter().find(|c| c.type_ == kind)?;
    Some(found.status.as_str())
}

/// Still there, not terminating, not marked for disruption.
async fn untouched(pods: &Api<Pod>, name: &str) {
    let pod = get_existing(pods, name).await;
    assert!(
        pod.metadata.deletion_timestamp.is_none(),
        "{name} terminating"
    );
    assert_eq!(condition(&pod, "DisruptionTarget"), None, "{name} marked");
}

/// Gone, or terminating and marked `DisruptionTarget`.
async fn evicted(pods: &Api<Pod>, name: &str) {
    if let Some(pod) = pods.get_opt(name).await.expect("read the pod") {
        assert!(
            pod.metadata.deletion_timestamp.is_some(),
            "{name} not deleted"
        );
        assert_eq!(condition(&pod, "DisruptionTarget"), Some("True"));
    }
}

#[tokio::test]
async fn each_eviction_spends_a_disruption_and_none_left_is_429() {
    let (_server, pods, budgets) = apis().await;
    for name in ["web-0", "web-1", "web-2"] {
        web_pod(&pods, name, "Running", true).await;
    }
    web_budget(&budgets, "web", healthy(3, 2)).await;

    evict(&pods, "web-0").await.expect("one disruption allowed");
    evicted(&pods, "web-0").await;
    let budget = get_existing(&budgets, "web").await;
    let status = budget.status.expect("status");
    assert_eq!(status.disruptions_allowed, 0);
    assert!(
        status
            .disrupted_pods
            .unwrap_or_default()
            .contains_key("web-0")
    );
    let allowed = status.conditions.unwrap_or_default();
    let allowed = allowed.iter().find(|c| c.type_ == "DisruptionAllowed");
    assert_eq!(
        allowed.map(|c| (c.status.as_str(), c.reason.as_str())),
        Some(("False", "InsufficientPods"))
    );

    assert_eq!(
        refusal(&pods, "web-1").await,
        (
            429,
            "TooManyRequests".into(),
            "DisruptionBudget: The disruption budget web needs 2 healthy pods and has 3 currently"
                .into()
        )
    );
    untouched(&pods, "web-1").await;
}

#[tokio::test]
async fn pods_no_budget_protects_are_evicted_at_once() {
    let (_server, pods, budgets) = apis().await;
    web_pod(&pods, "pending", "Pending", false).await;
    web_pod(&pods, "done", "Succeeded", false).await;
    web_pod(&pods, "running", "Running", true).await;
    web_budget(&budgets, "web", healthy(1, 2)).await;

    evict(&pods, "pending")
        .await
        .expect("a pending pod disrupts nothing");
    evict(&pods, "done")
        .await
        .expect("a finished pod disrupts nothing");
    evicted(&pods, "pending").await;
    evicted(&pods, "done").await;
    assert_eq!(refusal(&pods, "running").await.0, 429);
    let status = get_existing(&budgets, "web").await.status.expect("status");
    assert!(status.disrupted_pods.unwrap_or_default().is_empty());
}

#[tokio::test]
async fn an_unready_pod_goes_without_spending_while_the_budget_is_met() {
    let (_server, pods, budgets) = apis().await;
    web_pod(&pods, "ready-0", "Running", true).await;
    web_pod(&pods, "ready-1", "Running", true).await;
    web_pod(&pods, "stuck", "Running", false).await;
    web_budget(&budgets, "web", healthy(2, 2)).await;

    evict(&pods, "stuck").await.expect("unready, budget met");
    evicted(&pods, "stuck").await;
    let status = get_existing(&budgets, "web").await.status.expect("status");
    assert_eq!(status.disruptions_allowed, 0, "nothing spent");
    assert!(status.disrupted_pods.unwrap_or_default().is_empty());
    assert_eq!(refusal(&pods, "ready-0").await.0, 429);
}

#[tokio::test]
async fn a_budget_not_yet_processed_asks_to_retry_later() {
    let (server, pods, budgets) = apis().await;
    web_pod(&pods, "web-0", "Running", true).await;
    create_json(
        &budgets,
        json!({"metadata": {"name": "web"},
               "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    let (code, reason, cause) = refusal(&pods, "web-0").await;
    assert_eq!((code, reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(
        cause,
        "DisruptionBudget: The disruption budget web is still being processed by the server."
    );
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                          "metadata": {"name": "web-0", "namespace": "default"}});
    let raw = common::post_json(
        &server,
        "/api/v1/namespaces/default/pods/web-0/eviction",
        &eviction,
    )
    .await;
    assert_eq!(
        raw.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("10")
    );
    untouched(&pods, "web-0").await;
}

#[tokio::test]
async fn two_budgets_over_one_pod_are_refused_and_a_dry_run_spends_nothing() {
    let (server, pods, budgets) = apis().await;
    web_pod(&pods, "web-0", "Running", true).await;
    web_pod(&pods, "web-1", "Running", true).await;
    web_budget(&budgets, "web", healthy(2, 1)).await;

    // Raw: kube-rs sends `EvictParams::delete_options` as `delete_options`, a field
    // kube-apiserver does not know (and ignores, as steady does).
    let dry_run = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                         "metadata": {"name": "web-0"},
                         "deleteOptions": {"dryRun": ["All"]}});
    let answer = common::post_json(
        &server,
        "/api/v1/namespaces/default/pods/web-0/eviction",
        &dry_run,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 201, "{}", answer.json());
    untouched(&pods, "web-0").await;
    let status = get_existing(&budgets, "web").await.status.expect("status");
    assert_eq!(status.disruptions_allowed, 1, "a dry run spends nothing");

    web_budget(&budgets, "web-too", healthy(2, 1)).await;
    let (code, message) = match evict(&pods, "web-0").await {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(
        (code, message.as_str()),
        (
            500,
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        )
    );
    untouched(&pods, "web-0").await;
    assert_eq!(
        api_code(pods.evict("nope", &EvictParams::default()).await).0,
        404
    );
}
