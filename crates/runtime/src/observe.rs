//! What the loop did, as data: a record per reconcile (key, triggers, start, duration,
//! outcome, the writes it made) and the controller's state (queue, in flight, backoff,
//! watches, leadership), for live views, narrations and tests.
//!
//! A [`Recorder`] given to [`crate::Controller::with_recorder`] receives them. It keeps
//! everything bounded: a broadcast of [`Observed`] events (a subscriber that falls behind
//! is told it lagged and should take a fresh [`Recorder::history`]), the last
//! [`HISTORY_PER_KEY`] reconciles of at most [`HISTORY_KEYS`] keys, and the latest
//! [`ControllerState`]. One recorder may outlive several runs of a controller (a stop
//! and restart), so the history spans them. A recorder made with
//! [`Recorder::with_start_hook`] also calls a function as each reconcile starts, before it
//! runs, on the controller's task (the simulator traces reconciles this way, in order).
//!
//! Writes are known because the reconciler makes them through [`crate::Context::api`]:
//! each successful call of a [`crate::CachingApi`] is added to the record of the reconcile
//! that made it (a task-local scope around the reconcile future). Writes through a plain
//! `kube::Api` are invisible here.
//!
//! Must not know: how the records are shown (the UI, `steady demo`).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{broadcast, watch};

use crate::inputs::Written;
use crate::object_cache::ObjectKey;
use crate::queue::Trigger;

/// Reconciles kept per key.
pub const HISTORY_PER_KEY: usize = 32;
/// Keys whose history is kept; the key reconciled least recently is dropped first.
pub const HISTORY_KEYS: usize = 512;
/// Events a subscriber may fall behind before it is told it lagged.
const BROADCAST_CAPACITY: usize = 1024;

/// One reconcile: filled in as it starts, completed when it ends.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileRecord {
    /// Increasing over the recorder's life (across controller restarts).
    pub id: u64,
    /// The controller's name ([`crate::Config::name`]).
    pub controller: String,
    /// The primary object's key (`namespace/name`).
    pub key: String,
    /// Why it ran.
    pub triggers: Vec<Trigger>,
    /// Wall-clock start.
    #[serde(serialize_with = "rfc3339")]
    pub started_at: DateTime<Utc>,
    /// How long it took; `None` while it runs.
    pub duration_ms: Option<f64>,
    /// How it ended; `None` while it runs.
    pub outcome: Option<Outcome>,
    /// What it wrote through [`crate::Context::api`], in order.
    pub writes: Vec<Write>,
}

/// How a reconcile ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Outcome {
    /// Done until something changes.
    Ok,
    /// Done, and asked to run again after a delay.
    #[serde(rename_all = "camelCase")]
    Requeue {
        /// The delay asked for.
        after_ms: f64,
    },
    /// Failed (an error or a panic); retried after a backoff delay.
    #[serde(rename_all = "camelCase")]
    Error {
        /// The error's message.
        message: String,
        /// The backoff delay chosen.
        retry_after_ms: f64,
        /// Which retry comes next (1 for the first).
        attempt: u32,
    },
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WriteVerb {
    /// Created the object.
    Created,
    /// Replaced the whole object.
    Replaced,
    /// Patched the object.
    Patched,
    /// Patched the object's status.
    PatchedStatus,
    /// Replaced the object's status.
    ReplacedStatus,
    /// Deleted the object (it may still be terminating).
    Deleted,
}

/// One successful write of a reconcile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Write {
    /// What it did.
    pub verb: WriteVerb,
    /// The object's kind.
    pub kind: String,
    /// The object's key (`namespace/name`).
    pub object: String,
}

impl std::fmt::Display for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = self.kind.to_lowercase();
        let name = self.object.rsplit('/').next().unwrap_or(&self.object);
        match self.verb {
            WriteVerb::Created => write!(f, "created {kind} {name}"),
            WriteVerb::Replaced => write!(f, "replaced {kind} {name}"),
            WriteVerb::Patched => write!(f, "patched {kind} {name}"),
            WriteVerb::PatchedStatus => write!(f, "patched status of {kind} {name}"),
            WriteVerb::ReplacedStatus => write!(f, "replaced status of {kind} {name}"),
            WriteVerb::Deleted => write!(f, "deleted {kind} {name}"),
        }
    }
}

/// Where a kind's watch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WatchPhase {
    /// The first list.
    Listing,
    /// Following changes.
    Watching,
    /// Listing again (after a 410 Expired or a failure).
    Relisting,
    /// Failed; waiting before retrying.
    BackingOff,
}

/// How the controller relates to a watched kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// The reconciled kind.
    Primary,
    /// Objects the primary controls (ownerReferences).
    Owned,
    /// Related objects mapped to primaries by a function.
    Watched,
}

/// A kind the controller watches, with what a client needs to list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchedKind {
    /// How the controller uses it.
    pub role: Role,
    /// API group (`""` for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Resource name in URLs.
    pub plural: String,
    /// The namespace watched; `None` for all (or cluster-scoped).
    pub namespace: Option<String>,
    /// Where its watch is.
    pub phase: WatchPhase,
}

/// A key waiting to retry after a failed reconcile.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// The retry's number (1 for the first).
    pub attempt: u32,
    /// When it runs.
    #[serde(serialize_with = "rfc3339")]
    pub at: DateTime<Utc>,
}

/// The controller as a whole, as of its latest loop turn.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerState {
    /// The controller's name.
    pub name: String,
    /// Running (between the start and the end of `Controller::run`).
    pub running: bool,
    /// Leading (`Some(true)`), following (`Some(false)`), or no election (`None`).
    pub leader: Option<bool>,
    /// Every watch's caches have synced (it reconciles).
    pub synced: bool,
    /// Keys ready to run.
    pub queue_depth: usize,
    /// Reconciles running.
    pub in_flight: usize,
    /// Keys in backoff, by key.
    pub backoff: BTreeMap<String, Retry>,
    /// The watched kinds, primary first.
    pub kinds: Vec<WatchedKind>,
}

/// An event for subscribers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", content = "record", rename_all = "camelCase")]
pub enum Observed {
    /// A reconcile started (no duration or outcome yet).
    Started(ReconcileRecord),
    /// A reconcile ended.
    Finished(ReconcileRecord),
}

impl Observed {
    /// The record, started or finished.
    pub fn record(&self) -> &ReconcileRecord {
        match self {
            Observed::Started(record) | Observed::Finished(record) => record,
        }
    }
}

#[derive(Default)]
struct History {
    next_id: u64,
    by_key: BTreeMap<String, VecDeque<ReconcileRecord>>,
}

impl History {
    fn upsert(&mut self, record: &ReconcileRecord) {
        if !self.by_key.contains_key(&record.key) && self.by_key.len() >= HISTORY_KEYS {
            self.evict_stalest();
        }
        let ring = self.by_key.entry(record.key.clone()).or_default();
        match ring.iter_mut().rev().find(|r| r.id == record.id) {
            Some(existing) => *existing = record.clone(),
            None => {
                if ring.len() >= HISTORY_PER_KEY {
                    ring.pop_front();
                }
                ring.push_back(record.clone());
            }
        }
    }

    fn evict_stalest(&mut self) {
        let stalest = self
            .by_key
            .iter()
            .min_by_key(|(_, ring)| ring.back().map_or(0, |r| r.id))
            .map(|(key, _)| key.clone());
        if let Some(key) = stalest {
            self.by_key.remove(&key);
        }
    }
}

/// Called with a reconcile's record as it starts (see [`Recorder::with_start_hook`]).
pub type StartHook = Arc<dyn Fn(&ReconcileRecord) + Send + Sync>;

struct Shared {
    events: broadcast::Sender<Observed>,
    history: Mutex<History>,
    state: watch::Sender<ControllerState>,
    start_hook: Option<StartHook>,
}

/// Receives what controllers do; cheap to clone (all clones share one history).
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            shared: Arc::new(Shared {
                events: broadcast::channel(BROADCAST_CAPACITY).0,
                history: Mutex::default(),
                state: watch::channel(ControllerState::default()).0,
                start_hook: None,
            }),
        }
    }
}

impl Recorder {
    /// A recorder with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder that also calls `hook` with each reconcile's record as it starts:
    /// synchronously, before the reconcile runs, so what the hook records is in place
    /// when the reconciler looks (the simulator's trace, a test's last triggers).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use steady_runtime::observe::Recorder;
    /// let started = Arc::new(Mutex::new(Vec::new()));
    /// let seen = started.clone();
    /// let recorder = Recorder::with_start_hook(Arc::new(move |record| {
    ///     seen.lock().unwrap().push(record.key.clone());
    /// }));
    /// # drop(recorder);
    /// ```
    pub fn with_start_hook(hook: StartHook) -> Self {
        Recorder {
            shared: Arc::new(Shared {
                events: broadcast::channel(BROADCAST_CAPACITY).0,
                history: Mutex::default(),
                state: watch::channel(ControllerState::default()).0,
                start_hook: Some(hook),
            }),
        }
    }

    /// Events from now on. Subscribe before reading [`history`](Self::history), and
    /// merge by record id: nothing falls between the two.
    pub fn subscribe(&self) -> broadcast::Receiver<Observed> {
        self.shared.events.subscribe()
    }

    /// The kept reconciles of every key, oldest first.
    pub fn history(&self) -> Vec<ReconcileRecord> {
        let Ok(history) = self.shared.history.lock() else {
            return Vec::new();
        };
        let mut all: Vec<ReconcileRecord> = history.by_key.values().flatten().cloned().collect();
        all.sort_by_key(|r| r.id);
        all
    }

    /// The controller's latest state, and its changes.
    pub fn state(&self) -> watch::Receiver<ControllerState> {
        self.shared.state.subscribe()
    }

    /// A new record for a reconcile of `key` starting now.
    pub(crate) fn start(
        &self,
        controller: &str,
        key: &ObjectKey,
        triggers: &[Trigger],
    ) -> ReconcileRecord {
        let id = match self.shared.history.lock() {
            Ok(mut history) => {
                history.next_id += 1;
                history.next_id
            }
            Err(_) => 0,
        };
        let record = ReconcileRecord {
            id,
            controller: controller.to_string(),
            key: key.to_string(),
            triggers: triggers.to_vec(),
            started_at: Utc::now(),
            duration_ms: None,
            outcome: None,
            writes: Vec::new(),
        };
        if let Some(hook) = &self.shared.start_hook {
            hook(&record);
        }
        self.publish(Observed::Started(record.clone()));
        record
    }

    /// `record` ended after `elapsed` with `outcome`.
    pub(crate) fn finish(&self, mut record: ReconcileRecord, elapsed: Duration, outcome: Outcome) {
        record.duration_ms = Some(elapsed.as_secs_f64() * 1000.0);
        record.outcome = Some(outcome);
        self.publish(Observed::Finished(record));
    }

    fn publish(&self, event: Observed) {
        if let Ok(mut history) = self.shared.history.lock() {
            history.upsert(event.record());
        }
        // No subscriber is fine: the history keeps it.
        let _ = self.shared.events.send(event);
    }

    /// Change the controller state; `change` says whether it did, and subscribers wake
    /// only if so (no copy to compare: the state holds every key in backoff).
    pub(crate) fn update_state(&self, change: impl FnOnce(&mut ControllerState) -> bool) {
        self.shared.state.send_if_modified(change);
    }
}

fn rfc3339<S: serde::Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

tokio::task_local! {
    static WRITES: RefCell<ReconcileWrites>;
}

/// What a reconcile wrote: as its record shows it, and the states the server returned.
#[derive(Debug, Default)]
pub(crate) struct ReconcileWrites {
    pub(crate) record: Vec<Write>,
    pub(crate) versions: Vec<Written>,
}

/// Run `future`, collecting the writes [`record_write`] sees inside it.
pub(crate) async fn collect_writes<F: Future>(future: F) -> (F::Output, ReconcileWrites) {
    WRITES
        .scope(RefCell::new(ReconcileWrites::default()), async move {
            let output = future.await;
            let writes = WRITES.with(|writes| writes.take());
            (output, writes)
        })
        .await
}

/// Add a write to the record of the reconcile running on this task, if any.
pub(crate) fn record_write(verb: WriteVerb, kind: &str, object: ObjectKey) {
    let _ = WRITES.try_with(|writes| {
        writes.borrow_mut().record.push(Write {
            verb,
            kind: kind.to_string(),
            object: object.to_string(),
        })
    });
}

/// Note, for the reconcile running on this task if any, how one of its writes left the
/// cache (see [`Written`]).
pub(crate) fn record_written(written: Written) {
    let _ = WRITES.try_with(|writes| writes.borrow_mut().versions.push(written));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(Some("default"), name)
    }

    #[test]
    fn history_keeps_the_last_records_of_each_key_and_updates_in_place() {
        let recorder = Recorder::new();
        for _ in 0..HISTORY_PER_KEY + 5 {
            let record = recorder.start("c", &key("a"), &[Trigger::Primary]);
            recorder.finish(record, Duration::from_millis(2), Outcome::Ok);
        }
        let history = recorder.history();
        assert_eq!(history.len(), HISTORY_PER_KEY);
        assert_eq!(history.first().map(|r| r.id), Some(6));
        assert!(history.iter().all(|r| r.outcome == Some(Outcome::Ok)));
    }

    #[test]
    fn history_drops_the_key_reconciled_least_recently() {
        let recorder = Recorder::new();
        for n in 0..=HISTORY_KEYS {
            recorder.start("c", &key(&format!("k{n}")), &[Trigger::Resync]);
        }
        let history = recorder.history();
        assert_eq!(history.len(), HISTORY_KEYS);
        assert!(history.iter().all(|r| r.key != "default/k0"));
    }

    #[tokio::test]
    async fn writes_are_collected_only_inside_the_scope() {
        record_write(WriteVerb::Created, "Pod", key("outside"));
        record_written(Written::gone("Pod", key("outside")));
        let ((), writes) = collect_writes(async {
            record_write(WriteVerb::Created, "Pod", key("demo-1"));
            tokio::task::yield_now().await;
            record_write(WriteVerb::PatchedStatus, "Cache", key("demo"));
            record_written(Written::gone("Pod", key("demo-0")));
        })
        .await;
        let said: Vec<String> = writes.record.iter().map(ToString::to_string).collect();
        assert_eq!(said, ["created pod demo-1", "patched status of cache demo"]);
        let keys: Vec<&ObjectKey> = writes.versions.iter().map(|w| &w.key).collect();
        assert_eq!(keys, [&key("demo-0")]);
    }

    #[test]
    fn the_start_hook_sees_each_record_before_the_reconcile_runs() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hook_seen = seen.clone();
        let recorder = Recorder::with_start_hook(Arc::new(move |record: &ReconcileRecord| {
            if let Ok(mut seen) = hook_seen.lock() {
                seen.push((
                    record.key.clone(),
                    record.triggers.clone(),
                    record.outcome.clone(),
                ));
            }
        }));
        let record = recorder.start("c", &key("a"), &[Trigger::Primary, Trigger::Resync]);
        recorder.finish(record, Duration::from_millis(1), Outcome::Ok);
        let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(
            seen,
            [(
                "default/a".to_string(),
                vec![Trigger::Primary, Trigger::Resync],
                None
            )]
        );
    }

    #[test]
    fn unchanged_state_wakes_nobody() {
        let recorder = Recorder::new();
        let mut state = recorder.state();
        state.mark_unchanged();
        recorder.update_state(|_| false);
        assert!(!state.has_changed().unwrap_or(true));
        recorder.update_state(|s| {
            s.queue_depth = 3;
            true
        });
        assert!(state.has_changed().unwrap_or(false));
    }
}
