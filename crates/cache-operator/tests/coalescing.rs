//! Reconciles per spec update with and without the runtime's per-key debounce, counted on
//! a paused clock (so the counts are deterministic), and the debounce's cost in time to
//! converge.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

/// How one spec update went: reconciles from the update until converged (and a quiet
/// second after), and the virtual time it took to converge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rollout {
    reconciles: u64,
    converged_after: Duration,
}

/// Converge Cache `x` with `replicas`, apply `update` to its spec, and count.
async fn rollout(debounce: Duration, replicas: i32, update: serde_json::Value) -> Rollout {
    let w = world().await;
    let op = start_operator_with(
        &w.client,
        steady_runtime::Config {
            // No resync: only what the update causes is counted.
            resync_period: None,
            debounce,
            ..config()
        },
    );
    create_cache(&w.client, "x", json!({ "replicas": replicas })).await;
    wait_converged(&w.client, "x").await;
    // Let the last status patch's echo settle before counting.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = op.reconciles();
    let started = tokio::time::Instant::now();
    merge_patch(&caches(&w.client), "x", json!({ "spec": update }))
        .await
        .expect("update the spec");
    wait_converged(&w.client, "x").await;
    let converged_after = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reconciles = op.reconciles() - before;
    op.stop().await;
    Rollout {
        reconciles,
        converged_after,
    }
}

fn image_change() -> serde_json::Value {
    json!({"image": "memcached:1.7"})
}

#[tokio::test(start_paused = true)]
#[ignore = "measurement: prints reconciles per update for several windows"]
async fn measure_reconciles_per_update() {
    for window_ms in [0, 10, 25, 50, 100, 200, 500, 1000] {
        let window = Duration::from_millis(window_ms);
        let image = rollout(window, 3, image_change()).await;
        let scale_up = rollout(window, 1, json!({"replicas": 4})).await;
        println!(
            "debounce {window_ms} ms: image change rolling 3 pods {} reconciles, converged after {:?}; \
             scale 1 -> 4 {} reconciles, converged after {:?}",
            image.reconciles, image.converged_after, scale_up.reconciles, scale_up.converged_after
        );
    }
}

/// The fall the Cache operator's debounce buys, as counts: deterministic on the paused
/// clock. Fails if the debounce merges nothing (e.g. held events ran at once).
#[tokio::test(start_paused = true)]
async fn the_debounce_cuts_reconciles_per_update() {
    let debounce = steady_cache_operator::DEBOUNCE;
    assert_eq!(steady_cache_operator::default_config().debounce, debounce);
    for (what, replicas, update) in [
        ("an image change rolling 3 pods", 3, image_change()),
        ("a scale from 1 to 4", 1, json!({"replicas": 4})),
    ] {
        let without = rollout(Duration::ZERO, replicas, update.clone()).await;
        let with = rollout(debounce, replicas, update).await;
        assert!(
            with.reconciles < without.reconciles,
            "{what}: {} reconciles debounced, {} without",
            with.reconciles,
            without.reconciles
        );
    }
}
