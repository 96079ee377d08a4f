//! The in-memory multi-version map and event log shared by both backends.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use crate::{
    DERIVED_WINDOW, Event, EventKind, Labels, ListOptions, ListPage, Object, Revision, StoreError,
};

/// Revision of an empty store. The first write gets `INITIAL_REVISION + 1`.
pub(crate) const INITIAL_REVISION: Revision = 1;

/// Bookkeeping memory of one retained revision beyond its value bytes: the event and the
/// version entry. Counted so that a stream of tiny writes also meets the history budget.
const REVISION_OVERHEAD: u64 =
    (std::mem::size_of::<Event>() + std::mem::size_of::<Version>()) as u64;

/// Bytes that the event `e` keeps alive only for readers of old revisions, freed when the
/// store compacts past it: the version it superseded (`prev`), its own tombstone if it is a
/// delete, and its bookkeeping. Summed over the retained events this is exactly the value
/// bytes of every non-current version (each such version is superseded by exactly one
/// retained event, or is a retained tombstone) plus the per-revision overhead.
fn history_weight(e: &Event) -> u64 {
    let superseded = e.prev.as_ref().map_or(0, Bytes::len);
    let tombstone = if e.kind == EventKind::Deleted {
        e.value.len()
    } else {
        0
    };
    (superseded + tombstone) as u64 + REVISION_OVERHEAD
}

/// One stored version of a key. A tombstone keeps the object's last state
/// (re-encoded with the delete's revision) in `value`.
#[derive(Clone, Debug)]
pub(crate) struct Version {
    pub rev: Revision,
    pub value: Bytes,
    pub labels: Labels,
    pub deleted: bool,
}

/// A row as persisted by a backend (and reloaded on open).
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub rev: Revision,
    pub key: Arc<str>,
    pub deleted: bool,
    pub value: Bytes,
    /// The value's labels when the record comes from memory (an [`crate::Image`]);
    /// a backend's rows leave them to be read from `value`.
    pub labels: Option<Labels>,
}

/// How many of `versions` (one key's, ascending) compacting to `target` drops: every
/// version at or below `target` but the newest, and that one too if it is a tombstone.
fn compacted_away(versions: &[Version], target: Revision) -> usize {
    let at_or_below = versions.partition_point(|v| v.rev <= target);
    match versions[..at_or_below].last() {
        Some(newest) if newest.deleted => at_or_below,
        Some(_) => at_or_below - 1,
        None => 0,
    }
}

#[derive(Debug)]
pub(crate) struct State {
    /// Latest committed revision.
    pub current: Revision,
    /// Revisions `<= compacted` are no longer individually readable/watchable.
    pub compacted: Revision,
    /// Versions per key, ascending by revision. Invariant: for each key at most
    /// one version has `rev <= compacted`, and that one is live.
    pub objects: BTreeMap<Arc<str>, Vec<Version>>,
    /// One event per revision in `(compacted, current]` (except the virtual
    /// initial revision), ascending.
    pub events: VecDeque<Arc<Event>>,
    /// Sum of [`history_weight`] over `events`, kept up to date by `apply` and `compact`.
    pub history_bytes: u64,
    /// Set once the writer has stopped.
    pub closed: bool,
}

impl State {
    pub fn empty() -> State {
        State {
            current: INITIAL_REVISION,
            compacted: 0,
            objects: BTreeMap::new(),
            events: VecDeque::new(),
            history_bytes: 0,
            closed: false,
        }
    }

    /// Rebuilds the state from persisted rows (ascending by revision).
    pub fn from_records(records: Vec<Record>, compacted: Revision) -> State {
        let mut st = State::empty();
        st.compacted = compacted;
        let mut max_rev = 0;
        for r in records {
            max_rev = max_rev.max(r.rev);
            let (key, prev) = st.latest(&r.key);
            let key = key.unwrap_or(r.key);
            let labels = r.labels.unwrap_or_else(|| Labels::of_json_bytes(&r.value));
            if r.rev > compacted {
                let kind = if r.deleted {
                    EventKind::Deleted
                } else if prev.is_some() {
                    EventKind::Updated
                } else {
                    EventKind::Created
                };
                let event = Event {
                    revision: r.rev,
                    key: key.clone(),
                    kind,
                    value: r.value.clone(),
                    labels: labels.clone(),
                    prev_labels: prev.as_ref().map(|v| v.labels.clone()).unwrap_or_default(),
                    prev: prev.map(|v| v.value),
                    derived: Default::default(),
                };
                st.history_bytes += history_weight(&event);
                st.events.push_back(Arc::new(event));
            }
            st.objects.entry(key).or_default().push(Version {
                rev: r.rev,
                value: r.value,
                labels,
                deleted: r.deleted,
            });
        }
        st.current = max_rev.max(compacted).max(INITIAL_REVISION);
        // Re-establish the compaction invariant in case the backend kept extra rows.
        let keys: Vec<Arc<str>> = st.objects.keys().cloned().collect();
        for k in keys {
            st.prune_key(&k, compacted);
        }
        st
    }

    /// Every retained version as a persisted row, ascending by revision: what
    /// [`State::from_records`] rebuilds this state from.
    pub fn records(&self) -> Vec<Record> {
        let mut records: Vec<Record> = self
            .objects
            .iter()
            .flat_map(|(key, versions)| {
                versions.iter().map(|v| Record {
                    rev: v.rev,
                    key: key.clone(),
                    deleted: v.deleted,
                    value: v.value.clone(),
                    labels: Some(v.labels.clone()),
                })
            })
            .collect();
        records.sort_by_key(|r| r.rev);
        records
    }

    /// The latest version of `key` if it is live, plus the map's shared key.
    pub fn latest(&self, key: &str) -> (Option<Arc<str>>, Option<Version>) {
        match self.objects.get_key_value(key) {
            Some((k, versions)) => {
                let live = versions.last().filter(|v| !v.deleted).cloned();
                (Some(k.clone()), live)
            }
            None => (None, None),
        }
    }

    /// Resolves a requested read revision to a snapshot revision.
    pub fn snapshot(&self, at: Option<Revision>) -> Result<Revision, StoreError> {
        match at {
            None => Ok(self.current),
            Some(r) if r < self.compacted => Err(StoreError::Expired {
                requested: r,
                compacted: self.compacted,
            }),
            Some(r) if r > self.current => Err(StoreError::TooLarge {
                requested: r,
                current: self.current,
            }),
            Some(r) => Ok(r),
        }
    }

    fn visible(key: &Arc<str>, versions: &[Version], at: Revision) -> Option<Object> {
        let idx = versions.partition_point(|v| v.rev <= at);
        if idx == 0 {
            return None;
        }
        let v = &versions[idx - 1];
        if v.deleted {
            return None;
        }
        Some(Object {
            key: key.clone(),
            revision: v.rev,
            value: v.value.clone(),
            labels: v.labels.clone(),
        })
    }

    pub fn get(&self, key: &str, at: Option<Revision>) -> Result<Option<Object>, StoreError> {
        let at = self.snapshot(at)?;
        Ok(self
            .objects
            .get_key_value(key)
            .and_then(|(k, versions)| Self::visible(k, versions, at)))
    }

    pub fn list(
        &self,
        prefix: &str,
        opts: &ListOptions<'_>,
        filter: &dyn Fn(&Object) -> bool,
    ) -> Result<ListPage, StoreError> {
        let at = self.snapshot(opts.at)?;
        let limit = opts.limit.filter(|&l| l > 0);
        let start = match opts.start_after {
            Some(s) if s >= prefix => Bound::Excluded(s),
            _ => Bound::Included(prefix),
        };
        let mut items: Vec<Object> = Vec::new();
        let mut next_key = None;
        for (key, versions) in self.objects.range::<str, _>((start, Bound::Unbounded)) {
            if !key.starts_with(prefix) {
                break;
            }
            let Some(obj) = Self::visible(key, versions, at) else {
                continue;
            };
            if !filter(&obj) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                // One more match exists beyond the page.
                next_key = items.last().map(|o| o.key.clone());
                break;
            }
            items.push(obj);
        }
        Ok(ListPage {
            revision: at,
            items,
            next_key,
        })
    }

    /// Applies committed events (consecutive revisions after `current`).
    pub fn apply(&mut self, events: &[Arc<Event>]) {
        for e in events {
            let version = Version {
                rev: e.revision,
                value: e.value.clone(),
                labels: e.labels.clone(),
                deleted: e.kind == EventKind::Deleted,
            };
            match self.objects.get_mut(&*e.key) {
                Some(versions) => versions.push(version),
                None => {
                    self.objects.insert(e.key.clone(), vec![version]);
                }
            }
            self.current = e.revision;
            self.history_bytes += history_weight(e);
            self.events.push_back(e.clone());
            if let Some(leaving) = self.events.len().checked_sub(DERIVED_WINDOW + 1) {
                self.events[leaving].derived.expire();
            }
        }
    }

    /// Drops events and superseded versions at or below `target`.
    pub fn compact(&mut self, target: Revision) {
        if target <= self.compacted {
            return;
        }
        let mut touched: HashSet<Arc<str>> = HashSet::new();
        while let Some(e) = self.events.front() {
            if e.revision > target {
                break;
            }
            touched.insert(e.key.clone());
            self.history_bytes = self.history_bytes.saturating_sub(history_weight(e));
            self.events.pop_front();
        }
        for key in touched {
            self.prune_key(&key, target);
        }
        self.compacted = target;
    }

    /// The revisions of the versions [`compact`](Self::compact)`(target)` will drop:
    /// what a backend deletes so that its rows stay the versions kept in memory.
    pub fn compaction_drops(&self, target: Revision) -> Vec<Revision> {
        if target <= self.compacted {
            return Vec::new();
        }
        let end = self.events.partition_point(|e| e.revision <= target);
        let touched: HashSet<&str> = self.events.range(..end).map(|e| &*e.key).collect();
        let mut drops: Vec<Revision> = touched
            .into_iter()
            .filter_map(|key| self.objects.get(key))
            .flat_map(|versions| {
                let dropped = &versions[..compacted_away(versions, target)];
                dropped.iter().map(|v| v.rev)
            })
            .collect();
        drops.sort_unstable();
        drops
    }

    /// The oldest revision to compact to so that retained history drops to `low_water`
    /// bytes or below, or `None` while it is within `budget`. Never beyond the current
    /// revision: compacting to it leaves no history at all. Walks only the events that
    /// the compaction will drop, so the cost is amortized over the writes that made them.
    pub fn budget_compaction_target(&self, budget: u64, low_water: u64) -> Option<Revision> {
        if self.history_bytes <= budget {
            return None;
        }
        let mut remaining = self.history_bytes;
        let mut target = None;
        for e in &self.events {
            remaining = remaining.saturating_sub(history_weight(e));
            target = Some(e.revision);
            if remaining <= low_water {
                break;
            }
        }
        target
    }

    fn prune_key(&mut self, key: &str, target: Revision) {
        let Some(versions) = self.objects.get_mut(key) else {
            return;
        };
        versions.drain(..compacted_away(versions, target));
        if versions.is_empty() {
            self.objects.remove(key);
        }
    }

    /// Copies events with revision > `seen` whose key starts with `prefix` into
    /// `out`; returns the revision of the last scanned event (or `seen`).
    pub fn collect_events(
        &self,
        prefix: &str,
        seen: Revision,
        out: &mut VecDeque<Arc<Event>>,
        max_matches: usize,
        max_scanned: usize,
    ) -> Revision {
        let start = self.events.partition_point(|e| e.revision <= seen);
        let mut last = seen;
        for e in self.events.range(start..).take(max_scanned) {
            last = e.revision;
            if e.key.starts_with(prefix) {
                out.push_back(e.clone());
                if out.len() >= max_matches {
                    break;
                }
            }
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The definition the running total must match: value bytes of every version that
    /// is not the live latest one of its key, plus the overhead of each retained revision.
    fn recount_history(st: &State) -> u64 {
        let old_versions: usize = st
            .objects
            .values()
            .map(|versions| {
                let current = versions
                    .last()
                    .filter(|v| !v.deleted)
                    .map_or(0, |v| v.value.len());
                versions.iter().map(|v| v.value.len()).sum::<usize>() - current
            })
            .sum();
        old_versions as u64 + st.events.len() as u64 * REVISION_OVERHEAD
    }

    /// The event the writer would build for a write of `size` bytes (`None` deletes).
    fn write(st: &mut State, key: &str, size: Option<usize>) {
        let (shared_key, prev) = st.latest(key);
        let revision = st.current + 1;
        let (kind, value) = match (size, &prev) {
            (None, None) => return,
            (None, Some(prev)) => (EventKind::Deleted, prev.value.clone()),
            (Some(n), None) => (EventKind::Created, Bytes::from(vec![b'c'; n])),
            (Some(n), Some(_)) => (EventKind::Updated, Bytes::from(vec![b'u'; n])),
        };
        let event = Event {
            revision,
            key: shared_key.unwrap_or_else(|| Arc::from(key)),
            kind,
            value,
            labels: Labels::default(),
            prev_labels: Labels::default(),
            prev: prev.map(|v| v.value),
            derived: Default::default(),
        };
        st.apply(&[Arc::new(event)]);
    }

    #[test]
    fn running_history_total_matches_a_full_count_through_writes_and_compactions() {
        let mut st = State::empty();
        let mut seed: u64 = 7;
        let mut next = move |bound: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % bound
        };
        for step in 0..3000 {
            let key = format!("/k{}", next(20));
            let size = (next(4) != 0).then(|| next(5000) as usize);
            write(&mut st, &key, size);
            if step % 97 == 0 {
                let target = st.compacted + next(st.current - st.compacted + 1);
                compact_checking_drops(&mut st, target);
            }
            assert_eq!(st.history_bytes, recount_history(&st), "after step {step}");
        }
        let current = st.current;
        compact_checking_drops(&mut st, current);
        assert_eq!(st.history_bytes, recount_history(&st));
    }

    fn version_revisions(st: &State) -> BTreeSet<Revision> {
        st.objects.values().flatten().map(|v| v.rev).collect()
    }

    /// Compact, checking that `compaction_drops` named exactly the versions it dropped.
    fn compact_checking_drops(st: &mut State, target: Revision) {
        let before = version_revisions(st);
        let drops = st.compaction_drops(target);
        st.compact(target);
        let dropped: Vec<Revision> = before.difference(&version_revisions(st)).copied().collect();
        assert_eq!(drops, dropped, "compacting to {target}");
    }

    /// A label-selector watch resumed after a restart reads the previous labels from the
    /// replayed events, as from the events of this process's writes.
    #[test]
    fn replayed_events_carry_the_labels_of_the_state_they_replace() {
        let record = |rev, app: &str| Record {
            rev,
            key: Arc::from("/a"),
            deleted: false,
            value: Bytes::from(format!(r#"{{"metadata":{{"labels":{{"app":"{app}"}}}}}}"#)),
            labels: None,
        };
        let st = State::from_records(vec![record(2, "web"), record(3, "db")], 0);
        let labels = |l: &Labels| {
            l.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
        };
        let events: Vec<_> = st
            .events
            .iter()
            .map(|e| (e.revision, labels(&e.labels), labels(&e.prev_labels)))
            .collect();
        assert_eq!(
            events,
            [
                (2, vec!["app=web".to_string()], vec![]),
                (3, vec!["app=db".to_string()], vec!["app=web".to_string()]),
            ]
        );
    }

    #[test]
    fn budget_target_brings_history_to_the_low_water_mark_and_never_past_current() {
        let mut st = State::empty();
        for _ in 0..10 {
            write(&mut st, "/a", Some(1000));
        }
        let history = st.history_bytes;
        assert_eq!(st.budget_compaction_target(history, 0), None);
        let target = st.budget_compaction_target(history - 1, 3000).unwrap();
        st.compact(target);
        assert!(st.history_bytes <= 3000, "{} > 3000", st.history_bytes);
        // One step less would have kept more than the low-water mark.
        assert!(st.history_bytes + 1000 + REVISION_OVERHEAD > 3000);
        // A budget below one revision's worth compacts everything, to the current revision.
        assert_eq!(st.budget_compaction_target(0, 0), Some(st.current));
    }
}
