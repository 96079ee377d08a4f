//! `steady sim`: the Cache operator under injected faults, seed after seed, checked against
//! the convergence properties. A failing seed prints its replay command and its trace.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use steady_sim::{
    FaultKind, FaultRates, Options, PROPERTIES, Report, cache_reconciler, reference_run,
    run_seed_against,
};

#[derive(clap::Args, Debug)]
pub struct SimArgs {
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
    options: &Options,
    reconciler: &steady_sim::harness::ReconcileFn,
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
    let reference = reference_run(seeds.first().copied().unwrap_or(0), options, reconciler);
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
                    let report = run_seed_against(*seed, options, reconciler, &reference);
                    if !report.violations.is_empty() {
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
    let options = Options {
        faults: FaultRates::only(&kinds),
        ..Options::default()
    };
    let faults_flag = kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(",");
    let reconciler = cache_reconciler();
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => (args.first_seed..args.first_seed + args.seeds).collect(),
    };
    let replaying = args.seed.is_some();
    let started = Instant::now();
    let mut injected: BTreeMap<FaultKind, u64> = BTreeMap::new();
    let mut failures = Vec::new();
    let reports = run_all(&seeds, &options, &reconciler, args.jobs);
    for report in reports {
        for (kind, n) in &report.injected {
            *injected.entry(*kind).or_default() += n;
        }
        if replaying {
            for line in &report.trace {
                println!("{line}");
            }
        }
        if !report.violations.is_empty() {
            failures.push(report);
        }
    }
    eprintln!();
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "steady sim: the Cache operator under faults ({})",
        if kinds.is_empty() {
            "none".to_string()
        } else {
            faults_flag.clone()
        }
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
    println!("  properties checked:   {}", PROPERTIES.join(", "));
    println!("  violations:           {}", failures.len());
    for report in &failures {
        println!();
        for v in &report.violations {
            println!("seed {}: {} — {}", report.seed, v.property, v.message);
        }
        println!(
            "  replay: steady sim --seed {} --faults {}",
            report.seed,
            if faults_flag.is_empty() {
                "none"
            } else {
                &faults_flag
            }
        );
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
