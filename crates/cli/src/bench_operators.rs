//! `steady bench operators`: the Cache operator on steady's runtime side by side with the
//! same reconciler written idiomatically on kube-rs's `kube::runtime::Controller`, against
//! the same embedded server, in one run. (This kube-runtime implementation exists only
//! here, in the benchmark code.)
//!
//! Scenarios so far: cold start (N Caches exist before the operator starts: time until all
//! report Ready at their generation, and the requests it took) and steady state (a window
//! after convergence: writes and GET/LIST requests, which should be zero).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action as KubeAction;
use kube::runtime::{Controller as KubeController, watcher};
use kube::{Client, ResourceExt};
use steady_apiserver::ApiServer;
use steady_apiserver::node::NodeConfig;
use steady_cache_operator::resources::{
    desired_pod, desired_service, is_ready, ordinal_of, selector, template_hash,
};
use steady_cache_operator::{Cache, OperatorContext};

/// Requests the server received, by verb.
#[derive(Clone, Default)]
struct Counts(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl Counts {
    fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

fn verb(request: &http::Request<kube::client::Body>) -> &'static str {
    let query = request.uri().query().unwrap_or("");
    let named = matches!(
        steady_apiserver::request::parse_route(request.uri().path()),
        Some(steady_apiserver::request::Route::Object(
            steady_apiserver::request::ObjectPath { name: Some(_), .. }
        ))
    );
    match *request.method() {
        http::Method::GET if query.contains("watch=true") || query.contains("watch=1") => "watch",
        http::Method::GET if named => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

/// The Router behind a counter: what the operator under test asks of the server.
#[derive(Clone)]
struct Counted {
    router: axum::Router,
    counts: Counts,
}

impl tower::Service<http::Request<kube::client::Body>> for Counted {
    type Response = http::Response<axum::body::Body>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        if let Ok(mut counts) = self.counts.0.lock() {
            *counts.entry(verb(&request)).or_default() += 1;
        }
        let router = self.router.clone();
        Box::pin(async move {
            tower::ServiceExt::oneshot(router, request.map(axum::body::Body::new)).await
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct KubeRsError(#[from] kube::Error);

/// The Cache reconciler as a kube-rs user writes it: list the owned pods by label on every
/// reconcile, create the missing ordinals, delete the extra ones, ensure the Service, patch
/// status when it differs, requeue while pods are not ready.
async fn kube_rs_reconcile(
    cache: Arc<Cache>,
    client: Arc<Client>,
) -> Result<KubeAction, KubeRsError> {
    let ns = cache.namespace().unwrap_or_default();
    let name = cache.name_any();
    let pods: Api<Pod> = Api::namespaced((*client).clone(), &ns);
    let hash = template_hash(&cache.spec);
    let owned = pods
        .list(&ListParams::default().labels(&selector(&name)))
        .await?;
    let mut existing: BTreeMap<i32, Pod> = BTreeMap::new();
    for pod in owned.items {
        if let Some(ordinal) = ordinal_of(&name, &pod.name_any()) {
            existing.insert(ordinal, pod);
        }
    }
    for ordinal in 0..cache.spec.replicas {
        if !existing.contains_key(&ordinal) {
            match pods
                .create(&PostParams::default(), &desired_pod(&cache, ordinal, &hash))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    for (ordinal, pod) in existing.iter().rev() {
        if *ordinal >= cache.spec.replicas && pod.metadata.deletion_timestamp.is_none() {
            pods.delete(&pod.name_any(), &DeleteParams::default())
                .await?;
        }
    }
    let services: Api<Service> = Api::namespaced((*client).clone(), &ns);
    if services.get_opt(&name).await?.is_none() {
        match services
            .create(&PostParams::default(), &desired_service(&cache))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let ready = existing.values().filter(|p| is_ready(p)).count() as i32;
    let replicas = existing.len().min(cache.spec.replicas.max(0) as usize) as i32;
    let status = cache.status.clone().unwrap_or_default();
    let all_ready = ready == cache.spec.replicas;
    let want_ready_condition = if all_ready { "True" } else { "False" };
    let current_ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str());
    if status.replicas != replicas
        || status.ready_replicas != ready
        || status.observed_generation != cache.metadata.generation
        || current_ready != Some(want_ready_condition)
    {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let patch = serde_json::json!({"status": {
            "replicas": replicas,
            "readyReplicas": ready,
            "observedGeneration": cache.metadata.generation,
            "selector": selector(&name),
            "conditions": [{"type": "Ready", "status": want_ready_condition, "reason": if all_ready { "AllReplicasReady" } else { "ReplicasNotReady" }, "message": "", "lastTransitionTime": now}],
        }});
        Api::<Cache>::namespaced((*client).clone(), &ns)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }
    Ok(if all_ready {
        KubeAction::await_change()
    } else {
        KubeAction::requeue(Duration::from_secs(2))
    })
}

fn kube_rs_error_policy(
    _cache: Arc<Cache>,
    _error: &KubeRsError,
    _client: Arc<Client>,
) -> KubeAction {
    KubeAction::requeue(Duration::from_secs(1))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Runtime {
    Steady,
    KubeRs,
}

impl Runtime {
    fn name(self) -> &'static str {
        match self {
            Runtime::Steady => "steady",
            Runtime::KubeRs => "kube-runtime",
        }
    }
}

struct Outcome {
    cold_start: Duration,
    cold_requests: BTreeMap<&'static str, u64>,
    steady_requests: BTreeMap<&'static str, u64>,
}

async fn all_ready(admin: &Client, caches: usize) -> anyhow::Result<bool> {
    let list = Api::<Cache>::all(admin.clone())
        .list(&ListParams::default())
        .await?;
    let ready = list
        .items
        .iter()
        .filter(|c| {
            let status = c.status.clone().unwrap_or_default();
            status.observed_generation == c.metadata.generation
                && status
                    .conditions
                    .iter()
                    .any(|k| k.type_ == "Ready" && k.status == "True")
        })
        .count();
    Ok(ready == caches)
}

async fn measure(runtime: Runtime, caches: usize, window: Duration) -> anyhow::Result<Outcome> {
    let store = steady_store::Store::in_memory(Default::default()).await?;
    let node = NodeConfig {
        pod_start_delay: Duration::from_millis(50),
        ..NodeConfig::default()
    };
    let server = ApiServer::start(
        store,
        steady_apiserver::Config {
            node: Some(node),
            ..Default::default()
        },
    )
    .await?;
    let admin = server.client();
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &steady_cache_operator::crd())
        .await?;
    let api: Api<Cache> = Api::namespaced(admin.clone(), "default");
    for i in 0..caches {
        let cache: Cache = serde_json::from_value(serde_json::json!({
            "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
            "metadata": {"name": format!("c{i:05}")}, "spec": {"replicas": 2}
        }))?;
        api.create(&PostParams::default(), &cache).await?;
    }
    let counts = Counts::default();
    let client = Client::new(
        Counted {
            router: server.router(),
            counts: counts.clone(),
        },
        "default",
    );
    let started = Instant::now();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = match runtime {
        Runtime::Steady => {
            let config = steady_runtime::Config {
                name: "cache".into(),
                ..Default::default()
            };
            let controller = steady_cache_operator::controller(client.clone(), config);
            let data = Arc::new(OperatorContext::default());
            tokio::spawn(async move {
                let _ = controller
                    .run(steady_cache_operator::reconcile, data, async move {
                        let _ = stopped.await;
                    })
                    .await;
            })
        }
        Runtime::KubeRs => {
            let caches_api: Api<Cache> = Api::all(client.clone());
            let controller = KubeController::new(caches_api, watcher::Config::default())
                .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
                .owns(
                    Api::<Service>::all(client.clone()),
                    watcher::Config::default(),
                )
                .graceful_shutdown_on(async move {
                    let _ = stopped.await;
                });
            let ctx = Arc::new(client.clone());
            tokio::spawn(async move {
                controller
                    .run(kube_rs_reconcile, kube_rs_error_policy, ctx)
                    .for_each(|_| async {})
                    .await;
            })
        }
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    while !all_ready(&admin, caches).await? {
        anyhow::ensure!(
            Instant::now() < deadline,
            "{} did not converge in 600 s",
            runtime.name()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cold_start = started.elapsed();
    let cold_requests = counts.snapshot();
    tokio::time::sleep(window).await;
    let after = counts.snapshot();
    let steady_requests = after
        .iter()
        .map(|(verb, n)| (*verb, n - cold_requests.get(verb).copied().unwrap_or(0)))
        .collect();
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), operator).await;
    server.shutdown().await;
    Ok(Outcome {
        cold_start,
        cold_requests,
        steady_requests,
    })
}

fn writes(counts: &BTreeMap<&'static str, u64>) -> u64 {
    ["create", "update", "patch", "delete"]
        .iter()
        .map(|v| counts.get(v).copied().unwrap_or(0))
        .sum()
}

fn reads(counts: &BTreeMap<&'static str, u64>) -> u64 {
    ["get", "list"]
        .iter()
        .map(|v| counts.get(v).copied().unwrap_or(0))
        .sum()
}

fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        if a == 0.0 { "=".into() } else { "∞".into() }
    } else {
        format!("{:.2}", a / b)
    }
}

pub async fn run(quick: bool, caches: Option<usize>) -> anyhow::Result<()> {
    let caches = caches.unwrap_or(if quick { 20 } else { 1_000 });
    let window = if quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(20)
    };
    println!(
        "steady bench operators: {caches} Caches × 2 replicas, in-process server with the simulated node"
    );
    let steady = measure(Runtime::Steady, caches, window).await?;
    let kube_rs = measure(Runtime::KubeRs, caches, window).await?;
    println!();
    println!("| scenario | measurement | steady | kube-runtime | steady / kube-runtime |");
    println!("|---|---|---|---|---|");
    let secs = |o: &Outcome| o.cold_start.as_secs_f64();
    println!(
        "| cold start | seconds until all Ready at their generation | {:.2} | {:.2} | {} |",
        secs(&steady),
        secs(&kube_rs),
        ratio(secs(&steady), secs(&kube_rs))
    );
    for verb in [
        "list", "get", "watch", "create", "patch", "update", "delete",
    ] {
        let (a, b) = (
            steady.cold_requests.get(verb).copied().unwrap_or(0),
            kube_rs.cold_requests.get(verb).copied().unwrap_or(0),
        );
        println!(
            "| cold start | {verb} requests | {a} | {b} | {} |",
            ratio(a as f64, b as f64)
        );
    }
    let (sw, kw) = (
        writes(&steady.steady_requests),
        writes(&kube_rs.steady_requests),
    );
    println!(
        "| steady state ({} s) | writes | {sw} | {kw} | {} |",
        window.as_secs(),
        ratio(sw as f64, kw as f64)
    );
    let (sr, kr) = (
        reads(&steady.steady_requests),
        reads(&kube_rs.steady_requests),
    );
    println!(
        "| steady state ({} s) | GET + LIST | {sr} | {kr} | {} |",
        window.as_secs(),
        ratio(sr as f64, kr as f64)
    );
    Ok(())
}
