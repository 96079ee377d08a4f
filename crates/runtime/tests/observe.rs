//! The recorder sees every reconcile as it happened: its triggers (primary, owned object),
//! the writes made through the context, its outcome (ok, requeue, error with the backoff
//! chosen) and the controller's state (kinds watched, keys in backoff). In-process API
//! server, paused clock.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;
use steady_runtime::backoff::BackoffPolicy;
use steady_runtime::observe::{Observed, Outcome, ReconcileRecord, Role, WatchPhase};
use steady_runtime::{Action, Config, Context, Controller, Recorder, Trigger};
use tokio::sync::{broadcast, oneshot};

fn config() -> Config {
    let backoff = BackoffPolicy {
        jitter: 0.0,
        ..BackoffPolicy::default()
    };
    let (name, concurrency, seed) = ("copier".to_string(), 2, Some(1));
    Config {
        resync_period: None,
        backoff,
        name,
        concurrency,
        seed,
        ..Config::default()
    }
}

/// Copies each ConfigMap into an owned Secret `<name>-copy`; fails for ConfigMaps whose
/// `fail` key is set, and asks for a requeue when `requeue` is set.
async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Context<()>>) -> Result<Action, String> {
    let data = cm.data.clone().unwrap_or_default();
    if data.contains_key("fail") {
        return Err("told to fail".into());
    }
    let name = format!("{}-copy", cm.metadata.name.clone().unwrap_or_default());
    let secrets = ctx.cache::<Secret>().map_err(|e| e.to_string())?;
    let key = steady_runtime::ObjectKey::new(Some("default"), &name);
    if secrets.get(&key).is_none() {
        let mut secret = Secret::default();
        secret.metadata.name = Some(name);
        secret.metadata.owner_references = Some(vec![cm.controller_owner_ref(&()).unwrap_or(
            OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                ..Default::default()
            },
        )]);
        ctx.api::<Secret>("default")
            .create(&PostParams::default(), &secret)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(match data.contains_key("requeue") {
        true => Action::requeue_after(Duration::from_secs(5)),
        false => Action::done(),
    })
}

struct Running {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), steady_runtime::Error>>,
}

fn start(client: &Client, recorder: &Recorder) -> Running {
    let mut controller = Controller::new(
        Api::<ConfigMap>::namespaced(client.clone(), "default"),
        config(),
    )
    .with_recorder(recorder.clone());
    controller.owns(Api::<Secret>::all(client.clone()));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(controller.run(reconcile, Arc::new(()), async move {
        let _ = stopped.await;
    }));
    Running { stop, task }
}

async fn create(client: &Client, name: &str, data: serde_json::Value) {
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).expect("cm");
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
}

/// The next finished reconcile of `key` that `accept` takes.
async fn finished(
    events: &mut broadcast::Receiver<Observed>,
    key: &str,
    accept: impl Fn(&ReconcileRecord) -> bool,
) -> ReconcileRecord {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(Observed::Finished(record)) if record.key == key && accept(&record) => {
                    return record;
                }
                Ok(_) => {}
                Err(e) => panic!("event stream: {e}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .expect("no such reconcile within 60 s")
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn records_triggers_writes_and_outcomes() {
    let server = steady_apiserver::ApiServer::in_memory(steady_apiserver::Config {
        seed: Some(7),
        ..Default::default()
    })
    .await
    .expect("server");
    let client = server.client();
    let recorder = Recorder::new();
    let mut events = recorder.subscribe();
    let running = start(&client, &recorder);

    create(&client, "a", json!({"v": "1"})).await;
    let first = finished(&mut events, "default/a", |_| true).await;
    assert_eq!(first.triggers, [Trigger::Primary]);
    assert_eq!(first.outcome, Some(Outcome::Ok));
    let writes: Vec<String> = first.writes.iter().map(ToString::to_string).collect();
    assert_eq!(writes, ["created secret a-copy"]);
    assert!(first.duration_ms.is_some());

    // Deleting the owned Secret wakes the owner, which recreates it.
    Api::<Secret>::namespaced(client.clone(), "default")
        .delete("a-copy", &DeleteParams::default())
        .await
        .expect("delete");
    let healed = finished(&mut events, "default/a", |r| !r.writes.is_empty()).await;
    assert!(
        healed.triggers.contains(&Trigger::Owned {
            kind: "Secret".into(),
            name: "default/a-copy".into()
        }),
        "{:?}",
        healed.triggers
    );

    create(&client, "r", json!({"requeue": "yes"})).await;
    let requeued = finished(&mut events, "default/r", |_| true).await;
    assert_eq!(
        requeued.outcome,
        Some(Outcome::Requeue { after_ms: 5000.0 })
    );

    create(&client, "bad", json!({"fail": "yes"})).await;
    let failed = finished(&mut events, "default/bad", |_| true).await;
    let Some(Outcome::Error {
        message,
        retry_after_ms,
        attempt,
    }) = failed.outcome
    else {
        panic!("expected an error outcome: {failed:?}");
    };
    assert_eq!((message.as_str(), attempt), ("told to fail", 1));
    assert!(retry_after_ms > 0.0);
    let state = recorder.state().borrow().clone();
    assert_eq!(state.backoff.get("default/bad").map(|r| r.attempt), Some(1));
    let retried = finished(&mut events, "default/bad", |r| {
        r.triggers.contains(&Trigger::Backoff { attempt: 1 })
    })
    .await;
    assert!(matches!(
        retried.outcome,
        Some(Outcome::Error { attempt: 2, .. })
    ));

    let state = recorder.state().borrow().clone();
    assert!(state.running && state.synced);
    assert_eq!(state.name, "copier");
    let kinds: Vec<(Role, &str, &str, WatchPhase)> = state
        .kinds
        .iter()
        .map(|k| (k.role, k.kind.as_str(), k.plural.as_str(), k.phase))
        .collect();
    assert_eq!(
        kinds,
        [
            (
                Role::Primary,
                "ConfigMap",
                "configmaps",
                WatchPhase::Watching
            ),
            (Role::Owned, "Secret", "secrets", WatchPhase::Watching),
        ]
    );
    assert!(recorder.history().iter().any(|r| r.id == first.id));

    let _ = running.stop.send(());
    running.task.await.expect("join").expect("run");
    assert!(!recorder.state().borrow().running);
}
