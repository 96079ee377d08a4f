//! `steady bench workloads`: a Deployment of N replicas from creation to every pod Running
//! and Ready, on `steady up`'s parts (durable SQLite store, simulated node, the workload
//! controllers over the in-process client), with the writes it took, set against the
//! server's raw write rate measured in the same run (the machine may be shared: compare
//! the ratio, not the absolute numbers across runs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use steady_cluster::node::{NodeCapacity, NodeConfig};
use steady_store::{EventKind, Store};

use crate::bench::{Report, create_namespace, create_rate};
use crate::server::ControlPlane;

#[derive(clap::Args, Debug)]
pub struct WorkloadsBenchArgs {
    /// Small sizes: checks the harness works in seconds (numbers mean little).
    #[arg(long)]
    pub quick: bool,
    /// The Deployment's replicas (pods run through it).
    #[arg(long, default_value_t = 10_000)]
    pub replicas: i32,
    /// Concurrent clients for the raw write rate (ConfigMaps of ~1 KiB).
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Simulated nodes the pods are scheduled across (each decision then weighs every
    /// placed pod, as kube-scheduler's spreading does).
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1_800)]
    pub timeout_seconds: u64,
}

pub async fn run(mut args: WorkloadsBenchArgs) -> anyhow::Result<()> {
    if args.quick {
        args.replicas = args.replicas.min(50);
    }
    let replicas = usize::try_from(args.replicas).context("--replicas must not be negative")?;
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let config = steady_apiserver::Config::default();
    let plane = ControlPlane::start(dir.path(), "127.0.0.1:0".parse()?, config)
        .await?
        .with_nodes(NodeConfig {
            nodes: args.nodes,
            capacity: NodeCapacity::for_benchmarks(),
            ..NodeConfig::default()
        });
    let api = plane.api.clone();
    let client = api.client();
    println!(
        "steady bench workloads: a Deployment of {replicas} replicas on {} simulated node(s) \
         (pod start delay {:?}), durable SQLite store",
        args.nodes.max(1),
        NodeConfig::default().pod_start_delay
    );
    let mut report = Report::default();

    create_namespace(&client, "bench-raw").await?;
    let raw = create_rate(&client, "bench-raw", replicas, args.clients).await?;
    report.add(
        format!(
            "raw writes/s: {replicas} ConfigMap creates, {} clients",
            args.clients
        ),
        format!("{raw:.0}"),
    );

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controllers = tokio::spawn(steady_cluster::run(client.clone(), async {
        let _ = stopped.await;
    }));
    let by_kind = Arc::new(Mutex::new(BTreeMap::new()));
    let counting = tokio::spawn(count_writes(api.store().clone(), by_kind.clone()));
    let first = api.store().revision();
    let started = Instant::now();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment(args.replicas)?)
        .await?;
    let limit = Duration::from_secs(args.timeout_seconds);
    let elapsed = wait_rolled_out(&deployments, args.replicas, started, limit).await?;
    let writes = api.store().revision() - first;
    counting.abort();
    let by_kind = by_kind
        .lock()
        .map(|counts| counts.clone())
        .unwrap_or_default();

    report.add(
        format!("{replicas} pods Running and Ready through the Deployment (s)"),
        format!("{:.1}", elapsed.as_secs_f64()),
    );
    report.add(
        "pods Ready per second",
        format!("{:.0}", replicas as f64 / elapsed.as_secs_f64()),
    );
    let per_second = writes as f64 / elapsed.as_secs_f64();
    report.add("writes during the rollout", writes.to_string());
    report.add(
        "writes per pod",
        format!("{:.1}", writes as f64 / replicas.max(1) as f64),
    );
    report.add("writes/s during the rollout", format!("{per_second:.0}"));
    report.add(
        "rollout writes/s ÷ raw writes/s",
        format!("{:.2}", per_second / raw),
    );
    for (kind, count) in by_kind {
        report.add(format!("  writes to {kind}"), count.to_string());
    }

    let _ = stop.send(());
    let _ = controllers.await;
    plane.shutdown().await;
    report.print_table();
    Ok(())
}

fn deployment(replicas: i32) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": "big"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "big"}},
            "template": {
                "metadata": {"labels": {"app": "big"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
            },
        },
    }))?)
}

/// Poll until the Deployment is rolled out as `kubectl rollout status` judges it (every
/// replica updated, ready and available); how long that took since `started`.
async fn wait_rolled_out(
    deployments: &Api<Deployment>,
    replicas: i32,
    started: Instant,
    limit: Duration,
) -> anyhow::Result<Duration> {
    loop {
        let status = deployments.get("big").await?.status.unwrap_or_default();
        let want = Some(replicas);
        if status.updated_replicas == want
            && status.ready_replicas == want
            && status.available_replicas == want
            && status.replicas == want
        {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(
            started.elapsed() < limit,
            "the Deployment was not rolled out after {limit:?}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Count the store's writes into `counts` by resource (`core/pods`, `core/events`, …)
/// until aborted.
async fn count_writes(store: Store, counts: Arc<Mutex<BTreeMap<String, u64>>>) {
    let Ok(mut watcher) = store.watch("/", store.revision()) else {
        return;
    };
    // An expired watch (the history budget compacted past it) ends the breakdown early.
    while let Some(Ok(event)) = watcher.next().await {
        let resource: Vec<&str> = event.key.split('/').skip(1).take(2).collect();
        let verb = if event.kind == EventKind::Deleted {
            " (deletes)"
        } else {
            ""
        };
        if let Ok(mut counts) = counts.lock() {
            *counts
                .entry(format!("{}{verb}", resource.join("/")))
                .or_insert(0) += 1;
        }
    }
}
