//! `steady soak kill`: start `steady server` on a temporary data directory, run concurrent
//! writers (creates and updates of self-checking ConfigMaps, see `ledger`), SIGKILL the
//! server at a random moment, restart it on the same directory and check that every
//! acknowledged write is there (as acknowledged, or overtaken by the one write that was in
//! flight), and that nothing stored is partial. Repeat.
//!
//! Each writer owns a bounded set of objects (creates up to `--objects-per-writer`, then
//! only updates, with the acknowledged resourceVersion as precondition), so a long
//! campaign checks a stable number of objects rather than an ever-growing one.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::ChildServer;
use super::ledger::{self, Data, Outcome, Record};

#[derive(clap::Args, Debug)]
pub struct KillArgs {
    /// How many SIGKILL-and-restart cycles.
    #[arg(long, default_value_t = 10)]
    pub cycles: usize,
    /// Concurrent writers.
    #[arg(long, default_value_t = 8)]
    pub writers: usize,
    /// Seed of the kill moments and of the writers' choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Objects each writer creates before it only updates.
    #[arg(long, default_value_t = 40)]
    pub objects_per_writer: usize,
    /// The kill comes at a random moment up to this long after the first acknowledgement.
    #[arg(long, default_value = "1500ms", value_parser = crate::server::parse_duration)]
    pub max_run: Duration,
    /// The server's `--history-budget` (e.g. 2MiB): a small one makes it compact every
    /// few hundred writes, so kills also land in compactions.
    #[arg(long)]
    pub history_budget: Option<String>,
}

const LABEL: &str = "steady-soak=kill";
const WAIT: Duration = Duration::from_secs(60);

type Ledger = Arc<Mutex<HashMap<String, Record>>>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One cycle's writers' shared state.
struct Cycle {
    ledger: Ledger,
    /// Set, under the ledger lock, just before the SIGKILL: errors after it are expected.
    killed: AtomicBool,
    acks: AtomicU64,
    first_ack: tokio::sync::Notify,
    /// Write failures before the kill (each a problem).
    errors: Mutex<Vec<String>>,
}

#[derive(Default)]
struct Totals {
    acknowledged: u64,
    objects_checked: u64,
    lost: u64,
    in_flight_landed: u64,
    in_flight_lost: u64,
    problems: Vec<String>,
}

pub async fn run(args: KillArgs) -> anyhow::Result<()> {
    let workdir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let data_dir = workdir.path().join("data");
    let log = workdir.path().join("server.log");
    let ledger: Ledger = Arc::default();
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut totals = Totals::default();
    let started = Instant::now();
    let server_args: Vec<&str> = match &args.history_budget {
        Some(budget) => vec!["--history-budget", budget],
        None => Vec::new(),
    };
    let mut server = ChildServer::start(&data_dir, &log, &server_args).await?;

    for cycle in 0..args.cycles {
        let client = server.client().await?;
        let shared = Arc::new(Cycle {
            ledger: ledger.clone(),
            killed: AtomicBool::new(false),
            acks: AtomicU64::new(0),
            first_ack: tokio::sync::Notify::new(),
            errors: Mutex::default(),
        });
        let writers: Vec<_> = (0..args.writers)
            .map(|w| {
                let api = Api::default_namespaced(client.clone());
                let writer_rng = StdRng::seed_from_u64(rng.random());
                tokio::spawn(writer(
                    api,
                    w,
                    args.objects_per_writer,
                    writer_rng,
                    shared.clone(),
                ))
            })
            .collect();
        // The random moment: some time after the first acknowledgement.
        tokio::time::timeout(WAIT, shared.first_ack.notified())
            .await
            .with_context(|| format!("cycle {cycle}: no write acknowledged within {WAIT:?}"))?;
        let run_for =
            rng.random_range(Duration::from_millis(1)..args.max_run.max(Duration::from_millis(2)));
        tokio::time::sleep(run_for).await;
        // Kill with the ledger locked: no acknowledgement is recorded meanwhile, and every
        // write marked in flight was sent before the kill or will fail.
        let in_flight = {
            let ledger = lock(&ledger);
            shared.killed.store(true, Ordering::SeqCst);
            server.send_sigkill()?;
            ledger.values().filter(|r| r.in_flight.is_some()).count()
        };
        server.wait_exit().await?;
        for writer in writers {
            tokio::time::timeout(WAIT, writer)
                .await
                .context("a writer did not stop after the kill")?
                .context("a writer failed")?;
        }
        let acks = shared.acks.load(Ordering::SeqCst);
        totals.acknowledged += acks;
        totals.problems.extend(
            lock(&shared.errors)
                .drain(..)
                .map(|e| format!("cycle {cycle}: {e}")),
        );

        server = ChildServer::start(&data_dir, &log, &server_args).await?;
        let stored = stored(&server.client().await?).await?;
        let before = (totals.lost, totals.in_flight_landed, totals.in_flight_lost);
        verify(&ledger, &stored, cycle, &mut totals);
        println!(
            "cycle {cycle}: {acks} writes acknowledged, {in_flight} in flight at SIGKILL after {run_for:?}; {} objects checked, {} lost, in flight: {} landed, {} lost",
            stored.len(),
            totals.lost - before.0,
            totals.in_flight_landed - before.1,
            totals.in_flight_lost - before.2,
        );
    }
    let panics = server.panics();
    totals.problems.extend(
        panics
            .into_iter()
            .map(|line| format!("the server panicked: {line}")),
    );
    server.terminate().await?;
    println!(
        "soak kill: seed {}, {} cycles, {} writers in {:.1}s: {} acknowledged writes, {} object checks after restarts, {} lost; writes in flight at the kills: {} landed, {} lost (allowed)",
        args.seed,
        args.cycles,
        args.writers,
        started.elapsed().as_secs_f64(),
        totals.acknowledged,
        totals.objects_checked,
        totals.lost,
        totals.in_flight_landed,
        totals.in_flight_lost,
    );
    for problem in &totals.problems {
        println!("  {problem}");
    }
    if totals.lost > 0 || !totals.problems.is_empty() {
        bail!(
            "{} acknowledged writes lost, {} other problems (seed {})",
            totals.lost,
            totals.problems.len(),
            args.seed
        );
    }
    Ok(())
}

fn configmap(name: &str, data: &Data, resource_version: Option<u64>) -> anyhow::Result<ConfigMap> {
    let (key, value) = LABEL.split_once('=').unwrap_or((LABEL, ""));
    Ok(serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {key: value},
            "resourceVersion": resource_version.map(|rv| rv.to_string()),
        },
        "data": data,
    }))?)
}

fn rv_number(cm: &ConfigMap) -> Option<u64> {
    cm.metadata.resource_version.as_ref()?.parse().ok()
}

/// One writer: its objects are `w<N>-<K>`; it creates them up to `cap`, then updates them,
/// until a write fails after the kill. A failure before the kill is recorded and ends it.
async fn writer(
    api: Api<ConfigMap>,
    number: usize,
    cap: usize,
    mut rng: StdRng,
    cycle: Arc<Cycle>,
) {
    let prefix = format!("w{number}-");
    // This writer's acknowledged objects: name, resourceVersion, version number.
    let mut mine: Vec<(String, u64, u32)> = lock(&cycle.ledger)
        .iter()
        .filter(|(name, _)| name.starts_with(&prefix))
        .filter_map(|(name, record)| {
            let (rv, data) = record.acked.as_ref()?;
            Some((name.clone(), *rv, data.get("version")?.parse().ok()?))
        })
        .collect();
    mine.sort();
    let mut next_name = mine.len();
    let pp = PostParams::default();
    while !cycle.killed.load(Ordering::SeqCst) {
        let update = !mine.is_empty() && (mine.len() >= cap || rng.random_bool(0.5));
        let (name, version, index) = if update {
            let index = rng.random_range(0..mine.len());
            (mine[index].0.clone(), mine[index].2 + 1, Some(index))
        } else {
            next_name += 1;
            (format!("{prefix}{next_name}"), 0, None)
        };
        let data = ledger::content(&name, version);
        let object = match configmap(&name, &data, index.map(|i| mine[i].1)) {
            Ok(object) => object,
            Err(e) => {
                lock(&cycle.errors).push(format!("{name}: cannot build the object: {e}"));
                return;
            }
        };
        lock(&cycle.ledger)
            .entry(name.clone())
            .or_default()
            .in_flight = Some(data.clone());
        let result = match index {
            Some(_) => api.replace(&name, &pp, &object).await,
            None => api.create(&pp, &object).await,
        };
        let stored = match result {
            Ok(stored) => stored,
            // The server is gone: this write stays in flight.
            Err(_) if cycle.killed.load(Ordering::SeqCst) => return,
            Err(e) => {
                lock(&cycle.errors).push(format!("{name}: write failed before the kill: {e}"));
                return;
            }
        };
        let Some(rv) = rv_number(&stored).filter(|_| stored.data.as_ref() == Some(&data)) else {
            lock(&cycle.errors).push(format!(
                "{name}: the answer does not carry the data written"
            ));
            return;
        };
        {
            let mut ledger = lock(&cycle.ledger);
            if let Some(record) = ledger.get_mut(&name) {
                record.in_flight = None;
                record.acked = Some((rv, data));
            }
        }
        match index {
            Some(i) => {
                mine[i].1 = rv;
                mine[i].2 = version;
            }
            None => mine.push((name, rv, version)),
        }
        if cycle.acks.fetch_add(1, Ordering::SeqCst) == 0 {
            cycle.first_ack.notify_one();
        }
    }
}

/// Every ConfigMap the writers wrote, as stored: name → (resourceVersion, data).
async fn stored(client: &kube::Client) -> anyhow::Result<BTreeMap<String, (u64, Data)>> {
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let list = api
        .list(&ListParams::default().labels(LABEL))
        .await
        .context("cannot list the written ConfigMaps after the restart")?;
    Ok(list
        .items
        .into_iter()
        .map(|cm| {
            let rv = rv_number(&cm).unwrap_or(0);
            (
                cm.metadata.name.unwrap_or_default(),
                (rv, cm.data.unwrap_or_default()),
            )
        })
        .collect())
}

/// Check the restarted server against the ledger, then settle the ledger to what is stored
/// (the writes in flight are decided now).
fn verify(
    ledger: &Ledger,
    stored: &BTreeMap<String, (u64, Data)>,
    cycle: usize,
    totals: &mut Totals,
) {
    let mut ledger = lock(ledger);
    for (name, (rv, data)) in stored {
        if !ledger::is_complete(name, data) {
            totals.problems.push(format!(
                "cycle {cycle}: {name} at RV {rv} is partial or corrupt"
            ));
        }
        if !ledger.contains_key(name) {
            totals.problems.push(format!(
                "cycle {cycle}: {name} is stored but was never written"
            ));
        }
    }
    for (name, record) in ledger.iter() {
        totals.objects_checked += u64::from(record.acked.is_some());
        match ledger::classify(record, stored.get(name)) {
            Outcome::AsAcknowledged { in_flight_lost } => totals.in_flight_lost += u64::from(in_flight_lost),
            Outcome::InFlightLanded => totals.in_flight_landed += 1,
            Outcome::InFlightLost => totals.in_flight_lost += 1,
            Outcome::RevisionWentBack => totals.problems.push(format!(
                "cycle {cycle}: {name}: the write in flight landed with a revision not above the acknowledged one"
            )),
            Outcome::Lost => {
                totals.lost += 1;
                totals.problems.push(format!(
                    "cycle {cycle}: {name}: acknowledged {:?}, in flight {:?}, stored {:?}",
                    record.acked.as_ref().map(|(rv, d)| (rv, d.get("version"))),
                    record.in_flight.as_ref().map(|d| d.get("version")),
                    stored.get(name).map(|(rv, d)| (rv, d.get("version"))),
                ));
            }
        }
    }
    ledger.retain(|name, _| stored.contains_key(name));
    for (name, record) in ledger.iter_mut() {
        record.acked = stored.get(name).cloned();
        record.in_flight = None;
    }
}
