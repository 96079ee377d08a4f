//! `steady demo`: the reconciliation loop, narrated. An embedded cluster (in memory, with the
//! simulated node) and the Cache operator; each step says what it does, what the operator
//! observed, which trigger caused each reconcile and what it wrote (from the runtime's
//! reconcile records), and what the world ended as.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use steady_apiserver::ApiServer;
use steady_cache_operator::{Cache, OperatorContext};
use steady_cluster::node::NodeConfig;
use steady_runtime::Recorder;
use steady_runtime::observe::{Observed, Outcome, ReconcileRecord};
use tokio::sync::{broadcast, oneshot};

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Instead: run one faulty scenario on the simulator with an edge-triggered and a
    /// level-triggered reconciler, and show side by side how each ends.
    #[arg(long)]
    pub compare: bool,
}

/// The reconciles since the last flush, as the runtime recorded them.
type Seen = broadcast::Receiver<Observed>;

struct RunningOperator {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), steady_runtime::Error>>,
    context: Arc<OperatorContext>,
}

fn start_operator(client: &Client, recorder: &Recorder) -> RunningOperator {
    let (controller, context) = crate::operator::cache_controller(client.clone());
    let controller = controller.with_recorder(recorder.clone());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(controller.run(
        steady_cache_operator::reconcile,
        context.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    RunningOperator {
        stop,
        task,
        context,
    }
}

impl RunningOperator {
    async fn stop(self) -> anyhow::Result<u64> {
        let _ = self.stop.send(());
        self.task
            .await
            .context("operator task")?
            .context("operator")?;
        Ok(self.context.writes())
    }
}

fn step(n: u32, text: &str) {
    println!("\n── step {n}: {text}");
}

/// One line per finished reconcile: its key, why it ran, and what it did.
fn narrate(record: &ReconcileRecord) -> String {
    let why: Vec<String> = record.triggers.iter().map(ToString::to_string).collect();
    let did = match record.writes.as_slice() {
        [] => "no change".to_string(),
        writes => writes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    };
    let after = match &record.outcome {
        Some(Outcome::Requeue { after_ms }) => format!("; requeue in {:.1} s", after_ms / 1000.0),
        Some(Outcome::Error {
            message,
            retry_after_ms,
            ..
        }) => format!(
            "; failed: {message}; retry in {:.2} s",
            retry_after_ms / 1000.0
        ),
        _ => String::new(),
    };
    format!(
        "reconcile {}  ← {}  → {did}{after}",
        record.key,
        why.join(", ")
    )
}

fn flush_seen(seen: &mut Seen) {
    while let Ok(observed) = seen.try_recv() {
        if let Observed::Finished(record) = observed {
            println!("   {}", narrate(&record));
        }
    }
}

async fn pods(client: &Client) -> anyhow::Result<Vec<String>> {
    let list = Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            let gone = if p.metadata.deletion_timestamp.is_some() {
                " (terminating)"
            } else {
                ""
            };
            format!("{name} {phase}{gone}")
        })
        .collect())
}

/// Poll until the Cache reports `replicas` Ready at its current generation.
async fn wait_ready(client: &Client, replicas: i32) -> anyhow::Result<()> {
    let caches: Api<Cache> = Api::namespaced(client.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let cache = caches.get("demo").await?;
        let status = cache.status.clone().unwrap_or_default();
        let current = status.observed_generation == cache.metadata.generation;
        if current
            && status.ready_replicas == replicas
            && status.replicas == replicas
            && pods(client).await?.len() == replicas as usize
        {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the Cache did not become Ready in 30 s: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn report(client: &Client) -> anyhow::Result<()> {
    let cache = Api::<Cache>::namespaced(client.clone(), "default")
        .get("demo")
        .await?;
    let status = cache.status.unwrap_or_default();
    println!(
        "   world: pods [{}]; status replicas={} ready={} observedGeneration={} (generation {})",
        pods(client).await?.join(", "),
        status.replicas,
        status.ready_replicas,
        status.observed_generation.unwrap_or(0),
        cache.metadata.generation.unwrap_or(0),
    );
    Ok(())
}

pub async fn run(_args: DemoArgs) -> anyhow::Result<()> {
    println!("steady demo: the reconciliation loop of the Cache operator, on an embedded cluster.");
    println!("Every reconcile line names what triggered it; the operator never acts on an event's");
    println!("payload, only on what it observes — so missed events and restarts cannot fool it.");
    let store = steady_store::Store::in_memory(Default::default()).await?;
    let server = ApiServer::start(store, steady_apiserver::Config::default()).await?;
    let client = server.client();
    let nodes = steady_cluster::node::spawn(client.clone(), NodeConfig::default());
    crate::operator::ensure_crd(&client).await?;
    let recorder = Recorder::new();
    let mut seen: Seen = recorder.subscribe();
    let caches: Api<Cache> = Api::namespaced(client.clone(), "default");
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");

    step(
        1,
        "apply a Cache with 2 replicas; the loop creates both pods and reports Ready",
    );
    let operator = start_operator(&client, &recorder);
    let cache: Cache = serde_json::from_value(serde_json::json!({
        "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
        "metadata": {"name": "demo"}, "spec": {"replicas": 2}
    }))?;
    caches.create(&PostParams::default(), &cache).await?;
    wait_ready(&client, 2).await?;
    flush_seen(&mut seen);
    report(&client).await?;

    step(
        2,
        "delete pod demo-1; the owned-pod watch maps it to its Cache, which recreates it",
    );
    pod_api.delete("demo-1", &DeleteParams::default()).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_ready(&client, 2).await?;
    flush_seen(&mut seen);
    report(&client).await?;

    step(
        3,
        "stop the operator; while it is down, delete demo-0 and scale to 3",
    );
    let writes = operator.stop().await?;
    println!("   operator stopped (it made {writes} writes so far)");
    pod_api.delete("demo-0", &DeleteParams::default()).await?;
    caches
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 3}})),
        )
        .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    report(&client).await?;
    println!("   nobody is watching: those events are simply missed");

    step(
        4,
        "start the operator again: it converges from what it observes, not from missed events",
    );
    let operator = start_operator(&client, &recorder);
    wait_ready(&client, 3).await?;
    flush_seen(&mut seen);
    report(&client).await?;
    let writes = operator.stop().await?;
    println!("   this run made {writes} writes: exactly what closing the gap needed");

    step(
        5,
        "restart it on a converged world: it reconciles, observes no gap, and writes nothing",
    );
    let revision = server.store().revision();
    let operator = start_operator(&client, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    flush_seen(&mut seen);
    let writes = operator.stop().await?;
    let moved = server.store().revision() - revision;
    println!("   writes by the restarted operator: {writes}; store revisions since: {moved}");
    anyhow::ensure!(
        writes == 0 && moved == 0,
        "a converged world must see zero writes"
    );
    println!(
        "\nThat is level-triggered reconciliation: events say where to look; the state says what to do."
    );
    nodes.abort();
    server.shutdown().await;
    Ok(())
}
