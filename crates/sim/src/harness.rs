//! One simulated run of the Cache scenario: the in-memory API server with the simulated
//! node, a reconciler behind the fault layer, scripted spec changes, then the checks.
//!
//! Everything runs on a current-thread tokio runtime with a paused clock, every random draw
//! comes from the seed, and timestamps come from the simulated clock: a seed replays the
//! same trace byte for byte.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{TimeZone, Utc};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use steady_apiserver::ApiServer;
use steady_apiserver::node::NodeConfig;
use steady_cache_operator::resources::{CACHE_LABEL, TEMPLATE_HASH_LABEL, is_ready, template_hash};
use steady_cache_operator::{Cache, OperatorContext};
use steady_runtime::{Action, Context, ObjectKey, Trigger};
use tokio::time::Instant;

use crate::fault::{FaultKind, FaultRates, FaultService, Faults, Trace};

/// A reconciler under test (the real one, or a deliberately wrong one).
pub type ReconcileFn = Arc<
    dyn Fn(Arc<Cache>, Arc<Context<Subject>>) -> BoxFuture<'static, Result<Action, String>>
        + Send
        + Sync,
>;

/// What a reconciler under test gets as context data: the operator's context, plus what
/// triggered the current reconcile (only an edge-triggered reconciler would look).
pub struct Subject {
    /// The Cache operator's own context.
    pub operator: Arc<OperatorContext>,
    /// The triggers of the latest reconcile of each key.
    pub last_triggers: Mutex<BTreeMap<ObjectKey, Vec<Trigger>>>,
}

/// The reference: steady's Cache reconciler.
pub fn cache_reconciler() -> ReconcileFn {
    Arc::new(|cache, ctx| {
        Box::pin(async move {
            let operator_ctx = steady_cache_operator_context(&ctx);
            steady_cache_operator::reconcile(cache, operator_ctx)
                .await
                .map_err(|e| e.to_string())
        })
    })
}

/// The operator's reconcile takes `Context<OperatorContext>`; the harness's context wraps
/// it. Re-wrap the same client, caches and data without copying state.
pub fn steady_cache_operator_context(ctx: &Arc<Context<Subject>>) -> Arc<Context<OperatorContext>> {
    Arc::new(ctx.with_data(ctx.data().operator.clone()))
}

/// A property that must hold, and how it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// One of [`PROPERTIES`].
    pub property: &'static str,
    /// What was seen, for a person.
    pub message: String,
}

/// The outcome of one seed.
#[derive(Debug, Clone)]
pub struct Report {
    /// The seed that reproduces this run.
    pub seed: u64,
    /// Every property that failed; empty when the seed passed.
    pub violations: Vec<Violation>,
    /// Faults that fired, by kind.
    pub injected: BTreeMap<FaultKind, u64>,
    /// The whole trace of the run.
    pub trace: Vec<String>,
    /// Pods the controller created.
    pub pod_creates: u64,
    /// The world at the end, normalised for comparison with the fault-free run.
    pub end_state: String,
    /// Writes the controller made during the fault window (what systematic crashes explore).
    pub writes_in_window: u64,
}

/// The names of the properties every run is checked against.
pub const PROPERTIES: [&str; 5] = [
    "eventually-stable",
    "idempotent",
    "no-duplicates",
    "same-end-state",
    "runtime-invariants",
];

/// Timing of the scenario, in simulated time.
#[derive(Debug, Clone)]
pub struct Options {
    /// Which faults, how often.
    pub faults: FaultRates,
    /// Faults are injected from the start until this time.
    pub fault_window: Duration,
    /// After faults stop, the world must match the spec within this bound…
    pub settle_bound: Duration,
    /// …and keep matching for this long with zero writes.
    pub stable_window: Duration,
    /// Crash the controller right after its n-th write (systematic crash exploration).
    pub crash_after_write: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            faults: FaultRates::all(),
            fault_window: Duration::from_secs(30),
            settle_bound: Duration::from_secs(120),
            stable_window: Duration::from_secs(20),
            crash_after_write: None,
        }
    }
}

const NS: &str = "default";
/// After the faults stop and the world first matches, how long watches get to relist.
const RELIST_GRACE: Duration = Duration::from_secs(5);
const CACHE: &str = "sim";

/// Run one seed: a fault-free reference run, then the run under faults, then the checks.
pub fn run_seed(seed: u64, options: &Options, reconciler: &ReconcileFn) -> Report {
    let reference = reference_run(seed, options, reconciler);
    run_seed_against(seed, options, reconciler, &reference)
}

/// The fault-free run the checks compare with. For a deterministic reconciler its end state
/// and pod creates do not depend on the seed, so a campaign computes it once.
pub fn reference_run(seed: u64, options: &Options, reconciler: &ReconcileFn) -> Report {
    let quiet = Options {
        faults: FaultRates::none(),
        crash_after_write: None,
        ..options.clone()
    };
    run_once(seed, &quiet, reconciler)
}

/// Run `seed` under faults and compare it with an already computed `reference`.
pub fn run_seed_against(
    seed: u64,
    options: &Options,
    reconciler: &ReconcileFn,
    reference: &Report,
) -> Report {
    let mut report = run_once(seed, options, reconciler);
    if report.end_state != reference.end_state && report.violations.is_empty() {
        report.violations.push(Violation {
            property: "same-end-state",
            message: format!(
                "end state differs from the fault-free run:\n  faulty:    {}\n  reference: {}",
                report.end_state, reference.end_state
            ),
        });
    }
    // Each fault that can change what the controller sees or when it acts may justify one
    // more create (a pod deleted or failed, a crash or lost response mid-rollout, ...);
    // stale lists and duplicated events never should, with deterministic names.
    let justified = report
        .injected
        .iter()
        .filter(|(k, _)| !matches!(k, FaultKind::StaleList | FaultKind::DuplicateEvent))
        .map(|(_, n)| n)
        .sum::<u64>();
    if report.pod_creates > reference.pod_creates + justified {
        report.violations.push(Violation {
            property: "no-duplicates",
            message: format!(
                "{} pod creates; the fault-free run needed {} and the {justified} injected faults justify at most that many more",
                report.pod_creates, reference.pod_creates
            ),
        });
    }
    report
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("cannot build the simulation runtime: {e}"),
    }
}

fn run_once(seed: u64, options: &Options, reconciler: &ReconcileFn) -> Report {
    runtime().block_on(simulate(seed, options.clone(), reconciler.clone()))
}

/// The simulated wall clock: a fixed epoch plus tokio's (paused) elapsed time.
fn clock() -> steady_apiserver::Clock {
    let start = Instant::now();
    let epoch = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    Arc::new(move || epoch + chrono::Duration::from_std(start.elapsed()).unwrap_or_default())
}

struct Running {
    task: tokio::task::JoinHandle<()>,
}

fn start_controller(
    server: &ApiServer,
    faults: &Arc<Faults>,
    reconciler: &ReconcileFn,
    seed: u64,
    clock: &steady_apiserver::Clock,
    invariants: &Arc<Invariants>,
) -> Running {
    faults.thaw();
    let client = FaultService::client(server.router(), faults.clone());
    let trace = faults.trace().clone();
    let subject = Arc::new(Subject {
        operator: Arc::new(OperatorContext::new(clock.clone())),
        last_triggers: Mutex::new(BTreeMap::new()),
    });
    let observed = subject.clone();
    let observer: steady_runtime::controller::Observer =
        Arc::new(move |key: &ObjectKey, triggers: &[Trigger]| {
            let why: Vec<String> = triggers.iter().map(ToString::to_string).collect();
            trace.log(format!("reconcile {key} ← {}", why.join(", ")));
            if let Ok(mut last) = observed.last_triggers.lock() {
                last.insert(key.clone(), triggers.to_vec());
            }
        });
    let config = steady_runtime::Config {
        name: "cache".into(),
        concurrency: 2,
        resync_period: Some(Duration::from_secs(30)),
        seed: Some(seed),
        ..Default::default()
    };
    let controller = steady_cache_operator::controller(client, config).with_observer(observer);
    let reconciler = reconciler.clone();
    let invariants = invariants.clone();
    let reconcile = move |cache: Arc<Cache>, ctx: Arc<Context<Subject>>| {
        let reconciler = reconciler.clone();
        let invariants = invariants.clone();
        async move {
            let _running = invariants.enter(ObjectKey::of(cache.as_ref()));
            reconciler(cache, ctx).await
        }
    };
    let task = tokio::spawn(async move {
        let _ = controller
            .run(reconcile, subject, std::future::pending::<()>())
            .await;
    });
    Running { task }
}

/// A crashed controller is gone (its tasks aborted); a new one starts a second later with
/// empty caches.
async fn restart_after_crash(
    crashed: Running,
    server: &ApiServer,
    faults: &Arc<Faults>,
    reconciler: &ReconcileFn,
    seed: u64,
    clock: &steady_apiserver::Clock,
    invariants: &Arc<Invariants>,
) -> Running {
    crashed.task.abort();
    tokio::time::sleep(Duration::from_secs(1)).await;
    faults.trace().log("controller restarts with empty caches");
    start_controller(server, faults, reconciler, seed, clock, invariants)
}

/// The runtime's own invariant: never two reconciles of one key at once.
#[derive(Default)]
struct Invariants {
    running: Mutex<BTreeMap<ObjectKey, u32>>,
    overlap: AtomicBool,
}

impl Invariants {
    /// Mark `key` running until the guard drops (also when a crash cancels the reconcile).
    fn enter(self: &Arc<Self>, key: ObjectKey) -> RunningGuard {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let n = running.entry(key.clone()).or_default();
        *n += 1;
        if *n > 1 {
            self.overlap.store(true, Ordering::SeqCst);
        }
        RunningGuard {
            invariants: self.clone(),
            key,
        }
    }
}

struct RunningGuard {
    invariants: Arc<Invariants>,
    key: ObjectKey,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut running = self
            .invariants
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = running.get_mut(&self.key) {
            *n = n.saturating_sub(1);
        }
    }
}

async fn simulate(seed: u64, options: Options, reconciler: ReconcileFn) -> Report {
    let trace = Trace::default();
    trace.log(format!("seed {seed}"));
    let clock = clock();
    let store = match steady_store::Store::in_memory(Default::default()).await {
        Ok(s) => s,
        Err(e) => return failed(seed, trace, format!("store: {e}")),
    };
    let config = steady_apiserver::Config {
        seed: Some(seed),
        clock: clock.clone(),
        node: Some(NodeConfig::default()),
        ..Default::default()
    };
    let server = match ApiServer::start(store.clone(), config).await {
        Ok(s) => s,
        Err(e) => return failed(seed, trace, format!("server: {e}")),
    };
    let admin = server.client();
    let faults = Faults::new(
        seed,
        options.faults.clone(),
        options.crash_after_write,
        store.clone(),
        trace.clone(),
    );
    let invariants = Arc::new(Invariants::default());
    if let Err(e) = setup(&admin).await {
        return failed(seed, trace, format!("setup: {e}"));
    }
    faults.set_active(true);
    let mut controller = start_controller(&server, &faults, &reconciler, seed, &clock, &invariants);
    let mut crashes = faults.crashes();
    let fault_end = Instant::now() + options.fault_window;
    let script = [
        (Duration::from_secs(5), Step::Scale(3)),
        (Duration::from_secs(12), Step::Image("memcached:1.6.31")),
        (Duration::from_secs(20), Step::Scale(2)),
    ];
    let start = Instant::now();
    let mut next_step = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < fault_end {
        tokio::select! {
            biased;
            changed = crashes.changed() => {
                if changed.is_ok() {
                    controller = restart_after_crash(controller, &server, &faults, &reconciler, seed, &clock, &invariants).await;
                }
            }
            _ = tick.tick() => {
                while next_step < script.len() && start.elapsed() >= script[next_step].0 {
                    if let Err(e) = script[next_step].1.apply(&admin, &trace).await {
                        trace.log(format!("script step failed: {e}"));
                    }
                    next_step += 1;
                }
                pod_faults(&admin, &faults).await;
            }
        }
    }
    faults.set_active(false);
    if crashes.has_changed().unwrap_or(false) {
        // A crash fired in the last instant of the window: restart as always.
        controller = restart_after_crash(
            controller,
            &server,
            &faults,
            &reconciler,
            seed,
            &clock,
            &invariants,
        )
        .await;
    }
    let writes_in_window = faults.writes();
    let mut violations = Vec::new();
    // 1. Eventually stable: the world matches the spec within the bound…
    let settle_deadline = Instant::now() + options.settle_bound;
    let mut last_mismatch = String::new();
    let settled = loop {
        match world_matches(&admin).await {
            Ok(()) => break true,
            Err(why) => last_mismatch = why,
        }
        if Instant::now() >= settle_deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if !settled {
        violations.push(Violation {
            property: "eventually-stable",
            message: format!(
                "{}s after faults stopped the world still differs from the spec: {last_mismatch}",
                options.settle_bound.as_secs()
            ),
        });
    } else {
        trace.log("world matches the spec");
        // Let the relists that followed the faults finish: a cache that missed an event
        // may still make one corrective write attempt, which is the loop working.
        tokio::time::sleep(RELIST_GRACE).await;
        // …and stays so, with zero writes (warm caches).
        let writes_before = faults.writes();
        let stable_end = Instant::now() + options.stable_window;
        while Instant::now() < stable_end {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if let Err(why) = world_matches(&admin).await {
                violations.push(Violation {
                    property: "eventually-stable",
                    message: format!("the world drifted after matching: {why}"),
                });
                break;
            }
        }
        let warm = faults.writes() - writes_before;
        violations.extend(writes_at_fixed_point(
            warm,
            "at the fixed point with warm caches",
        ));
        // 2. Idempotent after a cold restart.
        controller.task.abort();
        let writes_before = faults.writes();
        trace.log("cold restart at the fixed point");
        controller = start_controller(&server, &faults, &reconciler, seed, &clock, &invariants);
        tokio::time::sleep(Duration::from_secs(10)).await;
        let cold = faults.writes() - writes_before;
        violations.extend(writes_at_fixed_point(
            cold,
            "after a cold restart on a converged world",
        ));
    }
    controller.task.abort();
    if invariants.overlap.load(Ordering::SeqCst) {
        violations.push(Violation {
            property: "runtime-invariants",
            message: "two reconciles of one key ran at once".into(),
        });
    }
    let (end_state, pod_creates) = end_state(&admin, &trace).await;
    let extra = owned_pods(&admin).await.len() as i32 - desired_replicas(&admin).await;
    if extra > 0 {
        violations.push(Violation {
            property: "no-duplicates",
            message: format!("{extra} more pods than the spec allows"),
        });
    }
    server.shutdown().await;
    Report {
        seed,
        violations,
        injected: faults.injected(),
        trace: trace.lines(),
        pod_creates,
        end_state,
        writes_in_window,
    }
}

/// The `idempotent` violation of a converged world that still saw `writes` writes `when`.
fn writes_at_fixed_point(writes: u64, when: &str) -> Option<Violation> {
    (writes > 0).then(|| Violation {
        property: "idempotent",
        message: format!("{writes} writes {when}"),
    })
}

fn failed(seed: u64, trace: Trace, message: String) -> Report {
    Report {
        seed,
        violations: vec![Violation {
            property: "eventually-stable",
            message,
        }],
        injected: BTreeMap::new(),
        trace: trace.lines(),
        pod_creates: 0,
        end_state: String::new(),
        writes_in_window: 0,
    }
}

async fn setup(admin: &Client) -> Result<(), kube::Error> {
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&PostParams::default(), &steady_cache_operator::crd())
        .await?;
    let cache: Cache = serde_json::from_value(serde_json::json!({
        "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
        "metadata": {"name": CACHE, "namespace": NS}, "spec": {"replicas": 2}
    }))
    .map_err(kube::Error::SerdeError)?;
    Api::<Cache>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &cache)
        .await?;
    Ok(())
}

/// A spec change made by "the user" (never subject to faults).
enum Step {
    Scale(i32),
    Image(&'static str),
}

impl Step {
    async fn apply(&self, admin: &Client, trace: &Trace) -> Result<(), kube::Error> {
        let patch = match self {
            Step::Scale(n) => serde_json::json!({"spec": {"replicas": n}}),
            Step::Image(image) => serde_json::json!({"spec": {"image": image}}),
        };
        trace.log(format!("user: patch Cache {NS}/{CACHE} {patch}"));
        Api::<Cache>::namespaced(admin.clone(), NS)
            .patch(CACHE, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }
}

/// Someone else deletes a pod, or a pod fails.
async fn pod_faults(admin: &Client, faults: &Arc<Faults>) {
    let pods = owned_pods(admin).await;
    if pods.is_empty() {
        return;
    }
    let api: Api<Pod> = Api::namespaced(admin.clone(), NS);
    if faults.roll(FaultKind::PodDeletion) {
        let name = pods[faults.random_index(pods.len())].clone();
        faults
            .trace()
            .log(format!("fault pod-deletion: someone deletes pod {name}"));
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
    if faults.roll(FaultKind::PodFailure) {
        let name = pods[faults.random_index(pods.len())].clone();
        faults
            .trace()
            .log(format!("fault pod-failure: pod {name} fails"));
        let patch = serde_json::json!({"status": {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False"}]}});
        let _ = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await;
    }
}

/// Names of the pods the Cache owns (not being deleted), in order.
async fn owned_pods(admin: &Client) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let selector = format!("{CACHE_LABEL}={CACHE}");
    match api.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect(),
        Err(_) => Vec::new(),
    }
}

async fn desired_replicas(admin: &Client) -> i32 {
    Api::<Cache>::namespaced(admin.clone(), NS)
        .get(CACHE)
        .await
        .map(|c| c.spec.replicas)
        .unwrap_or(0)
}

/// The spec, as observed: the right pods, Running, Ready, on the current template; the
/// Service; the status (replicas, readyReplicas, observedGeneration, Ready=True).
pub async fn world_matches(admin: &Client) -> Result<(), String> {
    let cache = Api::<Cache>::namespaced(admin.clone(), NS)
        .get(CACHE)
        .await
        .map_err(|e| format!("reading the Cache: {e}"))?;
    let replicas = cache.spec.replicas;
    let hash = template_hash(&cache.spec);
    let pods = Api::<Pod>::namespaced(admin.clone(), NS)
        .list(&ListParams::default().labels(&format!("{CACHE_LABEL}={CACHE}")))
        .await
        .map_err(|e| e.to_string())?;
    let mut names: Vec<String> = Vec::new();
    for pod in &pods.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            return Err(format!("pod {name} is still terminating"));
        }
        if !is_ready(pod) {
            return Err(format!("pod {name} is not Ready"));
        }
        let pod_hash = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(TEMPLATE_HASH_LABEL))
            .cloned()
            .unwrap_or_default();
        if pod_hash != hash {
            return Err(format!("pod {name} runs template {pod_hash}, not {hash}"));
        }
        names.push(name);
    }
    names.sort();
    let want: Vec<String> = (0..replicas).map(|i| format!("{CACHE}-{i}")).collect();
    if names != want {
        return Err(format!("pods {names:?}, want {want:?}"));
    }
    let service = Api::<Service>::namespaced(admin.clone(), NS)
        .get(CACHE)
        .await
        .map_err(|e| format!("service: {e}"))?;
    let port = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .map(|p| p.port);
    if port != Some(cache.spec.port) {
        return Err(format!("service port {port:?}, want {}", cache.spec.port));
    }
    let status = cache.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if status.replicas != replicas
        || status.ready_replicas != replicas
        || status.observed_generation != cache.metadata.generation
        || !ready
    {
        return Err(format!(
            "status replicas={} ready={} observedGeneration={:?} (generation {:?}) Ready={ready}",
            status.replicas,
            status.ready_replicas,
            status.observed_generation,
            cache.metadata.generation
        ));
    }
    Ok(())
}

/// The end state with fields that legitimately vary masked, and how many pods were created.
async fn end_state(admin: &Client, trace: &Trace) -> (String, u64) {
    let pod_creates = trace
        .lines()
        .iter()
        .filter(|l| l.contains("write POST /api/v1/namespaces/default/pods → 201"))
        .count() as u64;
    let cache = Api::<Cache>::namespaced(admin.clone(), NS)
        .get(CACHE)
        .await
        .ok();
    let pods = owned_pods(admin).await;
    let state = match cache {
        Some(c) => {
            let s = c.status.unwrap_or_default();
            format!(
                "spec={:?} pods={pods:?} status(replicas={}, ready={}, selector={})",
                (
                    c.spec.replicas,
                    c.spec.image,
                    c.spec.port,
                    c.spec.memory_mib
                ),
                s.replicas,
                s.ready_replicas,
                s.selector
            )
        }
        None => "no Cache".into(),
    };
    (state, pod_creates)
}

/// Crash the controller after each of the writes a fault-free run makes, one run per
/// write: every "crash between two writes" the reference reconcile can meet.
pub fn systematic_crashes(seed: u64, options: &Options, reconciler: &ReconcileFn) -> Vec<Report> {
    let quiet = Options {
        faults: FaultRates::none(),
        crash_after_write: None,
        ..options.clone()
    };
    let reference = run_once(seed, &quiet, reconciler);
    (1..=reference.writes_in_window)
        .map(|n| {
            run_seed(
                seed,
                &Options {
                    crash_after_write: Some(n),
                    ..quiet.clone()
                },
                reconciler,
            )
        })
        .collect()
}
