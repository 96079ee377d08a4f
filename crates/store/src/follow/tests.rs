use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::StoreOptions;

async fn store() -> Store {
    let opts = StoreOptions {
        compaction_interval: None,
        ..Default::default()
    };
    Store::in_memory(opts).await.expect("store")
}

/// A store holding a `/cm/<name>` labelled `app: <app>` for each pair, in order.
async fn store_with(objects: &[(&str, &str)]) -> Store {
    let store = store().await;
    for (name, app) in objects {
        create(&store, name, app).await;
    }
    store
}

fn object(name: &str, app: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"app": app}}})
}

async fn create(store: &Store, name: &str, app: &str) -> Object {
    let key = format!("/cm/{name}");
    store.create(&key, object(name, app)).await.expect("create")
}

async fn update(store: &Store, name: &str, app: &str) {
    let key = format!("/cm/{name}");
    store
        .update(&key, object(name, app), None)
        .await
        .expect("update");
}

async fn delete(store: &Store, name: &str) {
    store
        .delete(&format!("/cm/{name}"), None)
        .await
        .expect("delete");
}

fn web_only() -> Option<Filter> {
    Some(Box::new(|labels: &Labels, _: &[u8]| {
        labels.get("app") == Some("web")
    }))
}

fn keys(snapshot: &Snapshot) -> Vec<&str> {
    snapshot.objects.iter().map(|o| &*o.key).collect()
}

/// The next change, which must come without waiting on the clock.
async fn change(follow: &mut Follow) -> (ChangeKind, String, Revision) {
    let next = tokio::time::timeout(Duration::from_secs(5), follow.next()).await;
    let change = next.expect("a change").expect("open").expect("not lost");
    (
        change.kind,
        change.event.key.to_string(),
        change.event.revision,
    )
}

async fn followed(follow: &mut Follow) -> Followed {
    let next = follow.next_or_relist().await;
    next.expect("open").expect("a snapshot or a change")
}

#[tokio::test(start_paused = true)]
async fn snapshot_then_every_later_change_once_while_writes_race_the_start() {
    const KEYS: usize = 200;
    let store = store().await;
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..KEYS {
                create(&store, &format!("k{i:03}"), "web").await;
            }
        })
    };
    // Let some writes commit first, so that both halves are non-empty.
    while store.revision() < 50 {
        tokio::task::yield_now().await;
    }
    let (snapshot, mut follow) = store.follow("/cm/", None).expect("follow");
    let mut seen: BTreeMap<String, Revision> = snapshot
        .objects
        .iter()
        .map(|o| (o.key.to_string(), o.revision))
        .collect();
    assert!(
        !seen.is_empty() && seen.len() < KEYS,
        "{} listed",
        seen.len()
    );
    let mut last = snapshot.revision;
    while seen.len() < KEYS {
        let (kind, key, revision) = change(&mut follow).await;
        assert_eq!(kind, ChangeKind::Added);
        assert_eq!(revision, last + 1, "a gap or a repeat after {last}");
        assert!(
            seen.insert(key, revision).is_none(),
            "{revision} seen twice"
        );
        last = revision;
    }
    writer.await.expect("writer");
    assert_eq!(follow.revision(), store.revision());
}

#[tokio::test(start_paused = true)]
async fn the_filter_selects_the_snapshot_and_turns_updates_into_entries_and_exits() {
    let store = store_with(&[("a", "web"), ("b", "db"), ("c", "web")]).await;

    let (snapshot, mut follow) = store.follow("/cm/", web_only()).expect("follow");
    assert_eq!(keys(&snapshot), ["/cm/a", "/cm/c"]);

    create(&store, "d", "db").await;
    update(&store, "b", "web").await;
    update(&store, "a", "db").await;
    update(&store, "c", "web").await;
    delete(&store, "d").await;
    delete(&store, "c").await;

    let mut changes = Vec::new();
    for _ in 0..4 {
        let (kind, key, _) = change(&mut follow).await;
        changes.push((kind, key));
    }
    let expected = [
        (ChangeKind::Added, "/cm/b"),
        (ChangeKind::Deleted, "/cm/a"),
        (ChangeKind::Modified, "/cm/c"),
        (ChangeKind::Deleted, "/cm/c"),
    ];
    assert_eq!(changes, expected.map(|(k, key)| (k, key.to_string())));
    assert_eq!(follow.revision(), store.revision());
}

#[tokio::test(start_paused = true)]
async fn a_position_compacted_away_relists_and_the_new_snapshot_shows_the_gap() {
    let store = store_with(&[("a", "web"), ("b", "web")]).await;
    let (_, mut follow) = store.follow("/cm/", None).expect("follow");

    // While the follower is not looking: a delete, a create, and compaction past both.
    delete(&store, "b").await;
    create(&store, "c", "web").await;
    store.compact(store.revision()).await.expect("compact");

    let relisted = followed(&mut follow).await;
    let Followed::Snapshot(snapshot) = relisted else {
        panic!("expected a new snapshot, got {relisted:?}");
    };
    assert_eq!(keys(&snapshot), ["/cm/a", "/cm/c"]);
    assert_eq!(snapshot.revision, store.revision());

    // And it goes on from there.
    let d = create(&store, "d", "web").await;
    let next = followed(&mut follow).await;
    let Followed::Change(change) = next else {
        panic!("expected a change, got {next:?}");
    };
    assert_eq!(
        (change.kind, change.event.revision),
        (ChangeKind::Added, d.revision)
    );
}

#[tokio::test(start_paused = true)]
async fn a_follow_that_must_not_relist_ends_with_the_reason() {
    let store = store().await;
    let a = create(&store, "a", "web").await;
    let mut follow = store
        .follow_after("/cm/", a.revision, None)
        .expect("follow");
    create(&store, "b", "web").await;
    store.compact(store.revision()).await.expect("compact");

    let lost = follow.next().await.expect("an ending");
    assert!(
        matches!(lost, Err(StoreError::Expired { requested, .. }) if requested == a.revision),
        "{lost:?}"
    );
    assert_eq!(follow.revision(), a.revision);
    assert!(follow.next().await.is_none());
    assert!(matches!(
        store.follow_after("/cm/", a.revision, None),
        Err(StoreError::Expired { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn a_follow_ends_after_the_last_change_when_the_store_shuts_down() {
    let store = store().await;
    let (snapshot, mut follow) = store.follow("/cm/", None).expect("follow");
    assert!(snapshot.objects.is_empty());
    create(&store, "a", "web").await;
    store.shutdown().await;
    assert_eq!(change(&mut follow).await.1, "/cm/a");
    assert!(follow.next_or_relist().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_writers_derived_value_reaches_followers_of_its_write_only() {
    let store = store().await;
    let (_, mut follow) = store.follow("/cm/", None).expect("follow");
    let derived = |n: u32| Some(crate::Derived(std::sync::Arc::new(n)));
    store
        .create_derived("/cm/a", &mut object("a", "web"), derived(1))
        .await
        .expect("create");
    store
        .update_derived("/cm/a", &mut object("a", "db"), None, derived(2))
        .await
        .expect("update");
    update(&store, "a", "web").await;
    delete(&store, "a").await;
    let mut carried = Vec::new();
    for _ in 0..4 {
        let Followed::Change(change) = followed(&mut follow).await else {
            panic!("changes follow the snapshot");
        };
        let derived = change.event.derived.get();
        carried.push(derived.and_then(|d| d.0.downcast_ref::<u32>().copied()));
    }
    assert_eq!(carried, [Some(1), Some(2), None, None]);
}

#[tokio::test(start_paused = true)]
async fn the_history_drops_derived_values_once_their_events_leave_the_newest_window() {
    let store = store().await;
    let (_, mut follow) = store.follow("/cm/", None).expect("follow");
    let derived = |n: usize| Some(crate::Derived(std::sync::Arc::new(n)));
    for n in 0..=crate::DERIVED_WINDOW {
        let name = format!("o{n}");
        store
            .create_derived(
                &format!("/cm/{name}"),
                &mut object(&name, "web"),
                derived(n),
            )
            .await
            .expect("create");
    }
    let mut carried = Vec::new();
    for _ in 0..=crate::DERIVED_WINDOW {
        let Followed::Change(change) = followed(&mut follow).await else {
            panic!("changes follow the snapshot");
        };
        carried.push(change.event.derived.get().is_some());
    }
    // A follower that read the oldest event only now finds its value gone: the history
    // keeps the event, not what its writer derived.
    assert!(!carried[0], "the oldest event left the window");
    assert!(
        carried[1..].iter().all(|&kept| kept),
        "the newest window keeps theirs"
    );
}
