//! The controller's guarantees, each checked deterministically: steady's in-process API
//! server (no sockets), a current-thread tokio runtime with a paused clock, seeded jitter.
//! Every test fails if the property it names breaks.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;
use steady_runtime::backoff::BackoffPolicy;
use steady_runtime::{Action, Config, Context, Controller, ObjectKey};
use steady_test_support::merge_patch;
use tokio::sync::{Semaphore, oneshot};
use tokio::time::Instant;

async fn server_with(options: steady_store::StoreOptions) -> steady_apiserver::ApiServer {
    let store = steady_store::Store::in_memory(options)
        .await
        .expect("store");
    steady_apiserver::ApiServer::start(
        store,
        steady_apiserver::Config {
            seed: Some(7),
            ..Default::default()
        },
    )
    .await
    .expect("server")
}

async fn server() -> steady_apiserver::ApiServer {
    server_with(steady_store::StoreOptions::default()).await
}

/// A fresh [`server`] and a client of it.
async fn server_and_client() -> (steady_apiserver::ApiServer, Client) {
    let server = server().await;
    let client = server.client();
    (server, client)
}

fn config(name: &str) -> Config {
    Config {
        name: name.into(),
        concurrency: 4,
        resync_period: None,
        backoff: BackoffPolicy {
            jitter: 0.0,
            ..BackoffPolicy::default()
        },
        seed: Some(42),
        ..Config::default()
    }
}

fn configmap(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": value}}))
        .expect("configmap")
}

async fn create(client: &Client, name: &str, value: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &configmap(name, value))
        .await
        .expect("create")
}

async fn set_value(client: &Client, name: &str, value: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    merge_patch(&api, name, json!({"data": {"v": value}}))
        .await
        .expect("patch");
}

/// One reconcile as the test saw it.
#[derive(Debug, Clone)]
struct Call {
    name: String,
    value: String,
    at: Instant,
}

#[derive(Default)]
struct Log {
    calls: Mutex<Vec<Call>>,
    running: Mutex<BTreeMap<String, usize>>,
    overlap: Mutex<bool>,
}

impl Log {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("log").clone()
    }
    fn calls_of(&self, name: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.name == name)
            .collect()
    }
    /// The calls of `name` from `since` on.
    fn calls_of_since(&self, name: &str, since: Instant) -> Vec<Call> {
        self.calls_of(name)
            .into_iter()
            .filter(|c| c.at >= since)
            .collect()
    }
    /// Record a reconcile of `cm`; returns the value it saw (`data.v`, empty if none).
    fn record(&self, cm: &ConfigMap) -> String {
        let value = cm
            .data
            .as_ref()
            .and_then(|d| d.get("v").cloned())
            .unwrap_or_default();
        let call = Call {
            name: cm.metadata.name.clone().unwrap_or_default(),
            value: value.clone(),
            at: Instant::now(),
        };
        self.calls.lock().expect("log").push(call);
        value
    }
    /// Enter a reconcile of `name`; records an overlap if one is already running.
    fn enter(&self, name: &str) {
        let mut running = self.running.lock().expect("running");
        let count = running.entry(name.to_string()).or_default();
        *count += 1;
        if *count > 1 {
            *self.overlap.lock().expect("overlap") = true;
        }
    }
    fn leave(&self, name: &str) {
        let mut running = self.running.lock().expect("running");
        if let Some(count) = running.get_mut(name) {
            *count -= 1;
        }
    }
}

/// Let the controller work for `d` of simulated time.
async fn run_for(d: Duration) {
    tokio::time::sleep(d).await;
}

/// Spawn a controller over ConfigMaps in `default`; returns a handle that stops it.
fn spawn<R, Fut>(
    client: &Client,
    config: Config,
    reconcile: R,
) -> (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), steady_runtime::Error>>,
)
where
    R: Fn(Arc<ConfigMap>, Arc<Context<()>>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<Action, String>> + Send + 'static,
{
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let controller = Controller::new(api, config);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(controller.run(reconcile, Arc::new(()), async move {
        let _ = stop_rx.await;
    }));
    (stop_tx, handle)
}

/// A controller whose reconcile records what it saw and answers what `answer` makes of the
/// value it saw; keep the sender to keep it running.
fn spawn_answering(
    client: &Client,
    config: Config,
    answer: fn(&str) -> Result<Action, String>,
) -> (
    Arc<Log>,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), steady_runtime::Error>>,
) {
    let log = Arc::new(Log::default());
    let l = log.clone();
    let (stop, handle) = spawn(client, config, move |cm, _| {
        let log = l.clone();
        async move { answer(&log.record(&cm)) }
    });
    (log, stop, handle)
}

/// A reconcile that only records each call in `log`.
fn recording(
    log: &Arc<Log>,
) -> impl Fn(Arc<ConfigMap>, Arc<Context<()>>) -> std::future::Ready<Result<Action, String>>
+ Send
+ 'static {
    let log = log.clone();
    move |cm, _| {
        log.record(&cm);
        std::future::ready(Ok(Action::done()))
    }
}

/// A controller whose reconcile only records what it saw; keep the sender to keep it running.
fn spawn_recorder(
    client: &Client,
    config: Config,
) -> (
    Arc<Log>,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), steady_runtime::Error>>,
) {
    spawn_answering(client, config, |_| Ok(Action::done()))
}

#[tokio::test(start_paused = true)]
async fn events_during_a_reconcile_coalesce_into_exactly_one_more_run() {
    let (_server, client) = server_and_client().await;
    create(&client, "a", "0").await;
    let log = Arc::new(Log::default());
    let gate = Arc::new(Semaphore::new(0));
    let (l, g) = (log.clone(), gate.clone());
    let (_stop, _handle) = spawn(&client, config("coalesce"), move |cm, _| {
        let (log, gate) = (l.clone(), g.clone());
        async move {
            log.record(&cm);
            if let Ok(permit) = gate.acquire().await {
                permit.forget();
            }
            Ok(Action::done())
        }
    });
    run_for(Duration::from_secs(1)).await;
    assert_eq!(
        log.calls_of("a").len(),
        1,
        "the initial reconcile is running, held at the gate"
    );
    for i in 1..=5 {
        set_value(&client, "a", &i.to_string()).await;
    }
    // Duplicate events of an unchanged object add nothing either.
    run_for(Duration::from_secs(1)).await;
    assert_eq!(
        log.calls_of("a").len(),
        1,
        "no second reconcile of a key while one runs"
    );
    gate.add_permits(100);
    run_for(Duration::from_secs(5)).await;
    let calls = log.calls_of("a");
    assert_eq!(
        calls.len(),
        2,
        "five events during one reconcile coalesce into one more run: {calls:?}"
    );
    assert_eq!(calls[1].value, "5", "the second run sees the latest object");
}

#[tokio::test(start_paused = true)]
async fn one_reconcile_per_key_at_a_time_and_the_last_state_is_always_seen() {
    let (_server, client) = server_and_client().await;
    for name in ["x", "y", "z"] {
        create(&client, name, "0").await;
    }
    let log = Arc::new(Log::default());
    let l = log.clone();
    let (_stop, _handle) = spawn(&client, config("exclusive"), move |cm, _| {
        let log = l.clone();
        async move {
            let name = cm.metadata.name.clone().unwrap_or_default();
            log.enter(&name);
            log.record(&cm);
            tokio::time::sleep(Duration::from_millis(30)).await;
            log.leave(&name);
            Ok(Action::done())
        }
    });
    run_for(Duration::from_millis(100)).await;
    for round in 1..=20 {
        for name in ["x", "y", "z"] {
            set_value(&client, name, &round.to_string()).await;
        }
        run_for(Duration::from_millis(7)).await;
    }
    run_for(Duration::from_secs(2)).await;
    assert!(
        !*log.overlap.lock().expect("overlap"),
        "two reconciles of one key overlapped"
    );
    for name in ["x", "y", "z"] {
        let calls = log.calls_of(name);
        assert_eq!(
            calls.last().map(|c| c.value.as_str()),
            Some("20"),
            "{name} must end reconciled at its latest state"
        );
        assert!(
            calls.len() < 21,
            "{name}: {} reconciles for 21 states: events must coalesce",
            calls.len()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn errors_back_off_exponentially_and_reset_on_success_and_generation_change() {
    let (_server, client) = server_and_client().await;
    create(&client, "flaky", "fail").await;
    let (log, _stop, _handle) = spawn_answering(&client, config("backoff"), |value| {
        if value.starts_with("fail") {
            Err(format!("told to fail ({value})"))
        } else {
            Ok(Action::done())
        }
    });
    run_for(Duration::from_millis(700)).await;
    let gaps = |calls: &[Call]| -> Vec<u128> {
        calls
            .windows(2)
            .map(|w| (w[1].at - w[0].at).as_millis())
            .collect()
    };
    let first = log.calls_of("flaky");
    assert_eq!(
        &gaps(&first)[..6],
        [5, 10, 20, 40, 80, 160],
        "5 ms doubling"
    );

    // A spec change (new generation) restarts the backoff at 5 ms.
    set_value(&client, "flaky", "fail-again").await;
    let changed_at = Instant::now();
    run_for(Duration::from_millis(100)).await;
    let after: Vec<Call> = log.calls_of_since("flaky", changed_at);
    assert_eq!(after[0].value, "fail-again");
    assert_eq!(
        gaps(&after)[..3],
        [5, 10, 20],
        "reset on a generation change"
    );

    // Success forgets the failures: the next failure waits 5 ms again.
    set_value(&client, "flaky", "ok").await;
    run_for(Duration::from_millis(100)).await;
    set_value(&client, "flaky", "fail-once-more").await;
    let failed_at = Instant::now();
    run_for(Duration::from_millis(100)).await;
    let last: Vec<Call> = log.calls_of_since("flaky", failed_at);
    assert_eq!(gaps(&last)[0], 5, "reset after success");
}

#[tokio::test(start_paused = true)]
async fn a_requested_requeue_survives_later_errors() {
    let (_server, client) = server_and_client().await;
    create(&client, "r", "requeue").await;
    let (log, _stop, _handle) = spawn_answering(&client, config("requeue"), |value| match value {
        "requeue" => Ok(Action::requeue_after(Duration::from_secs(60))),
        "error" => Err("transient".to_string()),
        _ => Ok(Action::done()),
    });
    run_for(Duration::from_secs(1)).await;
    let start = log.calls_of("r")[0].at;
    // From here every run fails; the retries back off (5 ms, 10 ms, ... 41 s, 82 s).
    set_value(&client, "r", "error").await;
    run_for(Duration::from_secs(70)).await;
    let calls = log.calls_of("r");
    assert!(
        calls
            .iter()
            .any(|c| c.at - start == Duration::from_secs(60)),
        "the requeue asked for at t=0 must still run at t=60s, retries or not: {calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_successful_run_replaces_the_requeue_an_earlier_run_asked_for() {
    let (_server, client) = server_and_client().await;
    create(&client, "r", "requeue").await;
    let (log, _stop, _handle) = spawn_answering(&client, config("requeue"), |value| match value {
        "requeue" => Ok(Action::requeue_after(Duration::from_secs(2))),
        _ => Ok(Action::done()),
    });
    run_for(Duration::from_millis(500)).await;
    assert_eq!(log.calls_of("r").len(), 1);
    // The change arrives before the requeue is due: its run sees the world the requeue
    // would have looked at, and asks for nothing more (kube-runtime's scheduler merges
    // the two the same way; controller-runtime would run the key again at 2 s).
    set_value(&client, "r", "settled").await;
    run_for(Duration::from_secs(10)).await;
    let calls = log.calls_of("r");
    assert_eq!(
        calls.len(),
        2,
        "no run at 2 s after the change settled it: {calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn resync_reconciles_every_primary_without_delaying_a_real_change() {
    let (_server, client) = server_and_client().await;
    for i in 0..100 {
        create(&client, &format!("cm-{i:03}"), "0").await;
    }
    let log = Arc::new(Log::default());
    let l = log.clone();
    let config = Config {
        concurrency: 1,
        resync_period: Some(Duration::from_secs(60)),
        resync_jitter: 0.0,
        ..config("resync")
    };
    let (_stop, _handle) = spawn(&client, config, move |cm, _| {
        let log = l.clone();
        async move {
            log.record(&cm);
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(Action::done())
        }
    });
    run_for(Duration::from_secs(59)).await;
    let before = log.calls().len();
    assert_eq!(before, 100, "one reconcile per primary at start");
    // The resync wave starts at 60 s; 50 ms into it a real change arrives.
    run_for(Duration::from_millis(1050)).await;
    set_value(&client, "cm-099", "changed").await;
    let changed_at = Instant::now();
    run_for(Duration::from_secs(5)).await;
    let calls = log.calls();
    // cm-099 was still waiting in the resync lane: the change merged into its entry and
    // moved it to the front, so it ran once, at once, with the new state.
    assert_eq!(calls.len(), 200, "every primary resynced exactly once");
    let next = calls
        .iter()
        .find(|c| c.at > changed_at)
        .expect("a reconcile after the change");
    assert_eq!(
        next.name, "cm-099",
        "the real change jumps the resync queue"
    );
    assert_eq!(next.value, "changed");
    assert!(
        next.at - changed_at <= Duration::from_millis(10),
        "waited only for the reconcile already running"
    );
}

#[tokio::test(start_paused = true)]
async fn deleting_an_owned_object_triggers_its_owner() {
    let (_server, client) = server_and_client().await;
    let owner = create(&client, "owner", "0").await;
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "owned", "namespace": "default"}}))
            .expect("secret");
    let mut secret = secret;
    secret.metadata.owner_references = owner.controller_owner_ref(&()).map(|r| vec![r]);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    let log = Arc::new(Log::default());
    let l = log.clone();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut controller = Controller::new(api, config("owns"));
    controller.owns(secrets.clone());
    let (_stop_tx, stop_rx) = oneshot::channel::<()>();
    tokio::spawn(controller.run(
        move |cm: Arc<ConfigMap>, ctx: Arc<Context<()>>| {
            let log = l.clone();
            async move {
                let owned = ctx
                    .cache::<Secret>()
                    .expect("secret cache")
                    .owned_by(cm.metadata.uid.as_deref().unwrap_or(""));
                log.record(&cm);
                log.calls
                    .lock()
                    .expect("log")
                    .last_mut()
                    .expect("call")
                    .value = owned.len().to_string();
                Ok::<_, String>(Action::done())
            }
        },
        Arc::new(()),
        async move {
            let _ = stop_rx.await;
        },
    ));
    run_for(Duration::from_secs(1)).await;
    assert_eq!(log.calls_of("owner").len(), 1);
    assert_eq!(
        log.calls_of("owner")[0].value,
        "1",
        "the owner sees its secret through the owner index"
    );
    secrets
        .delete("owned", &DeleteParams::default())
        .await
        .expect("delete");
    run_for(Duration::from_secs(1)).await;
    let calls = log.calls_of("owner");
    assert_eq!(
        calls.len(),
        2,
        "the owned object's deletion reconciles the owner"
    );
    assert_eq!(
        calls[1].value, "0",
        "and the owner's cache no longer has it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_expired_by_compaction_relists_and_misses_nothing() {
    // Keep only 10 revisions: a burst of 200 writes in one group commit overtakes the
    // controller's watch, which must get 410 Expired, relist and reconcile everything.
    let server = server_with(steady_store::StoreOptions {
        max_retained_revisions: 10,
        ..Default::default()
    })
    .await;
    let client = server.client();
    let (log, _stop, _handle) = spawn_recorder(&client, config("relist"));
    run_for(Duration::from_secs(1)).await;
    let creates = (0..200).map(|i| {
        let client = client.clone();
        async move { create(&client, &format!("burst-{i:03}"), "1").await }
    });
    futures::future::join_all(creates).await;
    run_for(Duration::from_secs(30)).await;
    let mut seen: Vec<String> = log.calls().into_iter().map(|c| c.name).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen.len(),
        200,
        "every object created during the expired watch is reconciled"
    );
    assert!(
        server.store().compacted_revision() > 1,
        "the store really compacted"
    );
}

#[tokio::test(start_paused = true)]
async fn a_410_on_a_working_watch_is_obeyed_at_once_not_backed_off() {
    // An API server that restarts its watch cache ends every watch with 410 Expired. That
    // is an instruction to re-list, not a failure: a change made right after it must be
    // reconciled well within the first watch-retry delay (800 ms).
    let (server, client) = server_and_client().await;
    create(&client, "a", "1").await;
    let (log, _stop, _handle) = spawn_recorder(&client, config("expire"));
    run_for(Duration::from_secs(1)).await;
    server.expire_watches();
    let changed = Instant::now();
    set_value(&client, "a", "2").await;
    run_for(Duration::from_secs(5)).await;
    let seen = log
        .calls_of("a")
        .into_iter()
        .find(|c| c.value == "2")
        .expect("the change made after the 410 is reconciled");
    assert!(
        seen.at - changed < Duration::from_millis(100),
        "reconciled {:?} after the change; a backed-off relist takes 800 ms",
        seen.at - changed
    );
}

/// A reconciler that keeps, for each ConfigMap, a Secret `<name>-copy` with the same data,
/// and counts its writes: the reference for "zero writes at the fixed point".
async fn copy_reconcile(
    cm: Arc<ConfigMap>,
    ctx: Arc<Context<Mutex<u32>>>,
) -> Result<Action, String> {
    let name = format!("{}-copy", cm.metadata.name.clone().unwrap_or_default());
    let want: BTreeMap<String, String> = cm.data.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client(), "default");
    let cache = ctx.cache::<Secret>().map_err(|e| e.to_string())?;
    let have = cache.get(&ObjectKey::new(Some("default"), &name));
    let current = have
        .as_ref()
        .and_then(|s| s.string_data.clone())
        .or_else(|| {
            have.as_ref().and_then(|s| s.data.as_ref()).map(|d| {
                d.iter()
                    .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
                    .collect()
            })
        });
    if current.as_ref() == Some(&want) {
        return Ok(Action::done());
    }
    let mut secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}}))
            .map_err(|e| e.to_string())?;
    secret.metadata.owner_references = cm.controller_owner_ref(&()).map(|r| vec![r]);
    secret.data = Some(
        want.into_iter()
            .map(|(k, v)| (k, k8s_openapi::ByteString(v.into_bytes())))
            .collect(),
    );
    *ctx.data().lock().map_err(|e| e.to_string())? += 1;
    let written = match have {
        None => secrets.create(&PostParams::default(), &secret).await,
        Some(existing) => {
            secret.metadata.resource_version = existing.metadata.resource_version.clone();
            secrets
                .replace(&name, &PostParams::default(), &secret)
                .await
        }
    }
    .map_err(|e| e.to_string())?;
    cache.remember(written);
    Ok(Action::done())
}

#[tokio::test(start_paused = true)]
async fn a_cold_restart_on_a_converged_world_makes_zero_writes() {
    let (server, client) = server_and_client().await;
    for i in 0..20 {
        create(&client, &format!("src-{i:02}"), &format!("value-{i}")).await;
    }
    let run = |writes: Arc<Mutex<u32>>| {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
        let mut controller = Controller::new(api, config("copy"));
        controller.owns(secrets);
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(controller.run(copy_reconcile, writes, async move {
            let _ = stop_rx.await;
        }));
        (stop_tx, handle)
    };
    let first_writes = Arc::new(Mutex::new(0));
    let (stop, handle) = run(first_writes.clone());
    run_for(Duration::from_secs(5)).await;
    assert_eq!(
        *first_writes.lock().expect("writes"),
        20,
        "one write per missing secret"
    );
    let _ = stop.send(());
    handle.await.expect("joined").expect("clean stop");

    let revision = server.store().revision();
    let second_writes = Arc::new(Mutex::new(0));
    let (stop, handle) = run(second_writes.clone());
    run_for(Duration::from_secs(5)).await;
    assert_eq!(
        *second_writes.lock().expect("writes"),
        0,
        "converged: a restarted controller writes nothing"
    );
    assert_eq!(
        server.store().revision(),
        revision,
        "and the store did not move"
    );
    let _ = stop.send(());
    handle.await.expect("joined").expect("clean stop");
}

#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_is_an_error_for_its_key_only() {
    let (_server, client) = server_and_client().await;
    create(&client, "boom", "0").await;
    create(&client, "calm", "0").await;
    let log = Arc::new(Log::default());
    let l = log.clone();
    let (_stop, handle) = spawn(&client, config("panics"), move |cm, _| {
        let log = l.clone();
        async move {
            log.record(&cm);
            if cm.metadata.name.as_deref() == Some("boom") {
                panic!("reconciler bug");
            }
            Ok(Action::done())
        }
    });
    run_for(Duration::from_millis(100)).await;
    assert_eq!(log.calls_of("calm").len(), 1, "other keys are unaffected");
    assert!(
        log.calls_of("boom").len() >= 4,
        "the panicking key is retried with backoff"
    );
    set_value(&client, "calm", "1").await;
    run_for(Duration::from_millis(10)).await;
    assert_eq!(
        log.calls_of("calm").len(),
        2,
        "and the controller keeps running"
    );
    assert!(!handle.is_finished());
}

#[tokio::test(start_paused = true)]
async fn metrics_and_probes_report_controller_runtime_series() {
    use tower::ServiceExt;
    let (_server, client) = server_and_client().await;
    for name in ["m1", "m2", "m3"] {
        create(&client, name, "0").await;
    }
    let metrics = steady_runtime::metrics::Metrics::new();
    let health = steady_runtime::metrics::Health::default();
    let probes = steady_runtime::metrics::router(metrics.clone(), health.clone());
    let status_of = |path: &'static str| {
        let probes = probes.clone();
        async move {
            let request = http::Request::get(path)
                .body(axum::body::Body::empty())
                .expect("request");
            probes
                .oneshot(request)
                .await
                .expect("response")
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        status_of("/readyz").await,
        503,
        "not ready before the caches sync"
    );
    assert_eq!(status_of("/healthz").await, 200);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let controller = Controller::new(api, config("metered"))
        .with_metrics(metrics.clone())
        .with_health(health.clone());
    let (_stop_tx, stop_rx) = oneshot::channel::<()>();
    tokio::spawn(controller.run(
        |cm: Arc<ConfigMap>, _ctx: Arc<Context<()>>| async move {
            match cm.metadata.name.as_deref() {
                Some("m3") => Err("nope".to_string()),
                _ => Ok(Action::done()),
            }
        },
        Arc::new(()),
        async move {
            let _ = stop_rx.await;
        },
    ));
    run_for(Duration::from_millis(20)).await;
    assert_eq!(
        status_of("/readyz").await,
        200,
        "ready once the caches synced"
    );
    let text = metrics.encode();
    let series = |name: &str, labels: &[&str]| -> Option<f64> {
        text.lines()
            .filter(|l| {
                l.starts_with(&format!("{name}{{")) && labels.iter().all(|lbl| l.contains(lbl))
            })
            .find_map(|l| l.rsplit(' ').next()?.parse().ok())
    };
    let controller = "controller=\"metered\"";
    assert_eq!(
        series(
            "controller_runtime_reconcile_total",
            &[controller, "result=\"success\""]
        ),
        Some(2.0)
    );
    assert!(
        series(
            "controller_runtime_reconcile_total",
            &[controller, "result=\"error\""]
        )
        .is_some_and(|n| n >= 1.0)
    );
    assert!(
        series("controller_runtime_reconcile_errors_total", &[controller])
            .is_some_and(|n| n >= 1.0)
    );
    assert!(series("workqueue_adds_total", &["name=\"metered\""]).is_some_and(|n| n >= 3.0));
    assert!(series("workqueue_retries_total", &["name=\"metered\""]).is_some_and(|n| n >= 1.0));
    for name in [
        "controller_runtime_reconcile_time_seconds_bucket",
        "controller_runtime_active_workers",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "workqueue_work_duration_seconds_bucket",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn only_the_leader_reconciles_and_a_successor_takes_over_on_release() {
    use steady_runtime::leader::{LeaderElectionConfig, LeaderElector};
    let (server, client) = server_and_client().await;
    create(&client, "shared", "0").await;
    let logs = [Arc::new(Log::default()), Arc::new(Log::default())];
    let mut electors = Vec::new();
    let mut handles = Vec::new();
    for (i, log) in logs.iter().enumerate() {
        let elector = LeaderElector::start(
            server.client(),
            LeaderElectionConfig::new("default", "cm-controller", format!("replica-{i}")),
        );
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let controller = Controller::new(api, config("elected")).with_leader(elector.subscribe());
        handles.push(tokio::spawn(controller.run(
            recording(log),
            Arc::new(()),
            std::future::pending::<()>(),
        )));
        electors.push(elector);
        run_for(Duration::from_millis(10)).await;
    }
    run_for(Duration::from_secs(5)).await;
    assert!(electors[0].is_leader() && !electors[1].is_leader());
    assert_eq!(logs[0].calls().len(), 1, "the leader reconciles");
    assert!(logs[1].calls().is_empty(), "the follower does not");

    let leader = electors.remove(0);
    leader.release().await;
    run_for(Duration::from_millis(10)).await;
    let first = handles.remove(0);
    assert!(
        matches!(
            first.await.expect("joined"),
            Err(steady_runtime::Error::LostLeadership)
        ),
        "the old leader stops at once"
    );
    run_for(Duration::from_secs(3)).await;
    assert!(
        electors[0].is_leader(),
        "the successor takes over without waiting out the lease"
    );
    assert_eq!(
        logs[1].calls().len(),
        1,
        "and reconciles from its own cache"
    );
}

#[tokio::test(start_paused = true)]
async fn the_recorder_publishes_events_kubectl_describe_finds() {
    use k8s_openapi::api::core::v1::Event;
    use steady_runtime::events::{EventType, Recorder};
    let (_server, client) = server_and_client().await;
    let cm = create(&client, "described", "0").await;
    let recorder = Recorder::new(client.clone(), "test-operator", "replica-0");
    recorder
        .publish(
            &cm,
            EventType::Warning,
            "Degraded",
            "pod described-1 failed: exit code 1",
        )
        .await
        .expect("published");
    // What `kubectl describe configmap described` asks for.
    let selector = format!(
        "involvedObject.name=described,involvedObject.namespace=default,involvedObject.uid={}",
        cm.metadata.uid.clone().expect("uid")
    );
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let found = events
        .list(&kube::api::ListParams::default().fields(&selector))
        .await
        .expect("list");
    assert_eq!(found.items.len(), 1);
    let event = &found.items[0];
    assert_eq!(event.reason.as_deref(), Some("Degraded"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(
        event.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("test-operator")
    );
}

#[tokio::test(start_paused = true)]
async fn events_are_named_and_stamped_from_the_recorders_clock_even_when_it_stands_still() {
    use k8s_openapi::api::core::v1::Event;
    use steady_runtime::events::{EventType, Recorder};
    let (_server, client) = server_and_client().await;
    let cm = create(&client, "stamped", "0").await;
    let instant = chrono::DateTime::parse_from_rfc3339("2030-01-02T03:04:05.000000007Z")
        .expect("time")
        .to_utc();
    let nanos = instant.timestamp_nanos_opt().expect("in range");
    let standing_still = std::sync::Arc::new(move || instant);
    // Three different Events (the same one again would be folded into the first).
    let publish = |recorder: Recorder, message: &'static str| {
        let cm = cm.clone();
        async move {
            recorder
                .publish(&cm, EventType::Normal, "Seen", message)
                .await
                .expect("published")
        }
    };
    let recorder = Recorder::new(client.clone(), "test-operator", "replica-0")
        .with_clock(standing_still.clone());
    let first = publish(recorder.clone(), "seen once").await;
    let second = publish(recorder, "seen twice").await;
    // A second recorder on the same stopped clock starts from the same instant: its
    // first name is taken, so it moves on.
    let other =
        Recorder::new(client.clone(), "test-operator", "replica-1").with_clock(standing_still);
    let third = publish(other, "seen thrice").await;

    let names: Vec<String> = [&first, &second, &third]
        .iter()
        .map(|e: &&Event| e.metadata.name.clone().unwrap_or_default())
        .collect();
    let expected: Vec<String> = (0..3).map(|i| format!("stamped.{:x}", nanos + i)).collect();
    assert_eq!(
        names, expected,
        "client-go's <object>.<hex nanoseconds>, never reused"
    );
    for event in [&first, &second, &third] {
        let stamp = event.last_timestamp.as_ref().expect("stamped");
        assert_eq!(stamp.0.to_string(), "2030-01-02T03:04:05Z");
    }
}

/// As client-go's recorder: the same Event again raises the first one's `count` and
/// `lastTimestamp` (`kubectl describe` shows `x3`) instead of creating another.
#[tokio::test(start_paused = true)]
async fn the_same_event_again_is_counted_on_the_first() {
    use k8s_openapi::api::core::v1::Event;
    use steady_runtime::events::{EventType, Recorder};
    let (_server, client) = server_and_client().await;
    let cm = create(&client, "repeated", "0").await;
    let recorder = Recorder::new(client.clone(), "test-operator", "replica-0");
    for message in ["retrying", "retrying", "retrying", "gave up"] {
        recorder
            .publish(&cm, EventType::Warning, "Failing", message)
            .await
            .expect("published");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut found = events
        .list(&kube::api::ListParams::default().fields("involvedObject.name=repeated"))
        .await
        .expect("list")
        .items;
    found.sort_by_key(|e| e.count);
    let counted: Vec<(Option<&str>, Option<i32>)> = found
        .iter()
        .map(|e| (e.message.as_deref(), e.count))
        .collect();
    assert_eq!(
        counted,
        [(Some("gave up"), Some(1)), (Some("retrying"), Some(3))]
    );
}

#[tokio::test(start_paused = true)]
async fn a_mapped_watch_triggers_the_keys_its_mapper_names() {
    let (_server, client) = server_and_client().await;
    for name in ["alpha", "beta"] {
        create(&client, name, "0").await;
    }
    let log = Arc::new(Log::default());
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    // A Secret labelled `target: <name>` concerns the ConfigMap of that name.
    let mut controller = Controller::new(configmaps, config("mapped"));
    controller.watches(secrets.clone(), |s: &Secret| {
        s.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("target"))
            .map(|t| vec![ObjectKey::new(Some("default"), t)])
            .unwrap_or_default()
    });
    let (_stop_tx, stop_rx) = oneshot::channel::<()>();
    tokio::spawn(controller.run(recording(&log), Arc::new(()), async move {
        let _ = stop_rx.await;
    }));
    run_for(Duration::from_secs(1)).await;
    assert_eq!(
        (log.calls_of("alpha").len(), log.calls_of("beta").len()),
        (1, 1)
    );
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s", "labels": {"target": "beta"}}}))
            .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create");
    run_for(Duration::from_secs(1)).await;
    assert_eq!(
        (log.calls_of("alpha").len(), log.calls_of("beta").len()),
        (1, 2),
        "only the ConfigMap the mapper names is reconciled"
    );
}

/// Keeps a Secret `<name>-copy` owned by each ConfigMap with its data, writing through the
/// context, then marks the ConfigMap with the value it copied: two writes whose own events
/// come back to the controller.
async fn copy_and_mark(cm: Arc<ConfigMap>, ctx: Arc<Context<Arc<Log>>>) -> Result<Action, String> {
    let value = ctx.data().record(&cm);
    let name = cm.metadata.name.clone().unwrap_or_default();
    let copy_name = format!("{name}-copy");
    let secrets = ctx.api::<Secret>("default");
    let have = ctx
        .cache::<Secret>()
        .map_err(|e| e.to_string())?
        .get(&ObjectKey::new(Some("default"), &copy_name));
    let want = Some(BTreeMap::from([(
        "v".to_string(),
        k8s_openapi::ByteString(value.clone().into_bytes()),
    )]));
    if have.as_ref().map(|s| &s.data) != Some(&want) {
        let mut secret: Secret = serde_json::from_value(
            json!({"metadata": {"name": copy_name, "namespace": "default"}}),
        )
        .map_err(|e| e.to_string())?;
        secret.metadata.owner_references = cm.controller_owner_ref(&()).map(|r| vec![r]);
        secret.data = want;
        match have {
            None => secrets.create(&PostParams::default(), &secret).await,
            Some(existing) => {
                secret.metadata.resource_version = existing.metadata.resource_version.clone();
                secrets
                    .replace(&copy_name, &PostParams::default(), &secret)
                    .await
            }
        }
        .map_err(|e| e.to_string())?;
    }
    let marked = cm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("copied"));
    if marked != Some(&value) {
        let patch =
            kube::api::Patch::Merge(json!({"metadata": {"annotations": {"copied": value}}}));
        ctx.api::<ConfigMap>("default")
            .patch(&name, &kube::api::PatchParams::default(), &patch)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(Action::done())
}

/// Runs [`copy_and_mark`] over `source` with `skip_unchanged` as given: the reconciles of
/// `source` after it is created, after its value changes, and after its copy is changed
/// behind the controller's back.
async fn reconciles_of_copy_and_mark(skip_unchanged: bool) -> [usize; 3] {
    let (_server, client) = server_and_client().await;
    let log = Arc::new(Log::default());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let mut controller = Controller::new(
        api,
        Config {
            skip_unchanged,
            ..config("copy-and-mark")
        },
    );
    controller.owns(secrets.clone());
    let (_stop, stop_rx) = oneshot::channel::<()>();
    tokio::spawn(
        controller.run(copy_and_mark, Arc::new(log.clone()), async move {
            let _ = stop_rx.await;
        }),
    );
    create(&client, "source", "1").await;
    run_for(Duration::from_secs(1)).await;
    let created = log.calls_of("source").len();
    set_value(&client, "source", "2").await;
    run_for(Duration::from_secs(1)).await;
    let changed = log.calls_of("source").len();
    merge_patch(&secrets, "source-copy", json!({"data": {"v": "eA=="}}))
        .await
        .expect("tamper");
    run_for(Duration::from_secs(1)).await;
    let tampered = log.calls_of("source").len();
    let copy = secrets.get("source-copy").await.expect("copy");
    assert_eq!(
        copy.data.and_then(|d| d.get("v").cloned()),
        Some(k8s_openapi::ByteString(b"2".to_vec())),
        "the copy is repaired either way"
    );
    [created, changed - created, tampered - changed]
}

#[tokio::test(start_paused = true)]
async fn skip_unchanged_runs_nothing_for_the_echoes_of_a_reconciles_own_writes() {
    let [created, changed, tampered] = reconciles_of_copy_and_mark(true).await;
    assert_eq!(
        created, 1,
        "its secret's and its mark's events echo its own writes"
    );
    assert_eq!(changed, 1, "a change by someone else runs it, once");
    assert_eq!(tampered, 1, "so does a change to an object it owns");
    // Without the setting, every echo runs the reconciler again (the case above is not
    // vacuous).
    let [created, changed, _] = reconciles_of_copy_and_mark(false).await;
    assert!(created > 1 && changed > 1, "{created} {changed}");
}
