//! `steady bench server`: the control plane's throughput and latency, measured side by side
//! in one run (HTTPS vs in-process client), on a durable SQLite store in a temporary directory.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};

use crate::server::ControlPlane;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub target: BenchTarget,
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchTarget {
    /// Creates/s (HTTPS and in-process), watch fan-out latency, large-list latency.
    Server(ServerBenchArgs),
    /// The controller runtime: work-queue cost per key, event-to-reconcile latency.
    Runtime(RuntimeBenchArgs),
    /// A Deployment of N replicas to every pod Running and Ready: time, writes, raw rate.
    Workloads(crate::bench_workloads::WorkloadsBenchArgs),
    /// The Cache operator on steady's runtime vs the same reconciler on kube-runtime.
    Operators(crate::bench_operators::OperatorsBenchArgs),
    /// One operator under test, driven by `steady bench operators` (internal).
    #[command(hide = true)]
    OperatorProcess(crate::bench_operators::OperatorProcessArgs),
}

#[derive(clap::Args, Debug)]
pub struct RuntimeBenchArgs {
    /// Small sizes: checks the harness works in seconds (numbers mean little).
    #[arg(long)]
    pub quick: bool,
}

#[derive(clap::Args, Debug)]
pub struct ServerBenchArgs {
    /// Small sizes: checks the harness works in seconds (numbers mean little).
    #[arg(long)]
    pub quick: bool,
    /// ConfigMaps (~1 KiB each) created per client type.
    #[arg(long, default_value_t = 10_000)]
    pub creates: usize,
    /// Concurrent clients creating.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Concurrent watchers for the delivery-latency measurement.
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,
    /// Objects created (one at a time) while the watchers watch.
    #[arg(long, default_value_t = 200)]
    pub watched_events: usize,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.target {
        BenchTarget::Server(args) => server(args).await,
        BenchTarget::Runtime(args) => crate::bench_runtime::run(args.quick).await,
        BenchTarget::Workloads(args) => crate::bench_workloads::run(args).await,
        BenchTarget::Operators(args) => crate::bench_operators::run(args).await,
        BenchTarget::OperatorProcess(args) => {
            crate::bench_operators::serve_operator_process(args).await
        }
    }
}

#[derive(Default)]
pub(crate) struct Report {
    rows: Vec<(String, String)>,
}

impl Report {
    pub(crate) fn add(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let (name, value) = (name.into(), value.into());
        println!("{name:<58} {value}");
        self.rows.push((name, value));
    }

    /// The rows again as a Markdown table (for docs/BENCHMARKS.md).
    pub(crate) fn print_table(&self) {
        println!();
        println!("| measurement | result |");
        println!("|---|---|");
        for (name, value) in &self.rows {
            println!("| {name} | {value} |");
        }
    }
}

async fn server(mut args: ServerBenchArgs) -> anyhow::Result<()> {
    if args.quick {
        args.creates = args.creates.min(500);
        args.watchers = args.watchers.min(10);
        args.watched_events = args.watched_events.min(20);
    }
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let plane = ControlPlane::start(
        dir.path(),
        "127.0.0.1:0".parse()?,
        steady_apiserver::Config::default(),
    )
    .await?;
    let api = plane.api.clone();
    let https = https_client(&plane.kubeconfig).await?;
    let serving = tokio::spawn(plane.serve(std::future::pending()));
    let in_process = api.client();
    let mut report = Report::default();
    println!(
        "steady bench server: {} creates per client type, {} clients, durable SQLite store",
        args.creates, args.clients
    );

    for (label, client, ns) in [
        ("HTTPS", &https, "bench-https"),
        ("in-process", &in_process, "bench-inproc"),
    ] {
        create_namespace(client, ns).await?;
        let rate = create_rate(client, ns, args.creates, args.clients).await?;
        report.add(
            format!(
                "creates/s, {label}, {} clients, 1 KiB ConfigMaps",
                args.clients
            ),
            format!("{rate:.0}"),
        );
    }

    let list_ms = list_latency(&https, "bench-https").await?;
    report.add(
        format!(
            "list of {} ConfigMaps over HTTPS, median of 5 (ms)",
            args.creates
        ),
        format!("{list_ms:.1}"),
    );

    let (p50, p99) = watch_latency(&https, args.watchers, args.watched_events).await?;
    report.add(
        format!(
            "watch delivery p50 / p99, {} watchers over HTTPS (ms)",
            args.watchers
        ),
        format!("{p50:.2} / {p99:.2}"),
    );

    serving.abort();
    api.shutdown().await;
    report.print_table();
    Ok(())
}

async fn https_client(kubeconfig: &str) -> anyhow::Result<Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig).context("kubeconfig")?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    Ok(Client::try_from(config)?)
}

pub(crate) async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

fn config_map(name: String) -> anyhow::Result<ConfigMap> {
    let payload = "x".repeat(1000);
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"bench": "steady"}},
        "data": {"payload": payload},
    }))?)
}

/// Creates per second with `clients` concurrent tasks.
pub(crate) async fn create_rate(
    client: &Client,
    ns: &str,
    total: usize,
    clients: usize,
) -> anyhow::Result<f64> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|worker| {
            let api = api.clone();
            tokio::spawn(async move {
                for i in (worker..total).step_by(clients) {
                    api.create(&PostParams::default(), &config_map(format!("cm-{i}"))?)
                        .await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

async fn list_latency(client: &Client, ns: &str) -> anyhow::Result<f64> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut samples = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let list = api.list(&ListParams::default()).await?;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(!list.items.is_empty(), "the list came back empty");
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// Time from the start of a create to each watcher's receipt of its ADDED event.
async fn watch_latency(
    client: &Client,
    watchers: usize,
    events: usize,
) -> anyhow::Result<(f64, f64)> {
    let ns = "bench-watch";
    create_namespace(client, ns).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let sent: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
    let version = api
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut streams = Vec::new();
    for _ in 0..watchers {
        let stream = api
            .watch(&WatchParams::default().timeout(290), &version)
            .await?
            .boxed();
        streams.push(stream);
    }
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|mut stream| {
            let sent = sent.clone();
            let latencies = latencies.clone();
            tokio::spawn(async move {
                let mut seen = 0;
                while let Some(event) = stream.try_next().await? {
                    if let WatchEvent::Added(cm) = event {
                        let received = Instant::now();
                        let name = cm.metadata.name.unwrap_or_default();
                        let start = sent
                            .lock()
                            .map_err(|_| anyhow::anyhow!("poisoned"))?
                            .get(&name)
                            .copied();
                        if let Some(start) = start {
                            latencies
                                .lock()
                                .map_err(|_| anyhow::anyhow!("poisoned"))?
                                .push((received - start).as_secs_f64() * 1000.0);
                        }
                        seen += 1;
                        if seen == events {
                            break;
                        }
                    }
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for i in 0..events {
        let name = format!("watched-{i}");
        sent.lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .insert(name.clone(), Instant::now());
        api.create(&PostParams::default(), &config_map(name)?)
            .await?;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .context("watchers did not see every event")???;
    }
    let mut samples = latencies
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    anyhow::ensure!(
        samples.len() == watchers * events,
        "expected {} deliveries, got {}",
        watchers * events,
        samples.len()
    );
    samples.sort_by(f64::total_cmp);
    let percentile = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    Ok((percentile(0.5), percentile(0.99)))
}
