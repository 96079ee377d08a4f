//! The reconciler: from the Cache and the pods and Service it owns (read from the runtime's
//! caches) to the few API writes that move the world one step closer to the spec.
//!
//! The decisions ([`reconcile_with`]) read the owned objects through a [`View`]. steady's
//! runtime answers from its caches, and the writes update them ([`reconcile`]): the
//! [`OperatorContext`] holds the cache handles [`controller`] got when it declared the
//! controller's sources, so a reconcile cannot ask for a cache the controller lacks. A
//! runtime without caches answers by asking the API server every time, which is how
//! `steady bench operators` runs this very reconciler on kube-rs's `Controller`.
//!
//! Level-triggered: every decision is made from observed state, never from the event that
//! caused the run; at the fixed point a run makes no write at all. Decisions iterate pods in
//! ordinal order (a `BTreeMap`), so the same world always gives the same writes.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use steady_runtime::conditions::{Condition, set_condition};
use steady_runtime::{Action, CachingApi, Context, Controller, ObjectCache, ObjectKey};

use crate::resources::{
    CachedPod, CachedService, PodSummary, ServiceSummary, desired_pod, desired_service,
    is_deleting, ordinal_of, pod_name, selector, service_patch, template_hash, this_incarnation,
};
use crate::types::{
    CONDITION_DEGRADED, CONDITION_PROGRESSING, CONDITION_READY, Cache, CacheStatus,
};

/// How long to wait before looking again while pods start, stop or are replaced (watch
/// events usually come first; this is the safety net).
pub const REQUEUE_WHILE_PROGRESSING: Duration = Duration::from_secs(2);

/// The clock used for condition timestamps (the runtime's: the wall clock in a process,
/// the simulated one in the simulator).
pub use steady_runtime::events::{Clock, system_clock};

/// What every run of the decisions keeps: the API writes it attempts and the clock that
/// stamps its conditions. Shared by every runtime that drives [`reconcile_with`].
pub struct Ledger {
    writes: AtomicU64,
    clock: Clock,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new(system_clock())
    }
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("writes", &self.writes())
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// A ledger whose condition timestamps come from `clock`.
    pub fn new(clock: Clock) -> Self {
        Ledger {
            writes: AtomicU64::new(0),
            clock,
        }
    }

    /// API writes (create, replace, patch, delete) attempted so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    fn count_write(&self) {
        self.writes.fetch_add(1, Ordering::SeqCst);
    }

    fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }
}

/// What [`reconcile`] needs besides the runtime's context: the caches of the Caches and
/// what they own (the handles the controller's sources returned), and the [`Ledger`].
/// Made only by [`controller`], together with the controller those handles belong to.
pub struct OperatorContext {
    caches: ObjectCache<Cache>,
    pods: ObjectCache<CachedPod>,
    services: ObjectCache<CachedService>,
    ledger: Ledger,
}

impl fmt::Debug for OperatorContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperatorContext")
            .field("ledger", &self.ledger)
            .finish_non_exhaustive()
    }
}

impl OperatorContext {
    /// API writes (create, replace, patch, delete) attempted so far.
    pub fn writes(&self) -> u64 {
        self.ledger.writes()
    }
}

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the Cache has no {0}")]
    MissingField(&'static str),
    #[error("{action} {kind} {namespace}/{name}: {source}")]
    Api {
        action: &'static str,
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("encoding the status: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The Cache controller's debounce window, chosen by measurement (docs/BENCHMARKS.md,
/// "Issue 16: coalescing"): an image change rolling 3 pods takes 15 reconciles instead of
/// 22, and converges no later; 100 ms and more merge a little more but delay the rollout.
pub const DEBOUNCE: Duration = Duration::from_millis(50);

/// Objects per LIST page, chosen by measurement (docs/BENCHMARKS.md, "Issue 16: the relist
/// peak"): a relist of 10,000 pods and their Caches and Services peaks at 1.07× the
/// operator's steady RSS with pages of 100, 1.41× with kube's 500, for 5× the LIST
/// requests during a relist (a hundred per 10,000 objects).
pub const LIST_PAGE_SIZE: u32 = 100;

/// Cache reconciles run at once, chosen by measurement (docs/BENCHMARKS.md, "the event
/// queue, and concurrency"): a reconcile that acts spends most of its time waiting for
/// its writes to commit, not on a CPU, so the runtime's default (one per CPU) leaves a
/// small machine idle while the queue grows. At 16, 1,000 spec updates/s over 10,000
/// Caches fall behind (p99 update → status 2.2 s); at 64 they keep up (0.4 s), and the
/// cold start takes 12.8 s instead of 15.6.
pub const CONCURRENCY: usize = 64;

/// The Cache controller's settings: named `cache`, [`CONCURRENCY`] reconciles at once,
/// debounced by [`DEBOUNCE`], listing in pages of [`LIST_PAGE_SIZE`], skipping the
/// wake-ups that only echo its own writes (`skip_unchanged`: [`reconcile`] reaches its
/// fixed point in one run, which the simulator's idempotence property checks), otherwise
/// the runtime's defaults.
pub fn default_config() -> steady_runtime::Config {
    steady_runtime::Config {
        concurrency: CONCURRENCY,
        debounce: DEBOUNCE,
        list_page_size: LIST_PAGE_SIZE,
        skip_unchanged: true,
        ..steady_runtime::Config::named("cache")
    }
}

/// The controller of Caches in every namespace, owning their pods and Services, and the
/// context [`reconcile`] reads its caches through (condition timestamps from `clock`).
pub fn controller(
    client: Client,
    config: steady_runtime::Config,
    clock: Clock,
) -> (Controller<Cache>, Arc<OperatorContext>) {
    let mut controller = Controller::new(Api::<Cache>::all(client.clone()), config);
    let pods = controller.owns_projected::<PodSummary>(Api::all(client.clone()));
    let services = controller.owns_projected::<ServiceSummary>(Api::all(client));
    let context = OperatorContext {
        caches: controller.primary_cache(),
        pods,
        services,
        ledger: Ledger::new(clock),
    };
    (controller, Arc::new(context))
}

fn api_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// What is under way, whichever run started it: becomes the `Progressing` condition.
/// It describes the state (a pod terminating because replicas fell is still "removing"
/// on the next run, a created pod is "waiting to become Ready" from the run that created
/// it), so the run after the one that acted writes the same status, not a second one.
#[derive(Default)]
struct Progress {
    recreating: Vec<String>,
    removing: Vec<String>,
    replacing: Vec<String>,
    waiting_ready: Vec<String>,
    waiting_gone: Vec<String>,
    /// A write raced a stale cache (409): look again soon.
    raced: bool,
}

impl Progress {
    fn is_idle(&self) -> bool {
        self.recreating.is_empty()
            && self.removing.is_empty()
            && self.replacing.is_empty()
            && self.waiting_ready.is_empty()
            && self.waiting_gone.is_empty()
            && !self.raced
    }
}

/// How a reconcile sees what a Cache owns, and where it records its own writes so the
/// next run sees them even before their watch events arrive.
pub trait View: Sync {
    /// Pods in `namespace` that may belong to `cache` (whose uid is `uid`); the reconciler
    /// keeps only those it controls.
    fn owned_pods(
        &self,
        cache: &Cache,
        namespace: &str,
        uid: &str,
    ) -> impl Future<Output = Result<Vec<Arc<CachedPod>>, Error>> + Send;
    /// The Service `namespace/name`, whoever owns it.
    fn service(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Arc<CachedService>>, Error>> + Send;
    /// Where the writes in `namespace` go (by default plainly, through `client`).
    fn writes(&self, client: &Client, namespace: &str) -> Writes {
        Writes {
            caches: CachingApi::from(Api::namespaced(client.clone(), namespace)),
            pods: CachingApi::from(Api::namespaced(client.clone(), namespace)),
            services: CachingApi::from(Api::namespaced(client.clone(), namespace)),
        }
    }
}

/// The kinds a reconcile writes, in one namespace.
pub struct Writes {
    /// Caches (their status).
    pub caches: CachingApi<Cache>,
    /// Pods.
    pub pods: CachingApi<Pod>,
    /// Services.
    pub services: CachingApi<Service>,
}

/// steady's runtime caches: no request to read, and every write updates them.
impl View for OperatorContext {
    async fn owned_pods(
        &self,
        _cache: &Cache,
        _namespace: &str,
        uid: &str,
    ) -> Result<Vec<Arc<CachedPod>>, Error> {
        Ok(self.pods.owned_by(uid))
    }

    async fn service(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<CachedService>>, Error> {
        Ok(self.services.get(&ObjectKey::new(Some(namespace), name)))
    }

    fn writes(&self, client: &Client, namespace: &str) -> Writes {
        Writes {
            caches: CachingApi::with_cache(
                Api::namespaced(client.clone(), namespace),
                self.caches.clone(),
            ),
            pods: CachingApi::with_projection(
                Api::namespaced(client.clone(), namespace),
                self.pods.clone(),
            ),
            services: CachingApi::with_projection(
                Api::namespaced(client.clone(), namespace),
                self.services.clone(),
            ),
        }
    }
}

/// The writes of one reconcile, against one namespace, through the view.
struct Writer<'a> {
    ledger: &'a Ledger,
    namespace: String,
    apis: Writes,
}

impl Error {
    /// Turns a failed request about `kind` `namespace/name` into an [`Error::Api`].
    pub fn api(
        action: &'static str,
        kind: &'static str,
        namespace: &str,
        name: &str,
    ) -> impl FnOnce(kube::Error) -> Error {
        let (namespace, name) = (namespace.to_string(), name.to_string());
        move |source| Error::Api {
            action,
            kind,
            namespace,
            name,
            source,
        }
    }
}

impl Writer<'_> {
    fn api_error(
        &self,
        action: &'static str,
        kind: &'static str,
        name: &str,
    ) -> impl FnOnce(kube::Error) -> Error {
        Error::api(action, kind, &self.namespace, name)
    }

    /// Create `pod`; `Ok(None)` when a pod of that name already exists (a stale cache).
    async fn create_pod(&self, pod: &Pod) -> Result<Option<CachedPod>, Error> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.ledger.count_write();
        match self.apis.pods.create(&PostParams::default(), pod).await {
            Ok(created) => {
                tracing::info!(pod = %name, "created pod");
                Ok(Some(CachedPod::of(&created)))
            }
            Err(e) if api_code(&e) == Some(409) => {
                tracing::debug!(pod = %name, "pod already exists; the cache was behind");
                Ok(None)
            }
            Err(e) => Err(self.api_error("creating", "Pod", &name)(e)),
        }
    }

    /// Delete `pod` (only that incarnation: uid precondition). Returns the pod as it is
    /// now (terminating) or `None` when it is gone; `Err` only on real failures. A 409
    /// (another pod now has the name) or 404 counts as "look again".
    async fn delete_pod(&self, pod: &CachedPod) -> Result<Deleted, Error> {
        let name = pod.meta().name().to_string();
        let params = this_incarnation(pod);
        self.ledger.count_write();
        match self.apis.pods.delete(&name, &params).await {
            Ok(terminating) => {
                tracing::info!(pod = %name, "deleted pod");
                Ok(match terminating {
                    Some(pod) => Deleted::Terminating(Box::new(CachedPod::of(&pod))),
                    None => Deleted::Gone,
                })
            }
            Err(e) if api_code(&e) == Some(404) => Ok(Deleted::Gone),
            Err(e) if api_code(&e) == Some(409) => Ok(Deleted::Raced),
            Err(e) => Err(self.api_error("deleting", "Pod", &name)(e)),
        }
    }
}

enum Deleted {
    Terminating(Box<CachedPod>),
    Gone,
    Raced,
}

/// Record the outcome of deleting the pod with `ordinal` in `pods`.
fn apply_deleted(
    pods: &mut BTreeMap<i32, CachedPod>,
    ordinal: i32,
    deleted: Deleted,
    progress: &mut Progress,
) {
    match deleted {
        Deleted::Terminating(pod) => {
            pods.insert(ordinal, *pod);
        }
        Deleted::Gone => {
            pods.remove(&ordinal);
        }
        Deleted::Raced => progress.raced = true,
    }
}

/// Bring one Cache's pods, Service and status one step closer to its spec, reading from
/// steady's runtime caches.
pub async fn reconcile(
    cache: Arc<Cache>,
    ctx: Arc<Context<OperatorContext>>,
) -> Result<Action, Error> {
    let context = ctx.data();
    Ok(
        match reconcile_with(&cache, ctx.client(), &context.ledger, context).await? {
            Outcome::Converged => Action::done(),
            Outcome::Progressing => Action::requeue_after(REQUEUE_WHILE_PROGRESSING),
        },
    )
}

/// What a reconcile left to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The world matches the spec; nothing to look at until something changes.
    Converged,
    /// Pods are starting, stopping or being replaced: look again after
    /// [`REQUEUE_WHILE_PROGRESSING`] if no event comes first.
    Progressing,
}

/// The reconciler's decisions and writes, reading the owned objects through `view`.
pub async fn reconcile_with(
    cache: &Cache,
    client: Client,
    ledger: &Ledger,
    view: &impl View,
) -> Result<Outcome, Error> {
    let name = cache
        .metadata
        .name
        .clone()
        .ok_or(Error::MissingField("metadata.name"))?;
    let namespace = cache
        .metadata
        .namespace
        .clone()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let uid = cache
        .metadata
        .uid
        .clone()
        .ok_or(Error::MissingField("metadata.uid"))?;
    if cache.metadata.deletion_timestamp.is_some() {
        // What it owns is the garbage collector's; there is no external state to release.
        return Ok(Outcome::Converged);
    }
    let writer = Writer {
        ledger,
        namespace: namespace.clone(),
        apis: view.writes(&client, &namespace),
    };
    let hash = template_hash(&cache.spec);
    let replicas = cache.spec.replicas.max(0);

    // What exists: pods this Cache controls, by ordinal; misnamed ones are strays.
    let mut pods: BTreeMap<i32, CachedPod> = BTreeMap::new();
    let mut strays: Vec<CachedPod> = Vec::new();
    for pod in view.owned_pods(cache, &namespace, &uid).await? {
        if pod.meta().namespace() != Some(namespace.as_str()) || !pod.meta().is_controlled_by(&uid)
        {
            continue;
        }
        match ordinal_of(&name, pod.meta().name()) {
            Some(ordinal) => {
                pods.insert(ordinal, pod.as_ref().clone());
            }
            None => strays.push(pod.as_ref().clone()),
        }
    }
    let mut progress = Progress::default();
    let mut degraded: Option<(&'static str, String)> = None;

    // The Service.
    if let Some(problem) = ensure_service(cache, &writer, view, &name, &mut progress).await? {
        degraded = Some(problem);
    }

    // Failed pods are deleted; the missing-pod step recreates them once they are gone.
    // One above the replicas is only removed, by the scale-down below: reported as failed,
    // this run's status would describe a pod its own delete is about to take away.
    let failed: Vec<(i32, CachedPod)> = pods
        .range(..replicas)
        .filter(|(_, p)| p.is_failed() && !is_deleting(p))
        .map(|(o, p)| (*o, p.clone()))
        .collect();
    if let Some((_, first)) = failed.first() {
        let names: Vec<String> = failed
            .iter()
            .map(|(_, p)| p.meta().name().to_string())
            .collect();
        let first_name = first.meta().name().to_string();
        degraded = Some((
            "PodFailed",
            format!(
                "pod {} failed (phase Failed) and is being recreated; if it keeps failing, \
                 check `kubectl describe pod {first_name}` and the image, port and memoryMiB \
                 of this Cache",
                names.join(", ")
            ),
        ));
    }
    // While a deleted failed pod terminates it is "recreating" (below); once it is gone,
    // its replacement is created and waits to become Ready like any new pod.
    for (ordinal, pod) in failed {
        let deleted = writer.delete_pod(&pod).await?;
        apply_deleted(&mut pods, ordinal, deleted, &mut progress);
    }

    // Scale down: strays first, then the highest ordinal at or above `replicas`, one per run.
    let extra_terminating: Vec<String> = pods
        .range(replicas..)
        .filter(|(_, p)| is_deleting(p))
        .map(|(_, p)| p.meta().name().to_string())
        .collect();
    progress.removing.extend(extra_terminating);
    if let Some(stray) = strays.iter().find(|p| !is_deleting(p)) {
        let deleted = writer.delete_pod(stray).await?;
        progress.removing.push(stray.meta().name().to_string());
        if let Deleted::Raced = deleted {
            progress.raced = true;
        }
    } else if let Some((&ordinal, pod)) =
        pods.range(replicas..).rev().find(|(_, p)| !is_deleting(p))
    {
        let pod = pod.clone();
        let deleted = writer.delete_pod(&pod).await?;
        progress.removing.push(pod.meta().name().to_string());
        apply_deleted(&mut pods, ordinal, deleted, &mut progress);
    }
    for stray in strays.iter().filter(|p| is_deleting(p)) {
        progress.removing.push(stray.meta().name().to_string());
    }

    // Missing pods (never created, deleted, or failed and now gone) are created. A create
    // the API refuses (a quota, a LimitRange, a webhook) is reported in the status, and
    // the run then fails so that it is retried with backoff: what lifts the refusal (a
    // raised quota) is no event this operator watches.
    let mut refused: Option<Error> = None;
    for ordinal in 0..replicas {
        match pods.get(&ordinal) {
            Some(pod) if is_deleting(pod) && pod.is_failed() => {
                progress.recreating.push(pod_name(&name, ordinal));
            }
            Some(pod) if is_deleting(pod) => {
                progress.waiting_gone.push(pod_name(&name, ordinal));
            }
            Some(_) => {}
            None if refused.is_some() => {}
            None => {
                let pod = desired_pod(cache, ordinal, &hash);
                match writer.create_pod(&pod).await {
                    Ok(Some(created)) => {
                        pods.insert(ordinal, created);
                    }
                    Ok(None) => progress.raced = true,
                    Err(error) => match refusal(&error) {
                        Some(why) => {
                            let pod = pod_name(&name, ordinal);
                            degraded =
                                Some(("PodCreateRefused", format!("creating pod {pod}: {why}")));
                            refused = Some(error);
                        }
                        None => return Err(error),
                    },
                }
            }
        }
    }

    // Rolling update: replace the lowest-ordinal outdated pod, only while every other
    // desired pod is Ready (so never fewer than replicas-1 are Ready).
    let desired: Vec<(i32, &CachedPod)> = pods.range(..replicas).map(|(o, p)| (*o, p)).collect();
    let outdated: Vec<i32> = desired
        .iter()
        .filter(|(_, p)| p.template_hash() != Some(hash.as_str()))
        .map(|(o, _)| *o)
        .collect();
    let unavailable: Vec<i32> = desired
        .iter()
        .filter(|(_, p)| is_deleting(p) || !p.is_ready())
        .map(|(o, _)| *o)
        .collect();
    for (ordinal, pod) in &desired {
        if !is_deleting(pod) && !pod.is_ready() {
            progress.waiting_ready.push(pod_name(&name, *ordinal));
        }
    }
    let all_present = desired.len() == usize::try_from(replicas).unwrap_or(0);
    if let Some(&candidate) = outdated.first() {
        let others_available = unavailable.iter().all(|o| *o == candidate);
        let candidate_pod = pods.get(&candidate).cloned();
        match candidate_pod {
            Some(pod) if all_present && others_available && !is_deleting(&pod) => {
                let deleted = writer.delete_pod(&pod).await?;
                progress.replacing.push(pod_name(&name, candidate));
                apply_deleted(&mut pods, candidate, deleted, &mut progress);
            }
            _ => progress.replacing.push(pod_name(&name, candidate)),
        }
    }

    // Status, written only when it differs from what is stored.
    let status = desired_status(
        cache,
        &name,
        &hash,
        replicas,
        &pods,
        strays.len(),
        &progress,
        degraded,
        ledger.now(),
    );
    if cache.status.as_ref() != Some(&status) {
        let patch = serde_json::json!({ "status": serde_json::to_value(&status)? });
        ledger.count_write();
        writer
            .apis
            .caches
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(writer.api_error("updating the status of", "Cache", &name))?;
        tracing::info!(cache = %name, ready = status.ready_replicas, replicas = status.replicas, "status updated");
    }

    if let Some(error) = refused {
        return Err(error);
    }
    Ok(if progress.is_idle() {
        Outcome::Converged
    } else {
        Outcome::Progressing
    })
}

/// The API's message when it refused a write for what the object asks (403 Forbidden:
/// a quota, a LimitRange, an admission webhook; 422 Invalid), which a person must act on.
fn refusal(error: &Error) -> Option<&str> {
    match error {
        Error::Api {
            source: kube::Error::Api(status),
            ..
        } if matches!(status.code, 403 | 422) => Some(&status.message),
        _ => None,
    }
}

/// Create the Service, or fix its selector and port. Returns a Degraded reason when the
/// name is taken by a Service this Cache does not control.
async fn ensure_service(
    cache: &Cache,
    writer: &Writer<'_>,
    view: &impl View,
    name: &str,
    progress: &mut Progress,
) -> Result<Option<(&'static str, String)>, Error> {
    let (namespace, api, ledger) = (
        writer.namespace.as_str(),
        &writer.apis.services,
        writer.ledger,
    );
    let uid = cache.meta().uid.clone().unwrap_or_default();
    let err = |action: &'static str| Error::api(action, "Service", namespace, name);
    match view.service(namespace, name).await? {
        None => {
            ledger.count_write();
            match api
                .create(&PostParams::default(), &desired_service(cache))
                .await
            {
                Ok(_) => tracing::info!(service = %name, "created service"),
                Err(e) if api_code(&e) == Some(409) => progress.raced = true,
                Err(e) => return Err(err("creating")(e)),
            }
        }
        Some(existing) if !existing.meta().is_controlled_by(&uid) => {
            return Ok(Some((
                "ServiceNameTaken",
                format!(
                    "Service {namespace}/{name} exists but is not controlled by this Cache; \
                     delete or rename it so the operator can create its own"
                ),
            )));
        }
        Some(existing) => {
            if let Some(patch) = service_patch(cache, &existing) {
                ledger.count_write();
                let params = PatchParams::default();
                match api.patch(name, &params, &Patch::Merge(&patch)).await {
                    Ok(_) => tracing::info!(service = %name, "updated service selector/port"),
                    Err(e) if api_code(&e) == Some(409) => progress.raced = true,
                    Err(e) => return Err(err("updating")(e)),
                }
            }
        }
    }
    Ok(None)
}

/// `Progressing` is `True`: the run made or awaits a change, for `reason`.
fn progressing(reason: &str, message: impl Into<String>) -> Condition {
    Condition::from_bool(CONDITION_PROGRESSING, true, reason, message)
}

/// Names sorted and each once: the same pods make the same message in every run.
fn list(names: &[String]) -> String {
    let mut names = names.to_vec();
    names.sort();
    names.dedup();
    names.join(", ")
}

/// The status this world deserves; conditions keep their transition times when unchanged.
#[allow(clippy::too_many_arguments)]
fn desired_status(
    cache: &Cache,
    name: &str,
    hash: &str,
    replicas: i32,
    pods: &BTreeMap<i32, CachedPod>,
    strays: usize,
    progress: &Progress,
    degraded: Option<(&'static str, String)>,
    now: DateTime<Utc>,
) -> CacheStatus {
    let generation = cache.metadata.generation;
    let mut status = cache.status.clone().unwrap_or_default();
    let existing = i32::try_from(pods.len() + strays).unwrap_or(i32::MAX);
    let ready = i32::try_from(
        pods.range(..replicas)
            .filter(|(_, p)| !is_deleting(p) && p.is_ready() && p.template_hash() == Some(hash))
            .count(),
    )
    .unwrap_or(i32::MAX);
    status.replicas = existing;
    status.ready_replicas = ready;
    status.observed_generation = generation;
    status.selector = selector(name);

    let ready_condition = if ready == replicas {
        let message = if replicas == 0 {
            "no replicas requested".to_string()
        } else {
            format!("{ready} of {replicas} replicas are Ready and run the current template")
        };
        Condition::from_bool(CONDITION_READY, true, "AllReplicasReady", message)
    } else {
        Condition::from_bool(
            CONDITION_READY,
            false,
            "ReplicasNotReady",
            format!(
                "{ready} of {replicas} replicas are Ready with the current template; see the Progressing condition"
            ),
        )
    };

    let progressing_condition = if !progress.recreating.is_empty() {
        progressing(
            "RecreatingFailedPods",
            format!(
                "deleted failed {}; it is created again from the current template",
                list(&progress.recreating)
            ),
        )
    } else if !progress.removing.is_empty() && progress.replacing.is_empty() {
        progressing(
            "ScalingDown",
            format!(
                "removing {} (replicas is {replicas})",
                list(&progress.removing)
            ),
        )
    } else if !progress.replacing.is_empty() {
        let updated = pods
            .range(..replicas)
            .filter(|(_, p)| p.template_hash() == Some(hash) && !is_deleting(p))
            .count();
        progressing(
            "RollingUpdate",
            format!(
                "replacing pods one at a time with template {hash}: {updated} of {replicas} updated, next {}",
                list(&progress.replacing)
            ),
        )
    } else if !progress.waiting_gone.is_empty() {
        progressing(
            "WaitingForTermination",
            format!("waiting for {} to terminate", list(&progress.waiting_gone)),
        )
    } else if !progress.waiting_ready.is_empty() {
        progressing(
            "WaitingForReady",
            format!(
                "waiting for {} to become Ready; if this lasts, check `kubectl describe pod {}`",
                list(&progress.waiting_ready),
                progress.waiting_ready[0]
            ),
        )
    } else if progress.raced {
        progressing(
            "Retrying",
            "the operator's view was behind the API; looking again",
        )
    } else {
        Condition::from_bool(
            CONDITION_PROGRESSING,
            false,
            "Complete",
            format!("{replicas} replicas run template {hash}"),
        )
    };

    // A failure stays reported until its replacement serves, so a person sees it.
    let degraded = degraded.or_else(|| {
        let previous = steady_runtime::conditions::find(&status.conditions, CONDITION_DEGRADED)?;
        (previous.status == steady_runtime::conditions::STATUS_TRUE
            && previous.reason == "PodFailed"
            && ready < replicas)
            .then(|| ("PodFailed", previous.message.clone()))
    });
    let degraded_condition = match degraded {
        Some((reason, message)) => Condition::from_bool(CONDITION_DEGRADED, true, reason, message),
        None => Condition::from_bool(CONDITION_DEGRADED, false, "AsExpected", ""),
    };

    for condition in [ready_condition, progressing_condition, degraded_condition] {
        set_condition(
            &mut status.conditions,
            condition.with_observed_generation(generation),
            now,
        );
    }
    status
}
