//! The Deployment and ReplicaSet controllers against steady's in-process API server with
//! its simulated node (pods really become Running and Ready) and garbage collector, on a
//! paused tokio clock.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::node_server;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use steady_cluster::deployment::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, REVISION_ANNOTATION,
};
use steady_cluster::pod_template::{TEMPLATE_HASH_LABEL, is_ready};
use steady_test_support::pods::follow_pods;
use steady_test_support::{create_json, eventually, get_existing, merge_patch};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const NS: &str = "default";
const LIMIT: Duration = Duration::from_secs(60);

struct Cluster {
    client: Client,
    _server: steady_apiserver::ApiServer,
    stop: Option<oneshot::Sender<()>>,
    controllers: Option<JoinHandle<Result<(), steady_cluster::Stopped>>>,
}

impl Cluster {
    async fn start() -> Cluster {
        let server = node_server().await;
        let client = server.client();
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = steady_runtime::Config {
            concurrency: 2,
            seed: Some(7),
            ..steady_runtime::Config::default()
        };
        let setup = steady_cluster::Setup {
            client: client.clone(),
            config: runtime,
            clock: steady_cluster::clock::starting_now(),
        };
        let controllers = tokio::spawn(steady_cluster::run_with(setup, async move {
            let _ = stopped.await;
        }));
        Cluster {
            client,
            _server: server,
            stop: Some(stop),
            controllers: Some(controllers),
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(running) = self.controllers.take() {
            running.await.expect("joined").expect("a clean stop");
        }
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn replica_sets(&self) -> Api<ReplicaSet> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Create a ReplicaSet `name` of 2 redis pods labelled `app: <name>`, with `extra`
    /// fields in its spec.
    async fn create_replica_set(&self, name: &str, extra: Value) -> ReplicaSet {
        let mut body = json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "redis", "image": "redis"}]},
                },
            },
        });
        if let (Some(spec), Value::Object(extra)) = (body["spec"].as_object_mut(), extra) {
            spec.extend(extra);
        }
        create_json(&self.replica_sets(), body).await
    }

    async fn create_deployment(&self, name: &str, replicas: i32, spec: Value) -> Deployment {
        create_json(&self.deployments(), deployment(name, replicas, spec)).await
    }

    async fn set_image(&self, name: &str, image: &str) {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": image}]}}}});
        merge_patch(&self.deployments(), name, patch)
            .await
            .expect("set the image");
    }

    /// A cluster with the Deployment `web` of `replicas` nginx:1.26 pods, rolled out.
    async fn with_web(replicas: i32) -> (Cluster, Deployment) {
        Cluster::with_rolled_out("web", replicas, json!({})).await
    }

    /// A cluster with the Deployment `name` of `replicas` nginx:1.26 pods and `spec`
    /// merged into its spec, rolled out.
    async fn with_rolled_out(name: &str, replicas: i32, spec: Value) -> (Cluster, Deployment) {
        let cluster = Cluster::start().await;
        cluster.create_deployment(name, replicas, spec).await;
        let deployment = cluster.rolled_out(name, "nginx:1.26").await;
        (cluster, deployment)
    }

    /// The Deployment once its rollout is complete (what `kubectl rollout status` waits
    /// for), with every pod Ready on `image`.
    async fn rolled_out(&self, name: &str, image: &str) -> Deployment {
        eventually(&format!("{name} rolled out on {image}"), LIMIT, || async {
            let d = self.deployments().get(name).await.ok()?;
            let pods = self.active_pods().await;
            let replicas = d.spec.as_ref()?.replicas?;
            let on_image = pods
                .iter()
                .filter(|p| is_ready(p) && image_of(p) == image)
                .count();
            (rollout_complete(&d)
                && on_image == usize::try_from(replicas).ok()?
                && pods.len() == on_image)
                .then_some(d)
        })
        .await
    }

    /// Events as `Kind/name reason message`.
    async fn events(&self) -> Vec<String> {
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client.clone(), NS);
        events
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .iter()
            .map(|e| {
                let about = &e.involved_object;
                format!(
                    "{}/{} {} {}",
                    about.kind.as_deref().unwrap_or(""),
                    about.name.as_deref().unwrap_or(""),
                    e.reason.as_deref().unwrap_or(""),
                    e.message.as_deref().unwrap_or("")
                )
            })
            .collect()
    }

    /// Pods not being deleted.
    async fn active_pods(&self) -> Vec<Pod> {
        steady_test_support::pods::active_pods(&self.pods()).await
    }

    async fn scale(&self, name: &str, replicas: i32) {
        merge_patch(
            &self.deployments(),
            name,
            json!({"spec": {"replicas": replicas}}),
        )
        .await
        .expect("scale");
    }

    /// The Deployment's ReplicaSets (by revision) once they are scaled to `sizes` and
    /// still are a simulated minute later.
    async fn settled_sizes(&self, deployment: &Deployment, sizes: &[i32]) -> Vec<ReplicaSet> {
        let sized = || async {
            let sets = self.replica_sets_of(deployment).await;
            let now: Vec<i32> = sets
                .iter()
                .map(|rs| rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))
                .collect();
            (now == sizes).then_some(sets).ok_or(now)
        };
        eventually(&format!("replica sets of {sizes:?}"), LIMIT, || async {
            sized().await.ok()
        })
        .await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        match sized().await {
            Ok(sets) => sets,
            Err(now) => panic!("scaled to {sizes:?}, then moved to {now:?}"),
        }
    }

    async fn replica_sets_of(&self, deployment: &Deployment) -> Vec<ReplicaSet> {
        let uid = deployment.uid().expect("a uid");
        let mut sets: Vec<ReplicaSet> = self
            .replica_sets()
            .list(&ListParams::default())
            .await
            .expect("list replica sets")
            .items
            .into_iter()
            .filter(|rs| rs.owner_references().iter().any(|r| r.uid == uid))
            .collect();
        sets.sort_by_key(revision);
        sets
    }
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (k, v) in from {
                merge(into.entry(k).or_insert(Value::Null), v);
            }
        }
        (into, from) => *into = from,
    }
}

fn image_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or("")
}

/// A Deployment's or ReplicaSet's revision annotation (0 when it has none).
fn revision(object: &impl ResourceExt) -> i64 {
    object
        .annotations()
        .get(REVISION_ANNOTATION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// kubectl's rollout-status rule: observed, every replica updated, none old, all
/// available.
fn rollout_complete(d: &Deployment) -> bool {
    let (Some(spec), Some(status)) = (d.spec.as_ref(), d.status.as_ref()) else {
        return false;
    };
    let replicas = spec.replicas.unwrap_or(1);
    status.observed_generation >= d.metadata.generation
        && status.updated_replicas.unwrap_or(0) == replicas
        && status.replicas.unwrap_or(0) == replicas
        && status.available_replicas.unwrap_or(0) == replicas
}

fn condition(d: &Deployment, type_: &str) -> (String, String) {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
        .unwrap_or_default()
}

/// Each `(type, status, reason)` of `expected` is a condition of `d`.
fn assert_conditions(d: &Deployment, expected: &[(&str, &str, &str)]) {
    for &(type_, status, reason) in expected {
        let found = condition(d, type_);
        assert_eq!(found, (status.into(), reason.into()), "condition {type_}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_deployment_becomes_available_through_its_replica_set() {
    let (cluster, web) = Cluster::with_web(3).await;

    assert_conditions(
        &web,
        &[
            ("Available", "True", "MinimumReplicasAvailable"),
            ("Progressing", "True", "NewReplicaSetAvailable"),
        ],
    );
    let status = web.status.clone().expect("a status");
    assert_eq!(status.ready_replicas, Some(3));
    assert_eq!(status.unavailable_replicas, None, "zero counts are omitted");
    assert_eq!(revision(&web), 1);

    let sets = cluster.replica_sets_of(&web).await;
    assert_eq!(sets.len(), 1, "{sets:?}");
    let rs = &sets[0];
    let hash = rs
        .labels()
        .get(TEMPLATE_HASH_LABEL)
        .expect("the hash label")
        .clone();
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert_eq!(revision(rs), 1);
    let rs_status = rs.status.clone().expect("a status");
    assert_eq!(
        (
            rs_status.replicas,
            rs_status.ready_replicas,
            rs_status.available_replicas,
            rs_status.fully_labeled_replicas
        ),
        (3, Some(3), Some(3), Some(3))
    );
    assert_eq!(rs_status.observed_generation, rs.metadata.generation);
    let owner = &rs.owner_references()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("Deployment", Some(true), Some(true))
    );

    let events = cluster.events().await;
    let scaled = format!("Deployment/web ScalingReplicaSet Scaled up replica set web-{hash} to 3");
    assert!(events.contains(&scaled), "{events:?}");
    let created = events
        .iter()
        .filter(|e| {
            e.starts_with(&format!(
                "ReplicaSet/web-{hash} SuccessfulCreate Created pod: web-{hash}-"
            ))
        })
        .count();
    assert_eq!(created, 3, "{events:?}");

    let pods = cluster.active_pods().await;
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        assert!(
            pod.name_any().starts_with(&format!("web-{hash}-")),
            "{}",
            pod.name_any()
        );
        assert_eq!(pod.labels().get(TEMPLATE_HASH_LABEL), Some(&hash));
        let owner = &pod.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("ReplicaSet", rs.name_any().as_str(), Some(true))
        );
    }

    // The fixed point: a resync of everything (every 600 s) writes nothing.
    let versions = |d: &Deployment, sets: &[ReplicaSet]| {
        let mut all = vec![d.resource_version()];
        all.extend(sets.iter().map(ResourceExt::resource_version));
        all
    };
    let before = versions(&web, &sets);
    tokio::time::sleep(Duration::from_secs(700)).await;
    let web = get_existing(&cluster.deployments(), "web").await;
    assert_eq!(versions(&web, &cluster.replica_sets_of(&web).await), before);
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_rolling_update_keeps_within_surge_and_unavailability_and_undo_restores() {
    // 4 replicas at the default 25 %: at most 5 pods, at least 3 Ready.
    let (cluster, _) = Cluster::with_web(4).await;
    let (extremes, watching) = follow_pods(Api::namespaced(cluster.client.clone(), NS));
    eventually("the pod watch synced", LIMIT, || async {
        (extremes.lock().map(|e| e.events).unwrap_or(0) > 0).then_some(())
    })
    .await;

    cluster.set_image("web", "nginx:1.27").await;
    let web = cluster.rolled_out("web", "nginx:1.27").await;
    let seen = *extremes.lock().expect("extremes");
    assert!(
        seen.fewest_ready >= Some(3),
        "fell below replicas - maxUnavailable: {seen:?}"
    );
    assert!(
        seen.most_pods <= 5,
        "went past replicas + maxSurge: {seen:?}"
    );
    assert!(
        seen.most_pods == 5,
        "the rollout never surged, so this test shows nothing: {seen:?}"
    );
    assert_eq!(revision(&web), 2);
    let sets = cluster.replica_sets_of(&web).await;
    let summary: Vec<(i64, Option<i32>)> = sets
        .iter()
        .map(|rs| (revision(rs), rs.spec.as_ref().and_then(|s| s.replicas)))
        .collect();
    assert_eq!(summary, vec![(1, Some(0)), (2, Some(4))]);

    // What `kubectl rollout undo` does: the previous revision's template, minus its hash.
    let mut template = sets[0]
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .expect("a template");
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(TEMPLATE_HASH_LABEL);
    }
    merge_patch(
        &cluster.deployments(),
        "web",
        json!({"spec": {"template": template}}),
    )
    .await
    .expect("roll back");
    let web = cluster.rolled_out("web", "nginx:1.26").await;
    let seen = *extremes.lock().expect("extremes");
    assert!(
        seen.fewest_ready >= Some(3) && seen.most_pods <= 5,
        "{seen:?}"
    );
    let first = sets[0].name_any();
    let sets = cluster.replica_sets_of(&web).await;
    let names: Vec<(String, i64)> = sets
        .iter()
        .map(|rs| (rs.name_any(), revision(rs)))
        .collect();
    assert_eq!(names.len(), 2, "the old ReplicaSet is reused: {names:?}");
    assert_eq!(
        names[1],
        (first, 3),
        "revision 1's ReplicaSet is new again as 3"
    );
    assert_eq!(revision(&web), 3);
    watching.abort();
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn recreate_removes_every_old_pod_before_creating_new_ones() {
    let recreate = json!({"strategy": {"type": "Recreate", "rollingUpdate": null}});
    let (cluster, _) = Cluster::with_rolled_out("db", 3, recreate).await;
    let mixed = Arc::new(Mutex::new(false));
    let flag = mixed.clone();
    let api: Api<Pod> = cluster.pods();
    let watching = tokio::spawn(async move {
        let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
        let stream = watcher::watcher(api, watcher::Config::default());
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Apply(pod) | Event::InitApply(pod)) => {
                    pods.insert(pod.name_any(), pod);
                }
                Ok(Event::Delete(pod)) => {
                    pods.remove(&pod.name_any());
                }
                _ => continue,
            }
            // Terminating pods count: their containers may still run.
            let images: std::collections::BTreeSet<&str> = pods.values().map(image_of).collect();
            if images.len() > 1 {
                *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
            }
        }
    });
    cluster.set_image("db", "nginx:1.27").await;
    let db = cluster.rolled_out("db", "nginx:1.27").await;
    assert!(
        !*mixed.lock().expect("flag"),
        "old and new pods ran at once"
    );
    // Recreate never surges: kube's `MaxSurge` is 0 for it.
    let sets = cluster.replica_sets_of(&db).await;
    let max_replicas: Vec<Option<&String>> = sets
        .iter()
        .map(|rs| rs.annotations().get(MAX_REPLICAS_ANNOTATION))
        .collect();
    assert_eq!(max_replicas, [Some(&"3".to_string()); 2]);
    watching.abort();
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn history_is_kept_to_the_revision_history_limit() {
    let (cluster, _) = Cluster::with_rolled_out("web", 2, json!({"revisionHistoryLimit": 1})).await;
    for image in ["nginx:1.27", "nginx:1.28"] {
        cluster.set_image("web", image).await;
        cluster.rolled_out("web", image).await;
    }
    let web = get_existing(&cluster.deployments(), "web").await;
    let sets = eventually("the oldest revision deleted", LIMIT, || async {
        let sets = cluster.replica_sets_of(&web).await;
        (sets.len() == 2).then_some(sets)
    })
    .await;
    let revisions: Vec<i64> = sets.iter().map(revision).collect();
    assert_eq!(revisions, vec![2, 3]);
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn deleting_a_deployment_removes_its_replica_sets_and_pods() {
    let (cluster, _) = Cluster::with_web(2).await;
    cluster
        .deployments()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("replica sets and pods gone", LIMIT, || async {
        let sets = cluster
            .replica_sets()
            .list(&ListParams::default())
            .await
            .ok()?;
        let pods = cluster.pods().list(&ListParams::default()).await.ok()?;
        (sets.items.is_empty() && pods.items.is_empty()).then_some(())
    })
    .await;
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_replica_set_replaces_lost_pods_and_scales_down() {
    let cluster = Cluster::start().await;
    let rs = cluster.create_replica_set("cache", json!({})).await;
    let ready = |n: i32| {
        let api = cluster.replica_sets();
        async move {
            eventually(&format!("{n} ready"), LIMIT, || async {
                let rs = api.get("cache").await.ok()?;
                let status = rs.status.clone()?;
                (status.replicas == n
                    && status.ready_replicas.unwrap_or(0) == n
                    && status.observed_generation >= rs.metadata.generation)
                    .then_some(rs)
            })
            .await
        }
    };
    ready(2).await;
    let lost = cluster.active_pods().await[0].name_any();
    cluster
        .pods()
        .delete(&lost, &DeleteParams::default())
        .await
        .expect("delete a pod");
    eventually("a replacement", LIMIT, || async {
        let pods = cluster.active_pods().await;
        (pods.len() == 2 && pods.iter().all(|p| p.name_any() != lost && is_ready(p))).then_some(())
    })
    .await;
    merge_patch(
        &cluster.replica_sets(),
        "cache",
        json!({"spec": {"replicas": 1}}),
    )
    .await
    .expect("scale down");
    ready(1).await;
    assert_eq!(cluster.active_pods().await.len(), 1);
    assert!(rs.uid().is_some());
    cluster.stop().await;
}

/// On the paused clock: the deadline is judged on the cluster's clock, which advances
/// with tokio's, so a stuck rollout is reported once its simulated deadline has passed.
#[tokio::test(start_paused = true)]
async fn a_rollout_that_stops_progressing_passes_its_deadline() {
    let cluster = Cluster::start().await;
    let spec = json!({
        "progressDeadlineSeconds": 60,
        "template": {"metadata": {"annotations": {"steady.dev/simulate": "never-ready"}}},
    });
    let started = tokio::time::Instant::now();
    cluster.create_deployment("stuck", 1, spec).await;
    let stuck = eventually("the deadline passed", Duration::from_secs(120), || async {
        let d = cluster.deployments().get("stuck").await.ok()?;
        (condition(&d, "Progressing").1 == "ProgressDeadlineExceeded").then_some(d)
    })
    .await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(59) && waited < Duration::from_secs(63),
        "reported after {waited:?} of simulated time"
    );
    assert_conditions(
        &stuck,
        &[
            ("Progressing", "False", "ProgressDeadlineExceeded"),
            ("Available", "False", "MinimumReplicasUnavailable"),
        ],
    );
    cluster.stop().await;
}

/// `kubectl rollout pause` stops the deadline's clock, as kube's controller does: a
/// paused rollout shows Progressing Unknown (`DeploymentPaused`) and never times out, and
/// once resumed (`DeploymentResumed`) it has its whole deadline again.
#[tokio::test(start_paused = true)]
async fn a_paused_rollout_does_not_pass_its_deadline_and_gets_it_whole_on_resume() {
    let cluster = Cluster::start().await;
    let spec = json!({
        "progressDeadlineSeconds": 60,
        "template": {"metadata": {"annotations": {"steady.dev/simulate": "never-ready"}}},
    });
    cluster.create_deployment("held", 1, spec).await;
    let progressing = |d: &Deployment| condition(d, "Progressing").1;
    let deployments = cluster.deployments();
    let set_paused = |paused: bool| {
        let deployments = deployments.clone();
        async move {
            let patch = json!({"spec": {"paused": paused}});
            merge_patch(&deployments, "held", patch)
                .await
                .expect("pause or resume");
        }
    };
    tokio::time::sleep(Duration::from_secs(30)).await;
    set_paused(true).await;
    passing(&cluster.deployments(), "held", "paused", &|d| {
        progressing(d) == "DeploymentPaused"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    let paused = cluster.deployments().get("held").await.expect("held");
    assert_conditions(&paused, &[("Progressing", "Unknown", "DeploymentPaused")]);

    set_paused(false).await;
    let resumed_at = tokio::time::Instant::now();
    passing(&cluster.deployments(), "held", "resumed", &|d| {
        progressing(d) == "DeploymentResumed"
    })
    .await;
    eventually("timed out", Duration::from_secs(120), || async {
        let d = cluster.deployments().get("held").await.ok()?;
        (progressing(&d) == "ProgressDeadlineExceeded").then_some(())
    })
    .await;
    let waited = resumed_at.elapsed();
    assert!(
        waited >= Duration::from_secs(59) && waited < Duration::from_secs(63),
        "timed out {waited:?} after the resume"
    );
    cluster.stop().await;
}

/// kube's e2e "deployment should support proportional scaling": scaling a Deployment
/// whose rollout is under way grows its old and new ReplicaSets in proportion to their
/// sizes, neither hastening nor holding back the rollout. With 10 replicas, maxSurge 3 and
/// maxUnavailable 2, a rollout whose new pods never become Ready stops at 8 old and 5 new
/// pods; scaled to 30, the old ReplicaSet has 20 (8 + 20 × 8/13, rounded) and the new 13.
#[tokio::test(start_paused = true)]
async fn scaling_a_rollout_under_way_scales_old_and_new_in_proportion() {
    let strategy = json!({"strategy": {"rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}});
    let (cluster, web) = Cluster::with_rolled_out("web", 10, strategy).await;
    let stuck = json!({"spec": {"template": {
        "metadata": {"annotations": {"steady.dev/simulate": "never-ready"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:404"}]},
    }}});
    merge_patch(&cluster.deployments(), "web", stuck)
        .await
        .expect("a rollout that cannot finish");
    cluster.settled_sizes(&web, &[8, 5]).await;

    cluster.scale("web", 30).await;
    let sets = cluster.settled_sizes(&web, &[20, 13]).await;
    for rs in &sets {
        let annotation = |key: &str| rs.annotations().get(key).cloned();
        assert_eq!(
            (
                annotation(DESIRED_REPLICAS_ANNOTATION),
                annotation(MAX_REPLICAS_ANNOTATION)
            ),
            (Some("30".into()), Some("33".into())),
            "{}",
            rs.name_any()
        );
    }
    let events = cluster.events().await;
    let [old, new] = [&sets[0], &sets[1]].map(|rs| rs.name_any());
    for scaled in [
        format!("Deployment/web ScalingReplicaSet Scaled up replica set {old} to 20 from 8"),
        format!("Deployment/web ScalingReplicaSet Scaled up replica set {new} to 13 from 5"),
    ] {
        assert!(events.contains(&scaled), "{scaled} not in {events:?}");
    }

    // And back down, oldest first among equals: 33 pods to 13.
    cluster.scale("web", 10).await;
    cluster.settled_sizes(&web, &[8, 5]).await;
    cluster.stop().await;
}

/// `kubectl rollout pause`, a new image and `kubectl scale`: kube's controller still
/// scales a paused Deployment (the ReplicaSet it runs), and rolls out nothing until it is
/// resumed.
#[tokio::test(start_paused = true)]
async fn a_paused_deployment_scales_and_rolls_out_only_when_resumed() {
    let (cluster, web) = Cluster::with_web(2).await;
    let deployments = cluster.deployments();
    let pause =
        |paused: bool| merge_patch(&deployments, "web", json!({"spec": {"paused": paused}}));
    pause(true).await.expect("pause");
    cluster.set_image("web", "nginx:1.27").await;
    cluster.scale("web", 4).await;
    let sets = cluster.settled_sizes(&web, &[4]).await;
    assert_eq!(
        sets[0].annotations().get(DESIRED_REPLICAS_ANNOTATION),
        Some(&"4".to_string())
    );
    let pods = eventually("4 pods Ready", LIMIT, || async {
        let pods = cluster.active_pods().await;
        (pods.len() == 4 && pods.iter().all(is_ready)).then_some(pods)
    })
    .await;
    assert!(
        pods.iter().all(|p| image_of(p) == "nginx:1.26"),
        "a paused Deployment rolled out"
    );
    let paused = passing(&cluster.deployments(), "web", "status of 4", &|d| {
        d.status.as_ref().and_then(|s| s.available_replicas) == Some(4)
    })
    .await;
    assert_conditions(&paused, &[("Progressing", "Unknown", "DeploymentPaused")]);

    pause(false).await.expect("resume");
    let resumed = cluster.rolled_out("web", "nginx:1.27").await;
    assert_eq!(revision(&resumed), 2);
    cluster.stop().await;
}

/// A Deployment being deleted (held here by a finalizer) only reports: kube's controller
/// syncs its status and nothing else, so its ReplicaSet scaled by hand stays as scaled.
#[tokio::test(start_paused = true)]
async fn a_deployment_being_deleted_only_reports_its_status() {
    let held = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    let cluster = Cluster::start().await;
    let mut body = deployment("web", 2, json!({}));
    merge(&mut body, held);
    create_json(&cluster.deployments(), body).await;
    let web = cluster.rolled_out("web", "nginx:1.26").await;
    cluster
        .deployments()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    let rs = cluster.settled_sizes(&web, &[2]).await[0].name_any();
    merge_patch(
        &cluster.replica_sets(),
        &rs,
        json!({"spec": {"replicas": 1}}),
    )
    .await
    .expect("scale the ReplicaSet by hand");
    cluster.settled_sizes(&web, &[1]).await;
    passing(&cluster.deployments(), "web", "a status of 1", &|d| {
        d.status.as_ref().and_then(|s| s.replicas) == Some(1)
    })
    .await;
    merge_patch(
        &cluster.deployments(),
        "web",
        json!({"metadata": {"finalizers": null}}),
    )
    .await
    .expect("release");
    cluster.stop().await;
}

/// How long 1,000 replicas take to come up on the in-memory server, on the real clock:
/// a measurement, run by hand (`cargo test -p steady-cluster --test workloads --
/// --ignored --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn a_thousand_replicas_measurement() {
    let cluster = Cluster::start().await;
    let started = std::time::Instant::now();
    cluster.create_deployment("big", 1000, json!({})).await;
    let created = eventually("1000 pods created", Duration::from_secs(300), || async {
        let rs = cluster
            .replica_sets()
            .list(&ListParams::default())
            .await
            .ok()?;
        (rs.items.first()?.status.as_ref()?.replicas == 1000).then(|| started.elapsed())
    })
    .await;
    cluster.rolled_out("big", "nginx:1.26").await;
    println!(
        "1000 replicas: pods created and counted after {created:?}, rolled out after {:?}",
        started.elapsed()
    );
    cluster.stop().await;
}

/// Simulated time from `name` (of kind `K`) passing `ready` to it passing `available`,
/// checking that it is not available as soon as it is ready.
async fn ready_to_available<K>(
    api: &Api<K>,
    name: &str,
    ready: impl Fn(&K) -> bool,
    available: impl Fn(&K) -> bool,
) -> Duration
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let at_ready = passing(api, name, "ready", &ready).await;
    let since = tokio::time::Instant::now();
    assert!(
        !available(&at_ready),
        "available as soon as ready: {at_ready:?}"
    );
    passing(api, name, "available", &available).await;
    since.elapsed()
}

/// `name` once it passes `check`.
async fn passing<K>(api: &Api<K>, name: &str, what: &str, check: &dyn Fn(&K) -> bool) -> K
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(what, LIMIT, || async {
        let object = api.get(name).await.ok()?;
        check(&object).then_some(object)
    })
    .await
}

/// The Deployment `name` of `replicas` nginx:1.26 pods labelled `app: <name>`, with
/// `spec` merged into its spec.
fn deployment(name: &str, replicas: i32, spec: Value) -> Value {
    let mut body = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.26"}]},
            },
        },
    });
    merge(&mut body["spec"], spec);
    body
}

/// Ready times are stamped to the second: availability comes up to a second early.
fn assert_about_min_ready_seconds(waited: Duration) {
    assert!(
        waited >= Duration::from_secs(29) && waited <= Duration::from_secs(31),
        "available after {waited:?} ready"
    );
}

/// On the paused clock (readiness is judged on the cluster's clock): pods count as
/// available only once Ready for `minReadySeconds`, and the ReplicaSet comes back to count
/// them without any further pod event.
#[tokio::test(start_paused = true)]
async fn replicas_are_available_after_min_ready_seconds() {
    let cluster = Cluster::start().await;
    cluster
        .create_replica_set("slow", json!({"minReadySeconds": 30}))
        .await;
    let count = |rs: &ReplicaSet, field: fn(&ReplicaSetStatus) -> Option<i32>| {
        rs.status.as_ref().and_then(field)
    };
    let waited = ready_to_available(
        &cluster.replica_sets(),
        "slow",
        |rs| count(rs, |s| s.ready_replicas) == Some(2),
        |rs| count(rs, |s| s.available_replicas) == Some(2),
    )
    .await;
    assert_about_min_ready_seconds(waited);
    cluster.stop().await;
}

/// A Deployment with `minReadySeconds` becomes Available only once its pods have been
/// Ready that long on the simulated clock.
#[tokio::test(start_paused = true)]
async fn a_deployment_is_available_only_after_min_ready_seconds() {
    let cluster = Cluster::start().await;
    cluster
        .create_deployment("patient", 2, json!({"minReadySeconds": 30}))
        .await;
    let waited = ready_to_available(
        &cluster.deployments(),
        "patient",
        |d| d.status.as_ref().and_then(|s| s.ready_replicas) == Some(2),
        |d| condition(d, "Available").0 == "True",
    )
    .await;
    assert_about_min_ready_seconds(waited);
    let available = get_existing(&cluster.deployments(), "patient").await;
    assert_eq!(available.status.and_then(|s| s.available_replicas), Some(2));
    cluster.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_replica_set_adopts_matching_orphans_and_releases_pods_it_no_longer_selects() {
    let cluster = Cluster::start().await;
    let orphan: Pod = create_json(
        &cluster.pods(),
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "orphan", "namespace": NS, "labels": {"app": "cache"}},
            "spec": {"containers": [{"name": "redis", "image": "redis"}]},
        }),
    )
    .await;
    let rs = cluster.create_replica_set("cache", json!({})).await;
    let uid = rs.uid().expect("a uid");
    let controlled = |pod: &Pod| {
        pod.owner_references()
            .iter()
            .any(|r| r.controller == Some(true) && r.uid == uid)
    };
    eventually("the orphan adopted and one pod added", LIMIT, || async {
        let pods = cluster.active_pods().await;
        (pods.len() == 2 && pods.iter().all(controlled)).then_some(())
    })
    .await;
    let adopted = get_existing(&cluster.pods(), "orphan").await;
    assert_eq!(adopted.uid(), orphan.uid(), "the same pod, adopted");

    merge_patch(
        &cluster.pods(),
        "orphan",
        json!({"metadata": {"labels": {"app": "other"}}}),
    )
    .await
    .expect("relabel");
    eventually("the pod released and replaced", LIMIT, || async {
        let pods = cluster.active_pods().await;
        let released = pods.iter().find(|p| p.name_any() == "orphan")?;
        let owned = pods.iter().filter(|p| controlled(p)).count();
        (!controlled(released) && owned == 2).then_some(())
    })
    .await;
    cluster.stop().await;
}

/// A Deployment deleted with `--cascade=orphan` and applied again takes back its
/// ReplicaSet (the template is the same), as kube's controller adopts it: no new
/// ReplicaSet, no pod replaced.
#[tokio::test(start_paused = true)]
async fn a_deployment_created_again_after_an_orphaning_delete_adopts_its_replica_set() {
    let (cluster, _) = Cluster::with_web(2).await;
    let pods_before = common::children(&cluster.active_pods().await);
    let sets = || async {
        let listed = cluster.replica_sets().list(&ListParams::default()).await;
        listed.expect("list replica sets").items
    };
    common::orphan_then_recreate(
        &cluster.deployments(),
        "web",
        deployment("web", 2, json!({})),
        sets,
    )
    .await;
    cluster.rolled_out("web", "nginx:1.26").await;
    assert_eq!(common::children(&cluster.active_pods().await), pods_before);
    cluster.stop().await;
}

/// The `ReplicaFailure` condition of a Deployment's or ReplicaSet's status, as
/// (status, reason, message).
fn replica_failure(status: Option<&impl serde::Serialize>) -> Option<(String, String, String)> {
    let status = serde_json::to_value(status?).ok()?;
    let failure = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ReplicaFailure")?
        .clone();
    let text = |field: &str| failure[field].as_str().unwrap_or_default().to_string();
    Some((text("status"), text("reason"), text("message")))
}

fn deployment_failure(d: &Deployment) -> Option<(String, String, String)> {
    replica_failure(d.status.as_ref())
}

fn replica_set_failure(rs: &ReplicaSet) -> Option<(String, String, String)> {
    replica_failure(rs.status.as_ref())
}

/// A Deployment past its namespace's pod quota: the ReplicaSet reports the refused create
/// (`ReplicaFailure`, a `FailedCreate` event with the API's message) and the Deployment
/// carries the condition, as on a cluster; once the quota allows, the missing pod is
/// created and both conditions go.
#[tokio::test(start_paused = true)]
async fn a_replica_set_past_its_quota_reports_the_failure_until_the_quota_allows() {
    let cluster = Cluster::start().await;
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> =
        Api::namespaced(cluster.client.clone(), NS);
    create_json(
        &quotas,
        json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "2"}}}),
    )
    .await;
    cluster.create_deployment("web", 3, json!({})).await;

    let web = passing(&cluster.deployments(), "web", "failing", &|d| {
        deployment_failure(d).is_some()
    })
    .await;
    let (status, reason, message) = deployment_failure(&web).expect("the failure");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "FailedCreate"));
    assert!(
        message.starts_with("pods \"web-") && message.ends_with(
            "\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2"
        ),
        "{message}"
    );
    let sets = cluster.replica_sets_of(&web).await;
    let rs_failure = replica_set_failure(&sets[0]).expect("the ReplicaSet's failure");
    assert_eq!(rs_failure.1, "FailedCreate");
    let warned = common::event_with_reason(&cluster.client, "FailedCreate").await;
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
    assert!(
        warned
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("Error creating: pods \"web-")),
        "{warned:?}"
    );

    merge_patch(&quotas, "pods", json!({"spec": {"hard": {"pods": "3"}}}))
        .await
        .expect("quota raised");

    let web = passing(&cluster.deployments(), "web", "recovered", &|d| {
        deployment_failure(d).is_none()
            && d.status.as_ref().and_then(|s| s.ready_replicas) == Some(3)
    })
    .await;
    let sets = cluster.replica_sets_of(&web).await;
    assert_eq!(replica_set_failure(&sets[0]), None);
    cluster.stop().await;
}

/// kube's report of a new ReplicaSet the API refuses (here a quota of one ReplicaSet):
/// Progressing False `ReplicaSetCreateError` with the API's words, and a Warning of the
/// same reason; once the quota allows, the rollout goes on.
#[tokio::test(start_paused = true)]
async fn a_new_replica_set_the_api_refuses_is_reported_until_it_is_allowed() {
    let (cluster, _) = Cluster::with_web(1).await;
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> =
        Api::namespaced(cluster.client.clone(), NS);
    let one =
        json!({"metadata": {"name": "sets"}, "spec": {"hard": {"count/replicasets.apps": "1"}}});
    create_json(&quotas, one).await;
    eventually("the quota counts the ReplicaSet", LIMIT, || async {
        let quota = quotas.get("sets").await.ok()?;
        let used = quota.status?.used?;
        (used.get("count/replicasets.apps")?.0 == "1").then_some(())
    })
    .await;
    cluster.set_image("web", "nginx:1.27").await;

    let refused = passing(&cluster.deployments(), "web", "refused", &|d| {
        condition(d, "Progressing").1 == "ReplicaSetCreateError"
    })
    .await;
    let progressing = refused
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Progressing"))
        .expect("Progressing");
    let message = progressing.message.clone().unwrap_or_default();
    assert_eq!(progressing.status, "False");
    assert!(
        message.starts_with("Failed to create new replica set \"web-")
            && message.contains(
                "is forbidden: exceeded quota: sets, requested: count/replicasets.apps=1"
            ),
        "{message}"
    );
    let warned = common::event_with_reason(&cluster.client, "ReplicaSetCreateError").await;
    assert_eq!(
        (warned.type_.as_deref(), warned.message.as_ref()),
        (Some("Warning"), Some(&message))
    );

    quotas
        .delete("sets", &DeleteParams::default())
        .await
        .expect("quota lifted");
    cluster.rolled_out("web", "nginx:1.27").await;
    cluster.stop().await;
}

/// kube's `HasProgressDeadline`: `progressDeadlineSeconds: 2147483647` means no deadline,
/// and then no Progressing condition at all; a Deployment of no replicas creates its
/// ReplicaSet without a "Scaled up" event.
#[tokio::test(start_paused = true)]
async fn without_a_deadline_there_is_no_progressing_condition() {
    let forever = json!({"progressDeadlineSeconds": i32::MAX});
    let (cluster, web) = Cluster::with_rolled_out("web", 2, forever).await;
    let types: Vec<String> = web
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| c.type_.clone())
        .collect();
    assert_eq!(types, ["Available"]);

    let none = cluster.create_deployment("none", 0, json!({})).await;
    let sets = eventually("the ReplicaSet of none", LIMIT, || async {
        let sets = cluster.replica_sets_of(&none).await;
        (!sets.is_empty()).then_some(sets)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let scaled: Vec<String> = cluster
        .events()
        .await
        .into_iter()
        .filter(|e| e.starts_with("Deployment/none "))
        .collect();
    assert_eq!(scaled, Vec::<String>::new(), "{:?}", sets[0].name_any());
    cluster.stop().await;
}
