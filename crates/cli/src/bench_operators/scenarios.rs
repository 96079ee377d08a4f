//! The scenarios, and the table and plot of their results.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use steady_cache_operator::Cache;
use steady_cache_operator::resources::{desired_pod, desired_service, template_hash};

use super::process::{self, OperatorProcess};
use super::session::{CacheRef, Requests, Session};
use super::{Plan, Runtime};
use crate::plot::{Chart, Series, render_svg};

/// Seed of every random choice (which Caches lose a pod, the churn order).
const SEED: u64 = 7;

/// The kinds each operator lists and watches: Caches, Pods, Services.
const WATCHED_KINDS: u64 = 3;

const MIB: f64 = 1024.0 * 1024.0;

pub struct ColdStart {
    pub caches: usize,
    pub seconds: f64,
    pub requests: Requests,
    pub peak_rss: u64,
    pub cpu_seconds: f64,
    /// Writes the server committed meanwhile, by every writer (the operator, and the
    /// simulated node binding and starting pods and recording Events).
    pub server_writes: u64,
    /// The node's Events among them (it records fewer the busier the server: see
    /// `required_writes`).
    pub events: u64,
    pub reconciles: u64,
}

impl ColdStart {
    /// The writes this cold start could not do without: two pod creates, a Service create
    /// and one status write per Cache, plus the node's own writes (binding and starting
    /// the pods), which are the same whoever runs the operator. Not the node's Events:
    /// like a kubelet it drops them while the server is behind, so how many it records
    /// depends on the load, and none is needed for a Cache to be Ready.
    fn required_writes(&self) -> u64 {
        let node_writes = self.server_writes.saturating_sub(self.requests.writes());
        4 * self.caches as u64 + node_writes.saturating_sub(self.events)
    }
}

pub struct SteadyState {
    pub window: Duration,
    pub requests: Requests,
    pub reconciles: u64,
    pub relist_requests: Requests,
    pub relist_reconciles: u64,
    /// From the 410 until the operator re-listed every kind and watches again.
    pub relist_seconds: f64,
    /// A spec update sent right after the 410: until its status shows it.
    pub update_after_relist: Duration,
    pub rss_before_relist: u64,
    pub relist_peak: u64,
}

pub struct ChurnPhase {
    pub sent_per_second: f64,
    pub reconciles_per_second: f64,
    pub reconciles_per_update: f64,
    /// Writes the server committed per update, by every writer (the harness's update, the
    /// operator, the node), from the first update until every status caught up.
    pub writes_per_update: f64,
    /// Reconciles per update that had a trigger of each kind (steady's runtime only):
    /// "primary", "owned", "resync", … A reconcile that merged several kinds counts in
    /// each.
    pub by_trigger_per_update: Option<BTreeMap<String, f64>>,
    /// Wake-ups skipped per update because the Cache's inputs were unchanged (steady's
    /// runtime only; NaN for kube-runtime).
    pub skipped_per_update: f64,
    /// Where the machine's CPU went, from the first update until every status caught up.
    pub cpu: CpuSplit,
    pub lags: Percentiles,
}

/// CPU cores used over an interval: the benchmark's own process (the server, the node,
/// the load generator and the tracker), the operator's, and the machine's idle share.
#[derive(Clone, Copy, Debug)]
pub struct CpuSplit {
    pub benchmark: f64,
    pub operator: f64,
    pub idle_fraction: f64,
}

/// CPU counters at one moment, for [`CpuSplit::since`].
struct CpuMark {
    at: Instant,
    benchmark: f64,
    operator: f64,
    machine_idle: f64,
    machine_total: f64,
}

impl CpuMark {
    fn now(operator: &OperatorProcess) -> anyhow::Result<CpuMark> {
        let (machine_idle, machine_total) = process::machine_cpu_seconds()?;
        Ok(CpuMark {
            at: Instant::now(),
            benchmark: process::cpu_seconds_of("self")?,
            operator: operator.cpu_seconds()?,
            machine_idle,
            machine_total,
        })
    }
}

impl CpuSplit {
    fn since(earlier: &CpuMark, operator: &OperatorProcess) -> anyhow::Result<CpuSplit> {
        let now = CpuMark::now(operator)?;
        let seconds = now.at.duration_since(earlier.at).as_secs_f64().max(1e-9);
        let total = (now.machine_total - earlier.machine_total).max(1e-9);
        Ok(CpuSplit {
            benchmark: (now.benchmark - earlier.benchmark) / seconds,
            operator: (now.operator - earlier.operator) / seconds,
            idle_fraction: (now.machine_idle - earlier.machine_idle) / total,
        })
    }
}

pub struct MemoryPoint {
    pub pods: usize,
    pub resident: u64,
    pub relist_peak: u64,
    /// Bytes the operator's allocator has handed out, read with `resident` (None off jemalloc,
    /// and for kube-runtime's process alike: both report through the same child).
    pub heap_in_use: Option<u64>,
    /// Every Cache was Ready within `Plan::memory_timeout`.
    pub converged: bool,
}

/// Everything one runtime did.
pub struct RuntimeResults {
    pub cold_starts: Vec<ColdStart>,
    pub steady_state: SteadyState,
    pub heal_idle: Percentiles,
    pub heal_under_load: Percentiles,
    /// The churn that ran beside `heal_under_load`.
    pub churn_under_heal: ChurnPhase,
    pub churn: Vec<ChurnPhase>,
    pub memory: Vec<MemoryPoint>,
}

pub struct Results {
    pub plan: Plan,
    /// Writes/s the server takes for the operator's objects at the operator's concurrency.
    pub raw_write_rate: f64,
    pub runtimes: BTreeMap<&'static str, RuntimeResults>,
}

#[derive(Clone, Copy, Default)]
pub struct Percentiles {
    pub p50: Duration,
    pub p99: Duration,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Percentiles {
        samples.sort();
        let at = |q: f64| {
            samples
                .get(((samples.len() as f64 * q).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or_default()
        };
        Percentiles {
            p50: at(0.50),
            p99: at(0.99),
        }
    }
}

pub async fn run_all(plan: &Plan) -> anyhow::Result<Results> {
    eprintln!("the limit: the server's raw write rate…");
    let raw_write_rate = raw_write_rate(plan).await?;
    eprintln!("the limit: {raw_write_rate:.0} writes/s");
    let mut runtimes = BTreeMap::new();
    for runtime in Runtime::BOTH {
        runtimes.insert(runtime.name(), run_runtime(plan, runtime).await?);
    }
    Ok(Results {
        plan: plan.clone(),
        raw_write_rate,
        runtimes,
    })
}

async fn run_runtime(plan: &Plan, runtime: Runtime) -> anyhow::Result<RuntimeResults> {
    let mut cold_starts = Vec::new();
    for &caches in plan.cold_start_sizes.iter().filter(|&&n| n != plan.caches) {
        eprintln!("{}: cold start of {caches} Caches…", runtime.name());
        let session = Session::start(false).await?;
        let refs = session.create_caches(caches, 2).await?;
        let (operator, cold) = cold_start(&session, runtime, &refs, plan).await?;
        cold_starts.push(cold);
        operator.stop().await;
        session.stop().await;
    }

    eprintln!(
        "{}: cold start of {} Caches, then steady state, relist, self-heal and churn…",
        runtime.name(),
        plan.caches
    );
    let session = Session::start(true).await?;
    let refs = session.create_caches(plan.caches, 2).await?;
    let (mut operator, cold) = cold_start(&session, runtime, &refs, plan).await?;
    cold_starts.push(cold);
    cold_starts.sort_by_key(|c| c.caches);
    let steady_state = steady_state(&session, &mut operator, plan).await?;
    eprintln!(
        "{}: relisted in {:.2} s; RSS {:.1} MiB before, {:.1} MiB peak",
        runtime.name(),
        steady_state.relist_seconds,
        steady_state.rss_before_relist as f64 / MIB,
        steady_state.relist_peak as f64 / MIB
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    let heal_idle = self_heal(&session, &refs, plan, &mut rng).await?;
    report_percentiles(runtime, "self-heal, idle", heal_idle);
    let mut churn = Churn::new(&refs, &mut rng);
    let mut phases = Vec::new();
    for &rate in &plan.churn_rates {
        let phase = churn.phase(&session, &mut operator, rate, plan).await?;
        report_percentiles(runtime, &format!("churn at {rate}/s"), phase.lags);
        phases.push(phase);
    }
    // Self-heal while Caches churn: both at once, then let the churn settle. First the
    // world comes to rest, so what is measured is 1,000/s of churn, not the last phase's
    // backlog (pods still terminating after 5,000/s); the probe Cache counts too.
    if let Err(e) = session
        .tracker
        .wait_quiet(refs.len() + 1, plan.settle_timeout)
        .await
    {
        eprintln!(
            "{}: not at rest before the self-heal under churn: {e}",
            runtime.name()
        );
    }
    let (heal_under_load, under_load) = tokio::join!(
        self_heal(&session, &refs, plan, &mut rng),
        churn.phase(&session, &mut operator, plan.under_load_rate, plan)
    );
    let (heal_under_load, churn_under_heal) = (heal_under_load?, under_load?);
    report_percentiles(runtime, "self-heal under churn", heal_under_load);
    report_percentiles(runtime, "churn beside self-heal", churn_under_heal.lags);
    operator.stop().await;
    session.stop().await;

    let mut memory = Vec::new();
    for &pods in &plan.memory_pods {
        eprintln!("{}: memory with {pods} pods…", runtime.name());
        let point = memory_point(plan, runtime, pods).await?;
        eprintln!(
            "{}: {pods} pods: RSS {:.1} MiB, heap in use {:.1} MiB, relist peak {:.1} MiB",
            runtime.name(),
            point.resident as f64 / MIB,
            point.heap_in_use.map_or(f64::NAN, |b| b as f64 / MIB),
            point.relist_peak as f64 / MIB
        );
        memory.push(point);
    }
    Ok(RuntimeResults {
        cold_starts,
        steady_state,
        heal_idle,
        heal_under_load,
        churn_under_heal,
        churn: phases,
        memory,
    })
}

/// "primary 1.00, owned 2.31, …" (kinds that never woke a reconcile left out), or "–"
/// for a runtime that does not count triggers.
fn by_trigger(phase: &ChurnPhase) -> String {
    let Some(counts) = &phase.by_trigger_per_update else {
        return "–".to_string();
    };
    let shown: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n > 0.0)
        .map(|(kind, n)| format!("{kind} {n:.2}"))
        .collect();
    shown.join(", ")
}

/// Progress on stderr, so a run stopped before its table still leaves its numbers.
fn report_percentiles(runtime: Runtime, what: &str, percentiles: Percentiles) {
    eprintln!(
        "{}: {what}: p50 {:.1} ms, p99 {:.1} ms",
        runtime.name(),
        percentiles.p50.as_secs_f64() * 1e3,
        percentiles.p99.as_secs_f64() * 1e3
    );
}

/// Scenario 1: start the operator with every Cache already there; time until all are
/// Ready at their generation.
async fn cold_start(
    session: &Session,
    runtime: Runtime,
    caches: &[CacheRef],
    plan: &Plan,
) -> anyhow::Result<(OperatorProcess, ColdStart)> {
    let before = session.counts.snapshot();
    let revision_before = session.api.store().revision();
    let events_before = session.events_stored()?;
    let started = Instant::now();
    let operator = OperatorProcess::spawn(runtime, &session.kubeconfig, plan).await?;
    session
        .tracker
        .wait_ready(caches.len(), plan.converge_timeout)
        .await
        .with_context(|| format!("{} did not converge", runtime.name()))?;
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "{}: {} Caches Ready at their generation after {seconds:.2} s",
        runtime.name(),
        caches.len()
    );
    let requests = session.counts.snapshot().since(&before);
    let mut operator = operator;
    let reconciles = operator.reconciles().await?;
    let cold = ColdStart {
        reconciles,
        caches: caches.len(),
        seconds,
        requests,
        peak_rss: operator.memory()?.peak,
        cpu_seconds: operator.cpu_seconds()?,
        server_writes: session.api.store().revision() - revision_before,
        events: session.events_stored()?.saturating_sub(events_before),
    };
    Ok((operator, cold))
}

/// Scenario 2: ten resync periods at the fixed point, then every watch expired (410).
async fn steady_state(
    session: &Session,
    operator: &mut OperatorProcess,
    plan: &Plan,
) -> anyhow::Result<SteadyState> {
    // One more Cache, without pods, whose update is timed across the relist.
    let probe = &session.create_probe().await?;
    let all = plan.caches + 1;
    session
        .tracker
        .wait_ready(all, plan.converge_timeout)
        .await?;
    let window = plan.resync * 10 + plan.resync / 2;
    let (requests_before, reconciles_before) =
        (session.counts.snapshot(), operator.reconciles().await?);
    tokio::time::sleep(window).await;
    let (requests_after, reconciles_after) =
        (session.counts.snapshot(), operator.reconciles().await?);

    let rss_before_relist = operator.memory()?.resident;
    operator.reset_peak()?;
    let before_relist = session.expire_watches();
    let expired = Instant::now();
    probe_update(session, probe).await?;
    session
        .wait_relisted(&before_relist, WATCHED_KINDS, plan.converge_timeout)
        .await?;
    let relist_seconds = expired.elapsed().as_secs_f64();
    let update_after_relist = session
        .tracker
        .settle_updates(plan.settle_timeout)
        .await
        .into_iter()
        .max()
        .unwrap_or_default();
    tokio::time::sleep(plan.relist_window).await;
    session
        .tracker
        .wait_ready(all, plan.converge_timeout)
        .await?;
    let relist_requests = session.counts.snapshot().since(&before_relist);
    let relist_reconciles = operator.reconciles().await? - reconciles_after;
    Ok(SteadyState {
        window,
        requests: requests_after.since(&requests_before),
        reconciles: reconciles_after - reconciles_before,
        relist_requests,
        relist_reconciles,
        relist_seconds,
        update_after_relist,
        rss_before_relist,
        relist_peak: operator.memory()?.peak,
    })
}

/// A spec change of the probe Cache (which has no pods: the operator's only write is its
/// status); the tracker times it until status shows it.
async fn probe_update(session: &Session, cache: &CacheRef) -> anyhow::Result<()> {
    update_spec(session, cache, serde_json::json!({"memoryMiB": 96})).await?;
    Ok(())
}

/// Merge `spec` into the Cache's spec and tell the tracker to time it. The server answers
/// 409 when other writers (the operator's status patches) keep winning its internal
/// retries, as kube-apiserver does; a user would retry, and so does this.
async fn update_spec(
    session: &Session,
    cache: &CacheRef,
    spec: serde_json::Value,
) -> Result<(), kube::Error> {
    let api: Api<Cache> = Api::namespaced(session.admin.clone(), &cache.namespace);
    let patch = Patch::Merge(serde_json::json!({ "spec": spec }));
    let mut attempts = 0;
    loop {
        let sent = Instant::now();
        match api
            .patch(&cache.name, &PatchParams::default(), &patch)
            .await
        {
            Ok(updated) => {
                let generation = updated.metadata.generation.unwrap_or(0);
                session.tracker.expect_update(cache.key(), generation, sent);
                return Ok(());
            }
            Err(kube::Error::Api(status)) if status.code == 409 && attempts < 10 => {
                attempts += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Scenario 3: delete pod 0 of distinct random Caches at a fixed rate; time from each
/// delete to its replacement existing.
async fn self_heal(
    session: &Session,
    caches: &[CacheRef],
    plan: &Plan,
    rng: &mut rand::rngs::StdRng,
) -> anyhow::Result<Percentiles> {
    let mut chosen: Vec<&CacheRef> = caches.iter().collect();
    chosen.shuffle(rng);
    chosen.truncate(plan.heal_deletes);
    let start = tokio::time::Instant::now();
    let interval = Duration::from_secs_f64(1.0 / plan.heal_rate);
    let deletes = futures::stream::iter(chosen.into_iter().enumerate().map(|(i, cache)| {
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(session.admin.clone(), &cache.namespace);
        let name = format!("{}-0", cache.name);
        let key = format!("{}/{name}", cache.namespace);
        async move {
            tokio::time::sleep_until(start + interval * i as u32).await;
            session.tracker.expect_heal(key);
            if let Err(e) = pods
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await
            {
                tracing::warn!(pod = %name, error = %e, "benchmark delete failed");
            }
        }
    }))
    .buffer_unordered(64)
    .collect::<Vec<()>>();
    deletes.await;
    Ok(Percentiles::of(
        session.tracker.settle_heals(plan.settle_timeout).await,
    ))
}

/// Scenario 4: spec updates (replicas 2 → 3 → 2 …) at a fixed rate, over every Cache in a
/// shuffled order, so one Cache's consecutive updates are a whole pass apart.
struct Churn<'a> {
    order: Vec<&'a CacheRef>,
    next: usize,
}

impl<'a> Churn<'a> {
    fn new(caches: &'a [CacheRef], rng: &mut rand::rngs::StdRng) -> Churn<'a> {
        let mut order: Vec<&CacheRef> = caches.iter().collect();
        order.shuffle(rng);
        Churn { order, next: 0 }
    }

    async fn phase(
        &mut self,
        session: &Session,
        operator: &mut OperatorProcess,
        rate: u32,
        plan: &Plan,
    ) -> anyhow::Result<ChurnPhase> {
        let updates = (f64::from(rate) * plan.churn_duration.as_secs_f64()) as usize;
        let first = self.next;
        self.next += updates;
        let before = operator.stats().await?;
        let cpu_before = CpuMark::now(operator)?;
        let revision_before = session.api.store().revision();
        let start = tokio::time::Instant::now();
        let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
        let order = &self.order;
        futures::stream::iter((first..first + updates).map(|n| {
            let cache = order[n % order.len()];
            let replicas = if (n / order.len()).is_multiple_of(2) {
                3
            } else {
                2
            };
            async move {
                tokio::time::sleep_until(start + interval * (n - first) as u32).await;
                let spec = serde_json::json!({ "replicas": replicas });
                if let Err(e) = update_spec(session, cache, spec).await {
                    tracing::warn!(cache = %cache.key(), error = %e, "benchmark update failed");
                }
            }
        }))
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
        let sending = start.elapsed().as_secs_f64();
        let after = operator.stats().await?;
        let reconciles = after.reconciles - before.reconciles;
        let lags = session.tracker.settle_updates(plan.settle_timeout).await;
        let server_writes = session.api.store().revision() - revision_before;
        let cpu = CpuSplit::since(&cpu_before, operator)?;
        let per_update = |n: u64| n as f64 / updates.max(1) as f64;
        let by_trigger_per_update = match (before.by_trigger, after.by_trigger) {
            (Some(before), Some(after)) => Some(
                after
                    .into_iter()
                    .map(|(kind, n)| {
                        let earlier = before.get(&kind).copied().unwrap_or(0);
                        (kind, per_update(n.saturating_sub(earlier)))
                    })
                    .collect(),
            ),
            _ => None,
        };
        let skipped_per_update = match (before.skipped, after.skipped) {
            (Some(before), Some(after)) => per_update(after.saturating_sub(before)),
            _ => f64::NAN,
        };
        Ok(ChurnPhase {
            skipped_per_update,
            cpu,
            sent_per_second: updates as f64 / sending,
            reconciles_per_second: reconciles as f64 / sending,
            reconciles_per_update: per_update(reconciles),
            writes_per_update: per_update(server_writes),
            by_trigger_per_update,
            lags: Percentiles::of(lags),
        })
    }
}

/// Scenario 5: resident memory once `pods` pods (Caches of `memory_replicas`) are
/// converged, and the peak while every watch re-lists.
async fn memory_point(plan: &Plan, runtime: Runtime, pods: usize) -> anyhow::Result<MemoryPoint> {
    let session = Session::start(false).await?;
    let caches = pods / plan.memory_replicas as usize;
    session.create_caches(caches, plan.memory_replicas).await?;
    let mut operator = OperatorProcess::spawn(runtime, &session.kubeconfig, plan).await?;
    // Memory is measured with the world cached, converged or not: an operator that cannot
    // converge this many Caches in time is reported as such, not waited for forever.
    let converged = session
        .tracker
        .wait_ready(caches, plan.memory_timeout)
        .await
        .is_ok();
    if !converged {
        eprintln!(
            "{}: {caches} Caches not all Ready after {:?}; measuring memory anyway",
            runtime.name(),
            plan.memory_timeout
        );
    }
    tokio::time::sleep(plan.relist_window).await;
    let heap_in_use = operator.stats().await?.heap_in_use;
    let resident = operator.memory()?.resident;
    operator.reset_peak()?;
    let before_relist = session.expire_watches();
    session
        .wait_relisted(&before_relist, WATCHED_KINDS, plan.converge_timeout)
        .await?;
    tokio::time::sleep(plan.relist_window).await;
    let relist_peak = operator.memory()?.peak;
    operator.stop().await;
    session.stop().await;
    Ok(MemoryPoint {
        pods,
        resident,
        relist_peak,
        heap_in_use,
        converged,
    })
}

/// Scenario 6: the writes a cold start needs (two pods, a Service and a status per Cache),
/// made directly over HTTPS at the operators' concurrency, as fast as the server takes
/// them.
async fn raw_write_rate(plan: &Plan) -> anyhow::Result<f64> {
    // No node: its binds, status updates and Events for the pods created here would share
    // the server with the writes timed, and be counted against them.
    let session = Session::start_without_nodes().await?;
    session.create_caches(plan.caches, 2).await?;
    let caches = Api::<Cache>::all(session.admin.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let client = crate::operator::client(Some(&session.kubeconfig)).await?;
    let started = Instant::now();
    futures::stream::iter(caches.into_iter().map(|cache| {
        let client = client.clone();
        async move {
            let namespace = cache.metadata.namespace.clone().unwrap_or_default();
            let name = cache.metadata.name.clone().unwrap_or_default();
            let hash = template_hash(&cache.spec);
            let pods = Api::namespaced(client.clone(), &namespace);
            for ordinal in 0..2 {
                pods.create(&PostParams::default(), &desired_pod(&cache, ordinal, &hash))
                    .await?;
            }
            Api::namespaced(client.clone(), &namespace)
                .create(&PostParams::default(), &desired_service(&cache))
                .await?;
            let status = serde_json::json!({"status": {
                "replicas": 2, "readyReplicas": 2,
                "observedGeneration": cache.metadata.generation,
            }});
            Api::<Cache>::namespaced(client, &namespace)
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                .await?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(usize::from(plan.concurrency))
    .collect::<Vec<anyhow::Result<()>>>()
    .await
    .into_iter()
    .collect::<anyhow::Result<()>>()?;
    let rate = (4 * plan.caches) as f64 / started.elapsed().as_secs_f64();
    session.stop().await;
    Ok(rate)
}

impl Results {
    fn of(&self, runtime: Runtime) -> &RuntimeResults {
        &self.runtimes[runtime.name()]
    }

    fn main_cold_start(&self, runtime: Runtime) -> &ColdStart {
        let all = &self.of(runtime).cold_starts;
        all.iter()
            .find(|c| c.caches == self.plan.caches)
            .unwrap_or(&all[all.len() - 1])
    }

    /// One Markdown table: scenario, measurement, steady, kube-runtime, their ratio.
    pub fn table(&self) -> String {
        let mut table = Table::default();
        let plan = &self.plan;
        let both = |f: &dyn Fn(Runtime) -> f64| (f(Runtime::Steady), f(Runtime::KubeRuntime));

        let cold = format!("1. cold start, {} Caches", plan.caches);
        table.numbers(
            &cold,
            "seconds until all Ready at their generation",
            both(&|r| self.main_cold_start(r).seconds),
            2,
        );
        for verb in [
            "list", "get", "watch", "create", "patch", "update", "delete",
        ] {
            table.numbers(
                &cold,
                &format!("{verb} requests"),
                both(&|r| self.main_cold_start(r).requests.get(verb) as f64),
                0,
            );
        }
        table.numbers(
            &cold,
            "reconciles",
            both(&|r| self.main_cold_start(r).reconciles as f64),
            0,
        );
        table.numbers(
            &cold,
            "operator peak RSS (MiB)",
            both(&|r| self.main_cold_start(r).peak_rss as f64 / MIB),
            1,
        );
        table.numbers(
            &cold,
            "operator CPU seconds",
            both(&|r| self.main_cold_start(r).cpu_seconds),
            2,
        );
        for n in &plan.cold_start_sizes {
            table.numbers(
                &format!("1. cold start, {n} Caches"),
                "seconds (plotted)",
                both(&|r| self.cold_start_at(r, *n).map_or(f64::NAN, |c| c.seconds)),
                2,
            );
            table.numbers(
                &format!("1. cold start, {n} Caches"),
                "operator peak RSS, MiB (plotted)",
                both(&|r| {
                    self.cold_start_at(r, *n)
                        .map_or(f64::NAN, |c| c.peak_rss as f64 / MIB)
                }),
                1,
            );
        }

        let limit = format!(
            "6. the limit: the server takes {:.0} writes/s",
            self.raw_write_rate
        );
        table.numbers(
            &limit,
            "writes committed during the cold start, all writers",
            both(&|r| self.main_cold_start(r).server_writes as f64),
            0,
        );
        table.numbers(
            &limit,
            "required writes (4 per Cache + the node's, its Events aside)",
            both(&|r| self.main_cold_start(r).required_writes() as f64),
            0,
        );
        let limit_seconds =
            |r| self.main_cold_start(r).required_writes() as f64 / self.raw_write_rate;
        table.numbers(
            &limit,
            "the limit: required writes ÷ raw rate (s)",
            both(&|r| limit_seconds(r)),
            2,
        );
        table.numbers(
            &limit,
            "cold start ÷ the limit",
            both(&|r| self.main_cold_start(r).seconds / limit_seconds(r)),
            2,
        );

        let steady = format!(
            "2. steady state, {:.1} s (10 resyncs)",
            self.of(Runtime::Steady).steady_state.window.as_secs_f64()
        );
        let ss = |r: Runtime| &self.of(r).steady_state;
        let steady_rows: &[SteadyStateRow] = &[
            ("writes", |s| s.requests.writes() as f64, 0),
            ("GET + LIST", |s| s.requests.reads() as f64, 0),
            ("reconciles", |s| s.reconciles as f64, 0),
        ];
        let relist = format!(
            "2. forced relist (410), until re-listed + {:.0} s",
            plan.relist_window.as_secs_f64()
        );
        let relist_rows: &[SteadyStateRow] = &[
            (
                "seconds from the 410 until every kind is re-listed and watched",
                |s| s.relist_seconds,
                2,
            ),
            (
                "update sent right after the 410 → status (ms)",
                |s| s.update_after_relist.as_secs_f64() * 1e3,
                1,
            ),
            ("LIST", |s| s.relist_requests.get("list") as f64, 0),
            ("GET", |s| s.relist_requests.get("get") as f64, 0),
            ("writes", |s| s.relist_requests.writes() as f64, 0),
            ("reconciles", |s| s.relist_reconciles as f64, 0),
            (
                "peak RSS during relist (MiB)",
                |s| s.relist_peak as f64 / MIB,
                1,
            ),
            (
                "RSS before relist (MiB)",
                |s| s.rss_before_relist as f64 / MIB,
                1,
            ),
        ];
        for (scenario, rows) in [(&steady, steady_rows), (&relist, relist_rows)] {
            for (measurement, value, decimals) in rows {
                table.numbers(scenario, measurement, both(&|r| value(ss(r))), *decimals);
            }
        }

        let idle = format!(
            "3. self-heal, {} pods at {:.0}/s, idle",
            plan.heal_deletes, plan.heal_rate
        );
        let loaded = format!(
            "3. self-heal, {} pods at {:.0}/s, under {}/s churn",
            plan.heal_deletes, plan.heal_rate, plan.under_load_rate
        );
        for (scenario, pick) in [
            (
                &idle,
                (|r: &RuntimeResults| r.heal_idle) as fn(&RuntimeResults) -> Percentiles,
            ),
            (&loaded, |r: &RuntimeResults| r.heal_under_load),
        ] {
            table.numbers(
                scenario,
                "p50 delete → replacement (ms)",
                both(&|r| pick(self.of(r)).p50.as_secs_f64() * 1e3),
                1,
            );
            table.numbers(
                scenario,
                "p99 delete → replacement (ms)",
                both(&|r| pick(self.of(r)).p99.as_secs_f64() * 1e3),
                1,
            );
        }

        let seconds = plan.churn_duration.as_secs_f64();
        // `Some(i)`: the i-th churn rate; `None`: the churn beside the self-heal.
        let mut churns: Vec<(String, Option<usize>)> = plan
            .churn_rates
            .iter()
            .enumerate()
            .map(|(i, rate)| {
                (
                    format!("4. churn, {rate} updates/s for {seconds:.0} s"),
                    Some(i),
                )
            })
            .collect();
        churns.push((
            format!(
                "4. churn, {} updates/s for {seconds:.0} s, beside the self-heal under churn",
                plan.under_load_rate
            ),
            None,
        ));
        for (scenario, index) in &churns {
            let phase = |r: Runtime| {
                let results = self.of(r);
                index.map_or(&results.churn_under_heal, |i| &results.churn[i])
            };
            table.numbers(
                scenario,
                "updates sent/s",
                both(&|r| phase(r).sent_per_second),
                0,
            );
            table.numbers(
                scenario,
                "reconciles/s",
                both(&|r| phase(r).reconciles_per_second),
                0,
            );
            table.numbers(
                scenario,
                "reconciles per update",
                both(&|r| phase(r).reconciles_per_update),
                2,
            );
            table.text(
                scenario,
                "reconciles per update with a trigger of each kind",
                Runtime::BOTH.map(|r| by_trigger(phase(r))),
            );
            table.numbers(
                scenario,
                "wake-ups skipped per update (inputs unchanged)",
                both(&|r| phase(r).skipped_per_update),
                2,
            );
            table.text(
                scenario,
                "CPU cores: benchmark process (server, node, load) / operator; machine idle",
                Runtime::BOTH.map(|r| {
                    let cpu = phase(r).cpu;
                    format!(
                        "{:.2} / {:.2}; {:.0} %",
                        cpu.benchmark,
                        cpu.operator,
                        cpu.idle_fraction * 100.0
                    )
                }),
            );
            table.numbers(
                scenario,
                "writes committed per update, all writers",
                both(&|r| phase(r).writes_per_update),
                2,
            );
            table.numbers(
                scenario,
                "p50 update → status (ms)",
                both(&|r| phase(r).lags.p50.as_secs_f64() * 1e3),
                1,
            );
            table.numbers(
                scenario,
                "p99 update → status (ms)",
                both(&|r| phase(r).lags.p99.as_secs_f64() * 1e3),
                1,
            );
            table.text(
                scenario,
                "keeps up (p99 < 1 s)",
                [Runtime::Steady, Runtime::KubeRuntime].map(|r| {
                    if phase(r).lags.p99 < Duration::from_secs(1) {
                        "yes".to_string()
                    } else {
                        "no".to_string()
                    }
                }),
            );
        }

        for (i, pods) in plan.memory_pods.iter().enumerate() {
            let scenario = format!("5. memory, {pods} pods");
            let point = |r: Runtime| &self.of(r).memory[i];
            table.text(
                &scenario,
                "every Cache Ready within the time allowed",
                Runtime::BOTH.map(|r| if point(r).converged { "yes" } else { "no" }.to_string()),
            );
            table.numbers(
                &scenario,
                "operator RSS, converged (MiB)",
                both(&|r| point(r).resident as f64 / MIB),
                1,
            );
            table.numbers(
                &scenario,
                "operator peak RSS during relist (MiB)",
                both(&|r| point(r).relist_peak as f64 / MIB),
                1,
            );
            table.numbers(
                &scenario,
                "relist peak ÷ converged RSS",
                both(&|r| point(r).relist_peak as f64 / point(r).resident as f64),
                2,
            );
        }
        for (i, pair) in plan.memory_pods.windows(2).enumerate() {
            table.numbers(
                "5. memory",
                &format!("bytes per pod (RSS slope, {} → {} pods)", pair[0], pair[1]),
                both(&|r| self.bytes_per_pod(r, i, |p| Some(p.resident))),
                0,
            );
            table.numbers(
                "5. memory",
                &format!(
                    "bytes per pod (heap in use slope, {} → {} pods)",
                    pair[0], pair[1]
                ),
                both(&|r| self.bytes_per_pod(r, i, |p| p.heap_in_use)),
                0,
            );
        }
        table.render()
    }

    fn cold_start_at(&self, runtime: Runtime, caches: usize) -> Option<&ColdStart> {
        self.of(runtime)
            .cold_starts
            .iter()
            .find(|c| c.caches == caches)
    }

    /// RSS growth per pod between the memory points `from` and `from + 1`.
    /// The slope of `bytes` between memory points `from` and `from + 1`.
    fn bytes_per_pod(
        &self,
        runtime: Runtime,
        from: usize,
        bytes: impl Fn(&MemoryPoint) -> Option<u64>,
    ) -> f64 {
        let points = &self.of(runtime).memory;
        let (Some(a), Some(b)) = (points.get(from), points.get(from + 1)) else {
            return f64::NAN;
        };
        match (bytes(a), bytes(b)) {
            (Some(low), Some(high)) if b.pods > a.pods => {
                (high as f64 - low as f64) / (b.pods - a.pods) as f64
            }
            _ => f64::NAN,
        }
    }

    /// Cold-start time and peak operator memory against N, both runtimes.
    pub fn plot(&self) -> String {
        let series = |value: &dyn Fn(&ColdStart) -> f64| -> Vec<Series> {
            Runtime::BOTH
                .iter()
                .map(|&r| Series {
                    name: r.name().to_string(),
                    points: self
                        .of(r)
                        .cold_starts
                        .iter()
                        .map(|c| (c.caches as f64, value(c)))
                        .collect(),
                })
                .collect()
        };
        render_svg(&[
            Chart {
                title: "Cold start: time until every Cache is Ready".into(),
                x_label: "Caches (2 pods each)".into(),
                y_label: "seconds".into(),
                series: series(&|c| c.seconds),
            },
            Chart {
                title: "Operator memory during cold start".into(),
                x_label: "Caches (2 pods each)".into(),
                y_label: "peak RSS (MiB)".into(),
                series: series(&|c| c.peak_rss as f64 / MIB),
            },
        ])
    }
}

/// Rows of `| scenario | measurement | steady | kube-runtime | steady / kube-runtime |`.
#[derive(Default)]
struct Table {
    rows: Vec<[String; 5]>,
}

/// One row of the steady-state report: the measurement, how to read it from a run's
/// [`SteadyState`], and its decimals.
type SteadyStateRow = (&'static str, fn(&SteadyState) -> f64, usize);

impl Table {
    fn numbers(&mut self, scenario: &str, measurement: &str, (a, b): (f64, f64), decimals: usize) {
        let show = |x: f64| {
            if x.is_finite() {
                format!("{x:.decimals$}")
            } else {
                "–".to_string()
            }
        };
        let ratio = if !(a.is_finite() && b.is_finite()) {
            "–".to_string()
        } else if b == 0.0 {
            if a == 0.0 { "=".into() } else { "∞".into() }
        } else {
            format!("{:.2}", a / b)
        };
        self.rows.push([
            scenario.to_string(),
            measurement.to_string(),
            show(a),
            show(b),
            ratio,
        ]);
    }

    fn text(&mut self, scenario: &str, measurement: &str, [a, b]: [String; 2]) {
        self.rows.push([
            scenario.to_string(),
            measurement.to_string(),
            a,
            b,
            String::new(),
        ]);
    }

    fn render(&self) -> String {
        let mut out = String::from(
            "| scenario | measurement | steady | kube-runtime | steady / kube-runtime |\n|---|---|---|---|---|\n",
        );
        for row in &self.rows {
            out.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        out
    }
}
