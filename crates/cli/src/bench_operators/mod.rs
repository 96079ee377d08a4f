//! `steady bench operators`: the Cache operator on steady's runtime side by side with the
//! same reconciler on kube-rs's `kube::runtime::Controller` ([`kube_runtime`]), each in its
//! own process against a fresh control plane over HTTPS, in one run.
//!
//! Scenarios (the numbering): 1 cold start, 2 steady state and a forced relist,
//! 3 self-heal latency idle and under churn, 4 churn at increasing rates, 5 memory against
//! the number of pods, 6 the server's raw write rate as the physical limit. The results
//! are one Markdown table and an SVG plot of cold-start time and memory against N.

mod kube_runtime;
mod process;
mod scenarios;
mod session;

use std::path::PathBuf;
use std::time::Duration;

pub use process::{OperatorProcessArgs, serve as serve_operator_process};

/// The two runtimes compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    Steady,
    KubeRuntime,
}

impl Runtime {
    pub const BOTH: [Runtime; 2] = [Runtime::Steady, Runtime::KubeRuntime];

    pub fn name(self) -> &'static str {
        match self {
            Runtime::Steady => "steady",
            Runtime::KubeRuntime => "kube-runtime",
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct OperatorsBenchArgs {
    /// Every scenario at small sizes, in about a minute: checks the harness works (its
    /// numbers mean little).
    #[arg(long)]
    pub quick: bool,
    /// Caches (2 replicas each) in the cold-start, steady-state, self-heal and churn
    /// scenarios (default 10,000; 40 with --quick).
    #[arg(long)]
    pub caches: Option<usize>,
    /// Pod counts of the memory scenario (default 10000,50000,100000; 100,200 with --quick).
    #[arg(long, value_delimiter = ',')]
    pub memory_pods: Vec<usize>,
    /// Reconciles running at once, in both runtimes.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,
    /// Run steady's Cache operator without `Config::skip_unchanged` (every event
    /// reconciles, as in kube-runtime): to measure what the skipping saves.
    #[arg(long)]
    pub keep_echoes: bool,
    /// Where to write the SVG plot of cold-start time and memory against N.
    #[arg(long, default_value = "bench-operators.svg")]
    pub plot: PathBuf,
}

/// Sizes and rates of one run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub caches: usize,
    /// Extra cold starts (2 replicas) for the plot; `caches` is always one of the points.
    pub cold_start_sizes: Vec<usize>,
    /// Pods in the memory scenario, as Caches of `memory_replicas` pods.
    pub memory_pods: Vec<usize>,
    pub memory_replicas: i32,
    pub resync: Duration,
    pub concurrency: u16,
    pub keep_echoes: bool,
    pub churn_rates: Vec<u32>,
    pub churn_duration: Duration,
    pub heal_deletes: usize,
    pub heal_rate: f64,
    /// Churn rate while self-heal is measured under load.
    pub under_load_rate: u32,
    pub relist_window: Duration,
    pub converge_timeout: Duration,
    /// How long the memory scenario waits for convergence before measuring anyway.
    pub memory_timeout: Duration,
    pub settle_timeout: Duration,
}

impl Plan {
    fn new(args: &OperatorsBenchArgs) -> Plan {
        let mut plan = Plan::defaults(args);
        if !args.memory_pods.is_empty() {
            plan.memory_pods = args.memory_pods.clone();
        }
        plan
    }

    fn defaults(args: &OperatorsBenchArgs) -> Plan {
        if args.quick {
            let caches = args.caches.unwrap_or(40);
            Plan {
                caches,
                cold_start_sizes: vec![caches / 2, caches],
                memory_pods: vec![100, 200],
                memory_replicas: 10,
                resync: Duration::from_millis(300),
                concurrency: args.concurrency,
                keep_echoes: args.keep_echoes,
                churn_rates: vec![20, 50, 100],
                churn_duration: Duration::from_secs(1),
                heal_deletes: 10,
                heal_rate: 20.0,
                under_load_rate: 50,
                relist_window: Duration::from_secs(1),
                converge_timeout: Duration::from_secs(60),
                memory_timeout: Duration::from_secs(60),
                settle_timeout: Duration::from_secs(10),
            }
        } else {
            let caches = args.caches.unwrap_or(10_000);
            Plan {
                caches,
                cold_start_sizes: vec![caches / 10, caches * 3 / 10, caches],
                memory_pods: vec![10_000, 50_000, 100_000],
                memory_replicas: 10,
                resync: Duration::from_secs(5),
                concurrency: args.concurrency,
                keep_echoes: args.keep_echoes,
                churn_rates: vec![200, 1_000, 5_000],
                churn_duration: Duration::from_secs(10),
                heal_deletes: 1_000,
                heal_rate: 100.0,
                under_load_rate: 1_000,
                relist_window: Duration::from_secs(5),
                converge_timeout: Duration::from_secs(1_800),
                memory_timeout: Duration::from_secs(300),
                settle_timeout: Duration::from_secs(60),
            }
        }
    }
}

pub async fn run(args: OperatorsBenchArgs) -> anyhow::Result<()> {
    let plan = Plan::new(&args);
    println!(
        "steady bench operators{}",
        if args.quick { " --quick" } else { "" }
    );
    println!("machine: {}", machine());
    println!(
        "{} Caches × 2 replicas, {} per namespace; concurrency {} in both runtimes; resync every {:?}; steady {}; each operator in its own process, over HTTPS, against a fresh durable control plane with the simulated node",
        plan.caches,
        session::CACHES_PER_NAMESPACE,
        plan.concurrency,
        plan.resync,
        if plan.keep_echoes {
            "runs every wake-up (--keep-echoes)"
        } else {
            "skips wake-ups that only echo its own writes"
        }
    );
    let results = scenarios::run_all(&plan).await?;
    println!();
    print!("{}", results.table());
    let svg = results.plot();
    if let Some(parent) = args.plot.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.plot, svg)
        .map_err(|e| anyhow::anyhow!("cannot write the plot {}: {e}", args.plot.display()))?;
    println!();
    println!("plot: {}", args.plot.display());
    Ok(())
}

/// CPUs, CPU model and memory of this machine, for the record.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    format!("{cpus} CPUs ({model}), {memory_gib:.0} GiB RAM")
}
