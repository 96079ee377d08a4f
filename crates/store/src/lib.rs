//! `steady-store`: the storage layer of steady, modelled on kine (the
//! SQL-backed etcd shim of k3s).
//!
//! # What it owns
//!
//! - The global revision counter, which becomes Kubernetes
//!   `metadata.resourceVersion`. An empty store is at revision 1; the first
//!   write gets revision 2 (mirrors etcd and keeps "0" distinct).
//! - The multi-version map of JSON objects by string key: reads (`get`,
//!   `list`) are consistent snapshots at any retained revision.
//! - The write path: one writer with group commit (a thread of its own for
//!   SQLite, a task for the in-memory backend). Every mutation is
//!   queued to it; it drains the queue into a batch, validates each request in
//!   order (seeing the effects of earlier requests in the batch), assigns
//!   consecutive revisions, persists the batch in one transaction, and only
//!   then applies it to memory, notifies watchers and replies.
//! - Durability (SQLite backend, WAL, `synchronous=FULL` by default) or none
//!   (in-memory backend, which never uses threads so a deterministic
//!   simulator can drive it on a current-thread runtime with a paused clock).
//! - Compaction (explicit, periodic like kube-apiserver, and by caps on
//!   retained revisions and on the bytes of retained history), which also
//!   returns the freed space of the SQLite file to the file system.
//! - In-memory fan-out of committed events to watchers.
//!
//! # What it must not know
//!
//! Kubernetes kinds, API semantics, HTTP. The only things it knows about the
//! values are that they are JSON objects whose `metadata.resourceVersion` it
//! sets (as a decimal string) to the revision of the write, and whose
//! `metadata.labels` it decodes once per write so that readers can select by
//! label without decoding objects.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use steady_store::{ListOptions, Store, StoreOptions};
//! let store = Store::in_memory(StoreOptions::default()).await.unwrap();
//! let obj = store.create("/pods/default/a", serde_json::json!({"metadata": {"name": "a"}})).await.unwrap();
//! assert_eq!(obj.revision, 2);
//! let page = store.list("/pods/", &ListOptions::default(), &|_| true).unwrap();
//! assert_eq!(page.items.len(), 1);
//! store.shutdown().await;
//! # });
//! ```

mod backend;
mod follow;
pub mod json;
mod labels;
mod metadata;
mod revision_bytes;
mod state;
mod watcher;
mod writer;

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use backend::{Backend, MemoryBackend, SqliteBackend};
use state::State;
use writer::{Encoded, Op, Request, WriteReq, Writer};

pub use follow::{Change, ChangeKind, Filter, Follow, Followed, Snapshot};
pub use labels::Labels;
pub use metadata::metadata_of;
pub use revision_bytes::revision_in;
pub use watcher::Watcher;

/// A global, strictly increasing revision (Kubernetes `resourceVersion`).
pub type Revision = u64;

/// Default [`StoreOptions::max_history_bytes`]: 256 MiB. etcd's default quota is
/// 2 GiB for the whole database and kube-apiserver's watch cache keeps a number of
/// events per resource (sized to about 75 s of history), not bytes. An eighth of etcd's quota still
/// keeps more than 170 revisions of objects at etcd's 1.5 MiB request limit, and many
/// minutes of history under an ordinary write load, while a client in a write loop can
/// no longer grow memory without bound before the 5-minute compaction.
pub const DEFAULT_MAX_HISTORY_BYTES: u64 = 256 * 1024 * 1024;

/// Capacity of the request queue in front of the writer task.
const QUEUE_CAPACITY: usize = 4096;

/// A stored version of one object: `value` is compact JSON bytes whose
/// `metadata.resourceVersion == revision.to_string()`.
#[derive(Clone, Debug)]
pub struct Object {
    pub key: Arc<str>,
    pub revision: Revision,
    pub value: Bytes,
    /// `metadata.labels` of `value`, decoded when it was written.
    pub labels: Labels,
}

/// The kind of a committed change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Created,
    Updated,
    Deleted,
}

/// One committed change. For `Deleted`, `value` is the object's last state
/// re-encoded with `resourceVersion` = the delete's revision.
#[derive(Debug)]
pub struct Event {
    pub revision: Revision,
    pub key: Arc<str>,
    pub kind: EventKind,
    pub value: Bytes,
    /// `metadata.labels` of `value`.
    pub labels: Labels,
    /// Previous state (None on create).
    pub prev: Option<Bytes>,
    /// `metadata.labels` of `prev` (empty on create): a label-selector watch tells from
    /// them whether an update moved the object into or out of its set, without decoding
    /// `prev`.
    pub prev_labels: Labels,
    /// What the writer derived from `value` before it was encoded, when it passed
    /// something ([`Store::create_derived`], [`Store::update_derived`]): a follower that
    /// would decode `value` for it reads it here instead. Only in events of this process's
    /// own writes; never on a delete, nor in events replayed from disk; and only while the
    /// event is among the newest [`DERIVED_WINDOW`] (see [`DerivedSlot`]).
    pub derived: DerivedSlot,
}

/// How many of the newest events keep what their writer derived. Followers read an event
/// as it is committed, while the history keeps events until compaction (often hundreds of
/// thousands of them): kept for all of them, the derived values would cost more memory than
/// the history's bytes. A follower further behind decodes the bytes, as without them.
pub const DERIVED_WINDOW: usize = 1024;

/// An event's derived value, dropped by the store once the event leaves the newest
/// [`DERIVED_WINDOW`].
#[derive(Default)]
pub struct DerivedSlot(Mutex<Option<Derived>>);

impl DerivedSlot {
    /// A slot holding what the writer derived (`None`: nothing).
    pub fn new(derived: Option<Derived>) -> DerivedSlot {
        DerivedSlot(Mutex::new(derived))
    }

    /// The derived value, if the writer passed one and the event is still recent.
    pub fn get(&self) -> Option<Derived> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn expire(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

impl std::fmt::Debug for DerivedSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.get().is_some() {
            "Some(Derived(..))"
        } else {
            "None"
        })
    }
}

/// Anything a writer derived from a value and its followers would otherwise decode again;
/// the store only carries it.
#[derive(Clone)]
pub struct Derived(pub Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Derived(..)")
    }
}

/// Errors returned by the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("key {key:?} already exists")]
    AlreadyExists { key: String },
    #[error("key {key:?} not found")]
    NotFound { key: String },
    #[error("conflict on key {key:?}: expected revision {expected}, current revision is {actual}")]
    Conflict {
        key: String,
        expected: Revision,
        actual: Revision,
    },
    #[error("revision {requested} has been compacted (compacted revision is {compacted})")]
    Expired {
        requested: Revision,
        compacted: Revision,
    },
    #[error("revision {requested} is in the future (current revision is {current})")]
    TooLarge {
        requested: Revision,
        current: Revision,
    },
    #[error("invalid value: {0}")]
    InvalidValue(String),
    #[error("value nests more than {MAX_DEPTH} levels of objects and arrays")]
    TooDeep,
    #[error("storage backend error: {0}")]
    Backend(String),
    #[error("store is closed")]
    Closed,
}

/// The most levels of objects and arrays a stored value may nest: serde_json reads back no
/// more than 128, and the store must read back every value it holds. Deeper values are
/// refused ([`StoreError::TooDeep`]).
pub const MAX_DEPTH: usize = 100;

/// Store configuration.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Every tick, compact to the revision that was current at the previous
    /// tick (like kube-apiserver). `None` disables periodic compaction.
    pub compaction_interval: Option<Duration>,
    /// After a batch, if `current - compacted` exceeds
    /// `max_retained_revisions` (plus a slack of 1/64 of it), compact to
    /// `current - max_retained_revisions`.
    pub max_retained_revisions: u64,
    /// After a batch, if the retained history (every version that is not the
    /// current one of its key, plus a small per-revision overhead; see
    /// [`Store::history_bytes`]) exceeds this many bytes, compact to the oldest
    /// revision that brings it down to 7/8 of it. Reads and watches below that
    /// revision answer `Expired`.
    pub max_history_bytes: u64,
    /// SQLite `synchronous=FULL` (fsync per group commit) when true, `NORMAL`
    /// otherwise. Ignored by the in-memory backend.
    pub durable: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            compaction_interval: Some(Duration::from_secs(5 * 60)),
            max_retained_revisions: 200_000,
            max_history_bytes: DEFAULT_MAX_HISTORY_BYTES,
            durable: true,
        }
    }
}

/// Options for [`Store::list`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ListOptions<'a> {
    /// `None` = current revision; `Some(r)` = consistent snapshot at `r`
    /// (`Expired` if `r < compacted`, `TooLarge` if `r > current`).
    pub at: Option<Revision>,
    /// Exclusive key to resume after (continue tokens).
    pub start_after: Option<&'a str>,
    /// Max items returned (after filtering). `Some(0)` means no limit.
    pub limit: Option<usize>,
}

impl ListOptions<'_> {
    /// The whole list as of `revision`: a consistent snapshot, unpaged.
    pub fn at(revision: Revision) -> Self {
        ListOptions {
            at: Some(revision),
            ..Default::default()
        }
    }
}

/// One page of a list.
#[derive(Clone, Debug)]
pub struct ListPage {
    /// The snapshot revision.
    pub revision: Revision,
    /// Matching live objects in key order.
    pub items: Vec<Object>,
    /// `Some(last returned key)` iff more matching items remain.
    pub next_key: Option<Arc<str>>,
}

/// State shared by the store handles, the writer task and watchers.
pub(crate) struct Shared {
    state: RwLock<State>,
}

impl Shared {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

struct Inner {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Request>,
    signal: Arc<watcher::Signal>,
    ticker: Option<AbortHandle>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(t) = &self.ticker {
            t.abort();
        }
    }
}

/// What a store holds at one revision, from [`Store::image`]. Cheap to clone: the values
/// are shared.
#[derive(Clone, Debug)]
pub struct Image {
    records: Vec<state::Record>,
    compacted: Revision,
}

/// A handle to the store. Cheap to clone; the writer stops when the last
/// handle is dropped or [`Store::shutdown`] is called.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.inner.shared.read();
        f.debug_struct("Store")
            .field("revision", &st.current)
            .field("compacted", &st.compacted)
            .field("keys", &st.objects.len())
            .field("events", &st.events.len())
            .finish()
    }
}

impl Store {
    /// A store without persistence. Uses no threads (only `tokio::spawn` and
    /// `tokio::time`), so it runs under a paused-clock current-thread runtime.
    pub async fn in_memory(opts: StoreOptions) -> Result<Store, StoreError> {
        let mut backend = MemoryBackend;
        let loaded = backend.load()?;
        Self::start(Box::new(backend), loaded, opts)
    }

    /// A store without persistence that starts as `image` (see [`Store::image`]): its
    /// objects, history and revision.
    pub async fn in_memory_from(image: &Image, opts: StoreOptions) -> Result<Store, StoreError> {
        let loaded = backend::Loaded {
            records: image.records.clone(),
            compacted: image.compacted,
        };
        Self::start(Box::new(MemoryBackend), loaded, opts)
    }

    /// Everything this store holds now, to start in-memory stores from
    /// ([`Store::in_memory_from`]): for instance, many simulated clusters from one that
    /// was bootstrapped once.
    pub fn image(&self) -> Image {
        let st = self.inner.shared.read();
        Image {
            records: st.records(),
            compacted: st.compacted,
        }
    }

    /// A store persisted in a SQLite database at `path` (created together with
    /// its parent directories if missing). Existing contents are loaded and
    /// revisions continue increasing after a restart.
    pub async fn sqlite(path: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        let path = path.to_path_buf();
        let durable = opts.durable;
        let (backend, loaded) = tokio::task::spawn_blocking(move || {
            let mut backend = SqliteBackend::open(&path, durable)?;
            let loaded = backend.load()?;
            Ok::<_, StoreError>((backend, loaded))
        })
        .await
        .map_err(|e| StoreError::Backend(format!("open task failed: {e}")))??;
        Self::start(Box::new(backend), loaded, opts)
    }

    fn start(
        backend: Box<dyn Backend>,
        loaded: backend::Loaded,
        opts: StoreOptions,
    ) -> Result<Store, StoreError> {
        let st = State::from_records(loaded.records, loaded.compacted);
        let current = st.current;
        tracing::debug!(
            revision = current,
            compacted = st.compacted,
            keys = st.objects.len(),
            "store opened"
        );
        let shared = Arc::new(Shared {
            state: RwLock::new(st),
        });
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let signal = Arc::new(watcher::Signal::default());
        let writer = Writer {
            backend: Some(backend),
            shared: shared.clone(),
            signal: signal.clone(),
            max_retained: opts.max_retained_revisions,
            max_history_bytes: opts.max_history_bytes,
        };
        writer.spawn(rx)?;
        let ticker = opts.compaction_interval.map(|period| {
            tokio::spawn(periodic_compaction(period, tx.downgrade(), shared.clone())).abort_handle()
        });
        Ok(Store {
            inner: Arc::new(Inner {
                shared,
                tx,
                signal,
                ticker,
            }),
        })
    }

    /// Current (latest committed) revision.
    pub fn revision(&self) -> Revision {
        self.inner.shared.read().current
    }

    /// Bytes of retained history: the values of every version that only a read or
    /// watch at an old revision can reach (superseded versions and tombstones), plus a
    /// small overhead per retained revision. Bounded by
    /// [`StoreOptions::max_history_bytes`] after each batch.
    pub fn history_bytes(&self) -> u64 {
        self.inner.shared.read().history_bytes
    }

    /// Revisions at or below this one can no longer be read or watched.
    pub fn compacted_revision(&self) -> Revision {
        self.inner.shared.read().compacted
    }

    async fn write(&self, key: &str, op: Op) -> Result<Object, StoreError> {
        if key.is_empty() {
            return Err(StoreError::InvalidValue("key must not be empty".into()));
        }
        let (reply, rx) = oneshot::channel();
        let req = Request::Write(WriteReq {
            key: key.to_owned(),
            op,
            reply,
        });
        self.inner
            .tx
            .send(req)
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.unwrap_or(Err(StoreError::Closed))
    }

    /// Creates `key`; `AlreadyExists` if it is live.
    pub async fn create(
        &self,
        key: &str,
        mut value: serde_json::Value,
    ) -> Result<Object, StoreError> {
        self.create_derived(key, &mut value, None).await
    }

    /// [`create`](Self::create), its event carrying `derived` (see [`Event::derived`]).
    /// On success `value` is left as stored (see [`Self::update_derived`]).
    pub async fn create_derived(
        &self,
        key: &str,
        value: &mut serde_json::Value,
        derived: Option<Derived>,
    ) -> Result<Object, StoreError> {
        let encoded = Encoded::new(value, derived)?;
        let created = self.write(key, Op::Create(encoded)).await?;
        set_resource_version(value, created.revision);
        Ok(created)
    }

    /// Replaces `key`; `NotFound` if it is not live, `Conflict` if `expected`
    /// is given and differs from its current revision.
    pub async fn update(
        &self,
        key: &str,
        mut value: serde_json::Value,
        expected: Option<Revision>,
    ) -> Result<Object, StoreError> {
        self.update_derived(key, &mut value, expected, None).await
    }

    /// [`update`](Self::update), its event carrying `derived` (see [`Event::derived`]).
    ///
    /// On success `value` is left as stored: it equals the stored bytes decoded, its
    /// `metadata.resourceVersion` the write's revision. A caller that keeps objects
    /// decoded keeps it instead of parsing the bytes again. On error its
    /// `resourceVersion` is empty.
    pub async fn update_derived(
        &self,
        key: &str,
        value: &mut serde_json::Value,
        expected: Option<Revision>,
        derived: Option<Derived>,
    ) -> Result<Object, StoreError> {
        let encoded = Encoded::new(value, derived)?;
        let updated = self.write(key, Op::Update(encoded, expected)).await?;
        set_resource_version(value, updated.revision);
        Ok(updated)
    }

    /// Deletes `key`, returning the tombstone (last state with
    /// `resourceVersion` = the delete's revision).
    pub async fn delete(
        &self,
        key: &str,
        expected: Option<Revision>,
    ) -> Result<Object, StoreError> {
        self.write(key, Op::Delete(expected)).await
    }

    /// The live version of `key` at `at` (default: current revision).
    pub fn get(&self, key: &str, at: Option<Revision>) -> Result<Option<Object>, StoreError> {
        self.inner.shared.read().get(key, at)
    }

    /// Live objects whose key starts with `prefix`, in key order, at a
    /// consistent snapshot, filtered by `filter`.
    pub fn list(
        &self,
        prefix: &str,
        opts: &ListOptions<'_>,
        filter: &dyn Fn(&Object) -> bool,
    ) -> Result<ListPage, StoreError> {
        self.inner.shared.read().list(prefix, opts, filter)
    }

    /// Events with revision > `after` whose key starts with `prefix`.
    /// `Expired` if `after < compacted`.
    pub fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError> {
        let st = self.inner.shared.read();
        if after < st.compacted {
            return Err(StoreError::Expired {
                requested: after,
                compacted: st.compacted,
            });
        }
        if st.closed {
            return Err(StoreError::Closed);
        }
        Ok(Watcher {
            shared: self.inner.shared.clone(),
            prefix: prefix.into(),
            seen: after,
            buf: Default::default(),
            signal: self.inner.signal.clone(),
            version: 0,
            done: false,
            closed: false,
        })
    }

    /// Compacts to `revision` (clamped to the current revision). Idempotent;
    /// ordered with writes because it goes through the writer.
    pub async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Request::Compact { revision, reply })
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.unwrap_or(Err(StoreError::Closed))
    }

    /// Flushes queued writes and stops the writer. Later writes fail with
    /// `Closed`; watchers end (`next()` returns `None`) after draining.
    pub async fn shutdown(&self) {
        if let Some(t) = &self.inner.ticker {
            t.abort();
        }
        let (reply, rx) = oneshot::channel();
        if self
            .inner
            .tx
            .send(Request::Shutdown { reply })
            .await
            .is_ok()
        {
            let _ = rx.await;
        }
    }
}

/// Every `period`, compact to the revision that was current at the previous
/// tick. Stops when the store is dropped or shut down.
async fn periodic_compaction(period: Duration, tx: mpsc::WeakSender<Request>, shared: Arc<Shared>) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval.tick().await;
    let mut prev = shared.read().current;
    loop {
        interval.tick().await;
        let Some(tx) = tx.upgrade() else { return };
        let (reply, rx) = oneshot::channel();
        if tx
            .send(Request::Compact {
                revision: prev,
                reply,
            })
            .await
            .is_err()
        {
            return;
        }
        drop(tx);
        match rx.await {
            Ok(Ok(())) => {}
            Ok(Err(StoreError::Closed)) | Err(_) => return,
            Ok(Err(e)) => tracing::warn!(error = %e, revision = prev, "periodic compaction failed"),
        }
        prev = shared.read().current;
    }
}

/// What the writer does to the bytes, done to the value they were encoded from
/// ([`Encoded::new`] left its `resourceVersion` empty).
fn set_resource_version(value: &mut serde_json::Value, revision: Revision) {
    if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.insert(
            "resourceVersion".into(),
            serde_json::Value::String(revision.to_string()),
        );
    }
}
