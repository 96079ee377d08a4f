//! The DaemonSet controller against steady's API server and simulated node: one pod per
//! Node the API lists, nodeSelector honoured, pods leaving Nodes that stop matching, and
//! the status kube writes.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use serde_json::json;
use steady_test_support::{create_json, eventually, merge_patch};

async fn daemon_cluster() -> Cluster {
    controller_cluster(steady_cluster::daemonset::start, "daemonset").await
}

/// A cluster whose DaemonSet `agent` has its one pod ready on the one node.
async fn agent_ready_on_its_node() -> (Cluster, DaemonSet) {
    let cluster = daemon_cluster().await;
    create_json::<DaemonSet>(&cluster.api(), daemon_set("agent", "fluentd", json!({}))).await;
    let set = cluster
        .wait_for::<DaemonSet>("agent", "agent ready on the node", |s| {
            s.status.as_ref().is_some_and(|s| s.number_ready == 1)
        })
        .await;
    (cluster, set)
}

/// A second Node, with no simulated kubelet behind it: its pods stay Pending.
async fn add_node(cluster: &Cluster, name: &str, labels: serde_json::Value) {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    create_json::<Node>(
        &nodes,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}),
    )
    .await;
}

fn placement(pods: &[Pod]) -> Vec<String> {
    let mut nodes: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    nodes.sort();
    nodes
}

#[tokio::test(start_paused = true)]
async fn one_pod_runs_on_every_node() {
    let (cluster, set) = agent_ready_on_its_node().await;
    let status = set.status.expect("status");
    assert_eq!(status.desired_number_scheduled, 1);
    assert_eq!(status.current_number_scheduled, 1);
    assert_eq!(status.number_available, Some(1));
    assert_eq!(status.updated_number_scheduled, Some(1));
    assert_eq!(status.number_misscheduled, 0);
    assert_eq!(status.observed_generation, set.metadata.generation);
    let pods = cluster.pods("app=agent").await;
    assert_eq!(placement(&pods), ["steady-node"]);
    assert_eq!(phase(&pods[0]), "Running");
    let labels = pods[0].metadata.labels.clone().unwrap_or_default();
    assert!(labels.contains_key("controller-revision-hash"));
    assert_eq!(labels["pod-template-generation"], "1");

    add_node(&cluster, "second", json!({})).await;
    let set = cluster
        .wait_for::<DaemonSet>("agent", "scheduled on both nodes", |s| {
            s.status
                .as_ref()
                .is_some_and(|s| s.current_number_scheduled == 2)
        })
        .await;
    let status = set.status.expect("status");
    assert_eq!(status.desired_number_scheduled, 2);
    assert_eq!(status.number_ready, 1, "nothing runs the second node's pod");
    assert_eq!(status.number_unavailable, Some(1));
    assert_eq!(
        placement(&cluster.pods("app=agent").await),
        ["second", "steady-node"]
    );

    // The fixed point: nothing more is written.
    let settled = cluster.api::<DaemonSet>().get("agent").await.expect("set");
    cluster.assert_left_alone(&settled).await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_is_available_only_after_min_ready_seconds() {
    let cluster = daemon_cluster().await;
    let mut agent = daemon_set("agent", "fluentd", json!({}));
    agent["spec"]["minReadySeconds"] = json!(30);
    create_json::<DaemonSet>(&cluster.api(), agent).await;
    let ready = cluster
        .wait_for::<DaemonSet>("agent", "agent ready", |s| {
            s.status.as_ref().is_some_and(|s| s.number_ready == 1)
        })
        .await;
    let ready_at = tokio::time::Instant::now();
    let status = ready.status.expect("status");
    assert_eq!(status.number_available, None, "Ready for less than 30 s");
    assert_eq!(status.number_unavailable, Some(1));
    cluster
        .wait_for::<DaemonSet>("agent", "agent available", |s| {
            s.status
                .as_ref()
                .is_some_and(|s| s.number_available == Some(1) && s.number_unavailable.is_none())
        })
        .await;
    let waited = ready_at.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(25),
        "available {waited:?} after Ready, before minReadySeconds"
    );
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_node_selector_picks_the_nodes_and_a_relabel_moves_the_pod_off() {
    let cluster = daemon_cluster().await;
    add_node(&cluster, "fast", json!({"disk": "ssd"})).await;
    create_json::<DaemonSet>(
        &cluster.api(),
        daemon_set("ssd", "fluentd", json!({"nodeSelector": {"disk": "ssd"}})),
    )
    .await;
    cluster
        .wait_for::<DaemonSet>("ssd", "scheduled on the ssd node", |s| {
            s.status
                .as_ref()
                .is_some_and(|s| s.current_number_scheduled == 1)
        })
        .await;
    assert_eq!(placement(&cluster.pods("app=ssd").await), ["fast"]);

    let nodes: Api<Node> = Api::all(cluster.client.clone());
    merge_patch(
        &nodes,
        "fast",
        json!({"metadata": {"labels": {"disk": "hdd"}}}),
    )
    .await
    .expect("relabel");
    let set = cluster
        .wait_for::<DaemonSet>("ssd", "no node wanted", |s| {
            s.status
                .as_ref()
                .is_some_and(|s| s.desired_number_scheduled == 0 && s.number_misscheduled == 0)
        })
        .await;
    assert_eq!(set.status.expect("status").current_number_scheduled, 0);
    let pods = cluster.api::<Pod>();
    eventually("the pod on fast deleted", LIMIT, || {
        let pods = pods.clone();
        async move {
            let listed = pods
                .list(&kube::api::ListParams::default().labels("app=ssd"))
                .await
                .ok()?;
            placement(&listed.items).is_empty().then_some(())
        }
    })
    .await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_template_change_replaces_the_pod() {
    let (cluster, before) = agent_ready_on_its_node().await;
    let old_pod = cluster.pods("app=agent").await.remove(0);

    let update = json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "fluent-bit"}]}}}});
    merge_patch(&cluster.api::<DaemonSet>(), "agent", update)
        .await
        .expect("update");
    let generation = before.metadata.generation.unwrap_or(0) + 1;
    let after = cluster
        .wait_for::<DaemonSet>("agent", "updated and ready", |s| {
            s.status.as_ref().is_some_and(|st| {
                st.observed_generation == Some(generation)
                    && st.updated_number_scheduled == Some(1)
                    && st.number_ready == 1
            })
        })
        .await;
    assert_eq!(after.status.and_then(|s| s.number_available), Some(1));
    let pods: Vec<Pod> = cluster
        .pods("app=agent")
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    assert_eq!(pods.len(), 1);
    assert_ne!(pods[0].metadata.uid, old_pod.metadata.uid);
    let image = pods[0].spec.as_ref().map(|s| s.containers[0].image.clone());
    assert_eq!(image, Some(Some("fluent-bit".to_string())));
    let labels = pods[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["pod-template-generation"], generation.to_string());
    cluster.stop().await;
}

/// A DaemonSet deleted with `--cascade=orphan` and created again keeps the pod running on
/// its node: the new set adopts it (kube's claim by selector) instead of adding a second.
#[tokio::test(start_paused = true)]
async fn a_daemon_set_created_again_after_an_orphaning_delete_adopts_its_pod() {
    let (cluster, _) = agent_ready_on_its_node().await;
    let sets: Api<DaemonSet> = cluster.api();
    orphan_then_recreate(
        &sets,
        "agent",
        daemon_set("agent", "fluentd", json!({})),
        || cluster.pods("app=agent"),
    )
    .await;
    let set = cluster
        .wait_for::<DaemonSet>("agent", "agent ready again", |s| {
            s.status.as_ref().is_some_and(|s| s.number_ready == 1)
        })
        .await;
    assert_eq!(placement(&cluster.pods("app=agent").await), ["steady-node"]);
    cluster.assert_left_alone(&set).await;
    cluster.stop().await;
}
