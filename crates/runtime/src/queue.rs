//! The work queue: client-go `workqueue` semantics, plus priority lanes and trigger reasons.
//!
//! Guarantees (the same as client-go's rate-limiting work queue):
//! * **dedup** — a key is queued at most once; adding it again merges the new trigger.
//! * **per-key exclusivity** — a key handed out by [`WorkQueue::pop`] is not handed out again
//!   until [`WorkQueue::done`]; adds that arrive meanwhile mark it *dirty*, and it is queued
//!   exactly once more when `done` is called (however many adds arrived).
//! * **delays** — [`WorkQueue::add_after`] keeps, per key, the earliest requested requeue
//!   and, separately, the earliest backoff retry: a retry after an error never consumes a
//!   requeue the reconciler asked for (client-go and kube-rs drop one or the other). Delayed
//!   entries are independent of the ready/processing state; only
//!   [`WorkQueue::forget_delayed`] drops them (the controller calls it when a run of the key
//!   succeeds: that run's outcome supersedes them).
//!
//! And beyond client-go:
//! * two lanes: `Normal` (real events, requeues, retries) is always served before `Low`
//!   (periodic resync), so a resync wave over thousands of objects never delays a real change;
//! * every entry remembers *why* it was queued ([`Trigger`]) and *when* (for
//!   `workqueue_queue_duration_seconds`);
//! * an optional per-key **debounce** ([`WorkQueue::with_debounce`]): a key that has not run
//!   within the window is queued at once (a first event is never delayed); events for a key
//!   that arrive within the window after it was last handed out are held and merged into one
//!   run at the window's end. Requeues and backoff retries are never held, and a held key
//!   whose requeue or retry falls due runs at once with the held triggers merged.
//!
//! No locking and no async: the controller owns the queue in one task. All collections are
//! ordered (`BTreeMap`), so behaviour never depends on hash order, and all times are
//! `tokio::time::Instant`, so tests run on a paused clock. `add`, `pop`, `done`, `add_after`
//! and each promoted entry cost O(log n) (plus O(log t) per merged trigger).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

/// Why a key was queued; kept so a reconcile's tracing span can say why it runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Trigger {
    /// The primary object itself changed (or appeared/disappeared).
    Primary,
    /// An owned object of `kind` named `name` changed (found through ownerReferences).
    Owned {
        /// The owned object's kind (`Pod`).
        kind: String,
        /// The owned object's name.
        name: String,
    },
    /// A related object (mapped watch) changed.
    Watched {
        /// The watched object's kind.
        kind: String,
        /// The watched object's name.
        name: String,
    },
    /// Periodic resync.
    Resync,
    /// The reconciler asked to run again (`Action::requeue_after`).
    Requeue,
    /// Retry after an error, attempt n.
    Backoff {
        /// 1 for the first retry after a failure.
        attempt: u32,
    },
}

impl Trigger {
    /// Every [`kind`](Self::kind), in `Trigger`'s order.
    pub const KINDS: [&'static str; 6] = [
        "primary", "owned", "watched", "resync", "requeue", "backoff",
    ];

    /// The trigger's kind without its fields (a metric label value).
    pub fn kind(&self) -> &'static str {
        match self {
            Trigger::Primary => "primary",
            Trigger::Owned { .. } => "owned",
            Trigger::Watched { .. } => "watched",
            Trigger::Resync => "resync",
            Trigger::Requeue => "requeue",
            Trigger::Backoff { .. } => "backoff",
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Primary => f.write_str("primary"),
            Trigger::Owned { kind, name } => write!(f, "owned {kind} {name}"),
            Trigger::Watched { kind, name } => write!(f, "watched {kind} {name}"),
            Trigger::Resync => f.write_str("resync"),
            Trigger::Requeue => f.write_str("requeue"),
            Trigger::Backoff { attempt } => write!(f, "backoff retry {attempt}"),
        }
    }
}

/// Lane of a ready key. `Normal` is always served before `Low`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Periodic resync: work that only re-confirms the steady state.
    Low,
    /// Everything else (events, requeues, retries).
    Normal,
}

/// A key handed out by [`WorkQueue::pop`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Popped<K> {
    /// The key to reconcile.
    pub key: K,
    /// Every trigger merged since the key was queued, deduplicated, in `Trigger`'s order
    /// (`Primary`, `Owned`, `Watched`, `Resync`, `Requeue`, `Backoff`; then by fields).
    pub triggers: Vec<Trigger>,
    /// When the key was first queued (for `workqueue_queue_duration_seconds`). For a
    /// delayed entry this is its deadline, i.e. when it became due.
    pub queued_at: Instant,
}

/// A queued-but-not-running key (either ready, or waiting for `done` as the dirty mark).
#[derive(Debug, Clone)]
struct Pending {
    priority: Priority,
    triggers: BTreeSet<Trigger>,
    queued_at: Instant,
}

impl Pending {
    fn merge(&mut self, triggers: BTreeSet<Trigger>, priority: Priority, at: Instant) {
        if self.triggers.is_empty() {
            self.triggers = triggers;
        } else {
            self.triggers.extend(triggers);
        }
        self.priority = self.priority.max(priority);
        self.queued_at = self.queued_at.min(at);
    }
}

#[derive(Debug, Clone)]
struct Ready {
    pending: Pending,
    /// Position in its lane (`WorkQueue::lane(pending.priority)`).
    seq: u64,
}

#[derive(Debug, Clone)]
struct Processing {
    started: Instant,
    /// Adds that arrived while processing; re-queued once on `done`.
    dirty: Option<Pending>,
}

/// Events held by the debounce, and their entry in the timer index.
#[derive(Debug, Clone)]
struct Held {
    pending: Pending,
    timer: (Instant, u64),
}

#[derive(Debug, Clone)]
struct Delayed {
    deadline: Instant,
    /// Tie-breaker in the timer index (FIFO among equal deadlines).
    seq: u64,
    triggers: BTreeSet<Trigger>,
}

/// Requeues the reconciler asked for and retries after errors are kept apart, so neither
/// replaces the other; events held by the debounce are a third class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DelayClass {
    Requested,
    Retry,
    Debounced,
}

impl DelayClass {
    /// The classes [`WorkQueue::add_after`] creates (and `forget_delayed` drops).
    const ASKED_FOR: [DelayClass; 2] = [DelayClass::Requested, DelayClass::Retry];

    fn of(trigger: &Trigger) -> Self {
        match trigger {
            Trigger::Backoff { .. } => DelayClass::Retry,
            _ => DelayClass::Requested,
        }
    }
}

/// Events (and resyncs) may be held by the debounce; a requeue or a retry keeps its time.
fn is_event(trigger: &Trigger) -> bool {
    !matches!(trigger, Trigger::Requeue | Trigger::Backoff { .. })
}

/// Deadline used when `now + delay` is not representable.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The controller's work queue. See the module documentation for the guarantees.
#[derive(Debug, Clone)]
pub struct WorkQueue<K: Ord + Clone> {
    /// Ready keys (never also in `processing`).
    ready: BTreeMap<K, Ready>,
    normal: BTreeMap<u64, K>,
    low: BTreeMap<u64, K>,
    processing: BTreeMap<K, Processing>,
    /// Delayed entries, independent of `ready`/`processing`: one per key and class.
    delayed: BTreeMap<(K, DelayClass), Delayed>,
    timers: BTreeMap<(Instant, u64), (K, DelayClass)>,
    /// Events held by the debounce until their timer (class `Debounced`) fires; a held key
    /// is neither ready nor processing.
    held: BTreeMap<K, Held>,
    /// 0 disables the debounce.
    debounce: Duration,
    /// When each key was last handed out, while that is within `debounce` of now.
    last_popped: BTreeMap<K, Instant>,
    /// `last_popped` by time, to forget keys whose window is over.
    popped_order: BTreeSet<(Instant, K)>,
    next_seq: u64,
}

impl<K: Ord + Clone> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord + Clone> WorkQueue<K> {
    /// An empty queue without debounce.
    pub fn new() -> Self {
        Self::with_debounce(Duration::ZERO)
    }

    /// An empty queue that holds events for a key handed out less than `window` ago until
    /// `window` after that hand-out, merging them into one run (zero: no debounce). A key
    /// idle for `window` or more is queued at once; requeues and retries are never held.
    pub fn with_debounce(window: Duration) -> Self {
        Self {
            ready: BTreeMap::new(),
            normal: BTreeMap::new(),
            low: BTreeMap::new(),
            processing: BTreeMap::new(),
            delayed: BTreeMap::new(),
            timers: BTreeMap::new(),
            held: BTreeMap::new(),
            debounce: window,
            last_popped: BTreeMap::new(),
            popped_order: BTreeSet::new(),
            next_seq: 0,
        }
    }

    /// Queue `key` now.
    ///
    /// One entry per key (dedup): adding a key already queued merges the trigger into its set
    /// and raises its priority if higher (a resync-queued key that gets a real event moves to
    /// the back of the Normal lane; its original enqueue time is kept for queue-duration
    /// metrics). If the key is being processed, it is marked dirty and re-queued exactly
    /// once when [`done`](Self::done) is called (any number of adds during processing
    /// coalesce into one more run).
    pub fn add(&mut self, key: K, trigger: Trigger, priority: Priority) {
        self.enqueue(key, BTreeSet::from([trigger]), priority, Instant::now());
    }

    /// Queue `key` after `delay` (normally `Trigger::Requeue` or `Trigger::Backoff`).
    ///
    /// Keeps the earliest pending deadline per key and class — requested requeues and
    /// backoff retries are separate classes, so a retry never consumes a requested requeue
    /// (triggers of a later request of the same class merge into the earlier entry). The delayed entry is
    /// independent of the key being ready or processing: if the key runs earlier, the
    /// delayed entry stays and fires at its deadline unless the controller calls
    /// [`forget_delayed`](Self::forget_delayed) because a newer outcome supersedes it.
    /// A zero delay queues the key immediately (Normal priority), like client-go.
    pub fn add_after(&mut self, key: K, trigger: Trigger, delay: Duration) {
        let now = Instant::now();
        if delay.is_zero() {
            self.enqueue(key, BTreeSet::from([trigger]), Priority::Normal, now);
            return;
        }
        let deadline = now
            .checked_add(delay)
            .or_else(|| now.checked_add(FAR_FUTURE))
            .unwrap_or(now);
        let slot = (key, DelayClass::of(&trigger));
        match self.delayed.get_mut(&slot) {
            Some(entry) => {
                entry.triggers.insert(trigger);
                if deadline < entry.deadline {
                    self.timers.remove(&(entry.deadline, entry.seq));
                    entry.deadline = deadline;
                    entry.seq = self.next_seq;
                    self.next_seq += 1;
                    self.timers.insert((deadline, entry.seq), slot);
                }
            }
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.timers.insert((deadline, seq), slot.clone());
                self.delayed.insert(
                    slot,
                    Delayed {
                        deadline,
                        seq,
                        triggers: BTreeSet::from([trigger]),
                    },
                );
            }
        }
    }

    /// Drop the delayed entries of `key`, if any (a newer outcome supersedes them). Events
    /// held by the debounce are kept: they still have to run.
    pub fn forget_delayed(&mut self, key: &K) {
        for class in DelayClass::ASKED_FOR {
            if let Some(entry) = self.delayed.remove(&(key.clone(), class)) {
                self.timers.remove(&(entry.deadline, entry.seq));
            }
        }
    }

    /// Move delayed entries whose deadline is `<= now` into the ready lanes (Normal
    /// priority), in deadline order. A due key that is already ready is merged (never
    /// duplicated); a due key that is processing is marked dirty.
    pub fn promote_due(&mut self, now: Instant) {
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((deadline, _), (key, class)) = entry.remove_entry();
            if class == DelayClass::Debounced {
                if let Some(held) = self.held.remove(&key) {
                    self.insert_ready(key, held.pending);
                }
                continue;
            }
            let triggers = self
                .delayed
                .remove(&(key.clone(), class))
                .map(|d| d.triggers)
                .unwrap_or_default();
            self.enqueue(key, triggers, Priority::Normal, deadline);
        }
        self.forget_windows_over(now);
    }

    /// The earliest delayed deadline, for the controller's timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.first_key_value().map(|((at, _), _)| *at)
    }

    /// Take the next ready key: Normal lane first (FIFO), then Low (FIFO). The key moves to
    /// `processing` and is not handed out again until [`done`](Self::done).
    pub fn pop(&mut self) -> Option<Popped<K>> {
        loop {
            let (_, key) = match self.normal.pop_first() {
                Some(item) => item,
                None => self.low.pop_first()?,
            };
            // Lanes and `ready` are kept in sync; a missing entry would be a bug, so skip it
            // rather than hand out a key without its bookkeeping.
            let Some(ready) = self.ready.remove(&key) else {
                debug_assert!(false, "lane entry without ready entry");
                continue;
            };
            let now = Instant::now();
            self.processing.insert(
                key.clone(),
                Processing {
                    started: now,
                    dirty: None,
                },
            );
            self.remember_popped(&key, now);
            return Some(Popped {
                key,
                triggers: ready.pending.triggers.into_iter().collect(),
                queued_at: ready.pending.queued_at,
            });
        }
    }

    /// Processing of `key` finished. If it was added meanwhile, it is queued once more
    /// (at the back of its lane; held until the debounce window's end if only events
    /// arrived and the window is not over). Unknown keys are ignored.
    pub fn done(&mut self, key: &K) {
        let Some(processing) = self.processing.remove(key) else {
            return;
        };
        if let Some(pending) = processing.dirty {
            self.schedule_idle(key.clone(), pending);
        }
    }

    /// Ready keys (`workqueue_depth`).
    pub fn len(&self) -> usize {
        self.ready.len()
    }

    /// No ready keys (processing or delayed keys may exist).
    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Keys handed out and not yet `done`.
    pub fn processing(&self) -> usize {
        self.processing.len()
    }

    /// Delayed entries: requeues, retries, and keys held by the debounce.
    pub fn delayed(&self) -> usize {
        self.delayed.len() + self.held.len()
    }

    /// Whether `key` is ready, processing or delayed.
    pub fn contains(&self, key: &K) -> bool {
        self.ready.contains_key(key)
            || self.processing.contains_key(key)
            || self.held.contains_key(key)
            || DelayClass::ASKED_FOR
                .into_iter()
                .any(|class| self.delayed.contains_key(&(key.clone(), class)))
    }

    /// `(total, longest)` time spent so far by keys still processing at `now`
    /// (`workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds`).
    /// O(processing), which is bounded by the controller's concurrency.
    pub fn unfinished_work(&self, now: Instant) -> (Duration, Duration) {
        self.processing
            .values()
            .map(|p| now.saturating_duration_since(p.started))
            .fold((Duration::ZERO, Duration::ZERO), |(total, longest), d| {
                (total.saturating_add(d), longest.max(d))
            })
    }

    fn enqueue(&mut self, key: K, triggers: BTreeSet<Trigger>, priority: Priority, at: Instant) {
        if let Some(processing) = self.processing.get_mut(&key) {
            match &mut processing.dirty {
                Some(pending) => pending.merge(triggers, priority, at),
                None => {
                    processing.dirty = Some(Pending {
                        priority,
                        triggers,
                        queued_at: at,
                    });
                }
            }
            return;
        }
        if let Some(ready) = self.ready.get_mut(&key) {
            let old_priority = ready.pending.priority;
            ready.pending.merge(triggers, priority, at);
            if ready.pending.priority != old_priority {
                // Raised: move to the back of the higher lane.
                let seq = self.next_seq;
                self.next_seq += 1;
                let old_seq = std::mem::replace(&mut ready.seq, seq);
                let new_priority = ready.pending.priority;
                let moved = Self::lane_mut(&mut self.normal, &mut self.low, old_priority)
                    .remove(&old_seq)
                    .unwrap_or_else(|| key.clone());
                Self::lane_mut(&mut self.normal, &mut self.low, new_priority).insert(seq, moved);
            }
            return;
        }
        self.schedule_idle(
            key,
            Pending {
                priority,
                triggers,
                queued_at: at,
            },
        );
    }

    /// Queue `pending` for `key`, which is neither ready nor processing: held (merged with
    /// what is held already) while the key's debounce window is open and only events are
    /// pending; otherwise ready now, with anything held merged in.
    fn schedule_idle(&mut self, key: K, mut pending: Pending) {
        let holdable = pending.triggers.iter().all(is_event);
        if let Some(held) = self.held.get_mut(&key) {
            if holdable {
                let held = &mut held.pending;
                held.merge(pending.triggers, pending.priority, pending.queued_at);
                return;
            }
            if let Some(Held {
                pending: held,
                timer,
            }) = self.held.remove(&key)
            {
                self.timers.remove(&timer);
                pending.merge(held.triggers, held.priority, held.queued_at);
            }
        } else if holdable && let Some(window_end) = self.window_end(&key) {
            let timer = (window_end, self.next_seq);
            self.next_seq += 1;
            self.timers
                .insert(timer, (key.clone(), DelayClass::Debounced));
            self.held.insert(key, Held { pending, timer });
            return;
        }
        self.insert_ready(key, pending);
    }

    /// The end of `key`'s debounce window, if it is still open.
    fn window_end(&self, key: &K) -> Option<Instant> {
        let end = self.last_popped.get(key)?.checked_add(self.debounce)?;
        (end > Instant::now()).then_some(end)
    }

    fn remember_popped(&mut self, key: &K, at: Instant) {
        if self.debounce.is_zero() {
            return;
        }
        if let Some(previous) = self.last_popped.insert(key.clone(), at) {
            self.popped_order.remove(&(previous, key.clone()));
        }
        self.popped_order.insert((at, key.clone()));
        self.forget_windows_over(at);
    }

    /// Forget hand-out times whose window is over, so `last_popped` stays as small as the
    /// keys run within one window.
    fn forget_windows_over(&mut self, now: Instant) {
        while let Some((at, _)) = self.popped_order.first() {
            if at.checked_add(self.debounce).is_some_and(|end| end > now) {
                break;
            }
            if let Some((_, key)) = self.popped_order.pop_first() {
                self.last_popped.remove(&key);
            }
        }
    }

    /// `key` must be neither ready, processing nor held.
    fn insert_ready(&mut self, key: K, pending: Pending) {
        let seq = self.next_seq;
        self.next_seq += 1;
        Self::lane_mut(&mut self.normal, &mut self.low, pending.priority).insert(seq, key.clone());
        self.ready.insert(key, Ready { pending, seq });
    }

    fn lane_mut<'a>(
        normal: &'a mut BTreeMap<u64, K>,
        low: &'a mut BTreeMap<u64, K>,
        priority: Priority,
    ) -> &'a mut BTreeMap<u64, K> {
        match priority {
            Priority::Normal => normal,
            Priority::Low => low,
        }
    }
}

#[cfg(test)]
mod tests;
