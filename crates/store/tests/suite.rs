//! One behavioural suite, run against both backends.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};
use steady_store::{
    EventKind, ListOptions, Object, Revision, Store, StoreError, StoreOptions, Watcher,
};
use tempfile::TempDir;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Sqlite,
}

struct Fx {
    store: Store,
    _dir: Option<TempDir>,
}

impl std::ops::Deref for Fx {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

fn test_opts() -> StoreOptions {
    StoreOptions {
        compaction_interval: None,
        max_retained_revisions: 1_000_000,
        max_history_bytes: u64::MAX,
        durable: false,
    }
}

async fn open_with(kind: Kind, opts: StoreOptions) -> Fx {
    match kind {
        Kind::Memory => Fx {
            store: Store::in_memory(opts).await.expect("open memory store"),
            _dir: None,
        },
        Kind::Sqlite => {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = Store::sqlite(&dir.path().join("state.db"), opts)
                .await
                .expect("open sqlite store");
            Fx {
                store,
                _dir: Some(dir),
            }
        }
    }
}

async fn open(kind: Kind) -> Fx {
    open_with(kind, test_opts()).await
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("stored value is JSON")
}

fn rv_of(bytes: &[u8]) -> Revision {
    parse(bytes)["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion is a string")
        .parse()
        .expect("resourceVersion is decimal")
}

fn obj(name: &str, data: i64) -> Value {
    json!({"metadata": {"name": name}, "data": data})
}

fn data(o: &Object) -> i64 {
    parse(&o.value)["data"].as_i64().expect("data")
}

/// Panics unless `result` is the `Expired` a read below the compaction point gets.
#[track_caller]
fn assert_expired<T>(result: Result<T, StoreError>) {
    match result {
        Err(StoreError::Expired { .. }) => {}
        Err(other) => panic!("expected Expired, got {other:?}"),
        Ok(_) => panic!("expected Expired, got a success"),
    }
}

/// Panics unless `watcher` reports `Expired` once and then ends.
async fn assert_watch_expires(watcher: &mut Watcher) {
    assert_expired(watcher.next().await.expect("an event or an error"));
    assert!(
        watcher.next().await.is_none(),
        "the watcher goes on after Expired"
    );
}

/// List options for the first `limit` matches, at the current revision.
fn limited(limit: usize) -> ListOptions<'static> {
    ListOptions {
        limit: Some(limit),
        ..Default::default()
    }
}

/// `relative` inside a fresh temporary directory, which lasts as long as the guard.
fn temp_path(relative: &str) -> (TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(relative);
    (dir, path)
}

fn keys(items: &[Object]) -> Vec<String> {
    items.iter().map(|o| o.key.to_string()).collect()
}

async fn create_and_already_exists(kind: Kind) {
    let s = open(kind).await;
    assert_eq!(s.revision(), 1);
    let a = s.create("/a", obj("a", 1)).await.unwrap();
    assert_eq!(a.revision, 2);
    assert_eq!(&*a.key, "/a");
    assert_eq!(rv_of(&a.value), 2);
    assert_eq!(parse(&a.value)["metadata"]["name"], "a");
    match s.create("/a", obj("a", 2)).await {
        Err(StoreError::AlreadyExists { key }) => assert_eq!(key, "/a"),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    // A failed write does not consume a revision.
    assert_eq!(s.revision(), 2);
    let got = s.get("/a", None).unwrap().unwrap();
    assert_eq!(got.revision, 2);
    assert_eq!(data(&got), 1);
    assert!(s.get("/missing", None).unwrap().is_none());
}

async fn invalid_values(kind: Kind) {
    let s = open(kind).await;
    assert!(matches!(
        s.create("/a", json!([1, 2])).await,
        Err(StoreError::InvalidValue(_))
    ));
    assert!(matches!(
        s.create("/a", json!({"metadata": 3})).await,
        Err(StoreError::InvalidValue(_))
    ));
    // An object without metadata gets one.
    let o = s.create("/b", json!({"x": 1})).await.unwrap();
    assert_eq!(rv_of(&o.value), o.revision);
    assert!(matches!(
        s.update("/b", json!("str"), None).await,
        Err(StoreError::InvalidValue(_))
    ));
}

async fn update_cas_and_not_found(kind: Kind) {
    let s = open(kind).await;
    assert!(matches!(
        s.update("/a", obj("a", 1), None).await,
        Err(StoreError::NotFound { .. })
    ));
    let c = s.create("/a", obj("a", 1)).await.unwrap();
    // Unconditional update.
    let u1 = s.update("/a", obj("a", 2), None).await.unwrap();
    assert!(u1.revision > c.revision);
    // CAS with the right revision.
    let u2 = s
        .update("/a", obj("a", 3), Some(u1.revision))
        .await
        .unwrap();
    assert_eq!(rv_of(&u2.value), u2.revision);
    // CAS with a stale revision.
    match s.update("/a", obj("a", 4), Some(c.revision)).await {
        Err(StoreError::Conflict {
            key,
            expected,
            actual,
        }) => {
            assert_eq!(key, "/a");
            assert_eq!(expected, c.revision);
            assert_eq!(actual, u2.revision);
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    // The value's own (stale) resourceVersion is overwritten, not checked.
    let mut v = obj("a", 5);
    v["metadata"]["resourceVersion"] = json!("12345");
    let u3 = s.update("/a", v, None).await.unwrap();
    assert_eq!(rv_of(&u3.value), u3.revision);
    assert_eq!(data(&s.get("/a", None).unwrap().unwrap()), 5);
}

async fn written_values_are_left_as_stored(kind: Kind) {
    let s = open(kind).await;
    let mut value = json!({"data": {"n": 1.5, "s": "café \"q\" \u{1F600}"}, "kind": "K"});
    let created = s.create_derived("/a", &mut value, None).await.unwrap();
    assert_eq!(value, parse(&created.value));
    value["data"]["n"] = json!(-0.25);
    value["metadata"]["resourceVersion"] = json!("12345");
    let updated = s
        .update_derived("/a", &mut value, Some(created.revision), None)
        .await
        .unwrap();
    assert_eq!(value, parse(&updated.value));
    assert_eq!(
        value["metadata"]["resourceVersion"],
        updated.revision.to_string()
    );
    let stale = s
        .update_derived("/a", &mut value, Some(created.revision), None)
        .await;
    assert!(matches!(stale, Err(StoreError::Conflict { .. })));
}

async fn delete_tombstone(kind: Kind) {
    let s = open(kind).await;
    assert!(matches!(
        s.delete("/a", None).await,
        Err(StoreError::NotFound { .. })
    ));
    let c = s.create("/a", obj("a", 7)).await.unwrap();
    assert!(matches!(
        s.delete("/a", Some(c.revision + 100)).await,
        Err(StoreError::Conflict { .. })
    ));
    let d = s.delete("/a", Some(c.revision)).await.unwrap();
    assert!(d.revision > c.revision);
    assert_eq!(rv_of(&d.value), d.revision);
    assert_eq!(data(&d), 7);
    assert!(s.get("/a", None).unwrap().is_none());
    assert!(matches!(
        s.delete("/a", None).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.update("/a", obj("a", 1), None).await,
        Err(StoreError::NotFound { .. })
    ));
    // Re-create after delete.
    let c2 = s.create("/a", obj("a", 8)).await.unwrap();
    assert!(c2.revision > d.revision);
    // The old state is still readable at the old revision.
    assert_eq!(data(&s.get("/a", Some(c.revision)).unwrap().unwrap()), 7);
    assert!(s.get("/a", Some(d.revision)).unwrap().is_none());
}

async fn revisions_strictly_increase(kind: Kind) {
    let s = open(kind).await;
    let mut last = s.revision();
    for i in 0..20 {
        let key = format!("/k/{}", i % 5);
        let o = if i < 5 {
            s.create(&key, obj("x", i)).await.unwrap()
        } else if i % 7 == 0 {
            s.delete(&key, None).await.unwrap();
            s.create(&key, obj("x", i)).await.unwrap()
        } else {
            s.update(&key, obj("x", i), None).await.unwrap()
        };
        assert!(o.revision > last, "{} > {last}", o.revision);
        assert_eq!(rv_of(&o.value), o.revision);
        last = o.revision;
        assert_eq!(s.revision(), last);
    }
}

async fn snapshot_reads(kind: Kind) {
    let s = open(kind).await;
    let a1 = s.create("/p/a", obj("a", 1)).await.unwrap();
    let b1 = s.create("/p/b", obj("b", 1)).await.unwrap();
    let snap = s.revision();
    s.update("/p/a", obj("a", 2), None).await.unwrap();
    s.delete("/p/b", None).await.unwrap();
    s.create("/p/c", obj("c", 1)).await.unwrap();

    let old = s.get("/p/a", Some(snap)).unwrap().unwrap();
    assert_eq!(old.revision, a1.revision);
    assert_eq!(data(&old), 1);
    assert_eq!(
        s.get("/p/b", Some(snap)).unwrap().unwrap().revision,
        b1.revision
    );
    assert!(s.get("/p/c", Some(snap)).unwrap().is_none());
    assert!(s.get("/p/a", Some(a1.revision - 1)).unwrap().is_none());

    let page = s.list("/p/", &ListOptions::at(snap), &|_| true).unwrap();
    assert_eq!(page.revision, snap);
    assert_eq!(keys(&page.items), ["/p/a", "/p/b"]);
    assert_eq!(data(&page.items[0]), 1);
    assert!(page.next_key.is_none());

    let now = s.list("/p/", &ListOptions::default(), &|_| true).unwrap();
    assert_eq!(now.revision, s.revision());
    assert_eq!(keys(&now.items), ["/p/a", "/p/c"]);
    assert_eq!(data(&now.items[0]), 2);

    let future = s.revision() + 1;
    assert!(matches!(
        s.get("/p/a", Some(future)),
        Err(StoreError::TooLarge { .. })
    ));
    assert!(matches!(
        s.list("/p/", &ListOptions::at(future), &|_| true),
        Err(StoreError::TooLarge { .. })
    ));
    s.compact(snap + 1).await.unwrap();
    assert_expired(s.get("/p/a", Some(snap)));
    assert_expired(s.list("/p/", &ListOptions::at(snap), &|_| true));
}

async fn list_prefix_and_paging(kind: Kind) {
    let s = open(kind).await;
    for i in 0..10 {
        s.create(&format!("/pods/ns/{i:02}"), obj("p", i))
            .await
            .unwrap();
    }
    s.create("/pods/other/x", obj("x", 0)).await.unwrap();
    s.create("/pods/nt/x", obj("x", 0)).await.unwrap();
    s.create("/services/ns/a", obj("a", 0)).await.unwrap();

    // Prefix respects boundaries.
    let all = s
        .list("/pods/ns/", &ListOptions::default(), &|_| true)
        .unwrap();
    assert_eq!(all.items.len(), 10);
    assert!(all.next_key.is_none());
    assert_eq!(
        s.list("/pods/", &ListOptions::default(), &|_| true)
            .unwrap()
            .items
            .len(),
        12
    );

    // Page through a snapshot while writes happen in between.
    let snap = s.revision();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = s
            .list(
                "/pods/ns/",
                &ListOptions {
                    at: Some(snap),
                    start_after: cursor.as_deref(),
                    limit: Some(3),
                },
                &|_| true,
            )
            .unwrap();
        pages += 1;
        assert_eq!(page.revision, snap);
        assert!(page.items.len() <= 3);
        seen.extend(page.items.iter().map(|o| (o.key.to_string(), data(o))));
        // Concurrent mutation between pages.
        s.update(&format!("/pods/ns/{:02}", pages), obj("p", 100), None)
            .await
            .unwrap();
        s.delete(&format!("/pods/ns/{:02}", 9 - pages), None)
            .await
            .ok();
        s.create(&format!("/pods/ns/{:02}x", pages), obj("new", 0))
            .await
            .unwrap();
        match page.next_key {
            Some(k) => {
                assert_eq!(&*k, &*page.items.last().unwrap().key);
                cursor = Some(k.to_string());
            }
            None => break,
        }
    }
    assert_eq!(pages, 4);
    let expected: Vec<(String, i64)> = (0..10).map(|i| (format!("/pods/ns/{i:02}"), i)).collect();
    assert_eq!(seen, expected);

    // Exactly `limit` items left: no next_key.
    let page = s.list("/services/", &limited(1), &|_| true).unwrap();
    assert_eq!(page.items.len(), 1);
    assert!(page.next_key.is_none());

    // start_after before the prefix starts at the prefix.
    let page = s
        .list(
            "/services/",
            &ListOptions {
                start_after: Some("/a"),
                ..Default::default()
            },
            &|_| true,
        )
        .unwrap();
    assert_eq!(page.items.len(), 1);
}

async fn list_filter_and_limit(kind: Kind) {
    let s = open(kind).await;
    for i in 0..20 {
        s.create(&format!("/x/{i:02}"), obj("x", i)).await.unwrap();
    }
    let even = |o: &Object| data(o) % 2 == 0;
    let page = s.list("/x/", &limited(4), &even).unwrap();
    assert_eq!(keys(&page.items), ["/x/00", "/x/02", "/x/04", "/x/06"]);
    assert_eq!(page.next_key.as_deref(), Some("/x/06"));
    // Only the last matching item remains after 16: no next_key.
    let page = s
        .list(
            "/x/",
            &ListOptions {
                start_after: Some("/x/16"),
                limit: Some(1),
                ..Default::default()
            },
            &even,
        )
        .unwrap();
    assert_eq!(keys(&page.items), ["/x/18"]);
    assert!(page.next_key.is_none());
    // Filter matching nothing.
    let page = s.list("/x/", &limited(5), &|_| false).unwrap();
    assert!(page.items.is_empty());
    assert!(page.next_key.is_none());
}

fn labelled(app: &str) -> Value {
    serde_json::json!({"metadata": {"labels": {"app": app, "tier": "cache"}}})
}

/// Every read (get, list, snapshot, watch, tombstone) carries the labels of the version it
/// returns, decoded when that version was written.
async fn labels_follow_each_version(kind: Kind) {
    let s = open(kind).await;
    let first = s.create("/l/a", labelled("one")).await.unwrap();
    assert_eq!(first.labels.get("app"), Some("one"));
    let second = s.update("/l/a", labelled("two"), None).await.unwrap();
    assert_eq!(second.labels.get("app"), Some("two"));
    s.create("/l/b", obj("b", 1)).await.unwrap();
    let app = |o: &Object| o.labels.get("app").map(str::to_string);
    let now = s.list("/l/", &ListOptions::default(), &|_| true).unwrap();
    assert_eq!(
        now.items.iter().map(app).collect::<Vec<_>>(),
        [Some("two".to_string()), None]
    );
    let then = s.get("/l/a", Some(first.revision)).unwrap().unwrap();
    assert_eq!(then.labels.get("app"), Some("one"));
    let selected = s
        .list("/l/", &ListOptions::default(), &|o| {
            o.labels.get("tier") == Some("cache")
        })
        .unwrap();
    assert_eq!(keys(&selected.items), ["/l/a"]);
    let tombstone = s.delete("/l/a", None).await.unwrap();
    assert_eq!(tombstone.labels.get("app"), Some("two"));
    let mut w = s.watch("/l/", first.revision - 1).unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        let e = w.next().await.unwrap().unwrap();
        seen.push(e.labels.get("app").map(str::to_string));
    }
    assert_eq!(
        seen,
        [
            Some("one".into()),
            Some("two".into()),
            None,
            Some("two".into())
        ]
    );
}

async fn a_store_started_from_an_image_holds_what_it_held(kind: Kind) {
    let s = open(kind).await;
    let start = s.revision();
    let a1 = s.create("/p/a", obj("a", 1)).await.unwrap();
    s.create("/p/b", obj("b", 1)).await.unwrap();
    let a2 = s.update("/p/a", obj("a", 2), None).await.unwrap();
    let gone = s.delete("/p/b", None).await.unwrap();
    let copy = Store::in_memory_from(&s.image(), test_opts())
        .await
        .unwrap();
    assert_eq!(copy.revision(), s.revision());
    let now = copy
        .list("/p/", &ListOptions::default(), &|_| true)
        .unwrap();
    assert_eq!(keys(&now.items), ["/p/a"]);
    assert_eq!(now.items[0].value, a2.value);
    let then = copy.get("/p/a", Some(a1.revision)).unwrap().unwrap();
    assert_eq!(then.value, a1.value);
    let mut watch = copy.watch("/p/", start).unwrap();
    let mut replayed = Vec::new();
    for _ in 0..4 {
        let e = watch.next().await.unwrap().unwrap();
        replayed.push((e.kind, e.revision));
    }
    assert_eq!(replayed.last(), Some(&(EventKind::Deleted, gone.revision)));
    // The copy goes on on its own: the original does not see its writes.
    let c = copy.create("/p/c", obj("c", 1)).await.unwrap();
    assert!(c.revision > gone.revision);
    assert!(s.get("/p/c", None).unwrap().is_none());
}

async fn watch_replay_then_live(kind: Kind) {
    let s = open(kind).await;
    let start = s.revision();
    let c = s.create("/w/a", obj("a", 1)).await.unwrap();
    s.create("/other/z", obj("z", 1)).await.unwrap();
    let u = s.update("/w/a", obj("a", 2), None).await.unwrap();

    let mut w = s.watch("/w/", start).unwrap();
    let e = w.next().await.unwrap().unwrap();
    assert_eq!(
        (e.kind, e.revision, &*e.key),
        (EventKind::Created, c.revision, "/w/a")
    );
    assert!(e.prev.is_none());
    let e = w.next().await.unwrap().unwrap();
    assert_eq!((e.kind, e.revision), (EventKind::Updated, u.revision));
    assert_eq!(e.prev.as_deref(), Some(&c.value[..]));
    assert_eq!(w.revision(), u.revision);

    // Live: a writer in another task.
    let s2 = s.store.clone();
    let h = tokio::spawn(async move {
        tokio::task::yield_now().await;
        s2.create("/other/y", obj("y", 1)).await.unwrap();
        s2.create("/w/b", obj("b", 1)).await.unwrap();
        s2.delete("/w/a", None).await.unwrap()
    });
    let e = w.next().await.unwrap().unwrap();
    assert_eq!((e.kind, &*e.key), (EventKind::Created, "/w/b"));
    let e = w.next().await.unwrap().unwrap();
    let d = h.await.unwrap();
    assert_eq!(
        (e.kind, &*e.key, e.revision),
        (EventKind::Deleted, "/w/a", d.revision)
    );
    assert_eq!(rv_of(&e.value), d.revision);
    assert_eq!(data_bytes(&e.value), 2);
    assert_eq!(e.prev.as_deref(), Some(&u.value[..]));
    assert_eq!(w.revision(), d.revision);

    // A non-matching write advances the watcher's revision only when it looks.
    let o = s.create("/other/q", obj("q", 1)).await.unwrap();
    let r = tokio::time::timeout(Duration::from_millis(50), w.next()).await;
    assert!(r.is_err(), "no matching event expected");
    assert_eq!(w.revision(), o.revision);

    // Watching from the current revision sees only new events.
    let mut w2 = s.watch("/", s.revision()).unwrap();
    let n = s.create("/w/c", obj("c", 1)).await.unwrap();
    assert_eq!(w2.next().await.unwrap().unwrap().revision, n.revision);
}

fn data_bytes(b: &[u8]) -> i64 {
    parse(b)["data"].as_i64().expect("data")
}

async fn watch_expired(kind: Kind) {
    let s = open(kind).await;
    let first = s.create("/a", obj("a", 1)).await.unwrap();
    s.update("/a", obj("a", 2), None).await.unwrap();
    let mut behind = s.watch("/", first.revision - 1).unwrap();
    s.compact(first.revision).await.unwrap();
    assert_eq!(s.compacted_revision(), first.revision);
    // Watching from below the compaction point is refused...
    match s.watch("/", first.revision - 1) {
        Err(StoreError::Expired {
            requested,
            compacted,
        }) => {
            assert_eq!(requested, first.revision - 1);
            assert_eq!(compacted, first.revision);
        }
        other => panic!("expected Expired, got {other:?}"),
    }
    // ...but from the compaction point itself works.
    let mut ok = s.watch("/", first.revision).unwrap();
    assert_eq!(ok.next().await.unwrap().unwrap().kind, EventKind::Updated);
    // A watcher created earlier that had not consumed the compacted events expires.
    assert_watch_expires(&mut behind).await;
}

async fn slow_watcher_falls_behind(kind: Kind) {
    let s = open(kind).await;
    let mut w = s.watch("/", s.revision()).unwrap();
    let a = s.create("/a", obj("a", 1)).await.unwrap();
    assert_eq!(w.next().await.unwrap().unwrap().revision, a.revision);
    for i in 0..5 {
        s.update("/a", obj("a", i), None).await.unwrap();
    }
    s.compact(s.revision() - 1).await.unwrap();
    assert_watch_expires(&mut w).await;
}

async fn compaction_keeps_latest(kind: Kind) {
    let s = open(kind).await;
    s.create("/a", obj("a", 1)).await.unwrap();
    s.update("/a", obj("a", 2), None).await.unwrap();
    s.create("/b", obj("b", 1)).await.unwrap();
    s.delete("/b", None).await.unwrap();
    s.create("/c", obj("c", 1)).await.unwrap();
    let before = s.list("/", &ListOptions::default(), &|_| true).unwrap();
    let cur = s.revision();
    s.compact(cur).await.unwrap();
    assert_eq!(s.compacted_revision(), cur);
    // Idempotent, and clamped to the current revision.
    s.compact(cur - 2).await.unwrap();
    assert_eq!(s.compacted_revision(), cur);
    s.compact(cur + 1000).await.unwrap();
    assert_eq!(s.compacted_revision(), cur);
    assert_eq!(s.revision(), cur);

    let after = s.list("/", &ListOptions::default(), &|_| true).unwrap();
    assert_eq!(keys(&after.items), keys(&before.items));
    assert_eq!(keys(&after.items), ["/a", "/c"]);
    assert_eq!(data(&after.items[0]), 2);
    let listed_at = s.list("/", &ListOptions::at(cur), &|_| true).unwrap();
    assert_eq!(listed_at.items.len(), 2);
    assert!(s.get("/b", None).unwrap().is_none());
    // Compacted deleted key can be re-created; compacted live key can be updated.
    s.create("/b", obj("b", 2)).await.unwrap();
    let u = s
        .update("/a", obj("a", 3), Some(after.items[0].revision))
        .await
        .unwrap();
    let mut w = s.watch("/", cur).unwrap();
    assert_eq!(w.next().await.unwrap().unwrap().key.as_ref(), "/b");
    let e = w.next().await.unwrap().unwrap();
    assert_eq!(e.revision, u.revision);
    assert_eq!(e.prev.as_deref(), Some(&after.items[0].value[..]));
}

async fn auto_compaction_by_retained_revisions(kind: Kind) {
    let s = open_with(
        kind,
        StoreOptions {
            max_retained_revisions: 10,
            ..test_opts()
        },
    )
    .await;
    s.create("/a", obj("a", 0)).await.unwrap();
    for i in 0..30 {
        s.update("/a", obj("a", i), None).await.unwrap();
    }
    // Automatic compaction runs after the batch's replies; a no-op compaction
    // request goes through the writer and so acts as a barrier.
    s.compact(0).await.unwrap();
    assert_eq!(s.compacted_revision(), s.revision() - 10);
    assert_eq!(data(&s.get("/a", None).unwrap().unwrap()), 29);
    assert!(s.get("/a", Some(s.revision() - 10)).unwrap().is_some());
}

/// A ConfigMap-like object whose data is `size` bytes.
fn sized(name: &str, size: usize, fill: char) -> Value {
    json!({"metadata": {"name": name}, "data": {"blob": fill.to_string().repeat(size)}})
}

async fn history_stays_within_budget(kind: Kind) {
    const BUDGET: u64 = 1024 * 1024;
    const VALUE: usize = 100 * 1024;
    let s = open_with(
        kind,
        StoreOptions {
            max_history_bytes: BUDGET,
            ..test_opts()
        },
    )
    .await;
    let first = s.create("/a", sized("a", VALUE, 'a')).await.unwrap();
    s.create("/b", sized("b", VALUE, 'b')).await.unwrap();
    let mut peak = 0;
    for i in 0..60 {
        let key = if i % 3 == 0 { "/b" } else { "/a" };
        s.update(
            key,
            sized(key, VALUE, char::from(b'c' + (i % 20) as u8)),
            None,
        )
        .await
        .unwrap();
        // Automatic compaction follows the batch; a no-op compaction is a barrier.
        s.compact(0).await.unwrap();
        peak = peak.max(s.history_bytes());
        assert!(
            s.history_bytes() <= BUDGET,
            "history {} > budget {BUDGET} after update {i}",
            s.history_bytes()
        );
    }
    // The budget was reached (history is not trivially small) and compaction followed it.
    assert!(peak > BUDGET / 2, "peak history {peak}");
    assert!(s.compacted_revision() > first.revision);
    assert!(s.compacted_revision() < s.revision());
    assert_expired(s.get("/a", Some(first.revision)));
    assert_expired(s.watch("/", first.revision));
    // What the budget keeps is readable, and the current state is whole.
    let oldest = s.compacted_revision();
    assert!(s.get("/a", Some(oldest)).unwrap().is_some());
    assert!(s.watch("/", oldest).is_ok());
    let now = s.list("/", &ListOptions::default(), &|_| true).unwrap();
    assert_eq!(keys(&now.items), ["/a", "/b"]);

    // One write whose superseded version alone exceeds the budget: compaction goes up to
    // the current revision and no further.
    let big = s
        .update("/a", sized("a", 2 * BUDGET as usize, 'z'), None)
        .await
        .unwrap();
    s.update("/a", sized("a", 10, 'y'), None).await.unwrap();
    s.compact(0).await.unwrap();
    assert_eq!(s.compacted_revision(), s.revision());
    assert!(s.history_bytes() <= BUDGET);
    assert!(s.revision() > big.revision);
    assert_eq!(s.get("/a", None).unwrap().unwrap().revision, s.revision());
}

async fn periodic_compaction(kind: Kind) {
    let s = open_with(
        kind,
        StoreOptions {
            compaction_interval: Some(Duration::from_millis(100)),
            ..test_opts()
        },
    )
    .await;
    let o = s.create("/a", obj("a", 0)).await.unwrap();
    // First tick records the revision; the next one compacts to it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while s.compacted_revision() < o.revision {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no periodic compaction"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(s.compacted_revision() <= s.revision());
    assert!(s.get("/a", None).unwrap().is_some());
}

async fn same_key_in_one_batch(kind: Kind) {
    let s = open(kind).await;
    // Many concurrent creates of one key: staged against each other.
    let mut handles = Vec::new();
    for i in 0..50 {
        let s = s.store.clone();
        handles.push(tokio::spawn(
            async move { s.create("/one", obj("x", i)).await },
        ));
    }
    let mut ok = 0;
    for h in handles {
        match h.await.unwrap() {
            Ok(_) => ok += 1,
            Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(ok, 1);
    // Concurrent CAS updates from the same base: exactly one wins.
    let base = s.get("/one", None).unwrap().unwrap().revision;
    let mut handles = Vec::new();
    for i in 0..20 {
        let s = s.store.clone();
        handles.push(tokio::spawn(async move {
            s.update("/one", obj("y", i), Some(base)).await
        }));
    }
    let mut ok = 0;
    for h in handles {
        match h.await.unwrap() {
            Ok(_) => ok += 1,
            Err(StoreError::Conflict { expected, .. }) => assert_eq!(expected, base),
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(ok, 1);
}

async fn concurrent_creates(kind: Kind) {
    let s = open(kind).await;
    let mut handles = Vec::new();
    for t in 0..16 {
        let s = s.store.clone();
        handles.push(tokio::spawn(async move {
            let mut revs = Vec::new();
            for i in 0..125 {
                let o = s
                    .create(&format!("/c/{t:02}/{i:03}"), obj("c", i))
                    .await
                    .unwrap();
                assert_eq!(rv_of(&o.value), o.revision);
                revs.push(o.revision);
            }
            revs
        }));
    }
    let mut all = HashSet::new();
    for h in handles {
        let revs = h.await.unwrap();
        assert!(revs.windows(2).all(|w| w[0] < w[1]));
        for r in revs {
            assert!(all.insert(r), "duplicate revision {r}");
        }
    }
    assert_eq!(all.len(), 2000);
    assert_eq!(s.revision(), 2001);
    let page = s.list("/c/", &ListOptions::default(), &|_| true).unwrap();
    assert_eq!(page.items.len(), 2000);
    let mut w = s.watch("/c/", 1).unwrap();
    let mut n = 0;
    let mut last = 0;
    while n < 2000 {
        let e = w.next().await.unwrap().unwrap();
        assert!(e.revision > last);
        last = e.revision;
        n += 1;
    }
}

async fn shutdown_ends_watchers(kind: Kind) {
    let s = open(kind).await;
    let mut w = s.watch("/", s.revision()).unwrap();
    let s2 = s.store.clone();
    let waiter = tokio::spawn(async move {
        let mut got = Vec::new();
        while let Some(e) = w.next().await {
            got.push(e.unwrap().revision);
        }
        got
    });
    let a = s.create("/a", obj("a", 1)).await.unwrap();
    s2.shutdown().await;
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("watcher ended")
        .unwrap();
    assert_eq!(got, vec![a.revision]);
    assert!(matches!(
        s.create("/b", obj("b", 1)).await,
        Err(StoreError::Closed)
    ));
    assert!(matches!(
        s.delete("/a", None).await,
        Err(StoreError::Closed)
    ));
    assert!(matches!(s.compact(1).await, Err(StoreError::Closed)));
    // Reads still work; a second shutdown is harmless.
    assert!(s.get("/a", None).unwrap().is_some());
    s.shutdown().await;
}

macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::Kind::Memory).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::Kind::Sqlite).await
                }
            )*
        }
    };
}

suite!(
    create_and_already_exists,
    invalid_values,
    update_cas_and_not_found,
    written_values_are_left_as_stored,
    a_store_started_from_an_image_holds_what_it_held,
    delete_tombstone,
    revisions_strictly_increase,
    snapshot_reads,
    list_prefix_and_paging,
    list_filter_and_limit,
    labels_follow_each_version,
    watch_replay_then_live,
    watch_expired,
    slow_watcher_falls_behind,
    compaction_keeps_latest,
    auto_compaction_by_retained_revisions,
    history_stays_within_budget,
    periodic_compaction,
    same_key_in_one_batch,
    concurrent_creates,
    shutdown_ends_watchers,
);

// ---- multi-threaded runtime ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_multi_thread_memory() {
    concurrent_creates(Kind::Memory).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_multi_thread_sqlite_durable() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::sqlite(
        &dir.path().join("db"),
        StoreOptions {
            durable: true,
            ..test_opts()
        },
    )
    .await
    .unwrap();
    let mut handles = Vec::new();
    for t in 0..16 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            for i in 0..125 {
                s.create(&format!("/c/{t}/{i}"), json!({})).await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    assert_eq!(s.revision(), 2001);
}

// ---- paused clock (the deterministic simulator's setting) ----

#[tokio::test(start_paused = true)]
async fn memory_store_under_paused_clock() {
    let s = Store::in_memory(StoreOptions {
        compaction_interval: Some(Duration::from_secs(300)),
        ..StoreOptions::default()
    })
    .await
    .unwrap();
    let a = s.create("/a", obj("a", 1)).await.unwrap();
    let mut w = s.watch("/", a.revision).unwrap();
    tokio::time::sleep(Duration::from_secs(301)).await;
    let b = s.update("/a", obj("a", 2), None).await.unwrap();
    assert_eq!(w.next().await.unwrap().unwrap().revision, b.revision);
    // Second tick compacts to the revision current at the first tick (a).
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert!(s.compacted_revision() >= a.revision);
    s.shutdown().await;
    assert!(w.next().await.is_none());
}

// ---- SQLite only ----

#[tokio::test]
async fn sqlite_reopen_restores_everything() {
    let (_dir, path) = temp_path("state.db");
    let (compacted, last_rev, snapshot) = {
        let s = Store::sqlite(&path, test_opts()).await.unwrap();
        s.create("/a", obj("a", 1)).await.unwrap();
        s.update("/a", obj("a", 2), None).await.unwrap();
        s.create("/labelled", labelled("kept")).await.unwrap();
        s.create("/b", obj("b", 1)).await.unwrap();
        s.delete("/b", None).await.unwrap();
        s.create("/c", obj("c", 1)).await.unwrap();
        s.compact(s.revision() - 1).await.unwrap();
        s.update("/c", obj("c", 2), None).await.unwrap();
        s.create("/d", obj("d", 1)).await.unwrap();
        s.delete("/d", None).await.unwrap();
        let snapshot = s.list("/", &ListOptions::default(), &|_| true).unwrap();
        let r = (s.compacted_revision(), s.revision(), snapshot);
        s.shutdown().await;
        r
    };
    let s = Store::sqlite(&path, test_opts()).await.unwrap();
    assert_eq!(s.compacted_revision(), compacted);
    assert_eq!(s.revision(), last_rev);
    let now = s.list("/", &ListOptions::default(), &|_| true).unwrap();
    assert_eq!(keys(&now.items), keys(&snapshot.items));
    for (x, y) in now.items.iter().zip(&snapshot.items) {
        assert_eq!(x.revision, y.revision);
        assert_eq!(x.value, y.value);
        assert_eq!(x.labels, y.labels);
    }
    // Retained history survives: the event log after the compaction point.
    let mut w = s.watch("/", compacted).unwrap();
    let e = w.next().await.unwrap().unwrap();
    assert_eq!((e.kind, &*e.key), (EventKind::Created, "/c"));
    assert!(e.prev.is_none());
    let e = w.next().await.unwrap().unwrap();
    assert_eq!((e.kind, &*e.key), (EventKind::Updated, "/c"));
    assert!(e.prev.is_some());
    let e = w.next().await.unwrap().unwrap();
    assert_eq!((e.kind, &*e.key), (EventKind::Created, "/d"));
    let e = w.next().await.unwrap().unwrap();
    assert_eq!((e.kind, &*e.key), (EventKind::Deleted, "/d"));
    assert_expired(s.watch("/", compacted - 1));
    let n = s.create("/e", obj("e", 1)).await.unwrap();
    assert_eq!(n.revision, last_rev + 1);
    s.shutdown().await;
}

#[tokio::test]
async fn sqlite_revision_never_goes_backwards_after_full_compaction() {
    let (_dir, path) = temp_path("state.db");
    let last = {
        let s = Store::sqlite(&path, test_opts()).await.unwrap();
        s.create("/a", obj("a", 1)).await.unwrap();
        s.create("/b", obj("b", 1)).await.unwrap();
        s.delete("/b", None).await.unwrap();
        s.compact(s.revision()).await.unwrap();
        let r = s.revision();
        s.shutdown().await;
        r
    };
    for _ in 0..2 {
        let s = Store::sqlite(&path, test_opts()).await.unwrap();
        assert!(s.revision() >= last);
        let before = s.revision();
        let o = s.create(&format!("/n{before}"), obj("n", 1)).await.unwrap();
        assert!(o.revision > before);
        s.compact(o.revision).await.unwrap();
        s.shutdown().await;
    }
    let s = Store::sqlite(&path, test_opts()).await.unwrap();
    assert_eq!(s.revision(), last + 2);
    assert!(s.get("/b", None).unwrap().is_none());
    assert!(s.get("/a", None).unwrap().is_some());
}

#[tokio::test]
async fn sqlite_creates_missing_directories() {
    let (_dir, path) = temp_path("not/yet/there/state.db");
    let s = Store::sqlite(&path, StoreOptions::default()).await.unwrap();
    assert_eq!(s.revision(), 1);
    s.create("/a", obj("a", 1)).await.unwrap();
    s.shutdown().await;
    assert!(path.exists());
}

#[tokio::test]
async fn sqlite_drop_without_shutdown_keeps_committed_writes() {
    let (_dir, path) = temp_path("state.db");
    {
        let s = Store::sqlite(&path, test_opts()).await.unwrap();
        s.create("/a", obj("a", 1)).await.unwrap();
    }
    let s = Store::sqlite(&path, test_opts()).await.unwrap();
    assert_eq!(data(&s.get("/a", None).unwrap().unwrap()), 1);
}

/// Size of the database and its WAL on disk.
fn size_on_disk(path: &std::path::Path) -> u64 {
    ["", "-wal"]
        .iter()
        .map(|suffix| {
            let mut file = path.as_os_str().to_owned();
            file.push(suffix);
            std::fs::metadata(file).map_or(0, |m| m.len())
        })
        .sum()
}

#[tokio::test]
async fn sqlite_compaction_shrinks_the_file() {
    let (_dir, path) = temp_path("state.db");
    let s = Store::sqlite(&path, test_opts()).await.unwrap();
    for i in 0..60 {
        let key = format!("/k{}", i % 3);
        let value = sized(&key, 100 * 1024, char::from(b'a' + (i % 26) as u8));
        match s.get(&key, None).unwrap() {
            Some(_) => s.update(&key, value, None).await.unwrap(),
            None => s.create(&key, value).await.unwrap(),
        };
    }
    let grown = size_on_disk(&path);
    assert!(grown > 5_000_000, "60 writes of 100 KB take {grown} bytes");
    s.compact(s.revision()).await.unwrap();
    let compacted = size_on_disk(&path);
    // Three live objects of 100 KB remain.
    assert!(
        compacted < grown / 4,
        "file did not shrink: {grown} bytes before compaction, {compacted} after"
    );
    s.shutdown().await;
    let s = Store::sqlite(&path, test_opts()).await.unwrap();
    assert_eq!(
        s.list("/", &ListOptions::default(), &|_| true)
            .unwrap()
            .items
            .len(),
        3
    );
}

#[tokio::test]
async fn sqlite_a_second_store_on_one_database_is_refused_and_the_first_keeps_working() {
    let (_dir, path) = temp_path("state.db");
    let first = Store::sqlite(&path, test_opts()).await.unwrap();
    first.create("/a", obj("a", 1)).await.unwrap();
    let second = Store::sqlite(&path, test_opts()).await;
    assert!(
        matches!(&second, Err(StoreError::Backend(m)) if m.contains("locked")),
        "{:?}",
        second.err()
    );
    first.create("/b", obj("b", 2)).await.unwrap();
    assert_eq!(data(&first.get("/a", None).unwrap().unwrap()), 1);
    first.shutdown().await;
    let reopened = Store::sqlite(&path, test_opts()).await.unwrap();
    assert_eq!(data(&reopened.get("/b", None).unwrap().unwrap()), 2);
}

#[cfg(unix)]
fn mode_of(path: impl AsRef<std::path::Path>) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
#[tokio::test]
async fn sqlite_files_are_private_from_the_start() {
    let (dir, path) = temp_path("data/state.db");
    let s = Store::sqlite(&path, test_opts()).await.unwrap();
    s.create("/secret", obj("secret", 1)).await.unwrap();
    assert_eq!(mode_of(dir.path().join("data")), 0o700);
    for file in ["state.db", "state.db-wal"] {
        assert_eq!(mode_of(dir.path().join("data").join(file)), 0o600, "{file}");
    }
    // The store holds the database exclusively: its WAL index is in memory, not a file.
    assert!(!dir.path().join("data/state.db-shm").exists());
    s.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn sqlite_narrows_the_modes_of_an_existing_database() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = temp_path("state.db");
    let wal = dir.path().join("state.db-wal");
    let s = Store::sqlite(&path, test_opts()).await.unwrap();
    s.create("/secret", obj("secret", 1)).await.unwrap();
    s.shutdown().await;
    // A WAL left behind, as after a crash (an empty one: the writes are in the database).
    std::fs::write(&wal, b"").unwrap();
    for file in [&path, &wal] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let s = Store::sqlite(&path, test_opts()).await.unwrap();
    assert_eq!(mode_of(&path), 0o600);
    assert_eq!(mode_of(&wal), 0o600);
    assert_eq!(data(&s.get("/secret", None).unwrap().unwrap()), 1);
}
