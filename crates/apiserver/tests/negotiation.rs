//! Accept negotiation as kube clients use it: aggregated discovery (`kube::Discovery::
//! run_aggregated` and the raw v2 / v2beta1 documents), metadata-only GET, LIST and WATCH
//! (`Api::get_metadata`, `list_metadata`, a watcher of `PartialObjectMeta`), and 406 for a conversion the
//! server does not offer.

mod common;

use std::collections::BTreeSet;

use common::{GUARD, Raw, default_configmaps, discover, example_crd, install_crd, send, server};
use futures::StreamExt;
use http::Request;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::discovery::{ApiGroup, Discovery};
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use steady_apiserver::ApiServer;

/// kubectl's and kube-rs' header: v2, then v2beta1, then the legacy document.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// The previous version of the aggregated discovery document.
const AGGREGATED_V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
/// A conversion the server does not offer, then a fallback it serves.
const WIDGET_OR_JSON: &str = "application/json;as=Widget;g=example.com;v=v1, application/json";

async fn get(server: &ApiServer, uri: &str, accept: &str) -> Raw {
    let request = Request::get(uri)
        .header(http::header::ACCEPT, accept)
        .body(axum::body::Body::empty())
        .expect("request");
    send(server, request).await
}

fn content_type(raw: &Raw) -> &str {
    raw.headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "x"}},
        "data": {"secret-ish": "payload"},
    }))
    .expect("configmap")
}

/// Each version's resources as kube's discovery reports them, comparable across formats.
fn capabilities(group: &ApiGroup) -> BTreeSet<String> {
    group
        .versions()
        .flat_map(|version| group.versioned_resources(version))
        .map(|(resource, caps)| {
            let mut verbs = caps.operations.clone();
            verbs.sort();
            let mut subresources: Vec<String> = caps
                .subresources
                .iter()
                .map(|(s, _)| s.plural.clone())
                .collect();
            subresources.sort();
            format!(
                "{}/{} {} {:?} {verbs:?} {subresources:?}",
                resource.api_version, resource.plural, resource.kind, caps.scope
            )
        })
        .collect()
}

#[tokio::test]
async fn aggregated_discovery_matches_legacy_discovery() {
    let s = server().await;
    let aggregated = discover(s.client(), true).await;
    let legacy = discover(s.client(), false).await;
    let names = |d: &Discovery| {
        d.groups()
            .map(|g| g.name().to_string())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(names(&aggregated), names(&legacy));
    assert!(aggregated.has_group("") && aggregated.has_group("apps"));
    for group in legacy.groups() {
        let found = aggregated.get(group.name()).expect("group served");
        assert_eq!(
            found.versions().collect::<Vec<_>>(),
            group.versions().collect::<Vec<_>>(),
            "versions of {:?}",
            group.name()
        );
        assert_eq!(
            capabilities(found),
            capabilities(group),
            "{:?}",
            group.name()
        );
    }
}

/// The resource `plural` in an aggregated document's group-version.
fn resource<'a>(document: &'a Value, group: Option<&str>, plural: &str) -> &'a Value {
    let item = document["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["metadata"]["name"].as_str() == group)
        .expect("group in the document");
    item["versions"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == plural)
        .expect("resource in the document")
}

/// The names of the subresources an aggregated discovery resource lists.
fn subresource_names(resource: &Value) -> Vec<&str> {
    let subresources = resource["subresources"].as_array().expect("subresources");
    subresources
        .iter()
        .map(|s| s["subresource"].as_str().expect("a name"))
        .collect()
}

#[tokio::test]
async fn aggregated_documents_carry_every_field() {
    let s = server().await;
    let apis = get(&s, "/apis", AGGREGATED).await;
    assert_eq!(apis.status, 200);
    assert_eq!(
        content_type(&apis),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(apis.headers.get(http::header::VARY).unwrap(), "Accept");
    let document = apis.json();
    assert_eq!(document["kind"], "APIGroupDiscoveryList");
    assert_eq!(document["apiVersion"], "apidiscovery.k8s.io/v2");
    let apps = document["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "apps")
        .expect("apps");
    assert_eq!(apps["versions"][0]["version"], "v1");
    assert_eq!(apps["versions"][0]["freshness"], "Current");
    let deployments = resource(&document, Some("apps"), "deployments");
    assert_eq!(deployments["scope"], "Namespaced");
    assert_eq!(deployments["singularResource"], "deployment");
    assert_eq!(deployments["shortNames"], json!(["deploy"]));
    assert_eq!(
        deployments["responseKind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert_eq!(subresource_names(deployments), ["scale", "status"]);
    assert!(
        deployments["verbs"]
            .as_array()
            .unwrap()
            .contains(&json!("watch"))
    );

    let core = get(&s, "/api", AGGREGATED).await.json();
    assert_eq!(core["kind"], "APIGroupDiscoveryList");
    let configmaps = resource(&core, None, "configmaps");
    assert!(
        configmaps.get("categories").is_none() && configmaps.get("subresources").is_none(),
        "empty lists are omitted: {configmaps}"
    );
    let namespaces = resource(&core, None, "namespaces");
    assert_eq!(namespaces["scope"], "Cluster");
    assert_eq!(subresource_names(namespaces), ["finalize", "status"]);

    let beta = get(&s, "/apis", AGGREGATED_V2BETA1).await;
    assert_eq!(beta.json()["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    assert!(content_type(&beta).contains("v=v2beta1"));

    // Without the conversion: the legacy documents, as before.
    assert_eq!(
        get(&s, "/apis", "application/json").await.json()["kind"],
        "APIGroupList"
    );
    assert_eq!(
        get(&s, "/api", "application/json").await.json()["kind"],
        "APIVersions"
    );
}

#[tokio::test]
async fn metadata_only_get_and_list() {
    let (s, api) = default_configmaps().await;
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &cm(name)).await.unwrap();
    }

    let one = get(&s, "/api/v1/namespaces/default/configmaps/a", METADATA).await;
    assert_eq!(one.status, 200);
    assert_eq!(content_type(&one), METADATA);
    let one = one.json();
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(one["metadata"]["labels"], json!({"app": "x"}));
    assert!(one.get("data").is_none(), "metadata only: {one}");

    let list = get(&s, "/api/v1/namespaces/default/configmaps", METADATA_LIST).await;
    assert_eq!(content_type(&list), METADATA_LIST);
    let list = list.json();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert!(list["metadata"]["resourceVersion"].is_string(), "{list}");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert!(
        items
            .iter()
            .all(|i| i["kind"] == "PartialObjectMetadata" && i.get("data").is_none()),
        "{list}"
    );

    // kube's typed API over the same requests.
    let meta = api.get_metadata("b").await.unwrap();
    assert_eq!(meta.types.unwrap().kind, "PartialObjectMetadata");
    let listed = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
    assert_eq!(listed.types.kind, "PartialObjectMetadataList");
}

#[tokio::test(start_paused = true)]
async fn metadata_watcher_sees_metadata_only() {
    let (s, api) = default_configmaps().await;
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    // What kube's (deprecated) `metadata_watcher` became: a watcher over the metadata API.
    let metadata: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(s.client(), "default");
    let mut events = watcher::watcher(metadata, watcher::Config::default()).boxed();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(GUARD, events.next())
            .await
            .expect("event in time")
            .expect("stream open")
            .expect("no watch error");
        match event {
            Event::InitApply(o) | Event::Apply(o) => {
                assert_eq!(
                    o.types.as_ref().map(|t| t.kind.as_str()),
                    Some("PartialObjectMetadata")
                );
                seen.push(o.metadata.name.unwrap());
            }
            Event::InitDone => {
                api.create(&PostParams::default(), &cm("after"))
                    .await
                    .unwrap();
            }
            _ => {}
        }
    }
    assert_eq!(seen, ["before", "after"]);

    // The raw stream: every event's object is PartialObjectMetadata, bookmarks included.
    let raw = get(
        &s,
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        METADATA,
    )
    .await;
    let lines: Vec<Value> = raw
        .body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("event"))
        .collect();
    assert_eq!(
        lines.len(),
        3,
        "two objects and the initial-events bookmark"
    );
    for line in &lines {
        assert_eq!(line["object"]["kind"], "PartialObjectMetadata", "{line}");
        assert!(line["object"].get("data").is_none(), "{line}");
    }
}

#[tokio::test]
async fn unsupported_conversions_are_not_acceptable() {
    let (s, api) = default_configmaps().await;
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    for (uri, accept) in [
        (
            "/api/v1/namespaces/default/configmaps/a",
            "application/json;as=Widget;g=example.com;v=v1",
        ),
        ("/api/v1/namespaces/default/configmaps/a", METADATA_LIST),
        ("/api/v1/namespaces/default/configmaps", METADATA),
        ("/api/v1/namespaces/default/configmaps", "text/plain"),
    ] {
        let body = get(&s, uri, accept)
            .await
            .assert_status(406, "NotAcceptable");
        assert_eq!(
            body["message"],
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
            "{uri} {accept}"
        );
    }
    // A fallback in the same header is served.
    let fallback = get(
        &s,
        "/api/v1/namespaces/default/configmaps/a",
        WIDGET_OR_JSON,
    )
    .await;
    assert_eq!(fallback.json()["kind"], "ConfigMap");
}

#[tokio::test]
async fn aggregated_discovery_follows_crds() {
    let s = server().await;
    let names =
        json!({"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "categories": ["all"]});
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut crd = example_crd("Cluster", names, schema);
    crd["spec"]["versions"][0]["subresources"] = json!({"scale": {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
    }});
    install_crd(&s, crd).await;
    let document = get(&s, "/apis", AGGREGATED).await.json();
    let gadgets = resource(&document, Some("example.steady.dev"), "gadgets");
    assert_eq!(gadgets["scope"], "Cluster");
    assert_eq!(gadgets["categories"], json!(["all"]));
    assert_eq!(
        gadgets["subresources"],
        json!([{
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"],
        }])
    );
}
