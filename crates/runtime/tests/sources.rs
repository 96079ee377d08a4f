//! How a controller's sources are declared: typed cache handles, selectors on owned kinds,
//! one source per kind, and `trim` in any order. steady's in-process API server, a paused
//! clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde_json::json;
use steady_runtime::{
    Action, CachingApi, Config, Context, Controller, Error, ObjectCache, ObjectKey,
};
use steady_test_support::create_json;

async fn client() -> (steady_apiserver::ApiServer, Client) {
    let server = steady_apiserver::ApiServer::in_memory(Default::default())
        .await
        .expect("server");
    let client = server.client();
    (server, client)
}

fn config() -> Config {
    Config {
        name: "sources".into(),
        concurrency: 1,
        resync_period: None,
        seed: Some(1),
        ..Config::default()
    }
}

fn configmaps(client: &Client) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), "default")
}

fn secrets(client: &Client) -> Api<Secret> {
    Api::namespaced(client.clone(), "default")
}

/// A Secret `name` labelled `app=<app>`, controlled by `owner`, holding `v=<value>`.
fn owned_secret(name: &str, app: &str, owner: &ConfigMap, value: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"app": app},
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": ConfigMap::kind(&()),
                "name": owner.metadata.name,
                "uid": owner.metadata.uid,
                "controller": true,
            }],
        },
        "stringData": {"v": value},
    }))
    .expect("secret")
}

/// Create the ConfigMap `name`, without data, in `default`.
async fn create_configmap(client: &Client, name: &str) -> ConfigMap {
    create_json(&configmaps(client), json!({"metadata": {"name": name}})).await
}

/// Create an [`owned_secret`] in `default`.
async fn create_owned_secret(
    client: &Client,
    name: &str,
    app: &str,
    owner: &ConfigMap,
    value: &str,
) -> Secret {
    let secret = owned_secret(name, app, owner, value);
    secrets(client)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("create secret {name}: {e}"))
}

/// A controller of ConfigMaps, once ConfigMap `owner` and the Secret `s` it controls exist.
async fn controller_of_an_owned_secret(client: &Client) -> Controller<ConfigMap> {
    let owner = create_configmap(client, "owner").await;
    create_owned_secret(client, "s", "web", &owner, "secret").await;
    Controller::new(configmaps(client), config())
}

fn names<K: Resource>(objects: &[Arc<K>]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

/// `run` must refuse at once: it never waits for this shutdown.
async fn start_error(controller: Controller<ConfigMap>) -> Error {
    let run = controller.run(
        |_: Arc<ConfigMap>, _: Arc<Context<()>>| async { Ok::<_, String>(Action::done()) },
        Arc::new(()),
        std::future::pending(),
    );
    match tokio::time::timeout(Duration::from_secs(60), run).await {
        Ok(Err(error)) => error,
        Ok(Ok(())) => panic!("run stopped without an error"),
        Err(_) => panic!("run started instead of refusing"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_second_source_of_one_kind_is_an_error_at_start() {
    let (_server, client) = client().await;
    let mut controller = Controller::new(configmaps(&client), config());
    let first = controller.owns(secrets(&client));
    // Another namespace: merged into the first watch, this Api would be silently ignored.
    let second = controller.watches(Api::<Secret>::namespaced(client.clone(), "other"), |_| {
        Vec::new()
    });
    first.remember(owned_secret("s", "web", &ConfigMap::default(), "1"));
    assert_eq!(second.len(), 1, "both handles are the one cache of Secrets");
    assert!(matches!(
        controller.validate(),
        Err(Error::DuplicateSource { kind }) if kind == "Secret"
    ));
    let error = start_error(controller).await;
    assert!(matches!(&error, Error::DuplicateSource { kind } if kind == "Secret"));
    assert!(
        error.to_string().contains("Secret has two sources"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn owning_the_primary_kind_is_a_duplicate_source() {
    let (_server, client) = client().await;
    let mut controller = Controller::new(configmaps(&client), config());
    controller.owns(configmaps(&client));
    let error = start_error(controller).await;
    assert!(matches!(&error, Error::DuplicateSource { kind } if kind == "ConfigMap"));
}

#[tokio::test(start_paused = true)]
async fn a_trim_of_a_kind_never_watched_is_an_error_at_start() {
    let (_server, client) = client().await;
    let mut controller = Controller::new(configmaps(&client), config());
    controller.trim(|s: &mut Secret| s.data = None);
    assert!(controller.validate().is_err());
    let error = start_error(controller).await;
    assert!(
        matches!(&error, Error::TrimWithoutSource { kind } if kind.ends_with("Secret")),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_trim_before_its_owns_still_applies() {
    let (_server, client) = client().await;
    let mut controller = controller_of_an_owned_secret(&client).await;
    controller.trim(|s: &mut Secret| s.data = None);
    let cache = controller.owns(secrets(&client));
    assert!(controller.validate().is_ok());
    let running = tokio::spawn(controller.run(
        |_: Arc<ConfigMap>, _: Arc<Context<()>>| async { Ok::<_, String>(Action::done()) },
        Arc::new(()),
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cached = cache
        .get(&ObjectKey::new(Some("default"), "s"))
        .expect("the secret is cached");
    assert_eq!(cached.data, None, "cached trimmed");
    running.abort();
}

/// What each reconcile of the owner saw through its typed handle.
type Seen = Mutex<Vec<Vec<String>>>;

struct Data {
    secrets: ObjectCache<Secret>,
    seen: Seen,
}

async fn record_owned(cm: Arc<ConfigMap>, ctx: Arc<Context<Data>>) -> Result<Action, String> {
    let uid = cm.metadata.uid.clone().unwrap_or_default();
    let owned = names(&ctx.data().secrets.owned_by(&uid));
    ctx.data()
        .seen
        .lock()
        .map_err(|e| e.to_string())?
        .push(owned);
    Ok(Action::done())
}

#[tokio::test(start_paused = true)]
async fn a_selector_filtered_owns_sees_and_triggers_on_matching_objects_only() {
    let (_server, client) = client().await;
    let owner = create_configmap(&client, "owner").await;
    for (name, app) in [("web-config", "web"), ("db-config", "db")] {
        create_owned_secret(&client, name, app, &owner, "1").await;
    }
    let mut controller = Controller::new(configmaps(&client), config());
    let handle = controller.owns_with(
        secrets(&client),
        watcher::Config::default().labels("app=web"),
    );
    let data = Arc::new(Data {
        secrets: handle.clone(),
        seen: Mutex::new(Vec::new()),
    });
    let running = tokio::spawn(controller.run(record_owned, data.clone(), std::future::pending()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        names(&handle.list()),
        ["web-config"],
        "only matching objects are cached"
    );
    let seen = || data.seen.lock().expect("seen").clone();
    assert_eq!(seen(), [["web-config"]], "the reconciler reads the handle");

    let change = |value: &str| Patch::Merge(json!({"stringData": {"v": value}}));
    secrets(&client)
        .patch("db-config", &PatchParams::default(), &change("2"))
        .await
        .expect("patch db");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        seen().len(),
        1,
        "a non-matching owned object does not trigger"
    );

    secrets(&client)
        .patch("web-config", &PatchParams::default(), &change("2"))
        .await
        .expect("patch web");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(seen().len(), 2, "a matching owned object does");
    running.abort();
}

#[tokio::test(start_paused = true)]
async fn an_owned_update_wakes_the_owner_only_when_its_cached_form_changes() {
    let (_server, client) = client().await;
    let mut controller = controller_of_an_owned_secret(&client).await;
    let handle = controller.owns(secrets(&client));
    controller.trim(|s: &mut Secret| s.data = None);
    let data = Arc::new(Data {
        secrets: handle.clone(),
        seen: Mutex::new(Vec::new()),
    });
    let running = tokio::spawn(controller.run(record_owned, data.clone(), std::future::pending()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reconciles = || data.seen.lock().expect("seen").len();
    assert_eq!(reconciles(), 1, "the first sync reconciles the owner");

    let api = secrets(&client);
    let patch = |body| {
        let api = api.clone();
        async move {
            api.patch("s", &PatchParams::default(), &Patch::Merge(body))
                .await
                .expect("patch the secret");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let cached_version = || {
        handle
            .get(&ObjectKey::new(Some("default"), "s"))
            .and_then(|s| s.metadata.resource_version.clone())
    };
    let before = cached_version();
    patch(json!({"stringData": {"v": "2"}})).await;
    assert_eq!(
        reconciles(),
        1,
        "a change only to trimmed-away data does not wake"
    );
    assert_ne!(
        cached_version(),
        before,
        "the cache still follows the update"
    );

    patch(json!({"metadata": {"labels": {"tier": "front"}}})).await;
    assert_eq!(
        reconciles(),
        2,
        "a change to a cached field wakes the owner"
    );
    running.abort();
}

#[tokio::test(start_paused = true)]
async fn the_context_names_a_kind_it_has_no_cache_of() {
    let (_server, client) = client().await;
    let controller = Controller::new(configmaps(&client), config());
    create_configmap(&client, "cm").await;
    let answers: Arc<Mutex<BTreeMap<&'static str, String>>> = Arc::default();
    let record = answers.clone();
    let running = tokio::spawn(controller.run(
        move |_: Arc<ConfigMap>, ctx: Arc<Context<()>>| {
            let record = record.clone();
            async move {
                let mut answers = record.lock().map_err(|e| e.to_string())?;
                let primary = ctx.cache::<ConfigMap>().map(|c| c.len().to_string());
                answers.insert("ConfigMap", primary.unwrap_or_else(|e| e.to_string()));
                let secrets = ctx.cache::<Secret>().map(|c| c.len().to_string());
                answers.insert("Secret", secrets.unwrap_or_else(|e| e.to_string()));
                Ok::<_, String>(Action::done())
            }
        },
        Arc::new(()),
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let answers = answers.lock().expect("answers").clone();
    assert_eq!(answers["ConfigMap"], "1");
    assert!(
        answers["Secret"].contains("no cache of Secret"),
        "{answers:?}"
    );
    running.abort();
}

/// Reconciles each primary names, in order.
type Reconciled = Mutex<Vec<String>>;

async fn record_name(cm: Arc<ConfigMap>, ctx: Arc<Context<Reconciled>>) -> Result<Action, String> {
    let name = cm.metadata.name.clone().unwrap_or_default();
    ctx.data().lock().map_err(|e| e.to_string())?.push(name);
    Ok(Action::done())
}

#[tokio::test(start_paused = true)]
async fn a_referenced_object_triggers_the_primaries_that_name_it() {
    let (_server, client) = client().await;
    for (name, secret) in [("a", "one"), ("b", "two"), ("c", "one")] {
        let cm = json!({"metadata": {"name": name}, "data": {"secret": secret}});
        create_json(&configmaps(&client), cm).await;
    }
    for name in ["one", "two"] {
        create_json(&secrets(&client), json!({"metadata": {"name": name}})).await;
    }
    let mut controller = Controller::new(configmaps(&client), config());
    let cache = controller.watches_references(secrets(&client), |cm: &ConfigMap| {
        let secret = cm.data.as_ref().and_then(|d| d.get("secret")).cloned();
        secret.map(|name| ObjectKey::new(Some("default"), &name))
    });
    let reconciled = Arc::new(Mutex::new(Vec::new()));
    let running =
        tokio::spawn(controller.run(record_name, reconciled.clone(), std::future::pending()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(names(&cache.list()), ["one", "two"]);
    reconciled.lock().expect("reconciled").clear();

    let change = Patch::Merge(json!({"stringData": {"v": "2"}}));
    secrets(&client)
        .patch("one", &PatchParams::default(), &change)
        .await
        .expect("patch one");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut after = reconciled.lock().expect("reconciled").clone();
    after.sort();
    assert_eq!(
        after,
        ["a", "c"],
        "the primaries naming `one`, and only those"
    );
    running.abort();
}

/// A client of `server` that records the path and query of every GET it sends.
fn recording_client(server: &steady_apiserver::ApiServer) -> (Client, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let service = tower::ServiceBuilder::new()
        .map_request(move |r: http::Request<kube::client::Body>| {
            if r.method() == http::Method::GET {
                let uri = r.uri().path_and_query().map(ToString::to_string);
                record.lock().expect("request log").extend(uri);
            }
            r.map(axum::body::Body::new)
        })
        .service(server.router());
    (Client::new(service, "default"), seen)
}

/// The `limit` of every LIST (not watch) of `path` in `seen`, in order.
fn list_limits(seen: &Mutex<Vec<String>>, path: &str) -> Vec<String> {
    let seen = seen.lock().expect("request log");
    seen.iter()
        .filter_map(|uri| uri.strip_prefix(path)?.strip_prefix('?'))
        .filter(|query| !query.contains("watch=true"))
        .map(|query| {
            query
                .split('&')
                .find_map(|pair| pair.strip_prefix("limit="))
                .unwrap_or("none")
                .to_owned()
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn sources_list_in_pages_of_the_configured_size_unless_their_watch_says_otherwise() {
    let (server, _) = client().await;
    let (client, seen) = recording_client(&server);
    for i in 0..5 {
        create_configmap(&client, &format!("cm-{i}")).await;
    }
    let mut controller = Controller::new(
        configmaps(&client),
        Config {
            list_page_size: 2,
            ..config()
        },
    );
    let primaries = controller.primary_cache();
    let secrets = controller.owns_with(secrets(&client), watcher::Config::default().page_size(7));
    let running = tokio::spawn(controller.run(
        |_: Arc<ConfigMap>, _: Arc<Context<()>>| async { Ok::<_, String>(Action::done()) },
        Arc::new(()),
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    running.abort();

    assert_eq!(primaries.len(), 5, "every page reached the cache");
    assert!(secrets.is_empty());
    assert_eq!(
        list_limits(&seen, "/api/v1/namespaces/default/configmaps"),
        ["2", "2", "2"],
        "5 ConfigMaps in pages of 2"
    );
    assert_eq!(
        list_limits(&seen, "/api/v1/namespaces/default/secrets"),
        ["7"]
    );
}

/// Writes the Secret `<cm>-written` through the context once, then records whether each
/// cached object (primaries, watched and written Secrets) carries managed fields.
async fn write_and_inspect(
    cm: Arc<ConfigMap>,
    ctx: Arc<Context<Mutex<BTreeMap<String, bool>>>>,
) -> Result<Action, String> {
    let name = format!("{}-written", cm.metadata.name.clone().unwrap_or_default());
    let secrets = ctx.cache::<Secret>().map_err(|e| e.to_string())?;
    let key = ObjectKey::new(Some("default"), &name);
    let has_managed_fields = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.managed_fields.as_ref().is_some_and(|m| !m.is_empty())
    };
    if secrets.get(&key).is_none() {
        let written = owned_secret(&name, "web", &cm, "w");
        let created = ctx
            .api::<Secret>("default")
            .create(&PostParams::default(), &written)
            .await
            .map_err(|e| e.to_string())?;
        // A write through a handle of the cache is remembered the same way.
        let label = json!({"metadata": {"labels": {"written": "again"}}});
        let patched =
            CachingApi::with_cache(Api::namespaced(ctx.client(), "default"), secrets.clone())
                .patch(&name, &PatchParams::default(), &Patch::Merge(label))
                .await
                .map_err(|e| e.to_string())?;
        // The replies come back as the cache keeps them.
        let mut seen = ctx.data().lock().map_err(|e| e.to_string())?;
        seen.insert(
            "reply to create".into(),
            has_managed_fields(&created.metadata),
        );
        seen.insert(
            "reply to patch".into(),
            has_managed_fields(&patched.metadata),
        );
    }
    let mut seen = ctx.data().lock().map_err(|e| e.to_string())?;
    for primary in ctx.cache::<ConfigMap>().map_err(|e| e.to_string())?.list() {
        let name = primary.metadata.name.clone().unwrap_or_default();
        seen.insert(
            format!("configmap {name}"),
            has_managed_fields(&primary.metadata),
        );
    }
    for secret in secrets.list() {
        let name = secret.metadata.name.clone().unwrap_or_default();
        seen.insert(
            format!("secret {name}"),
            has_managed_fields(&secret.metadata),
        );
    }
    Ok(Action::done())
}

#[tokio::test(start_paused = true)]
async fn caches_and_write_replies_leave_managed_fields_out_unless_the_config_keeps_them() {
    for keep in [false, true] {
        // A cluster each: the first write of the Secret is what shows the replies.
        let (_server, client) = client().await;
        // With data: a manager that set no field at all gets no managed-fields entry.
        let owner = json!({"metadata": {"name": "owner"}, "data": {"k": "v"}});
        let owner = create_json(&configmaps(&client), owner).await;
        assert!(
            owner.metadata.managed_fields.is_some(),
            "the server sends them"
        );
        create_owned_secret(&client, "s", "web", &owner, "secret").await;
        let config = Config {
            keep_managed_fields: keep,
            ..config()
        };
        let mut controller = Controller::new(configmaps(&client), config);
        controller.owns(secrets(&client));
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let running =
            tokio::spawn(controller.run(write_and_inspect, seen.clone(), std::future::pending()));
        tokio::time::sleep(Duration::from_secs(1)).await;
        running.abort();
        let seen = seen.lock().expect("seen").clone();
        let names: Vec<&str> = seen.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "configmap owner",
                "reply to create",
                "reply to patch",
                "secret owner-written",
                "secret s"
            ],
            "keep = {keep}"
        );
        assert!(
            seen.values().all(|&has| has == keep),
            "keep_managed_fields = {keep}: {seen:?}"
        );
    }
}
