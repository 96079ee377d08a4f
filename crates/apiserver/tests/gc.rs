//! The garbage collector and namespace lifecycle: Background, Foreground and Orphan
//! propagation over ownerReferences, and namespace deletion.

mod common;

use common::{api_code, eventually, eventually_gone, release_held, server};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::{Value, json};
use steady_apiserver::ApiServer;

fn owner_ref(owner: &ConfigMap, block: bool) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "name": owner.metadata.name.clone().unwrap(),
        "uid": owner.metadata.uid.clone().unwrap(),
        "blockOwnerDeletion": block,
    })
}

fn dependent_cm(name: &str, owners: Vec<Value>, finalizers: &[&str]) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": owners, "finalizers": finalizers},
    }))
    .unwrap()
}

/// A ConfigMap in `cms` owned by `owners`, without finalizers of its own.
async fn create_dependent(cms: &Api<ConfigMap>, name: &str, owners: Vec<Value>) -> ConfigMap {
    create(cms, &dependent_cm(name, owners, &[])).await
}

fn dependent_pod(name: &str, owners: Vec<Value>) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "ownerReferences": owners},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }))
    .unwrap()
}

fn plain_cm(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
    )
    .unwrap()
}

fn policy(p: PropagationPolicy) -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(p),
        ..Default::default()
    }
}

async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), object)
        .await
        .expect("created")
}

/// A fresh server (kept alive by the caller) and its `default` ConfigMaps and Pods.
async fn default_apis() -> (ApiServer, Api<ConfigMap>, Api<Pod>) {
    let s = server().await;
    let cms = Api::namespaced(s.client(), "default");
    let pods = Api::namespaced(s.client(), "default");
    (s, cms, pods)
}

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizer))
}

#[tokio::test(start_paused = true)]
async fn background_deletes_dependents() {
    let (_s, cms, pods) = default_apis().await;
    let owner = create(&cms, &plain_cm("owner")).await;
    let other = create(&cms, &plain_cm("other")).await;
    create_dependent(&cms, "dep-cm", vec![owner_ref(&owner, false)]).await;
    create(
        &pods,
        &dependent_pod("dep-pod", vec![owner_ref(&owner, true)]),
    )
    .await;
    // Two owners: survives while one of them exists, losing the reference to the gone one.
    let owners = vec![owner_ref(&owner, false), owner_ref(&other, false)];
    create(&cms, &dependent_cm("two-owners", owners, &[])).await;
    // A reference to the owner's name with a different uid is not a dependent.
    let mut impostor = owner.clone();
    impostor.metadata.uid = Some("11111111-1111-1111-1111-111111111111".into());
    let owners = vec![owner_ref(&impostor, false), owner_ref(&other, false)];
    create(&cms, &dependent_cm("not-mine", owners, &[])).await;

    cms.delete("owner", &policy(PropagationPolicy::Background))
        .await
        .unwrap();
    assert_eq!(
        api_code(cms.get("owner").await).0,
        404,
        "owner gone at once"
    );
    eventually_gone(&cms, "dep-cm").await;
    eventually_gone(&pods, "dep-pod").await;
    let two = eventually("two-owners to lose its ref to owner", || async {
        let c = cms.get("two-owners").await.unwrap();
        (c.metadata.owner_references.as_ref().map(Vec::len) == Some(1)).then_some(c)
    })
    .await;
    assert_eq!(
        two.metadata.owner_references.unwrap()[0].uid,
        other.metadata.uid.clone().unwrap()
    );
    assert!(cms.get("not-mine").await.is_ok());
    assert!(cms.get("other").await.is_ok());

    // The default propagation is Background too.
    let owner = create(&cms, &plain_cm("owner2")).await;
    create_dependent(&cms, "dep2", vec![owner_ref(&owner, false)]).await;
    cms.delete("owner2", &DeleteParams::default())
        .await
        .unwrap();
    eventually_gone(&cms, "dep2").await;
}

#[tokio::test(start_paused = true)]
async fn dependent_of_a_missing_owner_is_collected() {
    let (_s, cms, _) = default_apis().await;
    let mut ghost = plain_cm("ghost");
    ghost.metadata.uid = Some("22222222-2222-2222-2222-222222222222".into());
    create_dependent(&cms, "orphaned", vec![owner_ref(&ghost, false)]).await;
    eventually_gone(&cms, "orphaned").await;
}

#[tokio::test(start_paused = true)]
async fn foreground_waits_for_blocking_dependents() {
    let (_s, cms, pods) = default_apis().await;
    let owner = create(&cms, &plain_cm("owner")).await;
    // A blocking dependent held by its own finalizer, so the wait is observable.
    create(
        &cms,
        &dependent_cm(
            "blocker",
            vec![owner_ref(&owner, true)],
            &["example.steady.dev/hold"],
        ),
    )
    .await;
    create_dependent(&cms, "free", vec![owner_ref(&owner, false)]).await;
    create(&pods, &dependent_pod("pod", vec![owner_ref(&owner, true)])).await;

    let pending = cms
        .delete("owner", &policy(PropagationPolicy::Foreground))
        .await
        .unwrap()
        .left()
        .expect("the owner is still there");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(has_finalizer(&pending.metadata, "foregroundDeletion"));

    eventually_gone(&cms, "free").await;
    eventually_gone(&pods, "pod").await;
    let blocker = eventually("blocker marked for deletion", || async {
        let c = cms.get("blocker").await.unwrap();
        c.metadata.deletion_timestamp.is_some().then_some(c)
    })
    .await;
    assert!(has_finalizer(&blocker.metadata, "example.steady.dev/hold"));
    // Let the collector settle; the owner must still be there, waiting.
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let waiting = cms.get("owner").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(has_finalizer(&waiting.metadata, "foregroundDeletion"));

    // Release the blocker: then the owner goes.
    cms.patch(
        "blocker",
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/finalizers", "value": ["example.steady.dev/hold"]},
            {"op": "remove", "path": "/metadata/finalizers"},
        ])).unwrap()),
    )
    .await
    .unwrap();
    eventually_gone(&cms, "blocker").await;
    eventually_gone(&cms, "owner").await;
}

#[tokio::test(start_paused = true)]
async fn orphan_keeps_dependents_and_strips_references() {
    let (_s, cms, pods) = default_apis().await;
    let owner = create(&cms, &plain_cm("owner")).await;
    let keep = create(&cms, &plain_cm("keep")).await;
    create_dependent(
        &cms,
        "dep",
        vec![owner_ref(&owner, true), owner_ref(&keep, false)],
    )
    .await;
    create(&pods, &dependent_pod("pod", vec![owner_ref(&owner, true)])).await;

    cms.delete("owner", &policy(PropagationPolicy::Orphan))
        .await
        .unwrap();
    eventually_gone(&cms, "owner").await;
    // Settle, then the dependents are still there without the owner's reference.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let dep = cms.get("dep").await.unwrap();
    let refs = dep.metadata.owner_references.unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].uid, keep.metadata.uid.unwrap());
    let pod = pods.get("pod").await.unwrap();
    assert!(pod.metadata.owner_references.is_none_or(|r| r.is_empty()));
    assert!(pod.metadata.deletion_timestamp.is_none());
}

#[tokio::test(start_paused = true)]
async fn namespace_deletion_removes_contents_then_namespace() {
    let s = server().await;
    let namespaces: Api<Namespace> = Api::all(s.client());
    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}}),
    )
    .unwrap();
    create(&namespaces, &ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(s.client(), "doomed");
    let pods: Api<Pod> = Api::namespaced(s.client(), "doomed");
    let kept: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    for i in 0..3 {
        create(&cms, &plain_cm(&format!("cm-{i}"))).await;
    }
    create(&pods, &dependent_pod("p", vec![])).await;
    let mut held = plain_cm("held");
    held.metadata.finalizers = Some(vec!["example.steady.dev/hold".into()]);
    create(&cms, &held).await;
    create(&kept, &plain_cm("cm-0")).await;

    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = namespaces.get("doomed").await.unwrap();
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    // No new content in a terminating namespace.
    assert_eq!(
        api_code(cms.create(&PostParams::default(), &plain_cm("late")).await).0,
        403
    );
    for i in 0..3 {
        eventually_gone(&cms, &format!("cm-{i}")).await;
    }
    eventually_gone(&pods, "p").await;
    // The namespace waits for the object with a finalizer.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert!(namespaces.get("doomed").await.is_ok());
    release_held(&cms, "held").await;
    eventually_gone(&namespaces, "doomed").await;
    assert!(kept.get("cm-0").await.is_ok(), "other namespaces untouched");
    // Creating into the deleted namespace is 404.
    assert_eq!(
        api_code(cms.create(&PostParams::default(), &plain_cm("x")).await).0,
        404
    );
}

/// kube-apiserver answers 202 only to a delete that sent the deprecated
/// `orphanDependents: false` and left the object in place; 200 to every other delete,
/// pending or final (so a client cannot tell the two apart by the status code).
#[tokio::test(start_paused = true)]
async fn only_a_pending_delete_asking_not_to_orphan_is_answered_accepted() {
    let (s, cms, _) = default_apis().await;
    let delete = |name: &'static str, options: Value| {
        let uri = format!("/api/v1/namespaces/default/configmaps/{name}");
        let s = &s;
        async move { common::raw(s, "DELETE", &uri, common::JSON, options.to_string()).await }
    };
    create(
        &cms,
        &dependent_cm("held", vec![], &["example.steady.dev/hold"]),
    )
    .await;
    create(
        &cms,
        &dependent_cm("held-too", vec![], &["example.steady.dev/hold"]),
    )
    .await;
    create(&cms, &plain_cm("free")).await;

    let not_orphan = json!({"orphanDependents": false});
    let pending = delete("held", not_orphan.clone()).await;
    assert_eq!(pending.status.as_u16(), 202, "{}", pending.json());
    assert!(pending.json()["metadata"]["deletionTimestamp"].is_string());
    let pending = delete("held-too", json!({})).await;
    assert_eq!(pending.status.as_u16(), 200, "without orphanDependents");
    let gone = delete("free", not_orphan).await;
    assert_eq!(gone.status.as_u16(), 200, "deleted at once");
    assert_eq!(gone.json()["metadata"]["name"], "free");
    release_held(&cms, "held").await;
    release_held(&cms, "held-too").await;
}
