//! kube-rs typed clients (`Api<ConfigMap>`, `Api<Pod>`) against the in-process server:
//! CRUD, selectors, paging, every patch type, resourceVersion and conflict rules,
//! finalizers and delete preconditions.

mod common;

use std::collections::BTreeSet;

use common::{api_code, clear_finalizers, default_configmaps, list_count, merge_patch, server};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

fn cm(name: &str, labels: serde_json::Value, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": data,
    }))
    .unwrap()
}

/// An RFC 6902 patch of the json-patch version kube uses.
fn json_patch<P: serde::de::DeserializeOwned>(ops: serde_json::Value) -> P {
    serde_json::from_value(ops).expect("a JSON patch")
}

fn rv<K: kube::Resource>(obj: &K) -> u64 {
    obj.meta()
        .resource_version
        .as_deref()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

/// A ConfigMap `name` holding `data`, as an apply configuration.
fn config_map_with(name: &str, data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[tokio::test]
async fn configmap_create_get_replace_conflicts() {
    let (s, api) = default_configmaps().await;
    let pp = PostParams::default();

    let created = api
        .create(&pp, &cm("one", json!({"app": "x"}), json!({"k": "v"})))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(
        created.metadata.generation, None,
        "ConfigMaps carry no generation"
    );
    let rv1 = rv(&created);

    // Create twice: 409 AlreadyExists.
    let (code, reason) = api_code(api.create(&pp, &cm("one", json!({}), json!({}))).await);
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));

    // Get missing: 404 NotFound.
    let (code, reason) = api_code(api.get("missing").await);
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    assert!(api.get_opt("missing").await.unwrap().is_none());

    let got = api.get("one").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["k"], "v");
    assert_eq!(rv(&got), rv1);

    // Replace: resourceVersion increases.
    let mut changed = got.clone();
    changed
        .data
        .get_or_insert_default()
        .insert("k".into(), "w".into());
    let replaced = api.replace("one", &pp, &changed).await.unwrap();
    let rv2 = rv(&replaced);
    assert!(rv2 > rv1, "{rv2} > {rv1}");
    assert_eq!(replaced.data.as_ref().unwrap()["k"], "w");
    assert_eq!(replaced.metadata.uid, created.metadata.uid);

    // Replace with the stale resourceVersion: 409 Conflict, nothing written.
    let before = s.store().revision();
    let (code, reason) = api_code(api.replace("one", &pp, &got).await);
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert_eq!(s.store().revision(), before);

    // A replace that changes nothing keeps the resourceVersion.
    let same = api.replace("one", &pp, &replaced).await.unwrap();
    assert_eq!(rv(&same), rv2);
    assert_eq!(s.store().revision(), before);

    // Clients cannot change uid or creationTimestamp.
    let mut tampered = same.clone();
    tampered.metadata.uid = Some("00000000-0000-0000-0000-000000000000".into());
    tampered
        .data
        .get_or_insert_default()
        .insert("extra".into(), "1".into());
    let kept = api.replace("one", &pp, &tampered).await.unwrap();
    assert_eq!(kept.metadata.uid, created.metadata.uid);
    assert_eq!(
        kept.metadata.creation_timestamp,
        created.metadata.creation_timestamp
    );

    // Delete (built-in kind: the object comes back), then 404.
    let deleted = api.delete("one", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_left());
    assert_eq!(api_code(api.get("one").await).0, 404);
    assert_eq!(
        api_code(api.delete("one", &DeleteParams::default()).await).0,
        404
    );
}

#[tokio::test]
async fn configmap_every_patch_type() {
    let (s, api) = default_configmaps().await;
    let created = api
        .create(
            &PostParams::default(),
            &cm("p", json!({"a": "1"}), json!({"k": "v"})),
        )
        .await
        .unwrap();
    let mut last = rv(&created);
    let pp = PatchParams::default();

    // Merge patch; null removes.
    let merged = api
        .patch(
            "p",
            &pp,
            &Patch::Merge(
                json!({"data": {"m": "1"}, "metadata": {"labels": {"a": null, "b": "2"}}}),
            ),
        )
        .await
        .unwrap();
    assert!(rv(&merged) > last);
    last = rv(&merged);
    let data = merged.data.clone().unwrap();
    assert_eq!((data["k"].as_str(), data["m"].as_str()), ("v", "1"));
    let labels = merged.metadata.labels.clone().unwrap();
    assert!(!labels.contains_key("a"));
    assert_eq!(labels["b"], "2");

    // The same merge patch again is a no-op: resourceVersion kept, no write.
    let revision = s.store().revision();
    let again = api
        .patch("p", &pp, &Patch::Merge(json!({"data": {"m": "1"}})))
        .await
        .unwrap();
    assert_eq!(rv(&again), last);
    assert_eq!(s.store().revision(), revision);

    // JSON patch (RFC 6902), including a passing test op.
    let jp = json_patch(json!([
        {"op": "test", "path": "/data/k", "value": "v"},
        {"op": "add", "path": "/data/j", "value": "2"},
        {"op": "remove", "path": "/data/m"},
    ]));
    let patched = api.patch("p", &pp, &Patch::<()>::Json(jp)).await.unwrap();
    assert!(rv(&patched) > last);
    last = rv(&patched);
    let data = patched.data.clone().unwrap();
    assert_eq!(data.get("j").map(String::as_str), Some("2"));
    assert!(!data.contains_key("m"));

    // A failing test op is 422 and writes nothing.
    let revision = s.store().revision();
    let jp = json_patch(json!([
        {"op": "test", "path": "/data/k", "value": "nope"},
        {"op": "add", "path": "/data/z", "value": "3"},
    ]));
    assert_eq!(
        api_code(api.patch("p", &pp, &Patch::<()>::Json(jp)).await).0,
        422
    );
    assert_eq!(s.store().revision(), revision);

    // Strategic merge patch on a built-in kind.
    let strategic = api
        .patch("p", &pp, &Patch::Strategic(json!({"data": {"s": "3"}})))
        .await
        .unwrap();
    assert!(rv(&strategic) > last);
    last = rv(&strategic);
    assert_eq!(strategic.data.as_ref().unwrap()["s"], "3");
    assert_eq!(strategic.data.as_ref().unwrap()["k"], "v");

    // Server-side apply with a field manager.
    let apply = PatchParams::apply("test-manager").force();
    let configuration = Patch::Apply(config_map_with("p", json!({"applied": "yes"})));
    let applied = api.patch("p", &apply, &configuration).await.unwrap();
    assert!(rv(&applied) > last);
    assert_eq!(applied.data.as_ref().unwrap()["applied"], "yes");
    // Applying the same configuration again changes nothing.
    let revision = s.store().revision();
    let reapplied = api.patch("p", &apply, &configuration).await.unwrap();
    assert_eq!(rv(&reapplied), rv(&applied));
    assert_eq!(s.store().revision(), revision);

    // Apply creates a missing object.
    let fresh = api
        .patch(
            "applied-new",
            &apply,
            &Patch::Apply(config_map_with("applied-new", json!({"a": "b"}))),
        )
        .await
        .unwrap();
    assert!(fresh.metadata.uid.is_some());
    assert_eq!(
        api.get("applied-new").await.unwrap().data.unwrap()["a"],
        "b"
    );

    // Apply without a field manager is 400.
    let (code, _) = api_code(
        api.patch(
            "p",
            &PatchParams::default(),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}}),
            ),
        )
        .await,
    );
    assert_eq!(code, 400);

    // Patching a missing object (non-apply) is 404.
    assert_eq!(
        api_code(
            api.patch("nope", &pp, &Patch::Merge(json!({"data": {}})))
                .await
        )
        .0,
        404
    );
}

#[tokio::test]
async fn configmap_list_selectors_and_paging() {
    let (_s, api) = default_configmaps().await;
    for i in 0..7 {
        let tier = if i % 2 == 0 { "even" } else { "odd" };
        api.create(
            &PostParams::default(),
            &cm(
                &format!("cm-{i}"),
                json!({"tier": tier, "n": i.to_string()}),
                json!({}),
            ),
        )
        .await
        .unwrap();
    }
    let all = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(all.items.len(), 7);
    assert!(all.metadata.resource_version.is_some());

    let labels = |selector: &str| ListParams::default().labels(selector);
    let fields = |selector: &str| ListParams::default().fields(selector);
    let odd_but_1_and_3 = labels("tier in (odd),n notin (1,3)");
    let all_but_3 = fields("metadata.name!=cm-3,metadata.namespace=default");
    for (params, expected) in [
        (labels("tier=even"), &["cm-0", "cm-2", "cm-4", "cm-6"][..]),
        (odd_but_1_and_3, &["cm-5"]),
        (labels("missing"), &[]),
        (fields("metadata.name=cm-3"), &["cm-3"]),
        (all_but_3, &["cm-0", "cm-1", "cm-2", "cm-4", "cm-5", "cm-6"]),
    ] {
        let listed = api.list(&params).await.unwrap();
        let names: BTreeSet<&str> = listed
            .items
            .iter()
            .map(|c| c.metadata.name.as_deref().unwrap_or_default())
            .collect();
        assert_eq!(names, expected.iter().copied().collect(), "{params:?}");
    }

    // limit + continue: every object exactly once, from the first page's snapshot.
    let mut seen = Vec::new();
    let mut params = ListParams::default().limit(3);
    let mut pages = 0;
    let mut snapshot = None;
    loop {
        let page = api.list(&params).await.unwrap();
        pages += 1;
        if pages == 1 {
            snapshot = page.metadata.resource_version.clone();
            // A write between pages must not show up in later pages.
            api.create(&PostParams::default(), &cm("cm-late", json!({}), json!({})))
                .await
                .unwrap();
        } else {
            assert_eq!(page.metadata.resource_version, snapshot);
        }
        seen.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = ListParams::default().limit(3).continue_token(&token),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..7).map(|i| format!("cm-{i}")).collect();
    assert_eq!(seen, expected);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        8
    );

    // Bad selectors are 400.
    assert_eq!(
        api_code(api.list(&ListParams::default().labels("a in (b")).await).0,
        400
    );
    assert_eq!(
        api_code(api.list(&ListParams::default().fields("spec.nope=1")).await).0,
        400
    );
}

#[tokio::test]
async fn pod_crud_strategic_merge_and_field_selectors() {
    let s = server().await;
    let api: Api<Pod> = Api::namespaced(s.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [
            {"name": "app", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "busybox:1.36"},
        ]},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(
        created.metadata.generation, None,
        "pods carry one from 1.33"
    );
    let phase = created.status.as_ref().and_then(|s| s.phase.clone());
    assert_eq!(phase.as_deref(), Some("Pending"));

    // Strategic merge: containers merge by name. A pod's spec changes only where kube
    // allows it (images here): an env var added is refused, and changes nothing.
    let add_env = Patch::Strategic(json!({"spec": {"containers": [
        {"name": "app", "image": "nginx:1.26", "env": [{"name": "B", "value": "2"}]},
    ]}}));
    let refused = api.patch("web", &PatchParams::default(), &add_env).await;
    let Err(kube::Error::Api(status)) = refused else {
        panic!("expected the env patch refused, got {refused:?}");
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let message = status.message;
    assert!(
        message.starts_with(
            "Pod \"web\" is invalid: spec: Forbidden: pod updates may not change fields other than"
        ),
        "{message}"
    );
    assert!(message.contains("spec.containers[0].env"), "{message}");
    let patched = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"containers": [
                {"name": "app", "image": "nginx:1.26"},
            ]}})),
        )
        .await
        .unwrap();
    let containers = &patched.spec.as_ref().unwrap().containers;
    assert_eq!(containers.len(), 2, "sidecar kept");
    assert_eq!(containers[0].image.as_deref(), Some("nginx:1.26"));
    let env: Vec<&str> = containers[0]
        .env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(env, ["A"]);
    assert!(rv(&patched) > rv(&created));
    assert_eq!(patched.metadata.generation, None);

    let labelled = merge_patch(&api, "web", json!({"metadata": {"labels": {"x": "y"}}}))
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, None);

    assert_eq!(
        list_count(&api, &ListParams::default().fields("status.phase=Pending")).await,
        1
    );
    assert_eq!(
        list_count(&api, &ListParams::default().fields("status.phase=Running")).await,
        0
    );
    assert_eq!(
        list_count(&api, &ListParams::default().labels("app=web,x=y")).await,
        1
    );

    // An unbound pod is deleted at once.
    api.delete("web", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_code(api.get("web").await).0, 404);
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_s, api) = default_configmaps().await;
    let mut obj = cm("held", json!({}), json!({"k": "v"}));
    obj.metadata.finalizers = Some(vec!["example.steady.dev/hold".into()]);
    api.create(&PostParams::default(), &obj).await.unwrap();

    let pending = api.delete("held", &DeleteParams::default()).await.unwrap();
    let pending = pending.left().expect("the pending object");
    let stamp = pending.metadata.deletion_timestamp.clone();
    assert!(stamp.is_some());
    let still = api.get("held").await.unwrap();
    assert_eq!(still.metadata.deletion_timestamp, stamp);

    // A second delete keeps the first deletionTimestamp.
    api.delete("held", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        api.get("held").await.unwrap().metadata.deletion_timestamp,
        stamp
    );

    // No new finalizers while deleting.
    let (code, _) = api_code(
        merge_patch(
            &api,
            "held",
            json!({"metadata": {"finalizers": ["example.steady.dev/hold", "other/x"]}}),
        )
        .await,
    );
    assert_eq!(code, 422);

    // Removing the last finalizer deletes it.
    clear_finalizers(&api, "held").await;
    assert_eq!(api_code(api.get("held").await).0, 404);
}

#[tokio::test]
async fn delete_preconditions() {
    let (s, api) = default_configmaps().await;
    let created = api
        .create(&PostParams::default(), &cm("pre", json!({}), json!({})))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let revision = s.store().revision();

    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(
        api_code(api.delete("pre", &wrong_uid).await),
        (409, "Conflict".to_string())
    );
    let wrong_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: Some("1".into()),
        }),
        ..Default::default()
    };
    assert_eq!(
        api_code(api.delete("pre", &wrong_rv).await),
        (409, "Conflict".to_string())
    );
    assert_eq!(s.store().revision(), revision);
    assert!(api.get("pre").await.is_ok());

    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: Some(rv),
        }),
        ..Default::default()
    };
    api.delete("pre", &right).await.unwrap();
    assert_eq!(api_code(api.get("pre").await).0, 404);
}

#[tokio::test]
async fn generate_name_appends_a_suffix_and_is_kept() {
    let (_s, api) = default_configmaps().await;
    let mut obj = cm("unused", json!({}), json!({}));
    obj.metadata.name = None;
    obj.metadata.generate_name = Some("gen-".into());
    let a = api.create(&PostParams::default(), &obj).await.unwrap();
    let b = api.create(&PostParams::default(), &obj).await.unwrap();
    let (na, nb) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(na.starts_with("gen-") && na.len() == 9, "{na}");
    assert_ne!(na, nb);
    // kube-apiserver keeps generateName in the stored metadata.
    assert_eq!(a.metadata.generate_name.as_deref(), Some("gen-"));
    assert_eq!(
        api.get(&na)
            .await
            .unwrap()
            .metadata
            .generate_name
            .as_deref(),
        Some("gen-")
    );
}

/// Writers that patch one object without a resourceVersion precondition never see 409:
/// the server re-reads and re-applies until each patch lands, as kube-apiserver's
/// `GuaranteedUpdate` does. Every writer's every key must be in the final object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_unconditioned_patches_all_apply() {
    const WRITERS: usize = 32;
    const PATCHES: usize = 10;
    let (_s, api) = default_configmaps().await;
    api.create(
        &PostParams::default(),
        &cm("contended", json!({}), json!({})),
    )
    .await
    .expect("create");
    let writers = (0..WRITERS).map(|writer| {
        let api = api.clone();
        tokio::spawn(async move {
            for i in 0..PATCHES {
                let patch = json!({"data": {format!("w{writer}-{i}"): "x"}});
                merge_patch(&api, "contended", &patch)
                    .await
                    .map_err(|e| format!("writer {writer} patch {i}: {e}"))?;
            }
            Ok::<(), String>(())
        })
    });
    for outcome in futures::future::join_all(writers).await {
        outcome.expect("writer task").expect("every patch applies");
    }
    let data = api
        .get("contended")
        .await
        .expect("get")
        .data
        .unwrap_or_default();
    assert_eq!(data.len(), WRITERS * PATCHES);
}
