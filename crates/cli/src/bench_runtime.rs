//! `steady bench runtime`: what the controller runtime itself costs — the work queue per
//! key, and the latency from a write to the reconcile that sees it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use steady_runtime::queue::{Priority, Trigger, WorkQueue};
use steady_runtime::{Action, Config, Context, Controller};

pub async fn run(quick: bool) -> anyhow::Result<()> {
    let keys = if quick { 10_000 } else { 200_000 };
    println!("steady bench runtime ({keys} keys per queue measurement)");
    let unique = queue_unique(keys);
    let hot = queue_hot(keys);
    let updates = if quick { 50 } else { 1_000 };
    let (p50, p99) = event_to_reconcile(updates).await?;
    println!();
    println!("| measurement | result |");
    println!("|---|---|");
    println!("| work queue: add + pop + done, distinct keys (ns per key) | {unique:.0} |");
    println!(
        "| work queue: 10 adds while processing + pop + done, 1,000 hot keys (ns per add) | {hot:.0} |"
    );
    println!(
        "| write → reconcile that sees it, in-process server, p50 / p99 over {updates} updates (µs) | {p50:.0} / {p99:.0} |"
    );
    Ok(())
}

fn queue_unique(keys: usize) -> f64 {
    let mut queue = WorkQueue::new();
    let started = Instant::now();
    for i in 0..keys {
        queue.add(i, Trigger::Primary, Priority::Normal);
    }
    while let Some(popped) = queue.pop() {
        queue.done(&popped.key);
    }
    started.elapsed().as_nanos() as f64 / keys as f64
}

/// Keys re-added while they are being processed: the dirty-set path that coalesces.
fn queue_hot(adds: usize) -> f64 {
    let mut queue = WorkQueue::new();
    let hot = 1_000;
    let started = Instant::now();
    let mut done = 0;
    while done < adds {
        for key in 0..hot {
            queue.add(key, Trigger::Primary, Priority::Normal);
        }
        let mut popped = Vec::new();
        while let Some(p) = queue.pop() {
            popped.push(p.key);
        }
        for key in &popped {
            for _ in 0..10 {
                queue.add(*key, Trigger::Primary, Priority::Normal);
            }
            done += 10;
        }
        for key in &popped {
            queue.done(key);
        }
        while let Some(p) = queue.pop() {
            queue.done(&p.key);
        }
    }
    started.elapsed().as_nanos() as f64 / done as f64
}

/// Time from the start of a patch to the start of the reconcile that sees its value.
async fn event_to_reconcile(updates: usize) -> anyhow::Result<(f64, f64)> {
    let store = steady_store::Store::in_memory(Default::default()).await?;
    let server =
        steady_apiserver::ApiServer::start(store, steady_apiserver::Config::default()).await?;
    let client = server.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "probe"}, "data": {"v": "0"}}),
    )?;
    api.create(&PostParams::default(), &cm).await?;
    let seen: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let recorded = seen.clone();
    let controller = Controller::new(
        api.clone(),
        Config {
            name: "bench".into(),
            ..Config::default()
        },
    );
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(
        move |cm: Arc<ConfigMap>, _ctx: Arc<Context<()>>| {
            let recorded = recorded.clone();
            async move {
                let value = cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get("v").cloned())
                    .unwrap_or_default();
                if let Ok(mut seen) = recorded.lock() {
                    seen.push((value, Instant::now()));
                }
                Ok::<_, String>(Action::done())
            }
        },
        Arc::new(()),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let mut samples = Vec::with_capacity(updates);
    for i in 1..=updates {
        let value = i.to_string();
        let started = Instant::now();
        api.patch(
            "probe",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"v": value}})),
        )
        .await?;
        let deadline = started + Duration::from_secs(10);
        loop {
            let hit = seen
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .iter()
                .find(|(v, _)| *v == value)
                .map(|(_, at)| *at);
            if let Some(at) = hit {
                samples.push((at - started).as_secs_f64() * 1e6);
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "update {i} was never reconciled");
            tokio::task::yield_now().await;
        }
    }
    let _ = stop_tx.send(());
    let _ = running.await;
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    Ok((at(0.5), at(0.99)))
}
