//! The StatefulSet controller against steady's API server and simulated node: ordinals
//! created in order (checked on a watch), Parallel, scale-down from the top, claims from
//! volumeClaimTemplates, rolling update by partition, and the status kube writes.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::json;
use steady_test_support::{create_json, eventually, merge_patch};

const SELECTOR: &str = "app=web";

/// The StatefulSet controller, and the volume controller that binds its claims (to
/// volumes of kind's default class, as on a kind cluster).
async fn set_cluster() -> Cluster {
    controllers_cluster(&[
        (steady_cluster::statefulset::start, "statefulset"),
        (steady_cluster::volumes::start, "persistentvolume-binder"),
    ])
    .await
}

fn web(replicas: i32, policy: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "serviceName": "web",
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]},
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }],
        },
    })
}

/// One pod event as the watch delivered it.
#[derive(Debug, Clone)]
struct Seen {
    added: bool,
    deleted: bool,
    name: String,
    ready: bool,
    terminating: bool,
}

/// Every pod event of the set from now on, in order.
async fn record_pod_events(cluster: &Cluster) -> Arc<Mutex<Vec<Seen>>> {
    let pods = cluster.api::<Pod>();
    let listed = pods
        .list(&ListParams::default().labels(SELECTOR))
        .await
        .expect("list");
    let version = listed.metadata.resource_version.expect("resourceVersion");
    let mut stream = pods
        .watch(&WatchParams::default().labels(SELECTOR), &version)
        .await
        .expect("watch")
        .boxed();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok(Some(event)) = stream.try_next().await {
            let (pod, added, deleted) = match event {
                WatchEvent::Added(pod) => (pod, true, false),
                WatchEvent::Modified(pod) => (pod, false, false),
                WatchEvent::Deleted(pod) => (pod, false, true),
                _ => continue,
            };
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            log.lock().expect("log").push(Seen {
                added,
                deleted,
                name: pod.metadata.name.clone().unwrap_or_default(),
                ready: ready && phase(&pod) == "Running",
                terminating: pod.metadata.deletion_timestamp.is_some(),
            });
        }
    });
    seen
}

fn events(seen: &Arc<Mutex<Vec<Seen>>>) -> Vec<Seen> {
    seen.lock().expect("log").clone()
}

/// The names in the order of their first event matching `pick`.
fn first_where(events: &[Seen], pick: impl Fn(&Seen) -> bool) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for e in events.iter().filter(|e| pick(e)) {
        if !names.contains(&e.name) {
            names.push(e.name.clone());
        }
    }
    names
}

/// Create `set` (named `web`) and wait until all its `replicas` are ready; returns it then.
async fn create_ready(cluster: &Cluster, set: serde_json::Value, replicas: i32) -> StatefulSet {
    create_json::<StatefulSet>(&cluster.api(), set).await;
    let what = format!("{replicas} ready");
    cluster
        .wait_for::<StatefulSet>("web", &what, |s| ready_replicas(s) == replicas)
        .await
}

fn ready_replicas(set: &StatefulSet) -> i32 {
    set.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

fn pod_revision(pod: &Pod) -> String {
    pod.metadata.labels.clone().unwrap_or_default()["controller-revision-hash"].clone()
}

#[tokio::test(start_paused = true)]
async fn ordered_ready_comes_up_in_order_and_scales_down_from_the_top() {
    let cluster = set_cluster().await;
    let seen = record_pod_events(&cluster).await;
    create_json::<StatefulSet>(&cluster.api(), web(3, "OrderedReady")).await;
    let set = cluster
        .wait_for::<StatefulSet>("web", "three ready", |s| {
            ready_replicas(s) == 3 && s.status.as_ref().and_then(|s| s.current_replicas) == Some(3)
        })
        .await;

    let log = events(&seen);
    assert_eq!(first_where(&log, |e| e.added), ["web-0", "web-1", "web-2"]);
    for (i, e) in log
        .iter()
        .enumerate()
        .filter(|(_, e)| e.added && e.name != "web-0")
    {
        let ordinal: usize = e.name["web-".len()..].parse().expect("ordinal");
        let previous = format!("web-{}", ordinal - 1);
        let before = log[..i].iter().rev().find(|s| s.name == previous);
        assert!(
            before.is_some_and(|s| s.ready),
            "{} was created before {previous} was Running and Ready: {log:#?}",
            e.name
        );
    }

    let status = set.status.clone().expect("status");
    assert_eq!(status.replicas, 3);
    assert_eq!(status.available_replicas, Some(3));
    assert_eq!(status.updated_replicas, Some(3));
    assert_eq!(status.observed_generation, set.metadata.generation);
    let revision = status.update_revision.clone().expect("updateRevision");
    assert!(revision.starts_with("web-"));
    assert_eq!(status.current_revision.as_ref(), Some(&revision));

    let pods = cluster.pods(SELECTOR).await;
    let claims = cluster.api::<PersistentVolumeClaim>();
    for (ordinal, pod) in pods.iter().enumerate() {
        let name = format!("web-{ordinal}");
        assert_eq!(pod.metadata.name.as_deref(), Some(name.as_str()));
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["statefulset.kubernetes.io/pod-name"], name);
        assert_eq!(labels["apps.kubernetes.io/pod-index"], ordinal.to_string());
        assert_eq!(pod_revision(pod), revision);
        let spec = pod.spec.clone().expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some(name.as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some("web"));
        let volume = spec
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == "data");
        let claim_name = format!("data-{name}");
        assert_eq!(
            volume
                .and_then(|v| v.persistent_volume_claim)
                .map(|c| c.claim_name),
            Some(claim_name.clone())
        );
        let claim = claims.get(&claim_name).await.expect("claim");
        let requested = claim
            .spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests);
        assert_eq!(requested.unwrap_or_default()["storage"].0, "1Gi");
        assert_eq!(claim.metadata.labels.unwrap_or_default()["app"], "web");
    }

    let mark = events(&seen).len();
    merge_patch(
        &cluster.api::<StatefulSet>(),
        "web",
        json!({"spec": {"replicas": 1}}),
    )
    .await
    .expect("scale down");
    cluster
        .wait_for::<StatefulSet>("web", "one replica", |s| {
            s.status.as_ref().is_some_and(|s| s.replicas == 1)
        })
        .await;
    let names: Vec<String> = cluster
        .pods(SELECTOR)
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(names, ["web-0"]);
    let log = events(&seen)[mark..].to_vec();
    assert_eq!(first_where(&log, |e| e.terminating), ["web-2", "web-1"]);
    let web1_stops = log
        .iter()
        .position(|e| e.name == "web-1" && e.terminating)
        .expect("web-1 stops");
    let web2_gone = log
        .iter()
        .position(|e| e.name == "web-2" && e.deleted)
        .expect("web-2 gone");
    assert!(
        web2_gone < web1_stops,
        "web-1 was deleted before web-2 was gone: {log:#?}"
    );
    let claims_left = claims
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items
        .len();
    assert_eq!(claims_left, 3, "claims are retained on scale-down");

    // The fixed point: nothing more is written.
    let settled = cluster.api::<StatefulSet>().get("web").await.expect("set");
    let pods_before = cluster.pods(SELECTOR).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let later = cluster.api::<StatefulSet>().get("web").await.expect("set");
    assert_eq!(
        later.metadata.resource_version,
        settled.metadata.resource_version
    );
    let versions = |pods: &[Pod]| -> Vec<Option<String>> {
        pods.iter()
            .map(|p| p.metadata.resource_version.clone())
            .collect()
    };
    assert_eq!(
        versions(&cluster.pods(SELECTOR).await),
        versions(&pods_before)
    );
    cluster.stop().await;
}

fn available_replicas(set: &StatefulSet) -> i32 {
    set.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn min_ready_seconds_holds_the_next_ordinal_and_the_available_count() {
    let cluster = set_cluster().await;
    let mut set = web(2, "OrderedReady");
    set["spec"]["minReadySeconds"] = json!(30);
    create_json::<StatefulSet>(&cluster.api(), set).await;
    let first_ready = cluster
        .wait_for::<StatefulSet>("web", "web-0 ready", |s| ready_replicas(s) == 1)
        .await;
    let ready_at = tokio::time::Instant::now();
    assert_eq!(
        available_replicas(&first_ready),
        0,
        "Ready for less than minReadySeconds is not available"
    );
    cluster
        .wait_for::<Pod>("web-1", "web-1 created", |_| true)
        .await;
    let waited = ready_at.elapsed();
    assert!(
        waited >= Duration::from_secs(25),
        "web-1 came {waited:?} after web-0 was Ready, before minReadySeconds"
    );
    cluster
        .wait_for::<StatefulSet>("web", "two available", |s| {
            ready_replicas(s) == 2 && available_replicas(s) == 2
        })
        .await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn parallel_creates_every_ordinal_at_once() {
    let cluster = set_cluster().await;
    let seen = record_pod_events(&cluster).await;
    create_ready(&cluster, web(3, "Parallel"), 3).await;
    let log = events(&seen);
    let third_added = log
        .iter()
        .filter(|e| e.added)
        .nth(2)
        .map(|e| e.name.clone());
    let at = log
        .iter()
        .position(|e| e.added && Some(&e.name) == third_added.as_ref())
        .expect("three added");
    assert!(
        log[..at].iter().all(|e| !e.ready),
        "a pod was Ready before all three existed: {log:#?}"
    );
    cluster.stop().await;
}

/// The way to change what a StatefulSet may not change (its claim templates): delete it
/// with `--cascade=orphan` and create it again. The new set takes back the running pods,
/// as kube's controller adopts them, instead of failing on their names for ever; a pod
/// that only looks like one of its ordinals (same labels, another name) stays an orphan.
#[tokio::test(start_paused = true)]
async fn a_set_created_again_after_an_orphaning_delete_adopts_its_pods() {
    let cluster = set_cluster().await;
    create_ready(&cluster, web(2, "OrderedReady"), 2).await;
    let lookalike: Pod = create_json(
        &cluster.api(),
        json!({
            "metadata": {"name": "web-extra", "labels": {"app": "web", "statefulset.kubernetes.io/pod-name": "web-extra"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]},
        }),
    )
    .await;
    let members = || async {
        let pods = cluster.pods(SELECTOR).await;
        pods.into_iter()
            .filter(|p| p.metadata.name.as_deref() != Some("web-extra"))
            .collect::<Vec<_>>()
    };
    let sets: Api<StatefulSet> = cluster.api();
    orphan_then_recreate(&sets, "web", web(2, "OrderedReady"), members).await;
    cluster
        .wait_for::<StatefulSet>("web", "2 ready again", |s| ready_replicas(s) == 2)
        .await;
    let extra = children(&[cluster
        .api::<Pod>()
        .get("web-extra")
        .await
        .expect("web-extra")]);
    assert_eq!(
        extra["web-extra"],
        (
            lookalike.metadata.uid.clone().expect("a uid"),
            String::new()
        ),
        "a pod named as no ordinal is not adopted"
    );
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_rolling_update_stops_at_the_partition() {
    let cluster = set_cluster().await;
    let before = create_ready(&cluster, web(3, "OrderedReady"), 3).await;
    let old = before
        .status
        .and_then(|s| s.update_revision)
        .expect("revision");

    let sets = cluster.api::<StatefulSet>();
    let update = json!({"spec": {
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
        "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}]}},
    }});
    merge_patch(&sets, "web", update).await.expect("update");
    let partial = cluster
        .wait_for::<StatefulSet>("web", "two updated and ready", |s| {
            let status = s.status.clone().unwrap_or_default();
            status.updated_replicas == Some(2) && status.ready_replicas == Some(3)
        })
        .await;
    let status = partial.status.expect("status");
    let new = status.update_revision.clone().expect("update revision");
    assert_ne!(new, old);
    assert_eq!(
        status.current_revision.as_ref(),
        Some(&old),
        "not done below the partition"
    );
    let revisions: Vec<String> = cluster
        .pods(SELECTOR)
        .await
        .iter()
        .map(pod_revision)
        .collect();
    assert_eq!(revisions, [old.clone(), new.clone(), new.clone()]);

    let finish = json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}});
    merge_patch(&sets, "web", finish)
        .await
        .expect("partition 0");
    let done = cluster
        .wait_for::<StatefulSet>("web", "all updated", |s| {
            let status = s.status.clone().unwrap_or_default();
            status.updated_replicas == Some(3) && status.ready_replicas == Some(3)
        })
        .await;
    assert_eq!(
        done.status.and_then(|s| s.current_revision),
        Some(new.clone())
    );
    let pods = cluster.pods(SELECTOR).await;
    assert!(pods.iter().all(|p| pod_revision(p) == new));
    let image = pods[0].spec.as_ref().map(|s| s.containers[0].image.clone());
    assert_eq!(image, Some(Some("nginx:1.28".to_string())));

    let revisions: Api<ControllerRevision> = cluster.api();
    let names = |list: Vec<ControllerRevision>| -> Vec<String> {
        list.into_iter().filter_map(|r| r.metadata.name).collect()
    };
    let kept = names(
        revisions
            .list(&ListParams::default())
            .await
            .expect("list")
            .items,
    );
    assert_eq!(
        kept.len(),
        2,
        "both templates are kept by default: {kept:?}"
    );
    merge_patch(&sets, "web", json!({"spec": {"revisionHistoryLimit": 0}}))
        .await
        .expect("limit");
    eventually("the old revision pruned", LIMIT, || {
        let revisions = revisions.clone();
        let new = new.clone();
        async move {
            let left = names(revisions.list(&ListParams::default()).await.ok()?.items);
            (left == [new]).then_some(())
        }
    })
    .await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn claims_follow_the_retention_policy() {
    let cluster = set_cluster().await;
    let mut set = web(2, "Parallel");
    set["spec"]["persistentVolumeClaimRetentionPolicy"] =
        json!({"whenDeleted": "Delete", "whenScaled": "Delete"});
    create_ready(&cluster, set, 2).await;
    let claims = cluster.api::<PersistentVolumeClaim>();
    let claim_names = || {
        let claims = claims.clone();
        async move {
            let listed = claims.list(&ListParams::default()).await.ok()?;
            let mut names: Vec<String> = listed
                .items
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .collect();
            names.sort();
            Some(names)
        }
    };
    assert_eq!(
        claim_names().await.expect("claims"),
        ["data-web-0", "data-web-1"]
    );

    let sets = cluster.api::<StatefulSet>();
    merge_patch(&sets, "web", json!({"spec": {"replicas": 1}}))
        .await
        .expect("scale down");
    eventually("data-web-1 deleted with its pod", LIMIT, || async {
        (claim_names().await? == ["data-web-0"]).then_some(())
    })
    .await;

    sets.delete("web", &Default::default())
        .await
        .expect("delete the set");
    eventually("data-web-0 deleted with the set", LIMIT, || async {
        claim_names().await?.is_empty().then_some(())
    })
    .await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_pod_is_recreated_under_its_name() {
    let cluster = set_cluster().await;
    create_json::<StatefulSet>(&cluster.api(), web(1, "OrderedReady")).await;
    let pods = cluster.api::<Pod>();
    let first = eventually("web-0 running", LIMIT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("web-0").await.ok()?;
            (phase(&pod) == "Running").then_some(pod.metadata.uid)
        }
    })
    .await;
    // What a node that fails the pod (an eviction, a shutdown) reports: a pod whose
    // containers restart in place never fails.
    let failed = json!({"status": {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False"}]}});
    steady_test_support::merge_patch_subresource::<Pod, Pod>(&pods, "status", "web-0", failed)
        .await
        .expect("fail web-0");
    eventually("web-0 recreated", LIMIT, || {
        let pods = pods.clone();
        let first = first.clone();
        async move {
            let pod = pods.get("web-0").await.ok()?;
            (pod.metadata.uid != first).then_some(())
        }
    })
    .await;
    cluster.stop().await;
}

/// An ordinal the API refuses (past the namespace's pod quota) is reported as kube's
/// StatefulSet controller reports it, and created once the quota allows.
#[tokio::test(start_paused = true)]
async fn an_ordinal_past_the_quota_is_reported_and_created_once_allowed() {
    let cluster = set_cluster().await;
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> =
        Api::namespaced(cluster.client.clone(), NS);
    create_json(
        &quotas,
        json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "1"}}}),
    )
    .await;
    let sets: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), NS);
    create_json(&sets, web(2, "Parallel")).await;
    let failed = common::event_with_reason(&cluster.client, "FailedCreate").await;
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    let message = failed.message.unwrap_or_default();
    assert!(
        message.starts_with("create Pod web-") && message.contains(" in StatefulSet web failed error: pods \"web-")
            && message.ends_with("is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1"),
        "{message}"
    );
    merge_patch(&quotas, "pods", json!({"spec": {"hard": {"pods": "2"}}}))
        .await
        .expect("quota raised");
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), NS);
    eventually("both ordinals", LIMIT, || async {
        let listed = pods
            .list(&ListParams::default().labels(SELECTOR))
            .await
            .ok()?;
        (listed.items.len() == 2).then_some(())
    })
    .await;
    cluster.stop().await;
}
