//! The CRD generated from the Rust types: its shape, and the API server enforcing it.

mod common;

use common::*;
use kube::api::PostParams;
use serde_json::json;
use steady_cache_operator::manifests::{ManifestOptions, manifests_yaml, objects};
use steady_cache_operator::{Cache, crd, crd_yaml};

#[test]
fn the_crd_carries_names_subresources_columns_and_validation() {
    let crd = serde_json::to_value(crd()).expect("json");
    assert_eq!(crd["metadata"]["name"], "caches.steady.dev");
    let spec = &crd["spec"];
    assert_eq!(spec["group"], "steady.dev");
    assert_eq!(spec["scope"], "Namespaced");
    assert_eq!(spec["names"]["kind"], "Cache");
    assert_eq!(spec["names"]["shortNames"], json!(["cache"]));
    let version = &spec["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert_eq!(version["subresources"]["status"], json!({}));
    assert_eq!(
        version["subresources"]["scale"],
        json!({
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"
        })
    );
    let columns: Vec<(String, String, String)> = version["additionalPrinterColumns"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or("").to_string(),
                c["type"].as_str().unwrap_or("").to_string(),
                c["jsonPath"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        columns,
        [
            ("Desired".into(), "integer".into(), ".spec.replicas".into()),
            (
                "Ready".into(),
                "integer".into(),
                ".status.readyReplicas".into()
            ),
            (
                "Age".into(),
                "date".into(),
                ".metadata.creationTimestamp".into()
            ),
        ]
    );
    let props = &version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(props["replicas"]["minimum"], json!(0.0));
    assert_eq!(props["replicas"]["default"], json!(1));
    assert_eq!(props["image"]["minLength"], json!(1));
    assert_eq!(props["image"]["default"], json!("memcached:1.6"));
    assert_eq!(props["port"]["minimum"], json!(1.0));
    assert_eq!(props["port"]["maximum"], json!(65535.0));
    assert_eq!(props["port"]["default"], json!(11211));
    assert_eq!(props["memoryMiB"]["minimum"], json!(1.0));
    assert_eq!(props["memoryMiB"]["default"], json!(64));

    let yaml = crd_yaml();
    assert!(yaml.starts_with("apiVersion: apiextensions.k8s.io/v1"));
    assert!(yaml.contains("name: caches.steady.dev"));
}

#[test]
fn manifests_hold_the_crd_rbac_and_a_deployment() {
    let options = ManifestOptions::default();
    let kinds: Vec<String> = objects(&options)
        .expect("objects")
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "CustomResourceDefinition",
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment"
        ]
    );
    let yaml = manifests_yaml(&options).expect("yaml");
    assert_eq!(yaml.matches("---\n").count(), 6);
    for doc in yaml.split("---\n").filter(|d| !d.trim().is_empty()) {
        let value: serde_json::Value = serde_yaml::from_str(doc).expect("each document parses");
        assert!(value["apiVersion"].is_string());
    }
}

async fn rejected(
    client: &kube::Client,
    name: &str,
    spec: serde_json::Value,
) -> kube::core::Status {
    let cache = cache_object(name, spec);
    match caches(client).create(&PostParams::default(), &cache).await {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("{name}: expected a rejection, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn invalid_caches_are_rejected_with_a_clear_message() {
    let w = world().await;
    for (name, spec, field) in [
        ("negative", json!({"replicas": -1}), "spec.replicas"),
        ("bad-port", json!({"port": 70000}), "spec.port"),
        ("zero-port", json!({"port": 0}), "spec.port"),
        ("no-image", json!({"image": ""}), "spec.image"),
        ("no-memory", json!({"memoryMiB": 0}), "spec.memoryMiB"),
    ] {
        let status = rejected(&w.client, name, spec).await;
        assert_eq!(status.code, 422, "{name}: {status:?}");
        assert!(
            status.message.contains(field),
            "{name}: the message names {field}: {}",
            status.message
        );
    }
    assert!(
        caches(&w.client)
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty(),
        "nothing invalid was stored"
    );
}

#[tokio::test(start_paused = true)]
async fn the_server_fills_in_defaults() {
    let w = world().await;
    // Sent untyped, so nothing is filled in on the client side.
    let resource = kube::api::ApiResource::erase::<Cache>(&());
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(w.client.clone(), NS, &resource);
    let object: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "steady.dev/v1alpha1",
        "kind": "Cache",
        "metadata": {"name": "defaults", "namespace": NS},
        "spec": {},
    }))
    .expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create");
    let created = caches(&w.client).get("defaults").await.expect("get");
    assert_eq!(created.spec.replicas, 1);
    assert_eq!(created.spec.image, "memcached:1.6");
    assert_eq!(created.spec.port, 11211);
    assert_eq!(created.spec.memory_mib, 64);
}
