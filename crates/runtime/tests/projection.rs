//! An owned kind cached as a projection the controller declares: the owner is found through
//! the projected owner index, only a change of the projection wakes it, and a write through
//! the context caches the projection of the server's reply. steady's in-process API server,
//! a paused clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use steady_runtime::{
    Action, Config, Context, Controller, ObjectCache, ObjectKey, Projected, Projection,
};
use steady_test_support::create_json;

/// What the reconciler reads of a Secret: its `app` label.
#[derive(Debug, Clone, PartialEq)]
struct App(Option<String>);

impl Projection for App {
    type Kind = Secret;

    fn project(secret: &Secret) -> Self {
        App(secret
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app").cloned()))
    }
}

struct Data {
    secrets: ObjectCache<Projected<App>>,
    /// Per reconcile: the apps of the owned Secrets, and whether the copy the reconcile
    /// wrote was cached as the `create` returned.
    seen: Mutex<Vec<(Vec<Option<String>>, bool)>>,
}

/// Records what it reads, and creates the owner's `<name>-copy` once.
async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Context<Data>>) -> Result<Action, String> {
    let uid = cm.metadata.uid.clone().unwrap_or_default();
    let cache = &ctx.data().secrets;
    let apps = cache.owned_by(&uid).iter().map(|s| s.0.clone()).collect();
    let whole = ctx.cache::<Secret>().err().map(|e| e.to_string());
    if !whole.as_deref().is_some_and(|e| e.contains("Projected<")) {
        return Err(format!(
            "asking for whole Secrets named no projection: {whole:?}"
        ));
    }
    let copy = ObjectKey::new(Some("default"), "copy");
    let mut written = cache.get(&copy).is_some();
    if !written {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "copy", "labels": {"app": "copied"}},
        }))
        .map_err(|e| e.to_string())?;
        ctx.api::<Secret>("default")
            .create(&PostParams::default(), &secret)
            .await
            .map_err(|e| e.to_string())?;
        written = cache
            .get(&copy)
            .is_some_and(|s| s.0.as_deref() == Some("copied"));
    }
    ctx.data()
        .seen
        .lock()
        .map_err(|e| e.to_string())?
        .push((apps, written));
    Ok(Action::done())
}

async fn in_memory_server() -> (steady_apiserver::ApiServer, kube::Client) {
    let server = steady_apiserver::ApiServer::in_memory(Default::default())
        .await
        .expect("server");
    let client = server.client();
    (server, client)
}

async fn patch_owned(secrets: &Api<Secret>, body: serde_json::Value) {
    let params = PatchParams::default();
    let patched = secrets.patch("owned", &params, &Patch::Merge(body)).await;
    patched.expect("patch");
}

#[tokio::test(start_paused = true)]
async fn a_projected_owned_kind_maps_owners_wakes_on_visible_changes_and_caches_writes() {
    let (_server, client) = in_memory_server().await;
    let (configmaps, secrets) = (
        Api::default_namespaced(client.clone()),
        Api::default_namespaced(client.clone()),
    );
    let secrets: Api<Secret> = secrets;
    let owner: ConfigMap = create_json(&configmaps, json!({"metadata": {"name": "owner"}})).await;
    let _owned: Secret = create_json(
        &secrets,
        json!({
            "metadata": {
                "name": "owned", "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                     "uid": owner.metadata.uid, "controller": true}],
            },
            "stringData": {"v": "1"},
        }),
    )
    .await;
    let config = Config {
        concurrency: 1,
        resync_period: None,
        seed: Some(1),
        ..Config::named("projection")
    };
    let mut controller = Controller::new(configmaps.clone(), config);
    let handle = controller.owns_projected::<App>(Api::all(client.clone()));
    let (secrets_cache, seen) = (handle.clone(), Mutex::default());
    let data = Arc::new(Data {
        secrets: secrets_cache,
        seen,
    });
    let running = tokio::spawn(controller.run(reconcile, data.clone(), std::future::pending()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = || data.seen.lock().expect("seen").clone();
    assert_eq!(
        seen(),
        [(vec![Some("web".to_string())], true)],
        "the owner reads its Secret's projection, and its own write at once"
    );

    patch_owned(&secrets, json!({"stringData": {"v": "2"}})).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        seen().len(),
        1,
        "a change outside the projection wakes nothing"
    );
    let cached = handle
        .get(&ObjectKey::new(Some("default"), "owned"))
        .expect("cached");
    assert_ne!(
        cached.meta().resource_version(),
        _owned.metadata.resource_version.as_deref(),
        "yet it is cached"
    );

    patch_owned(&secrets, json!({"metadata": {"labels": {"app": "db"}}})).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        seen().last().map(|(apps, _)| apps.clone()),
        Some(vec![Some("db".to_string())]),
        "a change of the projection wakes the owner"
    );
    assert_eq!(seen().len(), 2);
    running.abort();
}
