//! The Endpoints/EndpointSlice controller against steady's API server and simulated node:
//! a Service's selected pods, with their IPs, readiness, nodes and resolved ports, in one
//! Endpoints and its EndpointSlices; pods leaving; Services without a selector left alone;
//! nothing written at the fixed point.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;
use steady_cluster::endpoints::{MANAGED_BY, MANAGED_BY_LABEL, SERVICE_NAME_LABEL};
use steady_test_support::{create_json, eventually, merge_patch};

async fn endpoints_cluster() -> Cluster {
    controller_cluster(steady_cluster::endpoints::start, "endpoints").await
}

/// [`endpoints_cluster`] whose controller's writes to Endpoints and EndpointSlices are
/// counted (the server itself drops no-op writes, so only the requests show them).
async fn counted_endpoints_cluster() -> (Cluster, Arc<AtomicUsize>) {
    let writes = Arc::new(AtomicUsize::new(0));
    let counter = writes.clone();
    let cluster = cluster(move |client, stopped| {
        let counting = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let path = request.uri().path();
            if request.method() != http::Method::GET
                && (path.contains("/endpoints") || path.contains("/endpointslices"))
            {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            let client = client.clone();
            async move { client.send(request).await }
        });
        let client = kube::Client::new(counting, NS);
        steady_cluster::run_one(
            steady_cluster::endpoints::start,
            "endpoints",
            client,
            until(stopped),
        )
    })
    .await;
    (cluster, writes)
}

/// A pod labelled `app`, serving its port 8080 under the name `http`.
async fn pod(cluster: &Cluster, name: &str, app: &str, simulate: Option<&str>) -> Pod {
    let annotations = simulate.map_or(json!({}), |s| json!({"steady.dev/simulate": s}));
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}, "annotations": annotations},
        "spec": {"containers": [{
            "name": "web",
            "image": "nginx",
            "ports": [{"name": "http", "containerPort": 8080}],
        }]},
    });
    create_json(&cluster.api(), pod).await
}

async fn service(cluster: &Cluster, name: &str, selector: Option<serde_json::Value>) -> Service {
    let mut spec = json!({"ports": [{"name": "http", "port": 80, "targetPort": "http"}]});
    if let Some(selector) = selector {
        spec["selector"] = selector;
    }
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"tier": "front"}},
        "spec": spec,
    });
    create_json(&cluster.api(), service).await
}

/// Wait until `name` runs with an IP (and, unless `never-ready`, is Ready).
async fn running(cluster: &Cluster, name: &str, ready: bool) -> Pod {
    cluster
        .wait_for::<Pod>(name, "the pod running", |pod| {
            let status = pod.status.as_ref();
            let has_ip = status.and_then(|s| s.pod_ip.as_ref()).is_some();
            let is_ready = status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            has_ip && is_ready == ready
        })
        .await
}

fn ip(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    status
        .and_then(|s| s.pod_ip.clone())
        .expect("a running pod has an IP")
}

/// The (ready, not ready) IPs the Endpoints lists.
fn addresses(endpoints: &Endpoints) -> (Vec<String>, Vec<String>) {
    let subsets = endpoints.subsets.iter().flatten();
    let ips = |list: Option<&Vec<k8s_openapi::api::core::v1::EndpointAddress>>| {
        list.into_iter()
            .flatten()
            .map(|a| a.ip.clone())
            .collect::<Vec<_>>()
    };
    let ready = subsets.clone().flat_map(|s| ips(s.addresses.as_ref()));
    let not_ready = subsets.flat_map(|s| ips(s.not_ready_addresses.as_ref()));
    (ready.collect(), not_ready.collect())
}

async fn slices_of(cluster: &Cluster, service: &str) -> Vec<EndpointSlice> {
    let selector = format!("{SERVICE_NAME_LABEL}={service}");
    let listed = cluster
        .api::<EndpointSlice>()
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list slices");
    listed.items
}

/// Wait until the Service's one slice lists exactly `ips`; returns it.
async fn slice_listing(cluster: &Cluster, service: &str, ips: &[&str]) -> EndpointSlice {
    eventually("the slice", LIMIT, || async {
        let mut slices = slices_of(cluster, service).await;
        let listed: Vec<&str> = slices
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .flat_map(|e| e.addresses.iter().map(String::as_str))
            .collect();
        (slices.len() == 1 && listed == ips).then(|| slices.remove(0))
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn a_service_lists_the_pods_it_selects_with_their_ports_and_readiness() {
    let (cluster, writes) = counted_endpoints_cluster().await;
    pod(&cluster, "web-0", "web", None).await;
    pod(&cluster, "web-1", "web", Some("never-ready")).await;
    pod(&cluster, "other", "other", None).await;
    let ready = running(&cluster, "web-0", true).await;
    let unready = running(&cluster, "web-1", false).await;
    running(&cluster, "other", true).await;
    let service = service(&cluster, "web", Some(json!({"app": "web"}))).await;

    let endpoints = cluster
        .wait_for::<Endpoints>("web", "both pods listed", |e| {
            addresses(e) == (vec![ip(&ready)], vec![ip(&unready)])
        })
        .await;
    let labels = endpoints.labels();
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
    assert_eq!(
        labels
            .get("endpointslice.kubernetes.io/skip-mirror")
            .map(String::as_str),
        Some("true")
    );
    let subset = &endpoints.subsets.as_ref().expect("subsets")[0];
    let port = &subset.ports.as_ref().expect("ports")[0];
    assert_eq!(
        (port.name.as_deref(), port.port, port.protocol.as_deref()),
        (Some("http"), 8080, Some("TCP")),
        "the named targetPort resolved in the pod"
    );
    let address = &subset.addresses.as_ref().expect("addresses")[0];
    let target = address.target_ref.as_ref().expect("targetRef");
    assert_eq!(
        (target.kind.as_deref(), target.name.as_deref()),
        (Some("Pod"), Some("web-0"))
    );
    let node = ready.spec.as_ref().and_then(|s| s.node_name.clone());
    assert!(node.is_some());
    assert_eq!(address.node_name, node);

    let ips = [ip(&ready), ip(&unready)];
    let slice = slice_listing(&cluster, "web", &[&ips[0], &ips[1]]).await;
    assert!(slice.name_any().starts_with("web-"), "{}", slice.name_any());
    assert_eq!(slice.address_type, "IPv4");
    assert_eq!(
        slice.labels().get(MANAGED_BY_LABEL).map(String::as_str),
        Some(MANAGED_BY)
    );
    let owner = &slice.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Service", Some(true))
    );
    assert_eq!(Some(&owner.uid), service.metadata.uid.as_ref());
    let ports = slice.ports.as_ref().expect("ports");
    assert_eq!(
        (ports[0].name.as_deref(), ports[0].port),
        (Some("http"), Some(8080))
    );
    let conditions: Vec<_> = slice
        .endpoints
        .iter()
        .map(|e| {
            let c = e.conditions.clone().unwrap_or_default();
            (c.ready, c.serving, c.terminating)
        })
        .collect();
    assert_eq!(
        conditions,
        [
            (Some(true), Some(true), Some(false)),
            (Some(false), Some(false), Some(false))
        ]
    );

    // A reconcile at the fixed point (the Service touched) writes nothing.
    let written = writes.load(Ordering::SeqCst);
    assert!(written >= 2, "the Endpoints and the slice were written");
    let touch = json!({"metadata": {"annotations": {"touched": "yes"}}});
    merge_patch(&cluster.api::<Service>(), "web", touch)
        .await
        .expect("touch the service");
    cluster.assert_left_alone(&endpoints).await;
    cluster.assert_left_alone(&slice).await;
    assert_eq!(writes.load(Ordering::SeqCst), written, "written again");
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn pods_leave_when_relabelled_or_deleted() {
    let cluster = endpoints_cluster().await;
    pod(&cluster, "web-0", "web", None).await;
    pod(&cluster, "web-1", "web", None).await;
    let first = ip(&running(&cluster, "web-0", true).await);
    let second = ip(&running(&cluster, "web-1", true).await);
    service(&cluster, "web", Some(json!({"app": "web"}))).await;
    slice_listing(&cluster, "web", &[&first, &second]).await;

    let relabel = json!({"metadata": {"labels": {"app": "gone"}}});
    merge_patch(&cluster.api::<Pod>(), "web-1", relabel)
        .await
        .expect("relabel");
    slice_listing(&cluster, "web", &[&first]).await;
    cluster
        .wait_for::<Endpoints>("web", "the relabelled pod gone", |e| {
            addresses(e) == (vec![first.clone()], vec![])
        })
        .await;

    cluster
        .api::<Pod>()
        .delete("web-0", &DeleteParams::default())
        .await
        .expect("delete");
    let empty = slice_listing(&cluster, "web", &[]).await;
    assert_eq!(empty.ports.as_deref().map(<[_]>::len).unwrap_or(0), 0);
    cluster
        .wait_for::<Endpoints>("web", "no pod listed", |e| e.subsets.is_none())
        .await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_service_without_a_selector_is_left_alone() {
    let cluster = endpoints_cluster().await;
    pod(&cluster, "web-0", "web", None).await;
    running(&cluster, "web-0", true).await;
    service(&cluster, "manual", None).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let endpoints = cluster.api::<Endpoints>().get_opt("manual").await;
    assert!(endpoints.expect("get").is_none(), "no Endpoints written");
    assert!(slices_of(&cluster, "manual").await.is_empty());
    cluster.stop().await;
}
