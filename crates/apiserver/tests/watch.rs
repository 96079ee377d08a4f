//! Watches: `kube::runtime::watcher` (Applied/Deleted, relist after a 410 with nothing
//! lost) and raw `Api::watch` semantics (ADDED/MODIFIED/DELETED, 410 in-stream), and
//! `ApiServer::expire_watches` ending every open watch with a 410.

mod common;

use std::collections::BTreeMap;

use common::{GUARD, default_configmaps, merge_patch};
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tower::ServiceExt;

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"v": v},
    }))
    .unwrap()
}

async fn create(api: &Api<ConfigMap>, name: &str, v: &str) -> ConfigMap {
    api.create(&PostParams::default(), &cm(name, v))
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

async fn set(api: &Api<ConfigMap>, name: &str, v: &str) {
    merge_patch(api, name, json!({"data": {"v": v}}))
        .await
        .unwrap();
}

/// A raw watch of `api` from `resource_version`.
async fn watch_from(
    api: &Api<ConfigMap>,
    resource_version: &str,
) -> futures::stream::BoxStream<'static, kube::Result<WatchEvent<ConfigMap>>> {
    api.watch(&WatchParams::default(), resource_version)
        .await
        .unwrap_or_else(|e| panic!("watch from {resource_version}: {e}"))
        .boxed()
}

/// Next item of a stream, failing the test if none comes within the guard.
async fn next<S: futures::Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(GUARD, stream.next())
        .await
        .expect("stream yields in time")
        .expect("stream has not ended")
}

#[tokio::test(start_paused = true)]
async fn watcher_sees_applied_and_deleted() {
    let (_s, api) = default_configmaps().await;
    create(&api, "before", "1").await;

    let mut events = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    // Initial list.
    let mut initial = Vec::new();
    loop {
        match next(&mut events).await.unwrap() {
            Event::Init => {}
            Event::InitApply(o) => initial.push(o.metadata.name.unwrap()),
            Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(initial, ["before"]);

    create(&api, "after", "1").await;
    set(&api, "before", "2").await;
    api.delete("before", &DeleteParams::default())
        .await
        .unwrap();

    let mut seen = Vec::new();
    while seen.len() < 3 {
        match next(&mut events).await.unwrap() {
            Event::Apply(o) => seen.push(format!(
                "apply {} {}",
                o.metadata.name.unwrap(),
                o.data.unwrap()["v"]
            )),
            Event::Delete(o) => seen.push(format!("delete {}", o.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["apply after 1", "apply before 2", "delete before"]);

    // applied_objects over the same kind of stream.
    let mut applied = watcher::watcher(api.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = next(&mut applied).await.unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("after"));
    create(&api, "third", "1").await;
    let third = next(&mut applied).await.unwrap();
    assert_eq!(third.metadata.name.as_deref(), Some("third"));
}

#[tokio::test(start_paused = true)]
async fn watcher_relists_after_compaction_and_loses_nothing() {
    let (s, api) = default_configmaps().await;
    for name in ["a", "b", "c"] {
        create(&api, name, "1").await;
    }
    let (reader, writer) = reflector::store::<ConfigMap>();
    let mut stream = reflector::reflector(
        writer,
        watcher::watcher(api.clone(), watcher::Config::default()),
    )
    .boxed();
    let snapshot = |reader: &reflector::Store<ConfigMap>| -> BTreeMap<String, String> {
        reader
            .state()
            .iter()
            .map(|c| {
                (
                    c.metadata.name.clone().unwrap(),
                    c.data.as_ref().unwrap()["v"].clone(),
                )
            })
            .collect()
    };

    // Drive the watcher until it has the initial state and one live event.
    loop {
        if let Ok(Event::InitDone) = next(&mut stream).await {
            break;
        }
    }
    create(&api, "d", "1").await;
    loop {
        if let Ok(Event::Apply(o)) = next(&mut stream).await {
            assert_eq!(o.metadata.name.as_deref(), Some("d"));
            break;
        }
    }

    // While the watcher is not reading, the history it would need is compacted away.
    set(&api, "a", "2").await;
    api.delete("b", &DeleteParams::default()).await.unwrap();
    create(&api, "e", "1").await;
    let current = s.store().revision();
    s.store().compact(current).await.unwrap();
    set(&api, "c", "3").await;
    create(&api, "f", "1").await;

    let expected: BTreeMap<String, String> =
        [("a", "2"), ("c", "3"), ("d", "1"), ("e", "1"), ("f", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let mut saw_gone = false;
    let mut relisted = false;
    let wait = async {
        loop {
            match stream.next().await.expect("watcher stream does not end") {
                Err(watcher::Error::WatchError(status)) => {
                    assert_eq!(status.code, 410, "{status:?}");
                    saw_gone = true;
                }
                Err(e) => panic!("unexpected watcher error {e}"),
                Ok(Event::InitDone) => relisted = true,
                Ok(_) => {}
            }
            if relisted && snapshot(&reader) == expected {
                return;
            }
        }
    };
    tokio::time::timeout(GUARD, wait)
        .await
        .unwrap_or_else(|_| panic!("watcher did not converge: {:?}", snapshot(&reader)));
    assert!(saw_gone, "the watcher went through the 410 path");

    // And it keeps watching after the relist.
    create(&api, "g", "1").await;
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let wait = async {
        loop {
            next(&mut stream).await.expect("no more errors");
            let now = snapshot(&reader);
            if now.contains_key("g") && !now.contains_key("a") {
                return now;
            }
        }
    };
    let now = tokio::time::timeout(GUARD, wait).await.unwrap();
    assert_eq!(now.len(), 5);
}

#[tokio::test(start_paused = true)]
async fn raw_watch_events() {
    let (s, api) = default_configmaps().await;
    create(&api, "old", "1").await;

    // From "0": synthetic ADDED for the current state, then changes.
    let mut events = watch_from(&api, "0").await;
    match next(&mut events).await.unwrap() {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("old")),
        other => panic!("unexpected {other:?}"),
    }
    let created = create(&api, "new", "1").await;
    set(&api, "new", "2").await;
    // A no-op patch emits nothing.
    set(&api, "new", "2").await;
    api.delete("new", &DeleteParams::default()).await.unwrap();
    let mut kinds = Vec::new();
    let mut last_rv = 0u64;
    for _ in 0..3 {
        let (kind, obj) = match next(&mut events).await.unwrap() {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            other => panic!("unexpected {other:?}"),
        };
        let rv: u64 = obj.metadata.resource_version.unwrap().parse().unwrap();
        assert!(rv > last_rv, "resourceVersions increase");
        last_rv = rv;
        kinds.push(format!("{kind} {}", obj.data.unwrap()["v"]));
    }
    assert_eq!(kinds, ["ADDED 1", "MODIFIED 2", "DELETED 2"]);
    assert_eq!(
        last_rv,
        s.store().revision(),
        "DELETED carries the deletion's revision"
    );

    // From a resourceVersion: only the changes after it.
    let start = created.metadata.resource_version.clone().unwrap();
    let mut replay = watch_from(&api, &start).await;
    let mut kinds = Vec::new();
    for _ in 0..2 {
        kinds.push(match next(&mut replay).await.unwrap() {
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            other => panic!("unexpected {other:?}"),
        });
    }
    assert_eq!(kinds, ["MODIFIED", "DELETED"]);

    // With a label selector, entering/leaving the selection is ADDED/DELETED.
    let mut selected = api
        .watch(
            &WatchParams::default().labels("pick=yes"),
            &s.store().revision().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    create(&api, "sel", "1").await;
    let label = |v: Option<&str>| Patch::Merge(json!({"metadata": {"labels": {"pick": v}}}));
    api.patch("sel", &PatchParams::default(), &label(Some("yes")))
        .await
        .unwrap();
    set(&api, "sel", "2").await;
    api.patch("sel", &PatchParams::default(), &label(None))
        .await
        .unwrap();
    let mut kinds = Vec::new();
    for _ in 0..3 {
        kinds.push(match next(&mut selected).await.unwrap() {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            other => panic!("unexpected {other:?}"),
        });
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
}

#[tokio::test(start_paused = true)]
async fn raw_watch_from_compacted_revision_is_410_in_stream() {
    let (s, api) = default_configmaps().await;
    let first = create(&api, "x", "1").await;
    set(&api, "x", "2").await;
    set(&api, "x", "3").await;
    s.store().compact(s.store().revision()).await.unwrap();

    let rv = first.metadata.resource_version.unwrap();
    let events: Vec<_> = tokio::time::timeout(
        GUARD,
        api.watch(&WatchParams::default(), &rv)
            .await
            .unwrap()
            .try_collect::<Vec<_>>(),
    )
    .await
    .expect("the stream ends by itself")
    .unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    match &events[0] {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("unexpected {other:?}"),
    }

    // Watching from the revision a fresh list returns works.
    let list = api.list(&Default::default()).await.unwrap();
    let mut live = watch_from(&api, &list.metadata.resource_version.unwrap()).await;
    set(&api, "x", "4").await;
    assert!(matches!(next(&mut live).await, Ok(WatchEvent::Modified(_))));
}

/// The in-stream error `expire_watches` ends a watch with, as kube-apiserver words it.
fn assert_expired(status: &kube::core::Status) {
    assert_eq!(status.code, 410, "{status:?}");
    assert_eq!(status.reason, "Expired", "{status:?}");
    assert!(
        status.message.starts_with("too old resource version: "),
        "{status:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn expire_watches_ends_open_raw_watches_with_410() {
    let (s, api) = default_configmaps().await;
    create(&api, "x", "1").await;
    let list = api.list(&Default::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();

    // One watch that has delivered an event, one from "0" whose initial ADDED is unread.
    let mut live = watch_from(&api, &rv).await;
    set(&api, "x", "2").await;
    assert!(matches!(next(&mut live).await, Ok(WatchEvent::Modified(_))));
    let unread = api.watch(&WatchParams::default(), "0").await.unwrap();

    s.expire_watches();
    // Changes after the call reach neither stream: each sends the 410, then ends.
    set(&api, "x", "3").await;
    for stream in [live, unread.boxed()] {
        let events: Vec<_> = tokio::time::timeout(GUARD, stream.try_collect::<Vec<_>>())
            .await
            .expect("the stream ends by itself")
            .unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        match &events[0] {
            WatchEvent::Error(status) => assert_expired(status),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn expire_watches_makes_watcher_relist() {
    let (s, api) = default_configmaps().await;
    create(&api, "a", "1").await;
    let mut events = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    loop {
        if let Event::InitDone = next(&mut events).await.unwrap() {
            break;
        }
    }
    // One live event, so the watcher's watch request is open.
    create(&api, "b", "1").await;
    match next(&mut events).await.unwrap() {
        Event::Apply(o) => assert_eq!(o.metadata.name.as_deref(), Some("b")),
        other => panic!("unexpected {other:?}"),
    }

    s.expire_watches();
    create(&api, "c", "1").await;
    match next(&mut events).await {
        Err(watcher::Error::WatchError(status)) => assert_expired(&status),
        other => panic!("expected the 410, got {other:?}"),
    }
    // A second Init..InitDone: the full state, including what changed after the call.
    assert!(matches!(next(&mut events).await.unwrap(), Event::Init));
    let mut relisted = Vec::new();
    loop {
        match next(&mut events).await.unwrap() {
            Event::InitApply(o) => relisted.push(o.metadata.name.unwrap()),
            Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    relisted.sort();
    assert_eq!(relisted, ["a", "b", "c"]);

    // And it watches again.
    api.delete("a", &DeleteParams::default()).await.unwrap();
    match next(&mut events).await.unwrap() {
        Event::Delete(o) => assert_eq!(o.metadata.name.as_deref(), Some("a")),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn watch_opened_after_expire_watches_keeps_working() {
    let (s, api) = default_configmaps().await;
    let rv = || async {
        api.list(&Default::default())
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap()
    };
    let before = watch_from(&api, &rv().await).await;
    s.expire_watches();
    let mut after = watch_from(&api, &rv().await).await;

    create(&api, "late", "1").await;
    match next(&mut after).await.unwrap() {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("late")),
        other => panic!("unexpected {other:?}"),
    }
    set(&api, "late", "2").await;
    assert!(matches!(
        next(&mut after).await.unwrap(),
        WatchEvent::Modified(_)
    ));

    let events: Vec<_> = tokio::time::timeout(GUARD, before.try_collect::<Vec<_>>())
        .await
        .expect("the earlier stream ends by itself")
        .unwrap();
    assert!(
        matches!(&events[..], [WatchEvent::Error(status)] if status.code == 410),
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn expire_watches_ends_table_watches_with_410() {
    let (s, api) = default_configmaps().await;
    create(&api, "x", "1").await;
    // `kubectl get -w`: each event's object is a one-row Table.
    let request = http::Request::builder()
        .uri("/api/v1/namespaces/default/configmaps?watch=true")
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(axum::body::Body::empty())
        .unwrap();
    let response = s.router().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), http::StatusCode::OK);

    s.expire_watches();
    let body = tokio::time::timeout(GUARD, response.into_body().collect())
        .await
        .expect("the stream ends by itself")
        .unwrap()
        .to_bytes();
    let lines: Vec<serde_json::Value> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "ERROR", "{lines:?}");
    let status = &lines[0]["object"];
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["code"], 410, "{status}");
    assert_eq!(status["reason"], "Expired", "{status}");
}
