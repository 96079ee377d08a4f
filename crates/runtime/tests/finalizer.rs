//! `steady_runtime::finalizer` against steady's in-process API server, with ConfigMaps.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use steady_runtime::finalizer::{FinalizerError, FinalizerEvent, finalizer};
use steady_test_support::{clear_finalizers, merge_patch};

const FIN: &str = "example.com/cleanup";
const OTHER: &str = "other.example.com/hold";

#[derive(Debug, thiserror::Error)]
#[error("boom")]
struct Boom;

struct Env {
    server: steady_apiserver::ApiServer,
    api: Api<ConfigMap>,
}

async fn env() -> Env {
    let server = steady_apiserver::ApiServer::in_memory(steady_apiserver::Config::default())
        .await
        .expect("server");
    let api = Api::namespaced(server.client(), "default");
    Env { server, api }
}

async fn create(api: &Api<ConfigMap>, name: &str, finalizers: &[&str]) -> Arc<ConfigMap> {
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "finalizers": finalizers},
        "data": {"k": "v"},
    }))
    .unwrap();
    Arc::new(api.create(&PostParams::default(), &cm).await.unwrap())
}

async fn fresh(api: &Api<ConfigMap>, name: &str) -> Arc<ConfigMap> {
    Arc::new(api.get(name).await.unwrap())
}

fn finalizers(cm: &Arc<ConfigMap>) -> Vec<String> {
    cm.meta().finalizers.clone().unwrap_or_default()
}

/// What the handler saw: "apply:<name>" or "cleanup:<name>".
fn describe(ev: &FinalizerEvent<ConfigMap>) -> String {
    match ev {
        FinalizerEvent::Apply(cm) => format!("apply:{}", cm.meta().name.as_deref().unwrap()),
        FinalizerEvent::Cleanup(cm) => format!("cleanup:{}", cm.meta().name.as_deref().unwrap()),
    }
}

async fn run(
    api: &Api<ConfigMap>,
    obj: Arc<ConfigMap>,
) -> Result<Option<String>, FinalizerError<Boom>> {
    finalizer(api, FIN, obj, |ev| async move { Ok(describe(&ev)) }).await
}

fn api_code<E: std::fmt::Debug>(r: Result<Option<String>, FinalizerError<E>>) -> u16 {
    match r {
        Err(FinalizerError::Kube(kube::Error::Api(status))) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn add_then_apply_then_cleanup_on_delete_then_gone() {
    let Env { server, api } = env().await;
    let created = create(&api, "cm", &[]).await;

    // 1. Live without the finalizer: it is added, the handler does not run.
    let out = finalizer(&api, FIN, created, |_ev| async move {
        panic!("handler must not run while adding the finalizer");
        #[allow(unreachable_code)]
        Ok::<_, Boom>(())
    })
    .await
    .unwrap();
    assert!(out.is_none());
    let obj = fresh(&api, "cm").await;
    assert_eq!(finalizers(&obj), [FIN]);

    // 2. Live with the finalizer: apply; nothing written.
    let rv = obj.meta().resource_version.clone();
    assert_eq!(run(&api, obj).await.unwrap().as_deref(), Some("apply:cm"));
    assert_eq!(fresh(&api, "cm").await.meta().resource_version, rv);

    // 3. Deleted: the finalizer holds the object.
    api.delete("cm", &DeleteParams::default()).await.unwrap();
    let deleting = fresh(&api, "cm").await;
    assert!(deleting.meta().deletion_timestamp.is_some());
    assert_eq!(finalizers(&deleting), [FIN]);

    // 4. Cleanup runs, the finalizer is removed, the object is gone.
    assert_eq!(
        run(&api, deleting.clone()).await.unwrap().as_deref(),
        Some("cleanup:cm")
    );
    let err = api.get("cm").await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 404));

    // A late replay of the same (now stale) event: the object is gone, nothing to remove.
    assert_eq!(
        run(&api, deleting).await.unwrap().as_deref(),
        Some("cleanup:cm")
    );

    server.shutdown().await;
}

#[tokio::test]
async fn keeps_other_finalizers() {
    let Env { server, api } = env().await;
    let created = create(&api, "cm", &[OTHER]).await;
    assert!(run(&api, created).await.unwrap().is_none());
    let obj = fresh(&api, "cm").await;
    assert_eq!(finalizers(&obj), [OTHER, FIN]);

    api.delete("cm", &DeleteParams::default()).await.unwrap();
    let deleting = fresh(&api, "cm").await;
    assert_eq!(
        run(&api, deleting).await.unwrap().as_deref(),
        Some("cleanup:cm")
    );
    // Ours is gone, the other one still holds the object.
    let held = fresh(&api, "cm").await;
    assert_eq!(finalizers(&held), [OTHER]);
    assert!(held.meta().deletion_timestamp.is_some());

    // Being deleted without our finalizer: nothing to do, the handler does not run.
    assert!(run(&api, held).await.unwrap().is_none());

    server.shutdown().await;
}

#[tokio::test]
async fn concurrent_change_while_adding_is_a_conflict_not_a_lost_write() {
    let Env { server, api } = env().await;
    let stale = create(&api, "cm", &[]).await;

    // Someone else adds their finalizer after we read the object.
    merge_patch(&api, "cm", json!({"metadata": {"finalizers": [OTHER]}}))
        .await
        .unwrap();

    // Writing our full list from the stale read would drop theirs: 409 Conflict instead.
    assert_eq!(api_code(run(&api, stale).await), 409);
    assert_eq!(finalizers(&fresh(&api, "cm").await), [OTHER]);

    // Retried with a fresh read, both are there.
    assert!(run(&api, fresh(&api, "cm").await).await.unwrap().is_none());
    assert_eq!(finalizers(&fresh(&api, "cm").await), [OTHER, FIN]);

    // An unrelated change also conflicts (optimistic concurrency on resourceVersion).
    let stale = create(&api, "cm2", &[]).await;
    merge_patch(&api, "cm2", json!({"data": {"k": "changed"}}))
        .await
        .unwrap();
    assert_eq!(api_code(run(&api, stale).await), 409);
    assert!(finalizers(&fresh(&api, "cm2").await).is_empty());

    server.shutdown().await;
}

#[tokio::test]
async fn concurrent_change_while_removing_is_an_error_and_finalizer_stays() {
    let Env { server, api } = env().await;
    create(&api, "cm", &[OTHER, FIN]).await;
    api.delete("cm", &DeleteParams::default()).await.unwrap();
    let stale = fresh(&api, "cm").await;

    // The other holder removes its finalizer meanwhile: ours moves from index 1 to 0.
    merge_patch(&api, "cm", json!({"metadata": {"finalizers": [FIN]}}))
        .await
        .unwrap();

    // Cleanup ran, but the removal's precondition failed: surfaced, finalizer kept.
    let code = api_code(run(&api, stale).await);
    assert_eq!(code, 422, "a failed JSON-patch test is 422 Invalid");
    let obj = fresh(&api, "cm").await;
    assert_eq!(finalizers(&obj), [FIN]);

    // The retry (fresh read) cleans up again and lets the object go.
    assert_eq!(run(&api, obj).await.unwrap().as_deref(), Some("cleanup:cm"));
    assert!(api.get_opt("cm").await.unwrap().is_none());

    server.shutdown().await;
}

#[tokio::test]
async fn removal_never_touches_a_recreated_object() {
    let Env { server, api } = env().await;
    create(&api, "cm", &[FIN]).await;
    api.delete("cm", &DeleteParams::default()).await.unwrap();
    let stale = fresh(&api, "cm").await;

    // Someone else finishes the deletion, and a new object of the same name appears,
    // also carrying our finalizer.
    clear_finalizers(&api, "cm").await;
    assert!(api.get_opt("cm").await.unwrap().is_none());
    let recreated = create(&api, "cm", &[FIN]).await;

    let code = api_code(run(&api, stale).await);
    assert_eq!(code, 422, "a failed JSON-patch test is 422 Invalid");
    let now = fresh(&api, "cm").await;
    assert_eq!(now.meta().uid, recreated.meta().uid);
    assert_eq!(finalizers(&now), [FIN]);
    assert!(now.meta().deletion_timestamp.is_none());

    server.shutdown().await;
}

#[tokio::test]
async fn handler_errors_are_surfaced_and_cleanup_failure_keeps_the_finalizer() {
    let Env { server, api } = env().await;
    create(&api, "cm", &[FIN]).await;

    let r = finalizer(&api, FIN, fresh(&api, "cm").await, |_| async {
        Err::<(), _>(Boom)
    })
    .await;
    assert!(matches!(r, Err(FinalizerError::Apply(Boom))), "{r:?}");

    api.delete("cm", &DeleteParams::default()).await.unwrap();
    let r = finalizer(&api, FIN, fresh(&api, "cm").await, |_| async {
        Err::<(), _>(Boom)
    })
    .await;
    let err = r.unwrap_err();
    assert!(matches!(err, FinalizerError::Cleanup(Boom)));
    assert_eq!(err.to_string(), "cleanup failed: boom");
    assert!(std::error::Error::source(&err).is_some());
    assert_eq!(finalizers(&fresh(&api, "cm").await), [FIN]);

    server.shutdown().await;
}

#[tokio::test]
async fn unnamed_object_is_rejected() {
    let Env { server, api } = env().await;
    let r = run(&api, Arc::new(ConfigMap::default())).await;
    assert!(matches!(r, Err(FinalizerError::UnnamedObject)), "{r:?}");
    server.shutdown().await;
}
