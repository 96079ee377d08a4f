//! LimitRanges through kube-rs, as kube's LimitRanger admission applies them: defaults
//! for a new pod's containers (annotated), bounds refused with kube's 403 messages, and a
//! LimitRange's own defaults.

mod common;

use common::{forbidden_create, server};
use k8s_openapi::api::core::v1::{LimitRange, PersistentVolumeClaim, Pod};
use kube::api::Api;
use serde_json::{Value, json};
use steady_test_support::{create_json, get_existing};

fn pod(name: &str, resources: Value) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "resources": resources}]},
    })
}

#[tokio::test]
async fn containers_get_the_namespace_defaults_and_keep_within_its_bounds() {
    let server = server().await;
    let ranges: Api<LimitRange> = Api::default_namespaced(server.client());
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    create_json(
        &ranges,
        json!({"metadata": {"name": "limits"}, "spec": {"limits": [{
            "type": "Container",
            "max": {"cpu": "2", "memory": "1Gi"},
            "defaultRequest": {"cpu": "100m"},
        }]}}),
    )
    .await;
    // kube's LimitRange defaults: the default limit is the max, the default request
    // falls back to the default limit
    let stored = get_existing(&ranges, "limits")
        .await
        .spec
        .expect("spec")
        .limits[0]
        .clone();
    assert_eq!(
        serde_json::to_value(&stored.default).expect("json"),
        json!({"cpu": "2", "memory": "1Gi"})
    );
    assert_eq!(
        serde_json::to_value(&stored.default_request).expect("json"),
        json!({"cpu": "100m", "memory": "1Gi"})
    );

    let created = create_json(
        &pods,
        pod("defaulted", json!({"requests": {"memory": "64Mi"}})),
    )
    .await;
    let resources = created.spec.expect("spec").containers[0]
        .resources
        .clone()
        .expect("resources");
    assert_eq!(
        serde_json::to_value(resources.requests).expect("json"),
        json!({"cpu": "100m", "memory": "64Mi"})
    );
    assert_eq!(
        serde_json::to_value(resources.limits).expect("json"),
        json!({"cpu": "2", "memory": "1Gi"})
    );
    assert_eq!(
        created.metadata.annotations.expect("annotations")["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu request for container web; cpu, memory limit for container web"
    );
    assert_eq!(
        created.status.and_then(|s| s.qos_class).as_deref(),
        Some("Burstable")
    );

    assert_eq!(
        forbidden_create(&pods, pod("greedy", json!({"limits": {"cpu": "4"}}))).await,
        "pods \"greedy\" is forbidden: maximum cpu usage per Container is 2, but limit is 4"
    );
}

#[tokio::test]
async fn claims_keep_within_the_storage_bounds() {
    let server = server().await;
    let ranges: Api<LimitRange> = Api::default_namespaced(server.client());
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(server.client());
    create_json(
        &ranges,
        json!({"metadata": {"name": "storage"}, "spec": {"limits": [{
            "type": "PersistentVolumeClaim",
            "min": {"storage": "1Gi"},
            "max": {"storage": "10Gi"},
        }]}}),
    )
    .await;
    let claim = |name: &str, size: &str| {
        json!({"metadata": {"name": name}, "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        }})
    };
    create_json(&claims, claim("data", "5Gi")).await;
    assert_eq!(
        forbidden_create(&claims, claim("huge", "20Gi")).await,
        "persistentvolumeclaims \"huge\" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"
    );
    assert_eq!(
        forbidden_create(&claims, claim("tiny", "500Mi")).await,
        "persistentvolumeclaims \"tiny\" is forbidden: minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"
    );
}
