//! Runs a [`Scenario`]: the in-memory API server with the simulated node on a paused
//! current-thread runtime, the controller behind the fault layer (crashed and restarted
//! when a crash fault fires), the script, then the generic properties and the scenario's
//! own invariants and goals.
//!
//! Every random draw comes from the seed and every timestamp from the simulated clock: a
//! seed replays the same trace byte for byte, in any binary.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{TimeZone, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use steady_apiserver::ApiServer;
use steady_cluster::node::NodeConfig;
use steady_runtime::ObjectKey;
use tokio::time::Instant;

use crate::cluster::Workloads;
use crate::fault::{FaultKind, FaultRates, FaultService, Faults, HOT_LOOP_WRITES, Trace};
use crate::scenario::{Launch, RESYNC_PERIOD, Scenario, Step};
use crate::world::{Decodes, World};

/// The generic properties every run is checked against, needing nothing from the author.
pub const PROPERTIES: [&str; 4] = [
    "eventually-stable",
    "idempotent",
    "same-end-state",
    "runtime-invariants",
];

/// How a scenario is run: which faults, for how long, and the bounds of the properties.
///
/// ```
/// use std::time::Duration;
/// use steady_sim::{FaultKind, FaultRates, Simulation};
/// let only_crashes = Simulation {
///     faults: FaultRates::only(&[FaultKind::Crash]),
///     fault_window: Duration::from_secs(60),
///     ..Simulation::default()
/// };
/// assert_eq!(only_crashes.faults.kinds(), vec![FaultKind::Crash]);
/// ```
#[derive(Debug, Clone)]
pub struct Simulation {
    /// Which faults, how often.
    pub faults: FaultRates,
    /// Faults are injected from the controller's start until this time.
    pub fault_window: Duration,
    /// After faults stop, the controller's writes must stop within this bound…
    pub settle_bound: Duration,
    /// …for at least this long (shorter than a resync period, which the idempotency
    /// check then waits for).
    pub quiet_window: Duration,
    /// After a cold restart on the settled world, how long the new controller is watched
    /// for writes.
    pub cold_restart_window: Duration,
    /// Crash the controller right after its n-th write (systematic crash exploration).
    pub crash_after_write: Option<u64>,
}

impl Default for Simulation {
    fn default() -> Self {
        Simulation {
            faults: FaultRates::all(),
            fault_window: Duration::from_secs(30),
            settle_bound: Duration::from_secs(120),
            quiet_window: Duration::from_secs(10),
            cold_restart_window: Duration::from_secs(10),
            crash_after_write: None,
        }
    }
}

/// A property that failed, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// One of [`PROPERTIES`], or the name of a scenario's invariant or goal.
    pub property: String,
    /// What was seen, for a person.
    pub message: String,
}

/// The outcome of one seed.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The scenario run.
    pub scenario: String,
    /// The seed that reproduces this run.
    pub seed: u64,
    /// Every property that failed (the first failure of each); empty when the seed passed.
    pub violations: Vec<Violation>,
    /// Faults that fired, by kind.
    pub injected: BTreeMap<FaultKind, u64>,
    /// The whole trace of the run.
    pub trace: Vec<String>,
    /// The world at the end, normalised (see [`World::normalised`]).
    pub end_state: Vec<String>,
    /// Write requests the controller sent during the fault window (what systematic crashes
    /// explore: one run per request).
    pub write_requests_in_window: u64,
}

impl Report {
    /// Whether every property held.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The property names that failed.
    pub fn properties(&self) -> Vec<&str> {
        self.violations
            .iter()
            .map(|v| v.property.as_str())
            .collect()
    }

    /// A stable 64-bit FNV-1a hash of the trace: two runs of one seed, in any binary, have
    /// the same hash.
    pub fn trace_hash(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self.trace.iter().flat_map(|l| l.bytes().chain([b'\n'])) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash
    }

    /// The trace without the reconcile lines, at most `max` lines (the first and last
    /// halves): faults, user steps, writes, restarts.
    pub fn short_trace(&self, max: usize) -> Vec<String> {
        let lines: Vec<&String> = self
            .trace
            .iter()
            .filter(|l| !l.contains("  reconcile "))
            .collect();
        if lines.len() <= max {
            return lines.into_iter().cloned().collect();
        }
        let half = max / 2;
        let mut out: Vec<String> = lines[..half].iter().map(|l| l.to_string()).collect();
        out.push(format!("           … {} lines …", lines.len() - 2 * half));
        out.extend(lines[lines.len() - half..].iter().map(|l| l.to_string()));
        out
    }

    fn violate(&mut self, property: &str, message: String) {
        if !self.violations.iter().any(|v| v.property == property) {
            self.violations.push(Violation {
                property: property.into(),
                message,
            });
        }
    }
}

impl Simulation {
    /// Run `seed`: the fault-free run first (the reference), then the run under faults,
    /// compared with it.
    pub fn run(&self, scenario: &Scenario, seed: u64) -> Report {
        let reference = self.reference(scenario, seed);
        self.run_against(scenario, seed, &reference)
    }

    /// The fault-free run of `seed`, itself checked. For a deterministic controller its end
    /// state does not depend on the seed, so a campaign computes it once.
    pub fn reference(&self, scenario: &Scenario, seed: u64) -> Report {
        let quiet = Simulation {
            faults: FaultRates::none(),
            crash_after_write: None,
            ..self.clone()
        };
        quiet.run_alone(scenario, seed)
    }

    /// Run `seed` under faults and compare its end state with `reference`'s.
    pub fn run_against(&self, scenario: &Scenario, seed: u64, reference: &Report) -> Report {
        let mut report = self.run_alone(scenario, seed);
        if report.end_state != reference.end_state {
            let message = first_difference(&report.end_state, &reference.end_state);
            report.violate("same-end-state", message);
        }
        report
    }

    /// Crash the controller after each write a fault-free run makes, one run per write:
    /// every "crash between two writes" the controller can meet without other faults.
    pub fn systematic_crashes(&self, scenario: &Scenario, seed: u64) -> Vec<Report> {
        let reference = self.reference(scenario, seed);
        (1..=reference.write_requests_in_window)
            .map(|n| {
                let crash = Simulation {
                    faults: FaultRates::none(),
                    crash_after_write: Some(n),
                    ..self.clone()
                };
                crash.run_against(scenario, seed, &reference)
            })
            .collect()
    }

    /// The test API: run every seed of `seeds` and panic at the first that fails, naming
    /// the property, the seed, a shortened trace and the command that replays it. With
    /// `STEADY_SIM_SEED=<seed>` in the environment only that seed runs, and its whole
    /// trace is printed.
    ///
    /// ```no_run
    /// # let scenario = steady_sim::cache::scenario();
    /// // in a #[test]:
    /// steady_sim::Simulation::default().check(&scenario, 0..50);
    /// ```
    pub fn check(&self, scenario: &Scenario, seeds: impl IntoIterator<Item = u64>) {
        let replay = std::env::var("STEADY_SIM_SEED")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        let seeds: Vec<u64> = match replay {
            Some(seed) => vec![seed],
            None => seeds.into_iter().collect(),
        };
        let Some(first) = seeds.first() else { return };
        let reference = self.reference(scenario, *first);
        if !reference.passed() {
            panic!("{}", self.failure(scenario, &reference, true));
        }
        for seed in seeds {
            let report = self.run_against(scenario, seed, &reference);
            if replay.is_some() {
                println!("{}", report.trace.join("\n"));
            }
            if !report.passed() {
                panic!("{}", self.failure(scenario, &report, false));
            }
        }
    }

    /// What [`check`](Self::check) prints for a failed seed.
    pub fn failure(&self, scenario: &Scenario, report: &Report, fault_free: bool) -> String {
        let mut out = format!(
            "scenario {} failed at seed {}{}:\n",
            scenario.name(),
            report.seed,
            if fault_free { " without faults" } else { "" }
        );
        for v in &report.violations {
            out.push_str(&format!("  {}: {}\n", v.property, v.message));
        }
        out.push_str("trace (faults, user steps, writes):\n");
        for line in report.short_trace(60) {
            out.push_str(&format!("  {line}\n"));
        }
        out.push_str(&format!(
            "replay: {}\n",
            self.replay_command(scenario, report.seed)
        ));
        out
    }

    /// The one-line command that replays `seed` of `scenario`: `steady sim` for the
    /// scenarios compiled into it, else this test with `STEADY_SIM_SEED`.
    pub fn replay_command(&self, scenario: &Scenario, seed: u64) -> String {
        let faults = self.faults.flag();
        if crate::scenarios()
            .iter()
            .any(|s| s.name() == scenario.name())
            && self.is_standard()
        {
            return format!(
                "steady sim --scenario {} --seed {seed} --faults {faults}",
                scenario.name()
            );
        }
        let test = std::thread::current()
            .name()
            .filter(|n| *n != "main")
            .map(|n| format!(" {n} -- --exact --nocapture"))
            .unwrap_or_default();
        format!("STEADY_SIM_SEED={seed} cargo test{test}")
    }

    /// Whether `steady sim` can reproduce this simulation (its flags set only the faults).
    fn is_standard(&self) -> bool {
        let standard = Simulation {
            faults: self.faults.clone(),
            ..Simulation::default()
        };
        standard.fault_window == self.fault_window
            && standard.settle_bound == self.settle_bound
            && standard.quiet_window == self.quiet_window
            && standard.cold_restart_window == self.cold_restart_window
            && self.crash_after_write.is_none()
            && self.faults == FaultRates::only(&self.faults.kinds())
    }

    fn run_alone(&self, scenario: &Scenario, seed: u64) -> Report {
        // Outside the run's runtime: the first call builds the image on a runtime of its own.
        let image = bootstrapped(&scenario.crds);
        paused_runtime().block_on(Run::simulate(self, scenario, seed, image))
    }
}

/// The first line where two normalised worlds differ.
fn first_difference(faulty: &[String], reference: &[String]) -> String {
    let at = faulty
        .iter()
        .zip(reference)
        .position(|(a, b)| a != b)
        .unwrap_or(faulty.len().min(reference.len()));
    let line = |lines: &[String]| lines.get(at).cloned().unwrap_or_else(|| "(nothing)".into());
    format!(
        "the end state differs from the fault-free run ({} objects vs {}):\n    faulty:    {}\n    reference: {}",
        faulty.len(),
        reference.len(),
        line(faulty),
        line(reference)
    )
}

/// The runtime's own invariant: never two reconciles of one key at once.
#[derive(Default)]
pub(crate) struct Overlaps {
    running: Mutex<BTreeMap<ObjectKey, u32>>,
    seen: AtomicBool,
}

impl Overlaps {
    /// Mark `key` running until the guard drops (also when a crash cancels the reconcile).
    pub(crate) fn enter(self: &Arc<Self>, key: ObjectKey) -> RunningGuard {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let n = running.entry(key.clone()).or_default();
        *n += 1;
        if *n > 1 {
            self.seen.store(true, Ordering::SeqCst);
        }
        RunningGuard {
            overlaps: self.clone(),
            key,
        }
    }
}

/// Held while a reconcile runs.
pub(crate) struct RunningGuard {
    overlaps: Arc<Overlaps>,
    key: ObjectKey,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut running = self
            .overlaps
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = running.get_mut(&self.key) {
            *n = n.saturating_sub(1);
        }
    }
}

/// A single-threaded runtime whose clock only moves when every task waits.
fn paused_runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("cannot build the simulation runtime: {e}"),
    }
}

/// The simulated wall clock: a fixed epoch plus tokio's (paused) elapsed time, the same
/// one for the API server and the cluster's controllers.
fn clock() -> steady_apiserver::Clock {
    let epoch = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    steady_cluster::clock::starting_at(epoch)
}

/// One run in progress.
struct Run<'a> {
    options: &'a Simulation,
    scenario: &'a Scenario,
    server: ApiServer,
    admin: Client,
    faults: Arc<Faults>,
    launch: Launch,
    controller: Option<tokio::task::JoinHandle<()>>,
    /// The cluster's workload controllers, when the scenario runs them.
    workloads: Option<Workloads>,
    /// The store revision the invariants last held at: an unchanged world needs no check.
    checked_at: Option<u64>,
    /// What this run's snapshots of the world decoded so far.
    decodes: Arc<Decodes>,
    report: Report,
}

impl<'a> Run<'a> {
    async fn simulate(
        options: &'a Simulation,
        scenario: &'a Scenario,
        seed: u64,
        image: Result<&'static steady_store::Image, String>,
    ) -> Report {
        let trace = Trace::default();
        trace.log(format!("scenario {} seed {seed}", scenario.name()));
        let mut report = Report {
            scenario: scenario.name().into(),
            seed,
            ..Report::default()
        };
        let clock = clock();
        let server = match start_server(image, seed, &clock).await {
            Ok(server) => server,
            Err(e) => {
                report.violate("eventually-stable", e);
                report.trace = trace.lines();
                return report;
            }
        };
        let faults = Faults::new(
            seed,
            options.faults.clone(),
            options.crash_after_write,
            server.store().clone(),
            trace.clone(),
        );
        let workloads = scenario
            .workloads
            .then(|| Workloads::start(server.client(), seed, clock.clone(), &trace));
        let launch = Launch {
            seed,
            clock,
            trace,
            overlaps: Arc::new(Overlaps::default()),
            on_start: None,
        };
        // The nodes write through a client of their own, beside the fault layer: their
        // writes are neither faulted nor counted as the controller's.
        let nodes = NodeConfig {
            seed: Some(seed),
            clock: launch.clock.clone(),
            record_events: scenario.node_events,
            ..NodeConfig::default()
        };
        let node = steady_cluster::node::spawn(server.client(), nodes);
        let mut run = Run {
            options,
            scenario,
            admin: server.client(),
            server,
            faults,
            launch,
            controller: None,
            workloads,
            checked_at: None,
            decodes: Arc::default(),
            report,
        };
        run.go().await;
        run.workloads = None;
        node.abort();
        run.server.shutdown().await;
        let mut report = run.report;
        report.injected = run.faults.injected();
        report.trace = run.launch.trace.lines();
        report
    }

    async fn go(&mut self) {
        if let Err(e) = self.setup().await {
            self.report
                .violate("eventually-stable", format!("setup: {e}"));
            return;
        }
        self.faults.set_active(true);
        self.start_controller();
        self.fault_window().await;
        self.faults.set_active(false);
        self.report.write_requests_in_window = self.faults.write_requests();
        if self.settle().await {
            // The end state is the fixed point the writes stopped at, before the
            // idempotency probes (a cold restart may repair what the warm controller left).
            self.report.end_state = self.world().normalised();
            self.idempotent().await;
        }
        self.stop_controller();
        let world = self.world();
        if self.report.end_state.is_empty() {
            self.report.end_state = world.normalised();
        }
        self.check_invariants(&world);
        for (name, goal) in &self.scenario.goals {
            if let Err(why) = goal(&world) {
                self.report.violate(name, why);
            }
        }
        if self.launch.overlaps.seen.load(Ordering::SeqCst) {
            self.report.violate(
                "runtime-invariants",
                "two reconciles of one key ran at once".into(),
            );
        }
    }

    /// The scenario's setup steps (its CRDs are in the image the run started from).
    async fn setup(&self) -> Result<(), kube::Error> {
        for step in &self.scenario.setup {
            step.apply(&self.admin, Some(self.trace())).await?;
        }
        Ok(())
    }

    fn trace(&self) -> &Trace {
        &self.launch.trace
    }

    fn world(&self) -> World {
        World::read(self.server.store(), &self.decodes)
    }

    fn start_controller(&mut self) {
        let Some(start) = self.scenario.start.clone() else {
            return;
        };
        self.faults.thaw();
        let mut router = self.server.router();
        if let Some(identity) = &self.scenario.identity {
            router = router.layer(axum::Extension(identity.clone()));
        }
        let client = FaultService::client(router, self.faults.clone());
        self.controller = Some(tokio::spawn(start(client, self.launch.clone())));
    }

    fn stop_controller(&mut self) {
        if let Some(task) = self.controller.take() {
            task.abort();
        }
    }

    /// A crashed controller is gone (its tasks aborted); a new one starts a second later
    /// with empty caches.
    async fn restart_after_crash(&mut self) {
        self.stop_controller();
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.trace().log("controller restarts with empty caches");
        self.start_controller();
    }

    /// Faults on, the script played, invariants checked every second.
    async fn fault_window(&mut self) {
        let mut crashes = self.faults.crashes();
        let start = Instant::now();
        let end = start + self.options.fault_window;
        let mut next_step = 0;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while Instant::now() < end {
            tokio::select! {
                biased;
                changed = crashes.changed() => {
                    if changed.is_ok() {
                        self.restart_after_crash().await;
                    }
                }
                _ = tick.tick() => {
                    let script = &self.scenario.script;
                    while next_step < script.len() && start.elapsed() >= script[next_step].0 {
                        if let Err(e) = script[next_step].1.apply(&self.admin, Some(self.trace())).await {
                            self.trace().log(format!("user step failed: {e}"));
                        }
                        next_step += 1;
                    }
                    self.pod_faults().await;
                    self.check_invariants_now();
                }
            }
        }
        if crashes.has_changed().unwrap_or(false) {
            // A crash fired in the last instant of the window: restart as always.
            self.restart_after_crash().await;
        }
    }

    /// Eventually stable: within the bound after faults stop, the controller's writes stop
    /// for a quiet window. Returns whether they did.
    async fn settle(&mut self) -> bool {
        let stopped = Instant::now();
        let mut writes = self.faults.writes();
        let mut last_write = stopped;
        loop {
            if self.faults.hot_loop() {
                self.report.violate(
                    "eventually-stable",
                    format!(
                        "a hot loop: the controller wrote {HOT_LOOP_WRITES} times without \
                         simulated time passing (each write triggers its next reconcile)"
                    ),
                );
                return false;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.check_invariants_now();
            let now = Instant::now();
            if self.faults.writes() != writes {
                writes = self.faults.writes();
                last_write = now;
            }
            if now - last_write >= self.options.quiet_window {
                self.trace().log("the controller's writes stopped");
                return true;
            }
            if now - stopped >= self.options.settle_bound {
                let message = format!(
                    "{}s after faults stopped the controller still writes (last write {:.0}s ago)",
                    self.options.settle_bound.as_secs(),
                    (now - last_write).as_secs_f64()
                );
                self.report.violate("eventually-stable", message);
                return false;
            }
        }
    }

    /// Idempotent: at the fixed point a resync writes nothing, and neither does a
    /// controller started cold.
    async fn idempotent(&mut self) {
        let resync = RESYNC_PERIOD + RESYNC_PERIOD / 10 + Duration::from_secs(1);
        let warm = self.writes_during(resync).await;
        if warm > 0 {
            self.report.violate(
                "idempotent",
                format!("{warm} writes at the fixed point over a resync period (warm caches)"),
            );
        }
        self.stop_controller();
        self.trace().log("cold restart at the fixed point");
        self.start_controller();
        let cold = self.writes_during(self.options.cold_restart_window).await;
        if cold > 0 {
            self.report.violate(
                "idempotent",
                format!("{cold} writes after a cold restart on the settled world"),
            );
        }
    }

    /// Writes through the fault layer during `window`, invariants checked every second.
    async fn writes_during(&mut self, window: Duration) -> u64 {
        let before = self.faults.writes();
        let end = Instant::now() + window;
        while Instant::now() < end {
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.check_invariants_now();
        }
        self.faults.writes() - before
    }

    /// Check the invariants on the world as it is now (reading it only if there are any).
    fn check_invariants_now(&mut self) {
        let revision = self.server.store().revision();
        if !self.scenario.invariants.is_empty() && self.checked_at != Some(revision) {
            let world = self.world();
            self.check_invariants(&world);
        }
    }

    fn check_invariants(&mut self, world: &World) {
        self.checked_at = Some(self.server.store().revision());
        for (name, invariant) in &self.scenario.invariants {
            if let Err(why) = invariant(world) {
                let at = self.launch.trace.lines().len();
                self.launch
                    .trace
                    .log(format!("invariant {name} violated: {why}"));
                self.report
                    .violate(name, format!("{why} (trace line {at})"));
            }
        }
    }

    /// Someone else deletes a pod, or a pod fails: among live pods a controller owns.
    async fn pod_faults(&self) {
        let rates = &self.options.faults;
        if rates.rate(FaultKind::PodDeletion) <= 0.0 && rates.rate(FaultKind::PodFailure) <= 0.0 {
            return;
        }
        let world = self.world();
        let owned: Vec<(String, String)> = world
            .metadata::<Pod>()
            .into_iter()
            .filter(|p| p.deletion_timestamp.is_none())
            .filter(|p| {
                p.owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.controller == Some(true))
            })
            .filter_map(|p| Some((p.namespace?, p.name?)))
            .collect();
        if owned.is_empty() {
            return;
        }
        for (kind, step) in [
            (
                FaultKind::PodDeletion,
                Step::delete::<Pod> as fn(&str, &str) -> Step,
            ),
            (FaultKind::PodFailure, Step::fail_pod),
        ] {
            if self.faults.roll(kind) {
                let (namespace, name) = &owned[self.faults.random_index(owned.len())];
                self.trace()
                    .log(format!("fault {kind}: pod {namespace}/{name}"));
                let _ = step(namespace, name).apply(&self.admin, None).await;
            }
        }
    }
}

async fn start_server(
    image: Result<&steady_store::Image, String>,
    seed: u64,
    clock: &steady_apiserver::Clock,
) -> Result<ApiServer, String> {
    let store = steady_store::Store::in_memory_from(image?, Default::default())
        .await
        .map_err(|e| format!("store: {e}"))?;
    serve(store, seed, clock).await
}

async fn serve(
    store: steady_store::Store,
    seed: u64,
    clock: &steady_apiserver::Clock,
) -> Result<ApiServer, String> {
    let config = steady_apiserver::Config {
        seed: Some(seed),
        clock: clock.clone(),
        // One thread writes a small world: the next write of an object finds it decoded.
        keep_recent_writes: true,
        ..Default::default()
    };
    ApiServer::start(store, config)
        .await
        .map_err(|e| format!("server: {e}"))
}

/// The store every run of a scenario starts from: what the API server writes when it starts
/// on an empty store (namespaces, roles, the `kubernetes` Service…), then the scenario's
/// CRDs, the same in every run. Written once per process and set of CRDs, on a runtime of
/// its own, so that no run's schedule depends on whether it was the first; each run's seed
/// then draws everything written after it. Every run's CRDs are then the same bytes, and
/// their end-state lines are normalised once.
fn bootstrapped(crds: &[CustomResourceDefinition]) -> Result<&'static steady_store::Image, String> {
    type Images = BTreeMap<String, &'static Result<steady_store::Image, String>>;
    static IMAGES: Mutex<Images> = Mutex::new(BTreeMap::new());
    let key = serde_json::to_string(crds).map_err(|e| format!("crds: {e}"))?;
    // Held while an image is built: a worker that needs the same one waits for it.
    let mut images = IMAGES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let image = *images
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(build_image(crds))));
    image.as_ref().map_err(Clone::clone)
}

fn build_image(crds: &[CustomResourceDefinition]) -> Result<steady_store::Image, String> {
    paused_runtime().block_on(async {
        let store = steady_store::Store::in_memory(Default::default())
            .await
            .map_err(|e| format!("store: {e}"))?;
        let server = serve(store, 0, &clock()).await?;
        let api: Api<CustomResourceDefinition> = Api::all(server.client());
        for crd in crds {
            api.create(&PostParams::default(), crd)
                .await
                .map_err(|e| format!("install a CRD: {e}"))?;
        }
        // Whatever the server writes after a CRD's create (its conditions) lands first.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let image = server.store().image();
        server.shutdown().await;
        Ok(image)
    })
}
