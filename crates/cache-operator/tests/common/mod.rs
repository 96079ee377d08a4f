//! A world for the operator's tests: steady's in-process API server with the simulated
//! node (pods really become Running and Ready), the Cache CRD installed, and the operator
//! running on a paused tokio clock.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{TimeZone, Utc};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use steady_cache_operator::resources::{CACHE_LABEL, hash_of, is_ready, is_terminating};
use steady_cache_operator::{Cache, OperatorContext, crd};
use steady_runtime::backoff::BackoffPolicy;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const NS: &str = "default";

pub struct World {
    pub server: steady_apiserver::ApiServer,
    pub client: Client,
}

pub async fn world() -> World {
    let config = steady_apiserver::Config {
        seed: Some(1),
        ..Default::default()
    };
    let server = steady_apiserver::ApiServer::in_memory(config)
        .await
        .expect("server");
    let client = server.client();
    // The node's clock advances with the paused clock, so its 40 s heartbeat would
    // move the store during the fixed-point checks, which count every write as the
    // operator's: these tests' node reports its status once, at registration.
    let nodes = steady_cluster::node::NodeConfig {
        seed: Some(1),
        heartbeat_interval: std::time::Duration::from_secs(24 * 3600),
        ..Default::default()
    };
    steady_cluster::node::spawn(client.clone(), nodes);
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd())
        .await
        .expect("install the CRD");
    World { server, client }
}

pub fn config() -> steady_runtime::Config {
    steady_runtime::Config {
        name: "cache".into(),
        concurrency: 2,
        resync_period: Some(Duration::from_secs(10)),
        resync_jitter: 0.1,
        backoff: BackoffPolicy {
            jitter: 0.0,
            ..BackoffPolicy::default()
        },
        seed: Some(3),
        ..steady_runtime::Config::default()
    }
}

/// A running operator: its context (write counter), its reconcile count and a stop handle.
pub struct Operator {
    pub data: Arc<OperatorContext>,
    pub reconciles: Arc<AtomicU64>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), steady_runtime::Error>>>,
}

impl Operator {
    pub fn writes(&self) -> u64 {
        self.data.writes()
    }

    pub fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::SeqCst)
    }

    /// Stop it (as a clean shutdown) and wait until it has stopped.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            handle.await.expect("joined").expect("clean stop");
        }
    }
}

pub fn start_operator(client: &Client) -> Operator {
    start_operator_with(client, config())
}

/// [`start_operator`] with other controller settings.
pub fn start_operator_with(client: &Client, config: steady_runtime::Config) -> Operator {
    let clock: steady_cache_operator::Clock = Arc::new(|| {
        Utc.timestamp_opt(1_700_000_000, 0)
            .single()
            .unwrap_or_default()
    });
    let reconciles = Arc::new(AtomicU64::new(0));
    let counter = reconciles.clone();
    let (controller, data) = steady_cache_operator::controller(client.clone(), config, clock);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(controller.run(
        move |cache, ctx| {
            counter.fetch_add(1, Ordering::SeqCst);
            steady_cache_operator::reconcile(cache, ctx)
        },
        data.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    Operator {
        data,
        reconciles,
        stop: Some(stop_tx),
        handle: Some(handle),
    }
}

pub fn caches(client: &Client) -> Api<Cache> {
    Api::namespaced(client.clone(), NS)
}

pub fn pods_api(client: &Client) -> Api<Pod> {
    Api::namespaced(client.clone(), NS)
}

pub fn services(client: &Client) -> Api<Service> {
    Api::namespaced(client.clone(), NS)
}

/// Cache `name` in [`NS`] with `spec` as the user writes it (not yet sent).
pub fn cache_object(name: &str, spec: Value) -> Cache {
    serde_json::from_value(json!({
        "apiVersion": "steady.dev/v1alpha1",
        "kind": "Cache",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .expect("a Cache")
}

pub async fn create_cache(client: &Client, name: &str, spec: Value) -> Cache {
    caches(client)
        .create(&PostParams::default(), &cache_object(name, spec))
        .await
        .expect("create the Cache")
}

/// The pods of Cache `name`, sorted by name.
pub async fn pods_of(client: &Client, name: &str) -> Vec<Pod> {
    let params = ListParams::default().labels(&format!("{CACHE_LABEL}={name}"));
    let mut pods = pods_api(client)
        .list(&params)
        .await
        .expect("list pods")
        .items;
    pods.sort_by_key(|p| p.name_any());
    pods
}

pub fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter().map(|p| p.name_any()).collect()
}

/// Pods that serve: Ready and not being deleted.
pub fn serving(pods: &[Pod]) -> usize {
    pods.iter()
        .filter(|p| is_ready(p) && !is_terminating(p))
        .count()
}

/// The status (`True`, `False`, `Unknown`) of the condition `type_`, if reported.
pub fn condition_status<'a>(cache: &'a Cache, type_: &str) -> Option<&'a str> {
    condition(cache, type_).map(|c| c.status.as_str())
}

pub fn condition<'a>(
    cache: &'a Cache,
    type_: &str,
) -> Option<&'a steady_runtime::conditions::Condition> {
    cache
        .status
        .as_ref()
        .and_then(|s| steady_runtime::conditions::find(&s.conditions, type_))
}

/// The Cache has converged: exactly `<name>-0..replicas` exist, Ready, with the current
/// template; status says so for the current generation.
pub async fn converged(client: &Client, name: &str) -> Option<Cache> {
    let cache = caches(client).get_opt(name).await.ok()??;
    let replicas = cache.spec.replicas;
    let hash = steady_cache_operator::resources::template_hash(&cache.spec);
    let pods = pods_of(client, name).await;
    let want: Vec<String> = (0..replicas).map(|o| format!("{name}-{o}")).collect();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    if names(&pods) != want_sorted {
        return None;
    }
    if !pods
        .iter()
        .all(|p| is_ready(p) && !is_terminating(p) && hash_of(p) == Some(hash.as_str()))
    {
        return None;
    }
    let status = cache.status.as_ref()?;
    let ready = condition(&cache, "Ready")?;
    let progressing = condition(&cache, "Progressing")?;
    (status.ready_replicas == replicas
        && status.replicas == replicas
        && status.observed_generation == cache.metadata.generation
        && ready.status == "True"
        && progressing.status == "False")
        .then_some(cache)
}

#[allow(unused_imports)] // not every suite patches
pub use steady_test_support::{eventually, merge_patch, merge_patch_subresource};

pub async fn wait_converged(client: &Client, name: &str) -> Cache {
    eventually(
        &format!("Cache {name} to converge"),
        Duration::from_secs(60),
        || converged(client, name),
    )
    .await
}
