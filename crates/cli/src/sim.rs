//! `steady sim`: a compiled-in scenario (the Cache operator, the Cache scenario with a
//! deliberately wrong reconciler, or the Web operator owning a Deployment run by the
//! cluster's workload controllers) under injected faults, seed after seed, checked against
//! the convergence properties. A failing seed prints its replay command and its trace; a
//! replay (`--seed`) prints the whole trace and its hash, the same as the test API's.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context as _;
use steady_sim::{FaultKind, FaultRates, PROPERTIES, Report, Scenario, Simulation};

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// Which compiled-in scenario: cache, cache-quota (a pod quota refuses the scale-up
    /// until raised), cache-rescale (scaled 4 → 1 → 3 twice: pods recreated under the names
    /// of pods just deleted), cache-rbac (the operator held by RBAC to its manifests' ClusterRole),
    /// cache-generate-name, cache-edge-triggered,
    /// cache-record-then-create, cache-status-every-reconcile, cache-status-counter,
    /// cache-drift-on-dropped-field, cache-same-status-applied; web (an operator owning a Deployment, with the cluster's
    /// workload controllers), web-owns-all-annotations.
    #[arg(long, default_value = "cache")]
    pub scenario: String,
    /// How many seeds to run.
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// Run only this seed and print its whole trace (a replay).
    #[arg(long)]
    pub seed: Option<u64>,
    /// First seed of the campaign.
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// Comma-separated fault kinds (default: all). Kinds: drop-event, duplicate-event,
    /// delay-event, cut-watch, stale-list, conflict, throttle, server-error, timeout,
    /// lost-response, crash, pod-failure, pod-deletion; or `none`.
    #[arg(long, value_parser = parse_faults)]
    pub faults: Option<FaultList>,
    /// Seeds run in parallel, one single-threaded simulation per worker (default: CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
}

/// Run every seed on `jobs` worker threads; reports come back in seed order.
fn run_all(
    seeds: &[u64],
    simulation: &Simulation,
    scenario: &Scenario,
    jobs: Option<usize>,
) -> Vec<Report> {
    let jobs = jobs
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .clamp(1, seeds.len().max(1));
    // The fault-free reference does not depend on the seed: compute it once.
    let reference = simulation.reference(scenario, seeds.first().copied().unwrap_or(0));
    if !reference.passed() {
        // The fault-free run itself fails: that is the finding, whatever the faults do.
        eprintln!("the fault-free run of seed {} fails", reference.seed);
        return vec![reference];
    }
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let failing = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Report>>> = seeds.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(seed) = seeds.get(i) else { break };
                    let report = simulation.run_against(scenario, *seed, &reference);
                    if !report.passed() {
                        failing.fetch_add(1, Ordering::SeqCst);
                    }
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(report);
                    }
                    let done = finished.fetch_add(1, Ordering::SeqCst) + 1;
                    progress(done, seeds.len(), failing.load(Ordering::SeqCst));
                }
            });
        }
    });
    slots
        .into_iter()
        .filter_map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

/// A comma-separated list of fault kinds (one clap value, not many).
#[derive(Debug, Clone)]
pub struct FaultList(Vec<FaultKind>);

fn parse_faults(list: &str) -> Result<FaultList, String> {
    if list == "none" {
        return Ok(FaultList(Vec::new()));
    }
    list.split(',')
        .map(|name| {
            FaultKind::parse(name.trim()).ok_or_else(|| {
                let known: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown fault kind {name:?} (known: {})", known.join(", "))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(FaultList)
}

pub fn run(args: SimArgs) -> anyhow::Result<std::process::ExitCode> {
    let kinds = args
        .faults
        .clone()
        .map(|list| list.0)
        .unwrap_or_else(|| FaultKind::ALL.to_vec());
    let simulation = Simulation {
        faults: FaultRates::only(&kinds),
        ..Simulation::default()
    };
    let scenario = steady_sim::scenario(&args.scenario).with_context(|| {
        let known: Vec<String> = steady_sim::scenarios()
            .iter()
            .map(|s| s.name().to_string())
            .collect();
        format!(
            "unknown scenario {:?} (known: {})",
            args.scenario,
            known.join(", ")
        )
    })?;
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => (args.first_seed..args.first_seed + args.seeds).collect(),
    };
    let replaying = args.seed.is_some();
    let started = Instant::now();
    let mut injected: BTreeMap<FaultKind, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    let reports = run_all(&seeds, &simulation, &scenario, args.jobs);
    let mut hash = None;
    for report in reports {
        for (kind, n) in &report.injected {
            *injected.entry(*kind).or_default() += n;
        }
        if replaying {
            for line in &report.trace {
                println!("{line}");
            }
            hash = Some(report.trace_hash());
        }
        if !report.passed() {
            failures.push(report);
        }
    }
    eprintln!();
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "steady sim: scenario {} under faults ({})",
        scenario.name(),
        simulation.faults.flag()
    );
    println!(
        "  seeds run:            {} in {elapsed:.1}s ({:.0} seeds/s)",
        seeds.len(),
        seeds.len() as f64 / elapsed.max(1e-9)
    );
    println!("  faults injected:      {}", injected.values().sum::<u64>());
    for (kind, n) in &injected {
        println!("    {:<18}{n}", kind.name());
    }
    let properties: Vec<String> = PROPERTIES
        .iter()
        .map(|p| p.to_string())
        .chain(scenario.properties())
        .collect();
    println!("  properties checked:   {}", properties.join(", "));
    println!("  violations:           {}", failures.len());
    for report in &failures {
        println!();
        for v in &report.violations {
            println!("seed {}: {} — {}", report.seed, v.property, v.message);
        }
        println!(
            "  replay: {}",
            simulation.replay_command(&scenario, report.seed)
        );
    }
    if let Some(hash) = hash {
        println!("  trace hash:           {hash:016x}");
    }
    if let Some(first) = failures.first().filter(|_| !replaying) {
        println!("\ntrace of seed {}:", first.seed);
        for line in &first.trace {
            println!("{line}");
        }
    }
    Ok(if failures.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// A one-line progress bar on stderr.
fn progress(done: usize, total: usize, failed: usize) {
    const WIDTH: usize = 30;
    let filled = WIDTH * done / total.max(1);
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r[{}{}] {done}/{total} seeds, {failed} failing",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled)
    );
    let _ = err.flush();
}
