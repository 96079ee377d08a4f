//! PodSecurity admission through the API as kubectl and kube-rs meet it: a namespace's
//! `enforce` level refuses a pod with kube's message, `warn` answers with kube's
//! Warning header (for pods and workloads' templates), invalid labels are refused, and
//! tightening a namespace's level warns about the pods already there.

mod common;

use common::{JSON, post_json, raw, rejected, server, write};
use serde_json::{Value, json};

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn pod(name: &str, security: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "securityContext": security}]},
    })
}

fn warnings(response: &common::Raw) -> Vec<String> {
    response
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect()
}

const RESTRICTED_VIOLATIONS: &str = "allowPrivilegeEscalation != false (container \"app\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"app\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"app\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"app\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

#[tokio::test]
async fn an_enforced_level_refuses_a_pod_and_admits_a_compliant_one() {
    let server = server().await;
    let labels = json!({"pod-security.kubernetes.io/enforce": "restricted"});
    let created = post_json(&server, "/api/v1/namespaces", &namespace("secure", labels)).await;
    assert_eq!(created.status, 201);
    let pods = "/api/v1/namespaces/secure/pods";
    let status = rejected(
        &server,
        write("POST", pods, JSON, pod("naive", json!({})).to_string()),
        403,
        "Forbidden",
    )
    .await;
    assert_eq!(
        status["message"],
        format!(
            "pods \"naive\" is forbidden: violates PodSecurity \"restricted:latest\": {RESTRICTED_VIOLATIONS}"
        )
    );
    let compliant = json!({
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": true,
        "seccompProfile": {"type": "RuntimeDefault"},
    });
    let admitted = post_json(&server, pods, &pod("careful", compliant)).await;
    assert_eq!(
        admitted.status,
        201,
        "{}",
        String::from_utf8_lossy(&admitted.body)
    );
    assert!(warnings(&admitted).is_empty());
}

#[tokio::test]
async fn a_warn_level_warns_for_pods_and_workload_templates() {
    let server = server().await;
    let labels = json!({
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "v1.32",
    });
    post_json(&server, "/api/v1/namespaces", &namespace("watched", labels)).await;
    let admitted = post_json(
        &server,
        "/api/v1/namespaces/watched/pods",
        &pod("naive", json!({})),
    )
    .await;
    assert_eq!(admitted.status, 201);
    assert_eq!(
        warnings(&admitted),
        [format!(
            "299 - {:?}",
            format!("would violate PodSecurity \"restricted:v1.32\": {RESTRICTED_VIOLATIONS}")
        )]
    );
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}},
        },
    });
    let created = post_json(
        &server,
        "/apis/apps/v1/namespaces/watched/deployments",
        &deployment,
    )
    .await;
    assert_eq!(created.status, 201);
    assert_eq!(warnings(&created).len(), 1, "{:?}", warnings(&created));
}

#[tokio::test]
async fn invalid_labels_are_refused_and_a_tightened_level_warns_about_existing_pods() {
    let server = server().await;
    let bad = json!({"pod-security.kubernetes.io/enforce": "strict"});
    let status = rejected(
        &server,
        write(
            "POST",
            "/api/v1/namespaces",
            JSON,
            namespace("typo", bad).to_string(),
        ),
        422,
        "Invalid",
    )
    .await;
    assert_eq!(
        status["message"],
        "Namespace \"typo\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
    );

    post_json(&server, "/api/v1/namespaces", &namespace("open", json!({}))).await;
    for name in ["a", "b"] {
        post_json(
            &server,
            "/api/v1/namespaces/open/pods",
            &pod(name, json!({"privileged": true})),
        )
        .await;
    }
    let patch = json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}});
    let tightened = raw(
        &server,
        "PATCH",
        "/api/v1/namespaces/open",
        common::MERGE_PATCH,
        patch.to_string(),
    )
    .await;
    assert_eq!(tightened.status, 200);
    assert_eq!(
        warnings(&tightened),
        [
            format!(
                "299 - {:?}",
                "existing pods in namespace \"open\" violate the new PodSecurity enforce level \"baseline:latest\""
            ),
            format!("299 - {:?}", "a (and 1 other pod): privileged"),
        ]
    );
}
