//! The operator under test runs in its own process, so its memory and CPU are its own: the
//! parent reads them from `/proc`, and asks the child for its reconcile count over stdin.
//!
//! The child is `steady bench operator-process` (hidden): it connects with a kubeconfig,
//! like any operator, and answers each `stats` line on stdin with one JSON line on
//! stdout. It stops when stdin closes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::{Plan, Runtime};

/// Flags of the hidden `steady bench operator-process`.
#[derive(clap::Args, Debug)]
pub struct OperatorProcessArgs {
    #[arg(long, value_enum)]
    pub runtime: Runtime,
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Converged Caches are reconciled again this often.
    #[arg(long, value_parser = crate::server::parse_duration)]
    pub resync: Duration,
    /// Reconciles running at once.
    #[arg(long)]
    pub concurrency: u16,
    /// Run steady's operator without `Config::skip_unchanged`.
    #[arg(long)]
    pub keep_echoes: bool,
}

/// The child: run one operator until stdin closes.
pub async fn serve(args: OperatorProcessArgs) -> anyhow::Result<()> {
    let client = crate::operator::client(Some(&args.kubeconfig)).await?;
    let reconciles = Arc::new(AtomicU64::new(0));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let stopped = async move {
        let _ = stopped.await;
    };
    // Reconciles by trigger, which only steady's runtime reports.
    let mut by_trigger = None;
    let operator = match args.runtime {
        Runtime::Steady => {
            let config = steady_runtime::Config {
                name: "cache".into(),
                concurrency: usize::from(args.concurrency),
                resync_period: Some(args.resync),
                skip_unchanged: !args.keep_echoes,
                ..steady_cache_operator::default_config()
            };
            let counter = reconciles.clone();
            let metrics = steady_runtime::metrics::Metrics::new();
            by_trigger = Some(metrics.controller(&config.name));
            let (controller, data) = steady_cache_operator::controller(
                client,
                config,
                steady_cache_operator::system_clock(),
            );
            let controller = controller.with_metrics(metrics);
            tokio::spawn(async move {
                let reconcile = move |cache, ctx| {
                    counter.fetch_add(1, Ordering::Relaxed);
                    steady_cache_operator::reconcile(cache, ctx)
                };
                if let Err(e) = controller.run(reconcile, data, stopped).await {
                    tracing::error!(error = %e, "the steady controller stopped");
                }
            })
        }
        Runtime::KubeRuntime => tokio::spawn(super::kube_runtime::run(
            client,
            args.concurrency,
            args.resync,
            reconciles.clone(),
            stopped,
        )),
    };
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        if line.trim() == "stats" {
            let stats = serde_json::json!({
                "reconciles": reconciles.load(Ordering::Relaxed),
                "heap_in_use": heap_in_use(),
                "skipped": by_trigger.as_ref().map(|m| m.skipped()),
                "by_trigger": by_trigger.as_ref().map(|m| {
                    m.reconciles_by_trigger()
                        .into_iter()
                        .collect::<BTreeMap<_, _>>()
                }),
            });
            stdout.write_all(format!("{stats}\n").as_bytes()).await?;
            stdout.flush().await?;
        }
    }
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), operator).await;
    Ok(())
}

/// Bytes the program holds from the allocator (jemalloc's `stats.allocated`), so RSS can be
/// split into what the program holds and what the allocator keeps beside it. `None` where
/// the binary does not run on jemalloc.
#[cfg(not(target_env = "msvc"))]
fn heap_in_use() -> Option<u64> {
    // jemalloc caches its statistics; advancing the epoch refreshes them.
    tikv_jemalloc_ctl::epoch::advance().ok()?;
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().ok()?;
    u64::try_from(allocated).ok()
}

#[cfg(target_env = "msvc")]
fn heap_in_use() -> Option<u64> {
    None
}

/// The operator's command: `exe`, or, when `STEADY_BENCH_OPERATOR_WRAPPER` is set (e.g.
/// `heaptrack -o /tmp/operator`), that command with `exe` as its first argument, so a
/// profiler sees the operator alone and not the server and clients beside it.
fn wrapped_command(exe: PathBuf) -> tokio::process::Command {
    let wrapper = std::env::var("STEADY_BENCH_OPERATOR_WRAPPER").unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut command = tokio::process::Command::new(program);
            command.args(words).arg(exe);
            command
        }
        None => tokio::process::Command::new(exe),
    }
}

/// User + system CPU seconds the process `/proc/<process>` has used (`self`: this one).
pub fn cpu_seconds_of(process: &str) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{process}/stat"))
        .with_context(|| format!("cannot read /proc/{process}/stat"))?;
    // Fields after the parenthesised command name; utime and stime are the 12th and
    // 13th of those.
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => Ok((user + system) as f64 / USER_HZ),
        _ => anyhow::bail!("unexpected /proc/{process}/stat: {stat}"),
    }
}

/// The machine's idle and total CPU seconds since boot, all CPUs together (`/proc/stat`).
pub fn machine_cpu_seconds() -> anyhow::Result<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").context("cannot read /proc/stat")?;
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .context("no cpu line in /proc/stat")?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal …: idle and iowait are idle time.
    let idle = ticks.iter().skip(3).take(2).sum::<u64>();
    let total = ticks.iter().take(8).sum::<u64>();
    Ok((idle as f64 / USER_HZ, total as f64 / USER_HZ))
}

/// What the operator process reports about itself.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Reconciles started so far.
    pub reconciles: u64,
    /// See [`heap_in_use`].
    pub heap_in_use: Option<u64>,
    /// Reconciles started so far with a trigger of each kind (steady's runtime only).
    pub by_trigger: Option<BTreeMap<String, u64>>,
    /// Wake-ups skipped because the Cache's inputs were unchanged (steady's runtime only).
    pub skipped: Option<u64>,
}

/// The parent's handle on a running operator process.
pub struct OperatorProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    pid: u32,
}

/// Memory of a process, from `/proc/<pid>/status`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    /// Resident now (VmRSS), bytes.
    pub resident: u64,
    /// Peak resident since start or the last [`OperatorProcess::reset_peak`] (VmHWM), bytes.
    pub peak: u64,
}

/// Linux reports CPU time in clock ticks of USER_HZ, which is 100 on every architecture
/// Linux supports for user space ABI purposes.
const USER_HZ: f64 = 100.0;

impl OperatorProcess {
    pub async fn spawn(
        runtime: Runtime,
        kubeconfig: &Path,
        plan: &Plan,
    ) -> anyhow::Result<OperatorProcess> {
        let exe = std::env::current_exe().context("cannot find the steady executable")?;
        let mut child = wrapped_command(exe)
            .args(["bench", "operator-process", "--runtime", runtime.name()])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--resync")
            .arg(format!("{}ms", plan.resync.as_millis()))
            .arg("--concurrency")
            .arg(plan.concurrency.to_string())
            .args(plan.keep_echoes.then_some("--keep-echoes"))
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "error".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start the operator process")?;
        let pid = child.id().context("the operator process has no pid")?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        Ok(OperatorProcess {
            child,
            stdin,
            stdout,
            pid,
        })
    }

    /// Reconciles the operator has started so far.
    pub async fn reconciles(&mut self) -> anyhow::Result<u64> {
        Ok(self.stats().await?.reconciles)
    }

    /// Asks the operator for its [`Stats`].
    pub async fn stats(&mut self) -> anyhow::Result<Stats> {
        let stdin = self.stdin.as_mut().context("the operator was stopped")?;
        stdin.write_all(b"stats\n").await?;
        stdin.flush().await?;
        // A wrapper (see `wrapped_command`) may print its own lines; the operator's are
        // JSON objects.
        let line = loop {
            let line = self
                .stdout
                .next_line()
                .await?
                .context("the operator process exited")?;
            if line.starts_with('{') {
                break line;
            }
        };
        let stats: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("unexpected operator output {line:?}"))?;
        Ok(Stats {
            reconciles: stats["reconciles"]
                .as_u64()
                .with_context(|| format!("no reconcile count in {line:?}"))?,
            heap_in_use: stats["heap_in_use"].as_u64(),
            skipped: stats["skipped"].as_u64(),
            by_trigger: serde_json::from_value(stats["by_trigger"].clone())
                .with_context(|| format!("unexpected trigger counts in {line:?}"))?,
        })
    }

    pub fn memory(&self) -> anyhow::Result<Memory> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .context("cannot read the operator's /proc status")?;
        let kib = |field: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(Memory {
            resident: kib("VmRSS:") * 1024,
            peak: kib("VmHWM:") * 1024,
        })
    }

    /// User + system CPU seconds the operator has used.
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        cpu_seconds_of(&self.pid.to_string())
    }

    /// Start measuring the peak resident size afresh (Linux `clear_refs` value 5).
    pub fn reset_peak(&self) -> anyhow::Result<()> {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5")
            .context("cannot reset the operator's peak RSS")
    }

    /// Close stdin (the child's signal to stop) and wait for it to exit.
    pub async fn stop(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
