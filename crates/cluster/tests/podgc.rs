//! The pod garbage collector against steady's in-process server with two simulated nodes:
//! what `kubectl delete node` does to the node's pods on a cluster, and what becomes of a
//! pod no kubelet will ever finish.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams};
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use steady_test_support::{create_json, eventually, merge_patch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

async fn gc_cluster() -> Cluster {
    controller_cluster_of_nodes(2, steady_cluster::podgc::start, "pod-garbage-collector").await
}

fn pod_on(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]}})
}

/// Every state the pod `name` is seen in, the one it was deleted in last.
fn follow(api: Api<Pod>, name: &str) -> (Arc<Mutex<Vec<Pod>>>, JoinHandle<()>) {
    let seen: Arc<Mutex<Vec<Pod>>> = Arc::default();
    let record = seen.clone();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let following = tokio::spawn(async move {
        let stream = watcher::watcher(api, config);
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            if let Ok(Event::Apply(pod) | Event::InitApply(pod) | Event::Delete(pod)) = event {
                record.lock().unwrap_or_else(|e| e.into_inner()).push(pod);
            }
        }
    });
    (seen, following)
}

/// The pod's `DisruptionTarget` condition as (status, reason, message).
fn disruption(pod: &Pod) -> Option<(String, String, String)> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == "DisruptionTarget")?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// kube's `gcOrphaned`: 40 s after its node is deleted, a pod is marked Failed with the
/// `DisruptionTarget` condition and deleted at once; the other node's pods stay.
#[tokio::test(start_paused = true)]
async fn the_pods_of_a_deleted_node_fail_and_go_after_the_quarantine() {
    let cluster = gc_cluster().await;
    let pods: Api<Pod> = cluster.api();
    let _: Pod = create_json(&pods, pod_on("doomed", "steady-node-1")).await;
    let _: Pod = create_json(&pods, pod_on("spared", "steady-node-0")).await;
    for name in ["doomed", "spared"] {
        cluster
            .wait_for::<Pod>(name, "running", |p| phase(p) == "Running")
            .await;
    }
    let (seen, following) = follow(pods.clone(), "doomed");
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    nodes
        .delete("steady-node-1", &DeleteParams::default())
        .await
        .expect("delete the node");
    let deleted = Instant::now();
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert!(
        pods.get_opt("doomed").await.expect("get").is_some(),
        "collected during the quarantine"
    );
    eventually("doomed collected", LIMIT, || async {
        pods.get_opt("doomed").await.ok()?.is_none().then_some(())
    })
    .await;
    let waited = deleted.elapsed();
    assert!(
        waited >= Duration::from_secs(40) && waited < Duration::from_secs(45),
        "collected {waited:?} after its node was deleted"
    );
    let last = eventually("the failure seen", LIMIT, || async {
        let seen = seen.lock().ok()?;
        seen.iter().find(|pod| phase(pod) == "Failed").cloned()
    })
    .await;
    assert_eq!(phase(&last), "Failed");
    assert_eq!(
        disruption(&last),
        Some((
            "True".into(),
            "DeletionByPodGC".into(),
            "PodGC: node no longer exists".into()
        ))
    );
    following.abort();
    let spared = pods.get("spared").await.expect("spared");
    assert_eq!(phase(&spared), "Running");
    cluster.stop().await;
}

/// A pod bound to a node that never existed is collected as well; a pod being deleted
/// that was never scheduled is marked Failed and deleted at once (`gcUnscheduledTerminating`),
/// here held by its finalizer until that goes.
#[tokio::test(start_paused = true)]
async fn a_pod_of_no_node_and_an_unscheduled_pod_being_deleted_are_collected() {
    let cluster = gc_cluster().await;
    let pods: Api<Pod> = cluster.api();
    let _: Pod = create_json(&pods, pod_on("lost", "ghost")).await;
    let held = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]},
        "spec": {"nodeSelector": {"disk": "none"}, "containers": [{"name": "app", "image": "nginx"}]}});
    let _: Pod = create_json(&pods, held).await;
    pods.delete("held", &DeleteParams::default())
        .await
        .expect("delete held");
    let failed = cluster
        .wait_for::<Pod>("held", "failed", |p| phase(p) == "Failed")
        .await;
    assert!(failed.metadata.deletion_timestamp.is_some());
    assert_eq!(disruption(&failed), None);
    merge_patch(&pods, "held", json!({"metadata": {"finalizers": null}}))
        .await
        .expect("release held");
    eventually("lost and held gone", LIMIT, || async {
        let lost = pods.get_opt("lost").await.ok()?;
        let held = pods.get_opt("held").await.ok()?;
        (lost.is_none() && held.is_none()).then_some(())
    })
    .await;
    cluster.stop().await;
}
