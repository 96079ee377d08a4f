//! The simulated node under a burst of pods: it works in rounds, so the pods that arrive
//! together are bound (and started) together, their writes committed side by side rather
//! than one pod's after another's.

mod common;

use common::{create_json, eventually};
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

const PODS: usize = 20;

/// The node's binding of a pod and the scheduler's `Scheduled` event about it.
#[derive(Debug, PartialEq)]
enum Step {
    Bind,
    Scheduled,
}

#[tokio::test(start_paused = true)]
async fn the_node_binds_a_burst_of_pods_together() {
    let server = common::server_with_node().await;
    let store = server.store().clone();
    let mut watcher = store.watch("/core/", store.revision()).expect("watch");
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    join_all((0..PODS).map(|i| {
        create_json(
            &pods,
            json!({"metadata": {"name": format!("p{i}")},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
        )
    }))
    .await;
    eventually("every pod Running", || async {
        let listed = pods.list(&ListParams::default()).await.ok()?;
        let running = listed
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        (running.count() == PODS).then_some(())
    })
    .await;

    // The binds and Scheduled events in the order the store committed them.
    let mut steps = Vec::new();
    while steps.iter().filter(|s| **s == Step::Scheduled).count() < PODS {
        let event = watcher.next().await.expect("open").expect("not expired");
        let value: Value = serde_json::from_slice(&event.value).expect("json");
        let previous = event.prev.as_ref().map(|p| {
            serde_json::from_slice::<Value>(p).expect("json")["spec"]["nodeName"].is_string()
        });
        if event.key.starts_with("/core/pods/") && previous == Some(false) {
            steps.push(Step::Bind);
        } else if event.key.starts_with("/core/events/") && value["reason"] == "Scheduled" {
            steps.push(Step::Scheduled);
        }
    }
    // One pod at a time alternates bind, Scheduled, bind, …; a round binds side by side.
    let side_by_side = steps
        .windows(2)
        .filter(|pair| pair == &[Step::Bind, Step::Bind])
        .count();
    assert!(
        side_by_side >= PODS / 2,
        "binds committed one pod after another: {steps:?}"
    );
}
