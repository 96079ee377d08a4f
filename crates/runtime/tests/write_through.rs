//! Writes through `Context::api` update the controller's cache as they return, so a
//! reconcile reads its own writes without remember/forget. steady's in-process API server
//! on a paused clock, behind a client whose watch requests never get an answer: the
//! caches hold the initial list and nothing else, so only the writes can update them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use steady_runtime::{Action, Config, Context, Controller, ObjectCache, ObjectKey};
use tower::ServiceExt;

/// Whether `request` opens a watch (`?watch=true`).
fn is_watch<B>(request: &http::Request<B>) -> bool {
    request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true"))
}

/// One worker, no resync, a fixed seed: reconciles run one at a time, in a set order.
fn one_worker() -> Config {
    Config {
        concurrency: 1,
        resync_period: None,
        seed: Some(3),
        ..Config::default()
    }
}

/// A Deployment `web` of one nginx replica.
fn web_deployment() -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}
    }))
    .expect("deployment")
}

/// A client of a fresh server on which lists work and watches hang.
async fn client_without_watch_events() -> (steady_apiserver::ApiServer, Client) {
    let server = steady_apiserver::ApiServer::in_memory(Default::default())
        .await
        .expect("server");
    let router = server.router();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let router = router.clone();
        async move {
            let watch = is_watch(&request);
            if watch {
                std::future::pending::<()>().await;
            }
            router.oneshot(request.map(axum::body::Body::new)).await
        }
    });
    (server, Client::new(service, "default"))
}

struct Data {
    secrets: ObjectCache<Secret>,
    /// What the cache held right after each write: (step, the secret's value if cached).
    seen: Mutex<Vec<(&'static str, Option<String>)>>,
}

fn value(cache: &ObjectCache<Secret>) -> Option<String> {
    let secret = cache.get(&ObjectKey::new(Some("default"), "written"))?;
    let from_string = secret
        .string_data
        .as_ref()
        .and_then(|d| d.get("v").cloned());
    let from_data = secret
        .data
        .as_ref()
        .and_then(|d| d.get("v"))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned());
    Some(from_string.or(from_data).unwrap_or_default())
}

async fn write_patch_delete(_: Arc<ConfigMap>, ctx: Arc<Context<Data>>) -> Result<Action, String> {
    let api = ctx.api::<Secret>("default");
    let record = |step| {
        let now = value(&ctx.data().secrets);
        ctx.data().seen.lock().map(|mut s| s.push((step, now)))
    };
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "written"}, "stringData": {"v": "1"}}))
            .map_err(|e| e.to_string())?;
    api.create(&PostParams::default(), &secret)
        .await
        .map_err(|e| e.to_string())?;
    record("created").map_err(|e| e.to_string())?;
    let patch = Patch::Merge(json!({"stringData": {"v": "2"}}));
    api.patch("written", &PatchParams::default(), &patch)
        .await
        .map_err(|e| e.to_string())?;
    record("patched").map_err(|e| e.to_string())?;
    api.delete("written", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    record("deleted").map_err(|e| e.to_string())?;
    let kept: Secret = serde_json::from_value(json!({
        "metadata": {"name": "written", "finalizers": ["example.com/keep"]},
        "stringData": {"v": "3"},
    }))
    .map_err(|e| e.to_string())?;
    api.create(&PostParams::default(), &kept)
        .await
        .map_err(|e| e.to_string())?;
    api.delete("written", &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    record("terminating").map_err(|e| e.to_string())?;
    let marked = ctx
        .data()
        .secrets
        .get(&ObjectKey::new(Some("default"), "written"))
        .map(|s| s.metadata.deletion_timestamp.is_some().to_string());
    ctx.data()
        .seen
        .lock()
        .map(|mut s| s.push(("has a deletionTimestamp", marked)))
        .map_err(|e| e.to_string())?;
    Ok(Action::done())
}

#[tokio::test(start_paused = true)]
async fn writes_through_the_context_are_read_back_at_once() {
    let (_server, client) = client_without_watch_events().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut trigger = ConfigMap::default();
    trigger.metadata.name = Some("trigger".into());
    configmaps
        .create(&PostParams::default(), &trigger)
        .await
        .expect("configmap");
    let config = one_worker();
    let mut controller = Controller::new(configmaps, config);
    let secrets = controller.watches(Api::<Secret>::namespaced(client.clone(), "default"), |_| {
        Vec::new()
    });
    let data = Arc::new(Data {
        secrets,
        seen: Mutex::new(Vec::new()),
    });
    let running =
        tokio::spawn(controller.run(write_patch_delete, data.clone(), std::future::pending()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = data.seen.lock().expect("seen").clone();
    assert_eq!(
        seen,
        [
            ("created", Some("1".to_string())),
            ("patched", Some("2".to_string())),
            ("deleted", None),
            ("terminating", Some("3".to_string())),
            ("has a deletionTimestamp", Some("true".to_string())),
        ]
    );
    running.abort();
}

/// A client of `server` whose first watch loses every event: a second after it starts it
/// ends with 410 Expired (its events compacted away), as a watch broken off and resumed
/// too late does, and the client relists. Later watches, lists and writes pass through.
fn client_whose_first_watch_expires(server: &steady_apiserver::ApiServer) -> Client {
    let router = server.router();
    let watches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let router = router.clone();
        let watches = watches.clone();
        async move {
            let watch = is_watch(&request);
            if watch && watches.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                let expired = concat!(
                    r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","#,
                    r#""metadata":{},"status":"Failure","message":"too old resource version","#,
                    r#""reason":"Expired","code":410}}"#,
                    "\n"
                );
                let events = futures::stream::once(async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Ok::<_, std::convert::Infallible>(axum::body::Bytes::from_static(
                        expired.as_bytes(),
                    ))
                });
                let response = http::Response::new(axum::body::Body::from_stream(events));
                return Ok::<_, std::convert::Infallible>(response);
            }
            router.oneshot(request.map(axum::body::Body::new)).await
        }
    });
    Client::new(service, "default")
}

/// A client whose watch events each arrive `delay` late, as a busy API server's do: the
/// reply to a write reaches the controller before the events of what happened before it.
fn client_with_late_watch_events(server: &steady_apiserver::ApiServer, delay: Duration) -> Client {
    let router = server.router();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let router = router.clone();
        async move {
            let watch = is_watch(&request);
            let response = router.oneshot(request.map(axum::body::Body::new)).await?;
            if !watch {
                return Ok(response);
            }
            let (parts, body) = response.into_parts();
            let late = futures::StreamExt::then(body.into_data_stream(), move |frame| async move {
                tokio::time::sleep(delay).await;
                frame
            });
            Ok::<_, std::convert::Infallible>(http::Response::from_parts(
                parts,
                axum::body::Body::from_stream(late),
            ))
        }
    });
    Client::new(service, "default")
}

/// What each reconcile of a test read, and a user who writes beside the controller.
struct Seen<T> {
    user: Api<Deployment>,
    seen: Mutex<Vec<T>>,
}

impl<T> Seen<T> {
    /// Record what a reconcile read; whether it is the first.
    fn first(&self, read: T) -> Result<bool, String> {
        let mut seen = self.seen.lock().map_err(|e| e.to_string())?;
        seen.push(read);
        Ok(seen.len() == 1)
    }

    /// The user merge-patches the Deployment with `patch`.
    async fn user_patches(&self, patch: serde_json::Value) -> Result<(), String> {
        self.user
            .patch("web", &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// The reconcile merge-patches the Deployment's status with `status`, through its context.
async fn writes_status<T: Send + Sync + 'static>(
    ctx: &Context<T>,
    status: serde_json::Value,
) -> Result<Action, String> {
    ctx.api::<Deployment>("default")
        .patch_status("web", &PatchParams::default(), &Patch::Merge(status))
        .await
        .map_err(|e| e.to_string())?;
    Ok(Action::done())
}

/// What `reconcile` read in each of its runs over 10 s: the `web` Deployment created on a
/// fresh server, its controller configured by `config` and talking through `client`.
async fn readings<T, R, Fut>(
    client: impl FnOnce(&steady_apiserver::ApiServer) -> Client,
    config: Config,
    reconcile: R,
) -> Vec<T>
where
    T: Clone + Send + 'static,
    R: Fn(Arc<Deployment>, Arc<Context<Seen<T>>>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<Action, String>> + Send + 'static,
{
    let server = steady_apiserver::ApiServer::in_memory(Default::default())
        .await
        .expect("server");
    let user: Api<Deployment> = Api::namespaced(server.client(), "default");
    user.create(&PostParams::default(), &web_deployment())
        .await
        .expect("create");
    let api = Api::<Deployment>::namespaced(client(&server), "default");
    let data = Arc::new(Seen {
        user,
        seen: Mutex::new(Vec::new()),
    });
    let running = tokio::spawn(Controller::new(api, config).run(
        reconcile,
        data.clone(),
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_secs(10)).await;
    running.abort();
    data.seen.lock().expect("seen").clone()
}

/// The replicas a test's reconciles read: the first `Some(1)`, the last `Some(2)`.
fn assert_scale_reconciled(seen: &[Option<i32>]) {
    assert_eq!(seen.first(), Some(&Some(1)));
    assert_eq!(
        seen.last(),
        Some(&Some(2)),
        "the scale was reconciled: {seen:?}"
    );
}

/// Records the replicas it reads; the first time, a user scales the Deployment just before
/// the reconcile writes its status.
async fn scaled_during_status_write(
    deployment: Arc<Deployment>,
    ctx: Arc<Context<Seen<Option<i32>>>>,
) -> Result<Action, String> {
    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
    let first = ctx.data().first(replicas)?;
    if first {
        ctx.data()
            .user_patches(json!({"spec": {"replicas": 2}}))
            .await?;
    }
    // Nothing to report: a status write that changes nothing, answered with the object as
    // it is now, at the user's resourceVersion.
    writes_status(&ctx, json!({"status": {}})).await
}

/// A spec change that lands while a reconcile writes status, and whose watch event is lost
/// (the watch expires and the controller relists), is reconciled at once: the status
/// reply, which already shows the change, is not what the cache keeps, so the relist finds
/// the object changed. (Kept, the reply would make the relist see nothing new, and the
/// change would wait for a resync.)
#[tokio::test(start_paused = true)]
async fn a_change_made_during_a_status_write_and_lost_by_the_watch_is_still_reconciled() {
    let seen = readings(
        client_whose_first_watch_expires,
        one_worker(),
        scaled_during_status_write,
    )
    .await;
    assert_scale_reconciled(&seen);
}

/// Records the replicas it reads; the first time, a user scales the Deployment and the
/// scale reaches the controller's cache before the reconcile writes its status (whose
/// merge-patch reply then carries the scale).
async fn scaled_and_seen_before_status_write(
    deployment: Arc<Deployment>,
    ctx: Arc<Context<Seen<Option<i32>>>>,
) -> Result<Action, String> {
    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
    let first = ctx.data().first(replicas)?;
    if first {
        ctx.data()
            .user_patches(json!({"spec": {"replicas": 2}}))
            .await?;
        let cache = ctx.cache::<Deployment>().map_err(|e| e.to_string())?;
        let key = ObjectKey::new(Some("default"), "web");
        while cache.get(&key).and_then(|d| d.spec.as_ref()?.replicas) != Some(2) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    writes_status(&ctx, json!({"status": {"observedGeneration": 1}})).await
}

/// With `skip_unchanged`, a status write whose reply replaced in the cache a change the
/// reconcile never read (a scale that arrived while it ran) explains nothing: the run the
/// scale's event queued still runs and sees the scale. (Counted as the reconcile's own
/// change, it was skipped, and the scale waited for a resync: the simulator's
/// `cache-rescale` scenario found it.)
#[tokio::test(start_paused = true)]
async fn a_change_a_status_write_replaced_in_the_cache_is_still_reconciled() {
    let config = Config {
        skip_unchanged: true,
        ..one_worker()
    };
    let seen = readings(
        steady_apiserver::ApiServer::client,
        config,
        scaled_and_seen_before_status_write,
    )
    .await;
    assert_scale_reconciled(&seen);
}

/// Records the `tier` label it reads; the first time, a user labels the Deployment just
/// before the reconcile writes its status, whose merge-patch reply carries the label.
async fn labelled_during_status_write(
    deployment: Arc<Deployment>,
    ctx: Arc<Context<Seen<Option<String>>>>,
) -> Result<Action, String> {
    let tier = deployment
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("tier").cloned());
    let first = ctx.data().first(tier)?;
    if first {
        ctx.data()
            .user_patches(json!({"metadata": {"labels": {"tier": "gold"}}}))
            .await?;
    }
    writes_status(&ctx, json!({"status": {"observedGeneration": 1}})).await
}

/// A label added by someone else between the reconcile's read and its status write is
/// reconciled, whether its event reaches the cache before the write's reply (the write
/// then replaced a state the reconcile never read) or after it (the event is older than
/// the cached reply, which holds the label: it still wakes, as in client-go's informer,
/// which caches no writes). Neither a generation nor a deletion moved, so only the cache
/// can tell.
#[tokio::test(start_paused = true)]
async fn a_label_added_during_a_status_write_is_reconciled() {
    for skip_unchanged in [false, true] {
        let config = Config {
            skip_unchanged,
            ..one_worker()
        };
        let late = |server: &steady_apiserver::ApiServer| {
            client_with_late_watch_events(server, Duration::from_millis(200))
        };
        let seen = readings(late, config, labelled_during_status_write).await;
        assert_eq!(seen.first(), Some(&None));
        assert_eq!(
            seen.last(),
            Some(&Some("gold".to_string())),
            "skip_unchanged {skip_unchanged}: the label was reconciled: {seen:?}"
        );
    }
}

struct StatusWrites {
    deployments: ObjectCache<Deployment>,
    /// The cached status's `observedGeneration` right after each write.
    seen: Mutex<Vec<(&'static str, Option<i64>)>>,
}

async fn write_status_twice(
    deployment: Arc<Deployment>,
    ctx: Arc<Context<StatusWrites>>,
) -> Result<Action, String> {
    let api = ctx.api::<Deployment>("default");
    let record = |step| {
        let cached = ctx
            .data()
            .deployments
            .get(&ObjectKey::new(Some("default"), "web"));
        let observed = cached.and_then(|d| d.status.as_ref()?.observed_generation);
        ctx.data().seen.lock().map(|mut s| s.push((step, observed)))
    };
    let patch = Patch::Merge(json!({"status": {"observedGeneration": 7}}));
    let patched = api
        .patch_status("web", &PatchParams::default(), &patch)
        .await
        .map_err(|e| e.to_string())?;
    record("patched").map_err(|e| e.to_string())?;
    let mut replaced = patched.clone();
    replaced.status.get_or_insert_default().observed_generation = Some(8);
    api.replace_status("web", &PostParams::default(), &replaced)
        .await
        .map_err(|e| e.to_string())?;
    record("replaced").map_err(|e| e.to_string())?;
    // `deployment` is what the reconcile started from: replacing its status again is a
    // conflict (its resourceVersion is two writes old), and the cache keeps the last write.
    let stale = api
        .replace_status("web", &PostParams::default(), &deployment)
        .await;
    let conflict = matches!(stale, Err(kube::Error::Api(ref s)) if s.code == 409);
    record(if conflict {
        "stale: 409"
    } else {
        "stale: written"
    })
    .map_err(|e| e.to_string())?;
    Ok(Action::done())
}

#[tokio::test(start_paused = true)]
async fn status_writes_through_the_context_are_read_back_at_once() {
    let (_server, client) = client_without_watch_events().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment = web_deployment();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create");
    let config = one_worker();
    let controller = Controller::new(deployments, config);
    let data = Arc::new(StatusWrites {
        deployments: controller.primary_cache(),
        seen: Mutex::new(Vec::new()),
    });
    let running =
        tokio::spawn(controller.run(write_status_twice, data.clone(), std::future::pending()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = data.seen.lock().expect("seen").clone();
    assert_eq!(
        seen,
        [
            ("patched", Some(7)),
            ("replaced", Some(8)),
            ("stale: 409", Some(8)),
        ]
    );
    running.abort();
}
