//! Workloads on `steady up`, as a user meets them: the real kubectl creates, rolls, undoes
//! and deletes a Deployment, and a kube-rs watch judges every pod event on the way.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::UpCluster;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use steady_test_support::eventually;
use steady_test_support::pods::{active_pods, follow_pods};

/// The longest one kubectl command (a `rollout status` included) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

impl UpCluster {
    /// Run kubectl, which must succeed within [`COMMAND_TIMEOUT`]; returns its stdout.
    async fn kubectl(&self, args: &[&str]) -> String {
        let run = tokio::process::Command::new("kubectl")
            .args(args)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(COMMAND_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} took over {COMMAND_TIMEOUT:?}"))
            .expect("kubectl is on the machine image");
        steady_test_support::successful_stdout(format!("kubectl {args:?}"), &output)
    }

    async fn rolled_out(&self, deployment: &str) {
        let status = self
            .kubectl(&["rollout", "status", deployment, "--timeout=50s"])
            .await;
        assert!(status.contains("successfully rolled out"), "{status}");
    }

    async fn pod_images(&self) -> Vec<String> {
        let pods: Api<Pod> = Api::namespaced(self.server.client().await, "default");
        let mut images: Vec<String> = active_pods(&pods)
            .await
            .iter()
            .filter_map(|p| p.spec.as_ref()?.containers.first()?.image.clone())
            .collect();
        images.sort();
        images
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_rolls_undoes_and_deletes_a_deployment_on_steady_up() {
    let cluster = UpCluster::start(&["--pod-start-delay", "20ms", "--no-ui"]).await;
    cluster
        .kubectl(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=3",
        ])
        .await;
    cluster.rolled_out("deployment/web").await;
    assert_eq!(cluster.pod_images().await, vec!["nginx"; 3]);
    let ready = cluster
        .kubectl(&["get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}/{.status.availableReplicas}/{.status.updatedReplicas}"])
        .await;
    assert_eq!(ready, "3/3/3");

    // 3 replicas at the default 25 %: maxSurge 1, maxUnavailable 0.
    let client = cluster.server.client().await;
    let (extremes, watching) = follow_pods(Api::namespaced(client.clone(), "default"));
    eventually("the pod watch synced", COMMAND_TIMEOUT, || async {
        extremes.lock().ok()?.fewest_ready.map(drop)
    })
    .await;
    cluster
        .kubectl(&["set", "image", "deployment/web", "nginx=nginx:1.27"])
        .await;
    cluster.rolled_out("deployment/web").await;
    assert_eq!(cluster.pod_images().await, vec!["nginx:1.27"; 3]);
    let history = cluster
        .kubectl(&["rollout", "history", "deployment/web"])
        .await;
    assert!(history.contains('1') && history.contains('2'), "{history}");

    cluster
        .kubectl(&["rollout", "undo", "deployment/web"])
        .await;
    cluster.rolled_out("deployment/web").await;
    assert_eq!(cluster.pod_images().await, vec!["nginx"; 3]);
    let seen = *extremes.lock().expect("extremes");
    watching.abort();
    assert_eq!(
        seen.fewest_ready,
        Some(3),
        "a Ready pod went too early: {seen:?}"
    );
    assert_eq!(seen.most_pods, 4, "maxSurge is 1: {seen:?}");

    cluster.kubectl(&["delete", "deployment", "web"]).await;
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    eventually(
        "web's ReplicaSets and pods removed",
        COMMAND_TIMEOUT,
        || async {
            let left = sets.list(&ListParams::default()).await.ok()?.items.len()
                + pods.list(&ListParams::default()).await.ok()?.items.len();
            (left == 0).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_waits_for_a_job_to_complete_on_steady_up() {
    let cluster = UpCluster::start(&["--pod-start-delay", "20ms", "--no-ui"]).await;
    cluster
        .kubectl(&["create", "job", "once", "--image=busybox"])
        .await;
    let waited = cluster
        .kubectl(&[
            "wait",
            "--for=condition=complete",
            "job/once",
            "--timeout=50s",
        ])
        .await;
    assert!(waited.contains("condition met"), "{waited}");
    let succeeded = cluster
        .kubectl(&["get", "job", "once", "-o", "jsonpath={.status.succeeded}"])
        .await;
    assert_eq!(succeeded, "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_up_registers_as_many_ready_nodes_as_asked() {
    let cluster = UpCluster::start(&["--nodes", "3", "--no-ui"]).await;
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Ready",
            "node",
            "--all",
            "--timeout=50s",
        ])
        .await;
    let nodes = cluster.kubectl(&["get", "nodes", "-o", "name"]).await;
    assert_eq!(
        nodes.lines().collect::<Vec<_>>(),
        [
            "node/steady-node-0",
            "node/steady-node-1",
            "node/steady-node-2"
        ],
        "{nodes}"
    );
}
