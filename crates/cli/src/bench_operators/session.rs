//! One benchmark session: a fresh control plane (durable store in a temporary directory,
//! HTTPS, the simulated node) whose HTTPS requests are counted by verb, an in-process
//! admin client the harness uses without being counted, and a tracker that follows Caches
//! (and, when asked, pods) through watches to time what the operator achieves.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use steady_apiserver::ApiServer;
use steady_cache_operator::Cache;
use steady_cluster::node::{NodeCapacity, NodeConfig};

use crate::server::ControlPlane;

/// Where the store keeps core/v1 Events.
const EVENTS_PREFIX: &str = "/core/events/";

/// Caches per namespace: operators' Caches spread over namespaces as in a real cluster, so
/// a namespaced LIST scans one namespace, not all of them.
pub const CACHES_PER_NAMESPACE: usize = 100;

/// How long the simulated node takes to start a pod.
const POD_START_DELAY: Duration = Duration::from_millis(50);

/// Requests the server received over HTTPS, by verb.
#[derive(Clone, Default)]
pub struct Counts(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl Counts {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<&'static str, u64>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, verbs: &[&'static str]) {
        let mut counts = self.lock();
        for verb in verbs {
            *counts.entry(verb).or_default() += 1;
        }
    }

    pub fn snapshot(&self) -> Requests {
        Requests(self.lock().clone())
    }
}

/// Request counts by verb (`list`, `get`, `watch`, `create`, `update`, `patch`, `delete`).
#[derive(Clone, Debug, Default)]
pub struct Requests(pub BTreeMap<&'static str, u64>);

impl Requests {
    pub fn get(&self, verb: &str) -> u64 {
        self.0.get(verb).copied().unwrap_or(0)
    }

    pub fn writes(&self) -> u64 {
        ["create", "update", "patch", "delete"]
            .iter()
            .map(|v| self.get(v))
            .sum()
    }

    pub fn reads(&self) -> u64 {
        self.get("get") + self.get("list")
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Requests) -> Requests {
        Requests(
            self.0
                .iter()
                .map(|(verb, n)| (*verb, n.saturating_sub(earlier.get(verb))))
                .collect(),
        )
    }
}

/// A LIST across all namespaces: what a watcher does to (re)start, as opposed to the
/// namespaced LISTs a reconcile makes. Counted in addition to `list`.
pub const LIST_ALL_NAMESPACES: &str = "list, all namespaces";

/// The namespace of the probe Cache, whose requests are counted apart (as `probe`) so a
/// probe's own writes do not hide whether a relist caused any.
pub const PROBE_NAMESPACE: &str = "bench-probe";

fn verbs<B>(request: &http::Request<B>) -> &'static [&'static str] {
    use steady_apiserver::request::{ObjectPath, Route, parse_route};
    let query = request.uri().query().unwrap_or("");
    let path = match parse_route(request.uri().path()) {
        Some(Route::Object(path)) => Some(path),
        _ => None,
    };
    if path
        .as_ref()
        .is_some_and(|p| p.namespace.as_deref() == Some(PROBE_NAMESPACE))
    {
        return &["probe"];
    }
    let named = matches!(path, Some(ObjectPath { name: Some(_), .. }));
    let everywhere = matches!(
        path,
        Some(ObjectPath {
            namespace: None,
            ..
        })
    );
    match *request.method() {
        http::Method::GET if query.contains("watch=true") || query.contains("watch=1") => {
            &["watch"]
        }
        http::Method::GET if named => &["get"],
        http::Method::GET if everywhere => &["list", LIST_ALL_NAMESPACES],
        http::Method::GET => &["list"],
        http::Method::POST => &["create"],
        http::Method::PUT => &["update"],
        http::Method::PATCH => &["patch"],
        http::Method::DELETE => &["delete"],
        _ => &["other"],
    }
}

/// A Cache by namespace and name.
#[derive(Clone, Debug)]
pub struct CacheRef {
    pub namespace: String,
    pub name: String,
}

impl CacheRef {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

pub struct Session {
    pub api: ApiServer,
    /// In-process and uncounted: the harness's own requests.
    pub admin: Client,
    pub counts: Counts,
    pub kubeconfig: PathBuf,
    pub tracker: Tracker,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Session {
    /// A fresh control plane with the Cache CRD installed and the simulated node running
    /// pods; `watch_pods` also tracks pods (for self-heal latencies).
    pub async fn start(watch_pods: bool) -> anyhow::Result<Session> {
        let nodes = NodeConfig {
            pod_start_delay: POD_START_DELAY,
            capacity: NodeCapacity::for_benchmarks(),
            ..NodeConfig::default()
        };
        Session::start_with(watch_pods, Some(nodes)).await
    }

    /// The same control plane with no node: pods stay Pending, and the server serves only
    /// the requests the harness makes (the raw write rate).
    pub async fn start_without_nodes() -> anyhow::Result<Session> {
        Session::start_with(false, None).await
    }

    async fn start_with(watch_pods: bool, nodes: Option<NodeConfig>) -> anyhow::Result<Session> {
        let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
        let config = steady_apiserver::Config::default();
        let mut plane = ControlPlane::start(dir.path(), "127.0.0.1:0".parse()?, config).await?;
        if let Some(nodes) = nodes {
            plane = plane.with_nodes(nodes);
        }
        let api = plane.api.clone();
        let admin = api.client();
        let kubeconfig = dir.path().join("kubeconfig");
        let counts = Counts::default();
        let counting = counts.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(plane.serve_with(
            move |router| {
                router.layer(axum::middleware::from_fn(
                    move |request: axum::extract::Request, next: axum::middleware::Next| {
                        counting.add(verbs(&request));
                        next.run(request)
                    },
                ))
            },
            async move {
                let _ = stopped.await;
            },
        ));
        Api::<CustomResourceDefinition>::all(admin.clone())
            .create(&PostParams::default(), &steady_cache_operator::crd())
            .await
            .context("cannot install the Cache CRD")?;
        let tracker = Tracker::start(admin.clone(), watch_pods);
        Ok(Session {
            api,
            admin,
            counts,
            kubeconfig,
            tracker,
            stop,
            serving,
            _dir: dir,
        })
    }

    /// core/v1 Events in the store: the node's, which it drops when the server falls
    /// behind (its queue is full), so they are counted apart from the writes that matter.
    pub fn events_stored(&self) -> anyhow::Result<u64> {
        let options = steady_store::ListOptions::default();
        let events = self.api.store().list(EVENTS_PREFIX, &options, &|_| true)?;
        Ok(events.items.len() as u64)
    }

    /// Create `caches` Caches of `replicas` pods, [`CACHES_PER_NAMESPACE`] per namespace.
    pub async fn create_caches(
        &self,
        caches: usize,
        replicas: i32,
    ) -> anyhow::Result<Vec<CacheRef>> {
        let refs: Vec<CacheRef> = (0..caches)
            .map(|i| CacheRef {
                namespace: format!("bench-{:03}", i / CACHES_PER_NAMESPACE),
                name: format!("c{i:05}"),
            })
            .collect();
        let namespaces: Vec<String> = {
            let mut names: Vec<String> = refs.iter().map(|r| r.namespace.clone()).collect();
            names.dedup();
            names
        };
        let namespace_api: Api<Namespace> = Api::all(self.admin.clone());
        for name in namespaces {
            let namespace: Namespace =
                serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
            namespace_api
                .create(&PostParams::default(), &namespace)
                .await?;
        }
        futures::stream::iter(refs.iter().cloned().map(|r| {
            let admin = self.admin.clone();
            async move {
                let cache: Cache = serde_json::from_value(serde_json::json!({
                    "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
                    "metadata": {"name": r.name}, "spec": {"replicas": replicas}
                }))?;
                Api::<Cache>::namespaced(admin, &r.namespace)
                    .create(&PostParams::default(), &cache)
                    .await?;
                anyhow::Ok(())
            }
        }))
        .buffer_unordered(32)
        .try_collect::<()>()
        .await?;
        Ok(refs)
    }

    /// A Cache without pods in its own namespace, for timing one update.
    pub async fn create_probe(&self) -> anyhow::Result<CacheRef> {
        let namespace: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": PROBE_NAMESPACE}}))?;
        Api::<Namespace>::all(self.admin.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        let probe = CacheRef {
            namespace: PROBE_NAMESPACE.into(),
            name: "probe".into(),
        };
        let cache: Cache = serde_json::from_value(serde_json::json!({
            "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
            "metadata": {"name": probe.name}, "spec": {"replicas": 0}
        }))?;
        Api::<Cache>::namespaced(self.admin.clone(), &probe.namespace)
            .create(&PostParams::default(), &cache)
            .await?;
        Ok(probe)
    }

    /// Expire every watch (410); returns the request counts just before, for
    /// [`Session::wait_relisted`].
    pub fn expire_watches(&self) -> Requests {
        let before = self.counts.snapshot();
        self.api.expire_watches();
        before
    }

    /// Wait until, since `before`, the operator has re-listed and watches again each of its
    /// `kinds`.
    pub async fn wait_relisted(
        &self,
        before: &Requests,
        kinds: u64,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let since = self.counts.snapshot().since(before);
            if since.get(LIST_ALL_NAMESPACES) >= kinds && since.get("watch") >= kinds {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the operator did not re-list within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(30), self.serving).await;
    }
}

#[derive(Default)]
struct CacheState {
    observed: i64,
    ready: bool,
}

/// What the harness waits for, filled in from watch events.
#[derive(Default)]
struct TrackerState {
    caches: HashMap<String, CacheState>,
    /// Caches whose status says Ready at their current generation.
    ready: usize,
    /// Spec updates not yet reflected in status: generation and when the update was sent.
    pending_updates: HashMap<String, Vec<(i64, Instant)>>,
    lags: Vec<Duration>,
    /// Pods deleted on purpose: when, and whether the deletion has been seen.
    pending_heals: HashMap<String, (Instant, bool)>,
    heals: Vec<Duration>,
    /// Pods with a deletionTimestamp that still exist (only with the pod watch).
    terminating: HashSet<String>,
}

impl TrackerState {
    fn observe_cache(&mut self, cache: &Cache, now: Instant) {
        let key = format!(
            "{}/{}",
            cache.namespace().unwrap_or_default(),
            cache.name_any()
        );
        let status = cache.status.clone().unwrap_or_default();
        let generation = cache.metadata.generation.unwrap_or(0);
        let observed = status.observed_generation.unwrap_or(0);
        let ready = observed == generation
            && status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
        let entry = self.caches.entry(key.clone()).or_default();
        match (entry.ready, ready) {
            (false, true) => self.ready += 1,
            (true, false) => self.ready -= 1,
            _ => {}
        }
        *entry = CacheState { observed, ready };
        self.settle_updates(&key, observed, now);
    }

    fn settle_updates(&mut self, key: &str, observed: i64, now: Instant) {
        if let Some(pending) = self.pending_updates.get_mut(key) {
            let lags = &mut self.lags;
            pending.retain(|(generation, sent)| {
                let settled = *generation <= observed;
                if settled {
                    lags.push(now.duration_since(*sent));
                }
                !settled
            });
            if pending.is_empty() {
                self.pending_updates.remove(key);
            }
        }
    }

    fn observe_pod(&mut self, key: String, deleted: bool, terminating: bool, now: Instant) {
        if terminating && !deleted {
            self.terminating.insert(key.clone());
        } else {
            self.terminating.remove(&key);
        }
        if let Some((since, seen_deleted)) = self.pending_heals.get_mut(&key) {
            if deleted {
                *seen_deleted = true;
            } else if *seen_deleted {
                self.heals.push(now.duration_since(*since));
                self.pending_heals.remove(&key);
            }
        }
    }
}

/// Follows Caches (and optionally pods) through in-process watches.
pub struct Tracker {
    state: Arc<Mutex<TrackerState>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Tracker {
    fn start(admin: Client, watch_pods: bool) -> Tracker {
        let state = Arc::new(Mutex::new(TrackerState::default()));
        let mut tasks = Vec::new();
        let caches = state.clone();
        tasks.push(tokio::spawn(follow(
            Api::<Cache>::all(admin.clone()),
            move |event| {
                let now = Instant::now();
                let mut state = lock(&caches);
                if let watcher::Event::Apply(cache) | watcher::Event::InitApply(cache) = event {
                    state.observe_cache(&cache, now);
                }
            },
        )));
        if watch_pods {
            let pods = state.clone();
            tasks.push(tokio::spawn(follow(Api::<Pod>::all(admin), move |event| {
                let now = Instant::now();
                let (pod, deleted) = match event {
                    watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => (pod, false),
                    watcher::Event::Delete(pod) => (pod, true),
                    _ => return,
                };
                let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
                let terminating = pod.metadata.deletion_timestamp.is_some();
                lock(&pods).observe_pod(key, deleted, terminating, now);
            })));
        }
        Tracker { state, tasks }
    }

    /// Poll until `done` holds or `timeout` passes; whether it held.
    async fn wait_for(&self, done: impl Fn(&TrackerState) -> bool, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(&lock(&self.state)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait until `total` Caches report Ready at their generation.
    pub async fn wait_ready(&self, total: usize, timeout: Duration) -> anyhow::Result<()> {
        if self.wait_for(|s| s.ready >= total, timeout).await {
            return Ok(());
        }
        let ready = lock(&self.state).ready;
        anyhow::bail!(
            "only {ready} of {total} Caches were Ready at their generation after {timeout:?}"
        )
    }

    /// Wait until `total` Caches report Ready at their generation and no pod is
    /// terminating: the world at rest (needs the pod watch).
    pub async fn wait_quiet(&self, total: usize, timeout: Duration) -> anyhow::Result<()> {
        let quiet = |s: &TrackerState| s.ready >= total && s.terminating.is_empty();
        if self.wait_for(quiet, timeout).await {
            return Ok(());
        }
        let state = lock(&self.state);
        anyhow::bail!(
            "after {timeout:?}, {} of {total} Caches were Ready at their generation and {} pods terminating",
            state.ready,
            state.terminating.len()
        )
    }

    /// A spec update to `key` produced `generation`, sent at `sent`.
    pub fn expect_update(&self, key: String, generation: i64, sent: Instant) {
        let mut state = lock(&self.state);
        state
            .pending_updates
            .entry(key.clone())
            .or_default()
            .push((generation, sent));
        let observed = state.caches.get(&key).map_or(0, |c| c.observed);
        state.settle_updates(&key, observed, Instant::now());
    }

    /// Wait until every expected update is reflected in status, or `timeout`; returns the
    /// update-to-status lags (unsettled updates count as lasting until now).
    pub async fn settle_updates(&self, timeout: Duration) -> Vec<Duration> {
        self.wait_for(|s| s.pending_updates.is_empty(), timeout)
            .await;
        let mut state = lock(&self.state);
        let now = Instant::now();
        let mut lags = std::mem::take(&mut state.lags);
        let unsettled = state.pending_updates.drain().flat_map(|(_, p)| p);
        lags.extend(unsettled.map(|(_, sent)| now - sent));
        lags
    }

    /// The pod `key` is about to be deleted on purpose.
    pub fn expect_heal(&self, key: String) {
        lock(&self.state)
            .pending_heals
            .insert(key, (Instant::now(), false));
    }

    /// Wait until every deleted pod has a replacement, or `timeout`; returns the
    /// delete-to-replacement latencies (unhealed pods count as lasting until now).
    pub async fn settle_heals(&self, timeout: Duration) -> Vec<Duration> {
        self.wait_for(|s| s.pending_heals.is_empty(), timeout).await;
        let mut state = lock(&self.state);
        let now = Instant::now();
        let mut heals = std::mem::take(&mut state.heals);
        heals.extend(
            state
                .pending_heals
                .drain()
                .map(|(_, (since, _))| now - since),
        );
        heals
    }
}

fn lock(state: &Mutex<TrackerState>) -> MutexGuard<'_, TrackerState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Feed every watch event of `api` to `observe` until the task is aborted.
async fn follow<K>(api: Api<K>, mut observe: impl FnMut(watcher::Event<K>) + Send)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => observe(event),
            Err(e) => {
                tracing::debug!(error = %e, "benchmark watch error; the watcher retries");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
