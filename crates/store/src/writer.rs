//! The single writer task: batches queued requests (group commit), validates
//! them against memory plus a staging overlay, persists the batch in one
//! backend transaction, then applies it to memory and wakes watchers.

use std::cell::Cell;
use std::collections::HashMap;
use std::io;
use std::mem;
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::backend::Backend;
use crate::state::Version;
use crate::{
    Derived, DerivedSlot, Event, EventKind, Labels, MAX_DEPTH, Object, Revision, Shared, StoreError,
};

/// Maximum number of requests drained into one group commit.
const MAX_BATCH: usize = 1024;
/// Maximum bytes of values drained into one group commit (the first request is always
/// taken, whatever its size). A thousand small writes make one cheap transaction, but a
/// thousand objects near kube-apiserver's 3 MiB request limit would hold gigabytes in one
/// batch and keep every writer waiting on one long transaction.
const MAX_BATCH_BYTES: usize = 8 * 1024 * 1024;

pub(crate) enum Op {
    Create(Encoded),
    Update(Encoded, Option<Revision>),
    Delete(Option<Revision>),
}

impl Op {
    /// Bytes the write adds to a batch; a delete's tombstone is not known until it is
    /// staged and counts as nothing.
    fn len(&self) -> usize {
        match self {
            Op::Create(encoded) | Op::Update(encoded, _) => encoded.len(),
            Op::Delete(_) => 0,
        }
    }
}

type Reply = oneshot::Sender<Result<Object, StoreError>>;

pub(crate) struct WriteReq {
    pub key: String,
    pub op: Op,
    pub reply: Reply,
}

pub(crate) enum Request {
    Write(WriteReq),
    Compact {
        revision: Revision,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
}

impl Request {
    fn len(&self) -> usize {
        match self {
            Request::Write(w) => w.op.len(),
            Request::Compact { .. } | Request::Shutdown { .. } => 0,
        }
    }
}

/// A value serialized before it reaches the writer task: compact JSON with the string of
/// `metadata.resourceVersion` left empty at a known offset, and its labels. The single
/// writer task then only copies bytes around the revision; the serialization runs on the
/// (many) tasks that make requests.
pub(crate) struct Encoded {
    json: Vec<u8>,
    /// Offset just after the opening quote of the empty `resourceVersion` string.
    revision_at: usize,
    labels: Labels,
    derived: Option<Derived>,
}

impl Encoded {
    /// Encodes `value`, which must be a JSON object whose `metadata`, if any, is an object.
    /// `value` is left with that `metadata` and an empty `resourceVersion` in it.
    pub(crate) fn new(value: &mut Value, derived: Option<Derived>) -> Result<Encoded, StoreError> {
        let labels = Labels::of(value);
        let obj = value
            .as_object_mut()
            .ok_or_else(|| StoreError::InvalidValue("value must be a JSON object".into()))?;
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(serde_json::Map::new()))
            .as_object_mut()
            .ok_or_else(|| StoreError::InvalidValue("metadata must be a JSON object".into()))?;
        meta.insert("resourceVersion".into(), Value::String(String::new()));
        let mut json = Vec::with_capacity(256);
        let mut revision_at = 0;
        let deepest = Cell::new(0);
        write_object(&mut json, obj, 1, &deepest, &mut |json, key, value| {
            if key != "metadata" {
                return None;
            }
            let meta = value.as_object()?;
            Some(write_object(
                json,
                meta,
                2,
                &deepest,
                &mut |json, key, _| {
                    (key == "resourceVersion").then(|| {
                        json.push(b'"');
                        revision_at = json.len();
                        json.push(b'"');
                        Ok(())
                    })
                },
            ))
        })?;
        if deepest.get() > MAX_DEPTH {
            return Err(StoreError::TooDeep);
        }
        Ok(Encoded {
            json,
            revision_at,
            labels,
            derived,
        })
    }

    /// The stored bytes: the JSON with `rev` as its `resourceVersion`.
    fn at_revision(&self, rev: Revision) -> (Bytes, Labels) {
        let rev = rev.to_string();
        let mut bytes = Vec::with_capacity(self.json.len() + rev.len());
        bytes.extend_from_slice(&self.json[..self.revision_at]);
        bytes.extend_from_slice(rev.as_bytes());
        bytes.extend_from_slice(&self.json[self.revision_at..]);
        (Bytes::from(bytes), self.labels.clone())
    }

    /// The stored bytes at `rev` and what the writer derived from them.
    fn into_event_parts(self, rev: Revision) -> ((Bytes, Labels), Option<Derived>) {
        (self.at_revision(rev), self.derived)
    }

    /// Bytes this write adds to a batch (without the revision's few digits).
    pub(crate) fn len(&self) -> usize {
        self.json.len()
    }
}

/// Writes one member's value itself and returns `Some`, or leaves it to the default.
type MemberWriter<'a> =
    dyn FnMut(&mut Vec<u8>, &str, &Value) -> Option<Result<(), StoreError>> + 'a;

/// Writes `map`, an object `depth` levels deep, as compact JSON, exactly as
/// `serde_json::to_writer` would, except for the members `special` writes; `deepest` is
/// raised to the deepest level written.
fn write_object(
    json: &mut Vec<u8>,
    map: &serde_json::Map<String, Value>,
    depth: usize,
    deepest: &Cell<usize>,
    special: &mut MemberWriter<'_>,
) -> Result<(), StoreError> {
    let encoding = |e: serde_json::Error| StoreError::InvalidValue(e.to_string());
    deepest.set(deepest.get().max(depth));
    json.push(b'{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            json.push(b',');
        }
        serde_json::to_writer(&mut *json, key).map_err(encoding)?;
        json.push(b':');
        match special(json, key, value) {
            Some(written) => written?,
            None => {
                let nesting = Nesting { depth, deepest };
                let mut serializer = serde_json::Serializer::with_formatter(&mut *json, nesting);
                value.serialize(&mut serializer).map_err(encoding)?;
            }
        }
    }
    json.push(b'}');
    Ok(())
}

/// serde_json's compact format, noting how deeply what it writes nests: the encoding
/// walks every value anyway, so the store's depth limit costs no walk of its own.
struct Nesting<'a> {
    /// Levels of objects and arrays around what is written next.
    depth: usize,
    deepest: &'a Cell<usize>,
}

impl Nesting<'_> {
    fn enter(&mut self) {
        self.depth += 1;
        self.deepest.set(self.deepest.get().max(self.depth));
    }
}

impl serde_json::ser::Formatter for Nesting<'_> {
    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.enter();
        writer.write_all(b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth -= 1;
        writer.write_all(b"]")
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.enter();
        writer.write_all(b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.depth -= 1;
        writer.write_all(b"}")
    }
}

/// A stored object again, with `rev` as its `resourceVersion` (a delete's tombstone):
/// spliced into its bytes, or encoded again when they are not as the store writes them.
fn tombstone(prev: &Version, rev: Revision) -> Result<(Bytes, Labels), StoreError> {
    if let Some(bytes) = crate::revision_bytes::at_revision(&prev.value, rev) {
        return Ok((bytes, prev.labels.clone()));
    }
    let mut value: Value = serde_json::from_slice(&prev.value)
        .map_err(|e| StoreError::Backend(format!("stored value is not JSON: {e}")))?;
    Ok(Encoded::new(&mut value, None)?.at_revision(rev))
}

pub(crate) struct Writer {
    pub backend: Option<Box<dyn Backend>>,
    pub shared: Arc<Shared>,
    pub signal: Arc<crate::watcher::Signal>,
    pub max_retained: u64,
    pub max_history_bytes: u64,
}

impl Writer {
    /// Starts the writer: on a thread of its own when the backend blocks on I/O, so that
    /// a group commit calls SQLite (and waits for its fsync) where it is, without
    /// handing every batch to the blocking pool and back — two thread wake-ups that cost
    /// about as much as the fsync itself on these machines. A backend that never blocks
    /// (memory, the simulator's) runs the same loop as a task, with no thread.
    pub(crate) fn spawn(self, rx: mpsc::Receiver<Request>) -> Result<(), StoreError> {
        let blocking = self.backend.as_ref().is_some_and(|b| b.is_blocking());
        if !blocking {
            tokio::spawn(self.run(rx));
            return Ok(());
        }
        let on_thread = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| StoreError::Backend(format!("cannot start the store writer: {e}")))?;
        std::thread::Builder::new()
            .name("steady-store-writer".into())
            .spawn(move || on_thread.block_on(self.run(rx)))
            .map_err(|e| StoreError::Backend(format!("cannot start the store writer: {e}")))?;
        Ok(())
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Request>) {
        let mut waiters: Vec<oneshot::Sender<()>> = Vec::new();
        let mut batch: Vec<Request> = Vec::new();
        'outer: while let Some(first) = rx.recv().await {
            fill_batch(first, &mut rx, &mut batch);
            let mut pending: Vec<WriteReq> = Vec::new();
            let mut reqs = batch.drain(..);
            while let Some(req) = reqs.next() {
                match req {
                    Request::Write(w) => pending.push(w),
                    Request::Compact { revision, reply } => {
                        self.commit(mem::take(&mut pending));
                        let _ = reply.send(self.compact(revision));
                    }
                    Request::Shutdown { reply } => {
                        self.commit(mem::take(&mut pending));
                        waiters.push(reply);
                        for rest in reqs {
                            fail(rest, &mut waiters);
                        }
                        break 'outer;
                    }
                }
            }
            drop(reqs);
            self.commit(pending);
            self.auto_compact();
        }
        rx.close();
        while let Some(req) = rx.recv().await {
            fail(req, &mut waiters);
        }
        // Close the backend (SQLite may checkpoint on close).
        drop(self.backend.take());
        self.shared.write().closed = true;
        // Closing the signal ends every watcher once it drained the log.
        self.signal.close();
        tracing::debug!("store writer stopped");
        for w in waiters {
            let _ = w.send(());
        }
    }

    /// Runs `f` against the backend. A panic inside the backend leaves the store
    /// read-only (every later write fails) rather than ending the writer.
    fn with_backend<T>(
        &mut self,
        f: impl FnOnce(&mut dyn Backend) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let Some(mut backend) = self.backend.take() else {
            return Err(StoreError::Backend("storage backend unavailable".into()));
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(backend.as_mut()))) {
            Ok(r) => {
                self.backend = Some(backend);
                r
            }
            Err(_) => {
                tracing::error!("storage backend panicked; store is now read-only");
                Err(StoreError::Backend("storage backend failed".into()))
            }
        }
    }

    /// Validates, persists and applies one group of writes.
    fn commit(&mut self, writes: Vec<WriteReq>) {
        if writes.is_empty() {
            return;
        }
        let mut events: Vec<Arc<Event>> = Vec::with_capacity(writes.len());
        // Per request: Ok(index into events) or its validation error.
        let mut outcomes: Vec<(Reply, Result<usize, StoreError>)> =
            Vec::with_capacity(writes.len());
        {
            let st = self.shared.read();
            let mut next = st.current + 1;
            // Effects of earlier requests in this batch: key -> live state (None = deleted).
            let mut overlay: HashMap<Arc<str>, Option<Version>> = HashMap::new();
            for w in writes {
                let (key, cur) = match overlay.get_key_value(w.key.as_str()) {
                    Some((k, v)) => (k.clone(), v.clone()),
                    None => {
                        let (k, v) = st.latest(&w.key);
                        (k.unwrap_or_else(|| Arc::from(w.key.as_str())), v)
                    }
                };
                let res = stage(&key, cur, w.op, next);
                match res {
                    Ok(event) => {
                        overlay.insert(
                            key,
                            (event.kind != EventKind::Deleted).then(|| Version {
                                rev: event.revision,
                                value: event.value.clone(),
                                labels: event.labels.clone(),
                                deleted: false,
                            }),
                        );
                        events.push(Arc::new(event));
                        outcomes.push((w.reply, Ok(events.len() - 1)));
                        next += 1;
                    }
                    Err(e) => outcomes.push((w.reply, Err(e))),
                }
            }
        }

        if !events.is_empty() {
            let persisted = self.with_backend(|b| b.append(&events));
            if let Err(e) = persisted {
                tracing::warn!(error = %e, requests = outcomes.len(), "group commit failed");
                let msg = match e {
                    StoreError::Backend(m) => m,
                    other => other.to_string(),
                };
                for (reply, _) in outcomes {
                    let _ = reply.send(Err(StoreError::Backend(msg.clone())));
                }
                return;
            }
            self.shared.write().apply(&events);
            self.signal.publish();
        }
        for (reply, res) in outcomes {
            let res = res.map(|i| {
                let e = &events[i];
                Object {
                    key: e.key.clone(),
                    revision: e.revision,
                    value: e.value.clone(),
                    labels: e.labels.clone(),
                }
            });
            let _ = reply.send(res);
        }
    }

    fn compact(&mut self, revision: Revision) -> Result<(), StoreError> {
        let (target, dropped) = {
            let st = self.shared.read();
            let target = revision.min(st.current);
            if target <= st.compacted {
                return Ok(());
            }
            (target, st.compaction_drops(target))
        };
        self.with_backend(|b| b.compact(&dropped, target))?;
        self.shared.write().compact(target);
        tracing::debug!(revision = target, "compacted");
        Ok(())
    }

    /// Compacts early when the retained history exceeds either cap: more than
    /// `max_retained` revisions (with a slack of 1/64 of it), or more than
    /// `max_history_bytes` (down to 7/8 of it). The slack and the low-water mark keep a
    /// steady write load at one compaction transaction per many batches, not one per batch.
    fn auto_compact(&mut self) {
        let target = {
            let st = self.shared.read();
            let slack = self.max_retained / 64;
            let by_count = (st.current.saturating_sub(st.compacted)
                > self.max_retained.saturating_add(slack))
            .then(|| st.current - self.max_retained);
            let low_water = self.max_history_bytes - self.max_history_bytes / 8;
            let by_bytes = st.budget_compaction_target(self.max_history_bytes, low_water);
            by_count.max(by_bytes)
        };
        if let Some(target) = target
            && let Err(e) = self.compact(target)
        {
            tracing::warn!(error = %e, revision = target, "automatic compaction failed");
        }
    }
}

/// `first` and whatever is queued behind it, up to [`MAX_BATCH`] requests or, once
/// reached, [`MAX_BATCH_BYTES`]; the rest stays queued for the next batch.
fn fill_batch(first: Request, rx: &mut mpsc::Receiver<Request>, batch: &mut Vec<Request>) {
    let mut bytes = first.len();
    batch.push(first);
    while batch.len() < MAX_BATCH && bytes < MAX_BATCH_BYTES {
        match rx.try_recv() {
            Ok(r) => {
                bytes += r.len();
                batch.push(r);
            }
            Err(_) => break,
        }
    }
}

fn fail(req: Request, waiters: &mut Vec<oneshot::Sender<()>>) {
    match req {
        Request::Write(w) => {
            let _ = w.reply.send(Err(StoreError::Closed));
        }
        Request::Compact { reply, .. } => {
            let _ = reply.send(Err(StoreError::Closed));
        }
        Request::Shutdown { reply } => waiters.push(reply),
    }
}

/// Validates one write against the key's current live state and builds its event.
fn stage(key: &Arc<str>, cur: Option<Version>, op: Op, rev: Revision) -> Result<Event, StoreError> {
    let check = |expected: Option<Revision>| -> Result<Version, StoreError> {
        let live = cur.clone().ok_or_else(|| StoreError::NotFound {
            key: key.to_string(),
        })?;
        match expected {
            Some(expected) if expected != live.rev => Err(StoreError::Conflict {
                key: key.to_string(),
                expected,
                actual: live.rev,
            }),
            _ => Ok(live),
        }
    };
    let (kind, ((value, labels), derived), prev) = match op {
        Op::Create(encoded) => {
            if cur.is_some() {
                return Err(StoreError::AlreadyExists {
                    key: key.to_string(),
                });
            }
            (EventKind::Created, encoded.into_event_parts(rev), None)
        }
        Op::Update(encoded, expected) => {
            let prev = check(expected)?;
            (
                EventKind::Updated,
                encoded.into_event_parts(rev),
                Some(prev),
            )
        }
        Op::Delete(expected) => {
            let prev = check(expected)?;
            (
                EventKind::Deleted,
                (tombstone(&prev, rev)?, None),
                Some(prev),
            )
        }
    };
    Ok(Event {
        revision: rev,
        key: key.clone(),
        kind,
        value,
        labels,
        prev_labels: prev.as_ref().map(|p| p.labels.clone()).unwrap_or_default(),
        prev: prev.map(|p| p.value),
        derived: DerivedSlot::new(derived),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create_of(bytes: usize) -> Request {
        let mut value = serde_json::json!({"data": "x".repeat(bytes)});
        let encoded = Encoded::new(&mut value, None).expect("an object encodes");
        Request::Write(WriteReq {
            key: "/k".into(),
            op: Op::Create(encoded),
            reply: oneshot::channel().0,
        })
    }

    fn queued(requests: impl IntoIterator<Item = Request>) -> mpsc::Receiver<Request> {
        let (tx, rx) = mpsc::channel(MAX_BATCH * 2);
        for request in requests {
            assert!(tx.try_send(request).is_ok(), "the queue has room");
        }
        rx
    }

    #[test]
    fn a_batch_stops_once_it_holds_the_byte_limit() {
        let size = MAX_BATCH_BYTES / 4;
        let mut rx = queued((0..10).map(|_| create_of(size)));
        let mut batch = Vec::new();
        let first = rx.try_recv().expect("queued");
        fill_batch(first, &mut rx, &mut batch);
        // Four values just over a quarter of the limit each reach it; the rest wait.
        assert_eq!(batch.len(), 4);
        assert_eq!(rx.len(), 6);
    }

    #[test]
    fn a_value_over_the_byte_limit_is_a_batch_of_its_own() {
        let mut rx = queued([create_of(MAX_BATCH_BYTES), create_of(1)]);
        let mut batch = Vec::new();
        let first = rx.try_recv().expect("queued");
        fill_batch(first, &mut rx, &mut batch);
        assert_eq!(batch.len(), 1);
    }

    #[test]
    fn small_writes_batch_up_to_the_request_limit() {
        let mut rx = queued((0..MAX_BATCH + 5).map(|_| create_of(10)));
        let mut batch = Vec::new();
        let first = rx.try_recv().expect("queued");
        fill_batch(first, &mut rx, &mut batch);
        assert_eq!(batch.len(), MAX_BATCH);
    }

    #[test]
    fn encoding_leaves_the_bytes_serde_json_writes_with_the_revision() {
        let mut value = serde_json::json!({
            "apiVersion": "v1",
            "metadata": {"name": "a", "labels": {"app": "x"}, "resourceVersion": "9", "z": {"resourceVersion": "n"}},
            "data": {"resourceVersion": "\"quoted\"", "k": [1, 2.5, null, true]},
        });
        let mut expected = value.clone();
        expected["metadata"]["resourceVersion"] = Value::from("42");
        let (bytes, labels) = Encoded::new(&mut value, None)
            .expect("encodes")
            .at_revision(42);
        assert_eq!(bytes, serde_json::to_vec(&expected).expect("serializes"));
        assert_eq!(labels.get("app"), Some("x"));
        let bare = Encoded::new(&mut serde_json::json!({"a": 1}), None).expect("encodes");
        let (bytes, _) = bare.at_revision(7);
        assert_eq!(&bytes[..], br#"{"a":1,"metadata":{"resourceVersion":"7"}}"#);
    }

    #[test]
    fn a_value_nesting_deeper_than_the_limit_is_refused() {
        // A value of `depth` levels of objects and arrays.
        let nested = |depth: usize| {
            (0..depth).fold(serde_json::json!(1), |inner, level| {
                if level % 2 == 0 {
                    serde_json::json!([inner])
                } else {
                    serde_json::json!({ "a": inner })
                }
            })
        };
        // Objects of `levels` in all: under `spec` (the root is one level), and under
        // `metadata.annotations` (three), which the encoding writes on its own.
        let objects = |levels: usize| {
            [
                serde_json::json!({"metadata": {"name": "n"}, "spec": nested(levels - 1)}),
                serde_json::json!({"metadata": {"annotations": {"x": nested(levels - 3)}}}),
            ]
        };
        for mut deepest in objects(MAX_DEPTH) {
            let encoded = Encoded::new(&mut deepest, None).expect("at the limit");
            let (bytes, _) = encoded.at_revision(2);
            assert!(serde_json::from_slice::<Value>(&bytes).is_ok());
        }
        for mut deeper in objects(MAX_DEPTH + 1) {
            assert!(matches!(
                Encoded::new(&mut deeper, None),
                Err(StoreError::TooDeep)
            ));
        }
    }

    #[test]
    fn a_tombstone_is_the_stored_bytes_as_encoding_them_again_gives() {
        let mut value = serde_json::json!({
            "apiVersion": "v1",
            "data": {"metadata": {"resourceVersion": "1"}, "k": "\"}"},
            "metadata": {"name": "a", "labels": {"app": "x"}, "managedFields": [{"f:data": {}}]},
            "spec": {"list": [{"a": [1, {"b": "]"}]}, -2.5e3, false]},
        });
        let (stored, labels) = Encoded::new(&mut value.clone(), None)
            .expect("encodes")
            .at_revision(41);
        let prev = Version {
            rev: 41,
            value: stored,
            labels,
            deleted: false,
        };
        let (again, _) = Encoded::new(&mut value, None)
            .expect("encodes")
            .at_revision(1000);
        let (spliced, labels) = tombstone(&prev, 1000).expect("a tombstone");
        assert_eq!(spliced, again);
        assert_eq!(labels.get("app"), Some("x"));
    }
}
