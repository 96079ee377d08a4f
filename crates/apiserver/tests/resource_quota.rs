//! ResourceQuotas through kube-rs: the status a quota gets, kube's refusals when a create
//! would go over, and the usage given back when objects go or finish.

mod common;

use common::{forbidden_create, server};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ResourceQuota, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use steady_test_support::{create_json, get_existing, merge_patch_subresource};

fn pod(name: &str, resources: Value) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "resources": resources}]},
    })
}

fn cpu(request: &str) -> Value {
    json!({"requests": {"cpu": request}})
}

async fn quota(quotas: &Api<ResourceQuota>, name: &str, spec: Value) {
    create_json(quotas, json!({"metadata": {"name": name}, "spec": spec})).await;
}

/// The quota's `status.used` as JSON.
async fn used(quotas: &Api<ResourceQuota>, name: &str) -> Value {
    let status = get_existing(quotas, name).await.status.expect("status");
    serde_json::to_value(status.used).expect("json")
}

#[tokio::test]
async fn pods_are_charged_refused_over_hard_and_given_back_when_they_go_or_finish() {
    let server = server().await;
    let quotas: Api<ResourceQuota> = Api::default_namespaced(server.client());
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    quota(
        &quotas,
        "compute",
        json!({"hard": {"pods": "2", "requests.cpu": "1"}}),
    )
    .await;
    let status = get_existing(&quotas, "compute")
        .await
        .status
        .expect("status at once");
    assert_eq!(
        serde_json::to_value(status.hard).expect("json"),
        json!({"pods": "2", "requests.cpu": "1"})
    );
    assert_eq!(
        used(&quotas, "compute").await,
        json!({"pods": "0", "requests.cpu": "0"})
    );

    create_json(&pods, pod("a", cpu("400m"))).await;
    create_json(&pods, pod("b", cpu("0.4"))).await;
    assert_eq!(
        used(&quotas, "compute").await,
        json!({"pods": "2", "requests.cpu": "800m"})
    );
    assert_eq!(
        forbidden_create(&pods, pod("c", cpu("100m"))).await,
        "pods \"c\" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=2, limited: pods=2"
    );
    assert_eq!(
        forbidden_create(&pods, pod("c", json!({}))).await,
        "pods \"c\" is forbidden: failed quota: compute: must specify requests.cpu for: c"
    );

    pods.delete("a", &DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    assert_eq!(
        used(&quotas, "compute").await,
        json!({"pods": "1", "requests.cpu": "400m"})
    );
    assert_eq!(
        forbidden_create(&pods, pod("c", cpu("700m"))).await,
        "pods \"c\" is forbidden: exceeded quota: compute, requested: requests.cpu=700m, used: requests.cpu=400m, limited: requests.cpu=1"
    );
    create_json(&pods, pod("c", cpu("600m"))).await;

    // a finished pod is no longer charged its compute resources
    let _: Pod = merge_patch_subresource(
        &pods,
        "status",
        "b",
        json!({"status": {"phase": "Succeeded"}}),
    )
    .await
    .expect("finished");
    assert_eq!(
        used(&quotas, "compute").await,
        json!({"pods": "1", "requests.cpu": "600m"})
    );

    // a dry run checks but charges nothing
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let typed: Pod = serde_json::from_value(pod("d", cpu("100m"))).expect("pod");
    pods.create(&dry, &typed).await.expect("dry run admitted");
    assert_eq!(
        used(&quotas, "compute").await,
        json!({"pods": "1", "requests.cpu": "600m"})
    );

    // usage starting from zero prints in the charged quantity's format
    quota(&quotas, "memory", json!({"hard": {"limits.memory": "1Gi"}})).await;
    let with_memory = json!({"requests": {"cpu": "100m"}, "limits": {"memory": "512Mi"}});
    create_json(&pods, pod("m", with_memory)).await;
    assert_eq!(
        used(&quotas, "memory").await,
        json!({"limits.memory": "512Mi"})
    );
    assert_eq!(
        used(&quotas, "compute").await,
        json!({"pods": "2", "requests.cpu": "700m"})
    );
}

#[tokio::test]
async fn a_quota_without_status_is_counted_before_a_charge() {
    let server = server().await;
    let quotas: Api<ResourceQuota> = Api::default_namespaced(server.client());
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    create_json(&pods, pod("before", json!({}))).await;
    quota(&quotas, "count", json!({"hard": {"pods": "2"}})).await;
    // as a quota kept by an older steady, or whose status a user cleared
    let cleared = json!({"status": {"hard": null, "used": null}});
    let _: ResourceQuota = merge_patch_subresource(&quotas, "status", "count", cleared)
        .await
        .expect("status cleared");
    create_json(&pods, pod("after", json!({}))).await;
    assert_eq!(used(&quotas, "count").await, json!({"pods": "2"}));
}

#[tokio::test]
async fn quotas_and_limit_ranges_stored_before_a_restart_still_apply() {
    let before = server().await;
    let quotas: Api<ResourceQuota> = Api::default_namespaced(before.client());
    quota(&quotas, "none", json!({"hard": {"pods": "0"}})).await;
    let ranges: Api<k8s_openapi::api::core::v1::LimitRange> =
        Api::default_namespaced(before.client());
    let range = json!({"metadata": {"name": "cpu"}, "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}});
    create_json(&ranges, range).await;
    let image = before.store().image();

    let store = steady_store::Store::in_memory_from(&image, Default::default())
        .await
        .expect("store");
    let after = steady_apiserver::ApiServer::start(store, Default::default())
        .await
        .expect("server");
    let pods: Api<Pod> = Api::default_namespaced(after.client());
    assert_eq!(
        forbidden_create(&pods, pod("p", json!({"limits": {"cpu": "2"}}))).await,
        "pods \"p\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
    );
    assert_eq!(
        forbidden_create(&pods, pod("p", json!({"limits": {"cpu": "1"}}))).await,
        "pods \"p\" is forbidden: exceeded quota: none, requested: pods=1, used: pods=0, limited: pods=0"
    );
}

#[tokio::test]
async fn object_counts_scopes_and_service_ports() {
    let server = server().await;
    let quotas: Api<ResourceQuota> = Api::default_namespaced(server.client());
    let maps: Api<ConfigMap> = Api::default_namespaced(server.client());
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let services: Api<Service> = Api::default_namespaced(server.client());
    quota(
        &quotas,
        "objects",
        json!({"hard": {"count/configmaps": "1", "services.nodeports": "1"}}),
    )
    .await;
    quota(
        &quotas,
        "best-effort",
        json!({"hard": {"pods": "1"}, "scopes": ["BestEffort"]}),
    )
    .await;

    create_json(&maps, json!({"metadata": {"name": "a"}})).await;
    assert_eq!(
        forbidden_create(&maps, json!({"metadata": {"name": "b"}})).await,
        "configmaps \"b\" is forbidden: exceeded quota: objects, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"
    );
    maps.delete("a", &DeleteParams::default())
        .await
        .expect("deleted");
    create_json(&maps, json!({"metadata": {"name": "b"}})).await;

    create_json(&pods, pod("free", json!({}))).await;
    assert_eq!(
        forbidden_create(&pods, pod("free-2", json!({}))).await,
        "pods \"free-2\" is forbidden: exceeded quota: best-effort, requested: pods=1, used: pods=1, limited: pods=1"
    );
    // outside the scope: not charged
    create_json(&pods, pod("burstable", cpu("100m"))).await;
    assert_eq!(used(&quotas, "best-effort").await, json!({"pods": "1"}));

    let node_port = |name: &str, ports: Value| json!({"metadata": {"name": name}, "spec": {"type": "NodePort", "ports": ports}});
    let two_ports = json!([{"name": "a", "port": 80}, {"name": "b", "port": 81}]);
    assert_eq!(
        forbidden_create(&services, node_port("web", two_ports)).await,
        "services \"web\" is forbidden: exceeded quota: objects, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1"
    );
    create_json(&services, node_port("web", json!([{"port": 80}]))).await;
    assert_eq!(
        used(&quotas, "objects").await,
        json!({"count/configmaps": "1", "services.nodeports": "1"})
    );
    // a Service that stops being a NodePort gives its port back
    let cluster_ip = json!({"spec": {"type": "ClusterIP"}});
    steady_test_support::merge_patch(&services, "web", cluster_ip)
        .await
        .expect("ClusterIP");
    assert_eq!(
        used(&quotas, "objects").await,
        json!({"count/configmaps": "1", "services.nodeports": "0"})
    );
}
