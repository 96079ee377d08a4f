//! `steady bench server`: the control plane's throughput and latency, measured side by side
//! in one run (HTTPS vs in-process client), on a durable SQLite store in a temporary directory.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};

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
    /// One kind of write repeated in-process, for a profiler (callgrind) to count.
    #[command(hide = true)]
    WriteProfile(WriteProfileArgs),
}

#[derive(clap::Args, Debug)]
pub struct WriteProfileArgs {
    /// What to repeat: `create` (1 KiB ConfigMaps), `merge` and `apply` (patches of them,
    /// after as many creates), `pods` (creates) or `status` (pod status patches, after as
    /// many pod creates).
    #[arg(long)]
    pub phase: WritePhase,
    /// Writes of the phase (and as many setup creates).
    #[arg(long, default_value_t = 1000)]
    pub count: usize,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritePhase {
    Create,
    Merge,
    Apply,
    Pods,
    Status,
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
    /// Concurrent clients in the mixed creates + patches row (each creates a ConfigMap,
    /// then merge-patches it).
    #[arg(long, default_value_t = 16)]
    pub mixed_clients: usize,
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
        BenchTarget::WriteProfile(args) => write_profile(args).await,
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

    let rate = mixed_write_rate(&https, "bench-mixed", args.creates, args.mixed_clients).await?;
    report.add(
        format!(
            "writes/s, HTTPS, {} clients, creates + merge patches (1:1)",
            args.mixed_clients
        ),
        format!("{rate:.0}"),
    );

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
    let seconds = on_clients(clients, |worker| {
        let api = api.clone();
        async move {
            for i in (worker..total).step_by(clients) {
                api.create(&PostParams::default(), &config_map(format!("cm-{i}"))?)
                    .await?;
            }
            anyhow::Ok(())
        }
    })
    .await?;
    Ok(total as f64 / seconds)
}

/// Seconds until `work(worker)` has finished on each of `clients` concurrent tasks.
async fn on_clients<Work>(clients: usize, work: impl Fn(usize) -> Work) -> anyhow::Result<f64>
where
    Work: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|worker| tokio::spawn(work(worker)))
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Writes per second with `clients` concurrent tasks, each creating a ConfigMap and then
/// merge-patching it: `objects` creates and as many patches.
async fn mixed_write_rate(
    client: &Client,
    ns: &str,
    objects: usize,
    clients: usize,
) -> anyhow::Result<f64> {
    create_namespace(client, ns).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let seconds = on_clients(clients, |worker| {
        let api = api.clone();
        async move {
            for i in (worker..objects).step_by(clients) {
                let name = format!("cm-{i}");
                api.create(&PostParams::default(), &config_map(name.clone())?)
                    .await?;
                let patch = serde_json::json!({"data": {"patched": i.to_string()}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            anyhow::Ok(())
        }
    })
    .await?;
    Ok((2 * objects) as f64 / seconds)
}

/// `steady bench write-profile`: `count` writes of one kind through the in-process client,
/// one at a time, on an in-memory store, so that a profiler's count per write is the
/// server's work (the difference between two phases' totals divided by `count`).
async fn write_profile(args: WriteProfileArgs) -> anyhow::Result<()> {
    let api = steady_apiserver::ApiServer::in_memory(steady_apiserver::Config::default())
        .await
        .context("cannot start the API server")?;
    let client = api.client();
    create_namespace(&client, "profile").await?;
    let base = "/api/v1/namespaces/profile";
    let pods = matches!(args.phase, WritePhase::Pods | WritePhase::Status);
    for i in 0..args.count {
        let (path, body) = if pods {
            (format!("{base}/pods"), profile_pod(i))
        } else {
            (format!("{base}/configmaps"), profile_config_map(i))
        };
        send(&client, http::Method::POST, &path, "application/json", body).await?;
    }
    for i in 0..args.count {
        let (path, content_type, body) = match args.phase {
            WritePhase::Create | WritePhase::Pods => break,
            WritePhase::Merge => (
                format!("{base}/configmaps/cm-{i}"),
                "application/merge-patch+json",
                serde_json::json!({"data": {"patched": i.to_string()}}),
            ),
            WritePhase::Apply => (
                format!("{base}/configmaps/cm-{i}?fieldManager=profile"),
                "application/apply-patch+yaml",
                serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}"), "labels": {"applied": "yes"}},
                    "data": {"applied": i.to_string()},
                }),
            ),
            WritePhase::Status => (
                format!("{base}/pods/pod-{i}/status"),
                "application/merge-patch+json",
                serde_json::json!({"status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]}}),
            ),
        };
        send(&client, http::Method::PATCH, &path, content_type, body).await?;
    }
    api.shutdown().await;
    Ok(())
}

fn profile_config_map(i: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i}"), "labels": {"bench": "steady"}},
        "data": {"payload": "x".repeat(1000)},
    })
}

fn profile_pod(i: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "labels": {"app": "profile"}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    })
}

async fn send(
    client: &Client,
    method: http::Method,
    path: &str,
    content_type: &str,
    body: serde_json::Value,
) -> anyhow::Result<()> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(serde_json::to_vec(&body)?)?;
    client
        .request_text(request)
        .await
        .with_context(|| format!("{path} failed"))?;
    Ok(())
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
                        // Only the bench's own: the namespace has others (its
                        // kube-root-ca.crt, published as it was created).
                        let Some(start) = start else {
                            continue;
                        };
                        latencies
                            .lock()
                            .map_err(|_| anyhow::anyhow!("poisoned"))?
                            .push((received - start).as_secs_f64() * 1000.0);
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
