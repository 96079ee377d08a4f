//! The collector driven by hand, as `run` drives it, over a server whose own collector is
//! stopped: what it examines is counted, which a timing could not show reliably.

use steady_store::{Store, StoreOptions};

use super::*;
use crate::Config;

#[test]
fn reading_only_the_metadata_sees_what_parsing_the_whole_object_sees() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "default", "uid": "u-1",
            "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["a/b", 3],
            "ownerReferences": [{"uid": "u-0", "blockOwnerDeletion": true}, {"name": "no uid"}],
            "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"finalizers": ["kubernetes"], "containers": [{"name": "c"}]},
    });
    let key = "/core/pods/default/web-0";
    let (uid, read) = Node::read(key, pod.to_string().as_bytes()).expect("readable");
    let (_, parsed) = Node::parse(key, &pod).expect("parses");
    assert_eq!(uid, "u-1");
    assert_eq!(format!("{read:?}"), format!("{parsed:?}"));
    let derived = derived_for_collector(key, &pod);
    let (derived_uid, carried) = Node::derived(derived.as_ref()).expect("a write derives it");
    assert_eq!(
        (derived_uid, format!("{carried:?}")),
        (&uid, format!("{read:?}")),
        "what a write's event carries is what reading its bytes gives"
    );
    assert_eq!(read.owners.len(), 1);
    assert!(read.deleting);
    assert_eq!(read.finalizers, ["a/b"]);
    // Well-typed metadata takes the typed skim; the odd finalizer above took the fallback.
    let mut typed = pod.clone();
    typed["metadata"]["finalizers"] = json!(["a/b", "c/d"]);
    typed["metadata"]["namespace"] = json!("");
    let (_, skimmed) = Node::read(key, typed.to_string().as_bytes()).expect("readable");
    let (_, parsed) = Node::parse(key, &typed).expect("parses");
    assert_eq!(format!("{skimmed:?}"), format!("{parsed:?}"));
    assert_eq!(skimmed.finalizers, ["a/b", "c/d"]);
    assert_eq!(skimmed.namespace, None);
    let skim = steady_store::metadata_of::<SkeletonMetadata>(typed.to_string().as_bytes());
    assert!(matches!(skim, Ok(Some(_))));
    let no_uid = json!({"metadata": {"name": "x"}}).to_string();
    assert!(Node::read(key, no_uid.as_bytes()).is_err());
    let namespace = json!({"metadata": {"name": "ns", "uid": "u-2"},
        "spec": {"finalizers": ["kubernetes"]}});
    let (_, ns) =
        Node::read("/core/namespaces/ns", namespace.to_string().as_bytes()).expect("readable");
    assert!(ns.namespace_finalizer, "a namespace's spec is still read");
}

async fn server_without_collector() -> ApiServer {
    let store = Store::in_memory(StoreOptions::default())
        .await
        .expect("in-memory store");
    let server = ApiServer::start(store, Config::default())
        .await
        .expect("server starts");
    for task in server.tasks().drain(..) {
        task.abort();
    }
    server
}

async fn create(server: &ApiServer, plural: &str, ns: Option<&str>, name: &str) {
    let rt = server
        .registry()
        .builtin("", plural)
        .expect("built-in kind");
    let obj = json!({"apiVersion": "v1", "kind": rt.kind, "metadata": {"name": name}});
    server
        .create(&rt, ns, obj, &WriteOptions::default())
        .await
        .expect("create");
}

/// Runs the collector until it has nothing to do for a while (paused clock); returns
/// how many objects it examined.
async fn drive(gc: &mut GarbageCollector, follow: &mut Follow) -> usize {
    let mut examined = 0;
    loop {
        examined += gc.settle().await;
        match tokio::time::timeout(Duration::from_secs(10), gc.wait(follow)).await {
            Ok(Wake::Snapshot(_) | Wake::Closed) | Err(_) => return examined,
            Ok(wake) => {
                gc.take(wake);
            }
        }
    }
}

async fn create_owned(server: &ApiServer, name: &str, owner: &Value) {
    let rt = server
        .registry()
        .builtin("", "configmaps")
        .expect("built-in kind");
    let obj = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
        }]},
    });
    server
        .create(&rt, Some("default"), obj, &WriteOptions::default())
        .await
        .expect("create");
}

fn live(server: &ApiServer, key: &str) -> bool {
    matches!(server.store().get(key, None), Ok(Some(_)))
}

#[tokio::test(start_paused = true)]
async fn terminating_namespaces_examine_only_their_own_objects() {
    const NAMESPACES: usize = 300;
    const DOOMED: usize = 100;
    const PER_NAMESPACE: usize = 2;
    let server = server_without_collector().await;
    let names: Vec<String> = (0..NAMESPACES).map(|i| format!("ns-{i:03}")).collect();
    for name in &names {
        create(&server, "namespaces", None, name).await;
        for j in 0..PER_NAMESPACE {
            create(&server, "configmaps", Some(name), &format!("cm-{j}")).await;
        }
    }
    let mut gc = GarbageCollector::new(server.clone());
    let mut follow = gc.start().expect("list");
    drive(&mut gc, &mut follow).await;

    let namespaces = server.registry().builtin("", "namespaces").expect("kind");
    for name in &names[..DOOMED] {
        server
            .delete(&namespaces, None, name, &DeleteOptions::default())
            .await
            .expect("delete");
    }
    let examined = drive(&mut gc, &mut follow).await;

    for (i, name) in names.iter().enumerate() {
        let kept = i >= DOOMED;
        assert_eq!(live(&server, &format!("/core/namespaces/{name}")), kept);
        for j in 0..PER_NAMESPACE {
            assert_eq!(
                live(&server, &format!("/core/configmaps/{name}/cm-{j}")),
                kept
            );
        }
    }
    // A few looks per deleted object (its own events, its namespace's pass), however
    // many other namespaces are terminating at the same time. Waking every waiting
    // namespace on every delete made this about DOOMED times larger.
    let deleted = DOOMED * (1 + PER_NAMESPACE);
    assert!(
        examined <= 3 * deleted,
        "examined {examined} objects to delete {deleted}"
    );
}

#[tokio::test(start_paused = true)]
async fn orphaning_examines_the_owner_a_bounded_number_of_times() {
    const DEPENDENTS: usize = 200;
    let server = server_without_collector().await;
    let configmaps = server.registry().builtin("", "configmaps").expect("kind");
    create(&server, "configmaps", Some("default"), "owner").await;
    let (owner, _) = server
        .get_value(&configmaps, Some("default"), "owner")
        .expect("owner");
    for i in 0..DEPENDENTS {
        create_owned(&server, &format!("dep-{i:03}"), &owner).await;
    }
    let mut gc = GarbageCollector::new(server.clone());
    let mut follow = gc.start().expect("list");
    drive(&mut gc, &mut follow).await;

    let orphan = DeleteOptions {
        propagation: Some(Propagation::Orphan),
        ..Default::default()
    };
    server
        .delete(&configmaps, Some("default"), "owner", &orphan)
        .await
        .expect("delete");
    let examined = drive(&mut gc, &mut follow).await;

    assert!(!live(&server, "/core/configmaps/default/owner"));
    for i in 0..DEPENDENTS {
        let (dep, _) = server
            .get_value(&configmaps, Some("default"), &format!("dep-{i:03}"))
            .expect("dependent kept");
        assert!(dep.pointer("/metadata/ownerReferences").is_none());
    }
    // Each dependent once (its update), the owner a few times; not the owner once more
    // for every dependent's update, each time rewriting the dependents left.
    assert!(
        examined <= DEPENDENTS + 10,
        "examined {examined} objects to orphan {DEPENDENTS}"
    );
}
