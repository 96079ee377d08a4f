//! Resource quantities as kube-apiserver decodes them: canonical on the way in, whatever
//! form the client wrote (YAML's `cpu: 1` arrives as a JSON number), refused with kube's
//! 400 when malformed; a pod's requests default to its limits and its QoS class follows.

mod common;

use common::{JSON, MERGE_PATCH, post_json, rejected, server, write};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::{Value, json};
use steady_test_support::{create_json, get_existing, merge_patch};

const PODS: &str = "/api/v1/namespaces/default/pods";

fn pod(name: &str, resources: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "resources": resources}]},
    })
}

/// What kube-rs reads of the pod's one container: its requests, its limits, the class.
async fn read_back(pods: &Api<Pod>, name: &str) -> (Value, Value, String) {
    let pod = get_existing(pods, name).await;
    let resources = pod.spec.expect("spec").containers[0]
        .resources
        .clone()
        .expect("resources");
    let requests = serde_json::to_value(resources.requests).expect("json");
    let limits = serde_json::to_value(resources.limits).expect("json");
    let class = pod.status.and_then(|s| s.qos_class).expect("qosClass");
    (requests, limits, class)
}

#[tokio::test]
async fn quantities_are_stored_in_kubes_canonical_form_and_typed_clients_read_them() {
    let server = server().await;
    let body = pod(
        "burstable",
        json!({"requests": {"cpu": 0.5, "memory": "1.5Gi"}, "limits": {"cpu": 1, "memory": "2048Mi"}}),
    );
    let response = post_json(&server, PODS, &body).await;
    assert_eq!(
        response.status,
        201,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    let created = response.json();
    let container = &created["spec"]["containers"][0]["resources"];
    assert_eq!(
        container["requests"],
        json!({"cpu": "500m", "memory": "1536Mi"})
    );
    assert_eq!(container["limits"], json!({"cpu": "1", "memory": "2Gi"}));

    // a number kept as a number would fail k8s-openapi's Quantity (a string)
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let (requests, limits, class) = read_back(&pods, "burstable").await;
    assert_eq!(requests, json!({"cpu": "500m", "memory": "1536Mi"}));
    assert_eq!(limits, json!({"cpu": "1", "memory": "2Gi"}));
    assert_eq!(class, "Burstable");
}

#[tokio::test]
async fn requests_default_to_limits_and_the_qos_class_follows() {
    let server = server().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let limits_only = json!({"limits": {"cpu": "1000m", "memory": "128974848"}});
    create_json(&pods, pod("guaranteed", limits_only)).await;
    let (requests, limits, class) = read_back(&pods, "guaranteed").await;
    assert_eq!(requests, json!({"cpu": "1", "memory": "128974848"}));
    assert_eq!(requests, limits);
    assert_eq!(class, "Guaranteed");

    create_json(&pods, pod("best-effort", json!({}))).await;
    assert_eq!(read_back(&pods, "best-effort").await.2, "BestEffort");

    let cpu_only = json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}});
    create_json(&pods, pod("cpu-only", cpu_only)).await;
    assert_eq!(read_back(&pods, "cpu-only").await.2, "Burstable");
}

#[tokio::test]
async fn a_malformed_quantity_is_refused_with_kubes_message_and_stores_nothing() {
    let server = server().await;
    for (quantity, why) in [
        (
            "one",
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ),
        ("1K", "unable to parse quantity's suffix"),
    ] {
        let body = pod("bad", json!({"limits": {"cpu": quantity}}));
        let status = rejected(
            &server,
            write("POST", PODS, JSON, body.to_string()),
            400,
            "BadRequest",
        )
        .await;
        assert_eq!(
            status["message"],
            format!("Pod in version \"v1\" cannot be handled as a Pod: {why}")
        );
    }
}

#[tokio::test]
async fn a_patched_template_is_canonical_too() {
    let server = server().await;
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    create_json(
        &deployments,
        json!({
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}},
            },
        }),
    )
    .await;
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "nginx:1.27", "resources": {"requests": {"cpu": "0.25", "memory": "1e9"}}}
    ]}}}});
    let patched = merge_patch(&deployments, "web", patch)
        .await
        .expect("patched");
    let requests = patched
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec")
        .containers[0]
        .resources
        .clone()
        .and_then(|r| r.requests)
        .expect("requests");
    assert_eq!(
        serde_json::to_value(requests).expect("json"),
        json!({"cpu": "250m", "memory": "1e9"})
    );
    let bad = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "nginx:1.27", "resources": {"limits": {"memory": "lots"}}}
    ]}}}});
    let uri = "/apis/apps/v1/namespaces/default/deployments/web";
    rejected(
        &server,
        write("PATCH", uri, MERGE_PATCH, bad.to_string()),
        400,
        "BadRequest",
    )
    .await;
}

#[tokio::test]
async fn a_pod_requesting_more_than_its_limit_is_invalid() {
    let server = server().await;
    let body = pod(
        "greedy",
        json!({"requests": {"cpu": "2"}, "limits": {"cpu": "1000m"}}),
    );
    let status = rejected(
        &server,
        write("POST", PODS, JSON, body.to_string()),
        422,
        "Invalid",
    )
    .await;
    assert_eq!(
        status["message"],
        "Pod \"greedy\" is invalid: spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"
    );
    assert_eq!(
        status["details"]["causes"][0]["field"],
        "spec.containers[0].resources.requests"
    );
}

/// kube's defaulting rounds a resource list's quantities up to thousandths: an operator
/// that computes `cpu: 0.1234` (a fraction of a core) reads back `124m`, as on a cluster,
/// and so must compare what it reads in the form it will get.
#[tokio::test]
async fn resource_list_quantities_are_rounded_up_to_thousandths() {
    let server = server().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    create_json(
        &pods,
        pod(
            "fractional",
            json!({"requests": {"cpu": "0.1234", "memory": "0.5"}, "limits": {"cpu": "0.1234", "memory": "1"}}),
        ),
    )
    .await;
    let (requests, limits, _) = read_back(&pods, "fractional").await;
    assert_eq!(requests, json!({"cpu": "124m", "memory": "500m"}));
    assert_eq!(limits, json!({"cpu": "124m", "memory": "1"}));
}
