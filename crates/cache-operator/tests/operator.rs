//! The Cache operator end to end against steady's in-process API server with the simulated
//! node, on a paused clock: every test is deterministic and fails if the behaviour it names
//! breaks.

mod common;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use common::*;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::DeleteParams;
use serde_json::json;
use steady_cache_operator::Cache;
use steady_cache_operator::resources::{
    CACHE_LABEL, TEMPLATE_HASH_LABEL, hash_of, is_ready, is_terminating, template_hash,
};
use steady_runtime::conditions::Condition;

/// A world whose operator has converged Cache `x` with `spec`.
async fn converged_x(spec: serde_json::Value) -> (World, Operator, Cache) {
    let w = world().await;
    let op = start_operator(&w.client);
    create_cache(&w.client, "x", spec).await;
    let cache = wait_converged(&w.client, "x").await;
    (w, op, cache)
}

/// Merge `spec` into Cache `x`'s spec.
async fn patch_spec(client: &kube::Client, spec: serde_json::Value, what: &str) {
    merge_patch(&caches(client), "x", json!({ "spec": spec }))
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Cache `x`'s Degraded condition, once it is True.
async fn degraded_x(client: &kube::Client) -> Condition {
    eventually("Degraded=True", Duration::from_secs(10), || async {
        let cache = caches(client).get("x").await.ok()?;
        condition(&cache, "Degraded")
            .filter(|c| c.status == "True")
            .cloned()
    })
    .await
}

/// Over `window` of virtual time the operator reconciles at least `min_reconciles` more
/// times (so the check cannot pass on an operator that does nothing), yet writes nothing
/// and the store does not move.
async fn assert_reconciles_without_writes(
    w: &World,
    op: &Operator,
    window: Duration,
    min_reconciles: u64,
) {
    let revision = w.server.store().revision();
    let (writes, reconciles) = (op.writes(), op.reconciles());
    tokio::time::sleep(window).await;
    assert!(
        op.reconciles() >= reconciles + min_reconciles,
        "reconciles at the fixed point ({} -> {})",
        reconciles,
        op.reconciles()
    );
    assert_eq!(
        op.writes(),
        writes,
        "a reconcile at the fixed point writes nothing"
    );
    assert_eq!(
        w.server.store().revision(),
        revision,
        "and the store did not move"
    );
}

#[tokio::test(start_paused = true)]
async fn two_replicas_become_ready_with_status_and_service() {
    let (w, op, cache) = converged_x(json!({"replicas": 2})).await;

    let pods = pods_of(&w.client, "x").await;
    assert_eq!(names(&pods), ["x-0", "x-1"]);
    let hash = template_hash(&cache.spec);
    for pod in &pods {
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        let labels = pod.labels();
        assert_eq!(labels.get(CACHE_LABEL).map(String::as_str), Some("x"));
        assert_eq!(labels.get(TEMPLATE_HASH_LABEL), Some(&hash));
        let owner = &pod.owner_references()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Cache", "x"));
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
        let container = &pod.spec.as_ref().expect("spec").containers[0];
        assert_eq!(container.name, "memcached");
        assert_eq!(container.image.as_deref(), Some("memcached:1.6"));
        assert_eq!(
            container.args.clone().unwrap_or_default(),
            ["-m", "64", "-p", "11211"]
        );
        let limits = container
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .unwrap_or_default();
        assert_eq!(limits.get("memory").map(|q| q.0.as_str()), Some("64Mi"));
    }

    let status = cache.status.clone().expect("status");
    assert_eq!(status.ready_replicas, 2);
    assert_eq!(status.replicas, 2);
    assert_eq!(status.observed_generation, cache.metadata.generation);
    assert_eq!(status.selector, "steady.dev/cache=x");
    let degraded = condition(&cache, "Degraded").expect("Degraded");
    assert_eq!(degraded.status, "False");
    let ready = condition(&cache, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AllReplicasReady")
    );

    let service = services(&w.client).get("x").await.expect("service");
    let spec = service.spec.clone().expect("service spec");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(
        spec.selector.clone().unwrap_or_default(),
        BTreeMap::from([(CACHE_LABEL.to_string(), "x".to_string())])
    );
    let port = &spec.ports.clone().unwrap_or_default()[0];
    assert_eq!(
        (port.port, port.name.as_deref()),
        (11211, Some("memcached"))
    );
    assert_eq!(service.owner_references()[0].controller, Some(true));

    // The scale subresource reads what the status says.
    let scale = caches(&w.client).get_scale("x").await.expect("scale");
    assert_eq!(scale.status.as_ref().map(|s| s.replicas), Some(2));
    assert_eq!(
        scale.status.and_then(|s| s.selector).as_deref(),
        Some("steady.dev/cache=x")
    );
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_fixed_point_makes_zero_writes() {
    let (w, op, _) = converged_x(json!({"replicas": 2})).await;
    // Let every pending requeue and event play out.
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Resync (every ~10 s) reconciles the converged Cache several times meanwhile.
    assert_reconciles_without_writes(&w, &op, Duration::from_secs(60), 4).await;
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_deleted_pod_is_recreated() {
    let (w, op, _) = converged_x(json!({"replicas": 2})).await;
    let old = pods_api(&w.client).get("x-1").await.expect("x-1");
    pods_api(&w.client)
        .delete("x-1", &DeleteParams::default())
        .await
        .expect("delete x-1");
    let new = eventually("a new x-1 to be Ready", Duration::from_secs(30), || async {
        let pod = pods_api(&w.client).get_opt("x-1").await.ok()??;
        (pod.uid() != old.uid() && is_ready(&pod) && !is_terminating(&pod)).then_some(pod)
    })
    .await;
    assert_ne!(new.uid(), old.uid());
    wait_converged(&w.client, "x").await;
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_pod_is_replaced_and_reported() {
    let (w, op, _) = converged_x(json!({"replicas": 2})).await;
    let old = pods_api(&w.client).get("x-0").await.expect("x-0");
    let failed = json!({"status": {"phase": "Failed", "conditions": [
        {"type": "Ready", "status": "False", "reason": "PodFailed"}
    ]}});
    merge_patch_subresource::<Pod, _>(&pods_api(&w.client), "status", "x-0", failed)
        .await
        .expect("fail x-0");
    let degraded = degraded_x(&w.client).await;
    assert_eq!(degraded.reason, "PodFailed");
    assert!(degraded.message.contains("x-0"), "{}", degraded.message);
    let cache = wait_converged(&w.client, "x").await;
    let new = pods_api(&w.client).get("x-0").await.expect("x-0");
    assert_ne!(new.uid(), old.uid(), "x-0 was recreated");
    assert_eq!(condition_status(&cache, "Degraded"), Some("False"));
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn scaling_up_and_down_keeps_the_right_ordinals() {
    let (w, op, _) = converged_x(json!({"replicas": 2})).await;

    // Through the scale subresource, as `kubectl scale` does.
    let scale = json!({"spec": {"replicas": 4}});
    merge_patch_subresource::<Scale, _>(&caches(&w.client), "scale", "x", scale)
        .await
        .expect("scale to 4");
    wait_converged(&w.client, "x").await;
    assert_eq!(
        names(&pods_of(&w.client, "x").await),
        ["x-0", "x-1", "x-2", "x-3"]
    );

    patch_spec(&w.client, json!({"replicas": 1}), "scale to 1").await;
    let cache = wait_converged(&w.client, "x").await;
    assert_eq!(names(&pods_of(&w.client, "x").await), ["x-0"]);
    let status = cache.status.expect("status");
    assert_eq!((status.replicas, status.ready_replicas), (1, 1));

    patch_spec(&w.client, json!({"replicas": 0}), "scale to 0").await;
    let cache = wait_converged(&w.client, "x").await;
    assert!(pods_of(&w.client, "x").await.is_empty());
    assert!(
        services(&w.client)
            .get_opt("x")
            .await
            .expect("get")
            .is_some()
    );
    assert_eq!(condition_status(&cache, "Ready"), Some("True"));
    op.stop().await;
}

/// The operator's writes from `change` until `x` has converged again.
async fn writes_to_converge(w: &World, op: &Operator, change: impl Future<Output = ()>) -> u64 {
    let before = op.writes();
    change.await;
    wait_converged(&w.client, "x").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    op.writes() - before
}

/// The status says what is under way, not what the last run did: the run after the one
/// that created (or deleted) a pod sees the same state and writes nothing. A scale step
/// is one pod write and two status writes (the new generation, then the pod Ready or
/// gone); a failed pod's replacement is a delete, a create and two status writes
/// (Degraded, then Ready again), however many runs the pods' own events cause.
#[tokio::test(start_paused = true)]
async fn a_scale_step_writes_status_once_per_state_not_once_per_run() {
    let (w, op, _) = converged_x(json!({"replicas": 1})).await;
    let reconciles = op.reconciles();
    let scale = |replicas: i32| patch_spec(&w.client, json!({"replicas": replicas}), "scale");
    assert_eq!(writes_to_converge(&w, &op, scale(2)).await, 3, "scale up");
    assert_eq!(writes_to_converge(&w, &op, scale(1)).await, 3, "scale down");
    let fail = async {
        let failed = json!({"status": {"phase": "Failed"}});
        merge_patch_subresource::<Pod, _>(&pods_api(&w.client), "status", "x-0", failed)
            .await
            .expect("fail x-0");
    };
    assert_eq!(writes_to_converge(&w, &op, fail).await, 4, "a failed pod");
    assert!(
        op.reconciles() >= reconciles + 9,
        "the pods' events woke more runs than there were writes"
    );
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_image_change_rolls_pods_one_at_a_time() {
    let (w, op, before) = converged_x(json!({"replicas": 3})).await;
    let old_hash = template_hash(&before.spec);
    let old_uids: BTreeMap<String, String> = pods_of(&w.client, "x")
        .await
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();

    patch_spec(
        &w.client,
        json!({"image": "memcached:1.7", "memoryMiB": 128}),
        "change the image",
    )
    .await;
    let new_hash = template_hash(&steady_cache_operator::CacheSpec {
        replicas: 3,
        image: "memcached:1.7".into(),
        port: 11211,
        memory_mib: 128,
    });
    assert_ne!(old_hash, new_hash);

    // Sample the pods every 5 ms of simulated time until the rollout is done.
    let mut replaced_order: Vec<String> = Vec::new();
    let mut samples = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let pods = pods_of(&w.client, "x").await;
        samples += 1;
        let serving = serving(&pods);
        assert!(
            serving >= 2,
            "sample {samples}: only {serving} of 3 pods Ready: {:?}",
            pods.iter()
                .map(|p| (
                    p.name_any(),
                    hash_of(p).map(str::to_string),
                    is_ready(p),
                    is_terminating(p)
                ))
                .collect::<Vec<_>>()
        );
        for pod in &pods {
            if hash_of(pod) == Some(new_hash.as_str()) && !replaced_order.contains(&pod.name_any())
            {
                replaced_order.push(pod.name_any());
            }
        }
        if converged(&w.client, "x").await.is_some() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the rollout did not finish"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        samples > 50,
        "the rollout was observed, not skipped ({samples} samples)"
    );
    assert_eq!(
        replaced_order,
        ["x-0", "x-1", "x-2"],
        "lowest ordinal first, one at a time"
    );
    for pod in pods_of(&w.client, "x").await {
        assert_ne!(
            Some(&pod.uid().unwrap_or_default()),
            old_uids.get(&pod.name_any())
        );
        let container = &pod.spec.as_ref().expect("spec").containers[0];
        assert_eq!(container.image.as_deref(), Some("memcached:1.7"));
        assert_eq!(
            container.args.clone().unwrap_or_default(),
            ["-m", "128", "-p", "11211"]
        );
    }
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_port_change_updates_the_service() {
    let (w, op, _) = converged_x(json!({"replicas": 1})).await;
    patch_spec(&w.client, json!({"port": 11311}), "change the port").await;
    wait_converged(&w.client, "x").await;
    let service = services(&w.client).get("x").await.expect("service");
    let ports = service.spec.and_then(|s| s.ports).unwrap_or_default();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].port, 11311);
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn deleting_the_cache_collects_its_pods_and_service() {
    let (w, op, _) = converged_x(json!({"replicas": 2})).await;
    caches(&w.client)
        .delete("x", &DeleteParams::default())
        .await
        .expect("delete the Cache");
    eventually(
        "pods and service to be collected",
        Duration::from_secs(60),
        || async {
            let pods = pods_of(&w.client, "x").await;
            let service = services(&w.client).get_opt("x").await.ok()?;
            let cache = caches(&w.client).get_opt("x").await.ok()?;
            (pods.is_empty() && service.is_none() && cache.is_none()).then_some(())
        },
    )
    .await;
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_cold_restart_on_a_converged_world_makes_zero_writes() {
    let w = world().await;
    let op = start_operator(&w.client);
    create_cache(&w.client, "x", json!({"replicas": 2})).await;
    create_cache(&w.client, "y", json!({"replicas": 3, "port": 11300})).await;
    wait_converged(&w.client, "x").await;
    wait_converged(&w.client, "y").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    op.stop().await;

    // Started fresh, its counters begin at zero: both Caches reconciled, nothing written.
    let op = start_operator(&w.client);
    assert_reconciles_without_writes(&w, &op, Duration::from_secs(30), 2).await;
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn changes_while_the_operator_is_down_converge_from_observed_state() {
    let (w, op, _) = converged_x(json!({"replicas": 2})).await;
    op.stop().await;

    pods_api(&w.client)
        .delete("x-0", &DeleteParams::default())
        .await
        .expect("delete x-0");
    patch_spec(&w.client, json!({"replicas": 3}), "scale").await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    let op = start_operator(&w.client);
    wait_converged(&w.client, "x").await;
    assert_eq!(names(&pods_of(&w.client, "x").await), ["x-0", "x-1", "x-2"]);
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_service_name_taken_by_someone_else_is_reported_not_overwritten() {
    let w = world().await;
    let foreign: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "x", "namespace": NS},
        "spec": {"selector": {"app": "other"}, "ports": [{"port": 80}]}
    }))
    .expect("service");
    services(&w.client)
        .create(&kube::api::PostParams::default(), &foreign)
        .await
        .expect("create a foreign service");
    let op = start_operator(&w.client);
    create_cache(&w.client, "x", json!({"replicas": 1})).await;
    let degraded = degraded_x(&w.client).await;
    assert_eq!(degraded.reason, "ServiceNameTaken");
    let service = services(&w.client).get("x").await.expect("service");
    assert_eq!(
        service
            .spec
            .and_then(|s| s.selector)
            .unwrap_or_default()
            .get("app")
            .map(String::as_str),
        Some("other"),
        "the foreign service is left alone"
    );
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_change_the_reconciler_cannot_see_wakes_no_reconcile() {
    let (w, op, _) = converged_x(json!({"replicas": 1})).await;
    let patch_status = |status: serde_json::Value| {
        let pods = pods_api(&w.client);
        async move {
            merge_patch_subresource::<Pod, _>(&pods, "status", "x-0", json!({ "status": status }))
                .await
                .expect("patch the pod's status");
            // Well inside the resync period: only the pod's event can wake the Cache.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let before = op.reconciles();
    patch_status(json!({"podIP": "10.9.9.9", "podIPs": [{"ip": "10.9.9.9"}]})).await;
    assert_eq!(
        op.reconciles(),
        before,
        "the pod IP is trimmed from the cache: its change wakes nothing"
    );
    patch_status(json!({"conditions": [{"type": "Ready", "status": "False"}]})).await;
    assert!(
        op.reconciles() > before,
        "readiness is read: its change wakes the Cache"
    );
    op.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_create_the_api_refuses_is_reported_and_retried_until_allowed() {
    let w = world().await;
    let quotas: kube::Api<k8s_openapi::api::core::v1::ResourceQuota> =
        kube::Api::namespaced(w.client.clone(), NS);
    let quota = json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "1"}}});
    steady_test_support::create_json(&quotas, quota).await;
    let op = start_operator(&w.client);
    create_cache(&w.client, "x", json!({"replicas": 2})).await;
    let degraded = degraded_x(&w.client).await;
    assert_eq!(degraded.reason, "PodCreateRefused");
    assert_eq!(
        degraded.message,
        "creating pod x-1: pods \"x-1\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1"
    );

    // nothing the operator watches changes when the quota is raised: its retries find it
    let raised = json!({"spec": {"hard": {"pods": "2"}}});
    steady_test_support::merge_patch(&quotas, "pods", raised)
        .await
        .expect("quota raised");
    wait_converged(&w.client, "x").await;
    assert_eq!(names(&pods_of(&w.client, "x").await), ["x-0", "x-1"]);
    let cache = caches(&w.client).get("x").await.expect("cache");
    assert_eq!(
        condition(&cache, "Degraded").map(|c| c.status.as_str()),
        Some("False")
    );
    op.stop().await;
}
