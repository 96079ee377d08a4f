//! Following a key prefix: a consistent snapshot (every live object under the prefix at
//! one revision), then every change after that revision, with neither a gap nor a
//! duplicate at the boundary, both through one filter. It is the one place that decides
//! what happens when the follower's position is compacted away: a follower that keeps
//! its own view up to date (the API server's garbage collector) gets a new snapshot at
//! once ([`Follow::next_or_relist`]); one that serves a client (a watch, whose client must
//! re-list itself) ends with the `Expired` reason ([`Follow::next`]).
//!
//! A filter turns the store's creates, updates and deletes into changes *of the filtered
//! set*, as a Kubernetes watch with a selector does: an update that makes an object match
//! is an `Added`, one that makes it stop matching a `Deleted`, and changes to objects that
//! match neither before nor after are not seen.
//!
//! It knows nothing of Kubernetes: a filter is any predicate on an object's labels and
//! bytes.

use std::sync::Arc;

use crate::{Event, EventKind, Labels, ListOptions, Object, Revision, Store, StoreError, Watcher};

/// Which objects a [`Follow`] sees, from their labels (decoded when written) and bytes.
pub type Filter = Box<dyn Fn(&Labels, &[u8]) -> bool + Send + Sync>;

/// Every live object under the followed prefix that the filter admits, at `revision`, in
/// key order.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub revision: Revision,
    pub objects: Vec<Object>,
}

/// How a committed event changes the followed set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created, or updated into the filter.
    Added,
    /// Updated, admitted before and after.
    Modified,
    /// Deleted, or updated out of the filter (the event's value is then the new state).
    Deleted,
}

/// One committed event, as the follower sees it.
#[derive(Clone, Debug)]
pub struct Change {
    pub kind: ChangeKind,
    pub event: Arc<Event>,
}

/// What [`Follow::next_or_relist`] delivers.
#[derive(Debug)]
pub enum Followed {
    /// The position was compacted away: this replaces everything seen so far, and the
    /// changes after it follow.
    Snapshot(Snapshot),
    Change(Change),
}

/// A position in the store's history under one prefix; see the module documentation.
pub struct Follow {
    store: Store,
    prefix: Box<str>,
    filter: Option<Filter>,
    /// `None` once the follow ended (position lost or store closed).
    watcher: Option<Watcher>,
    /// Where the follow was when it ended.
    ended_at: Revision,
}

impl std::fmt::Debug for Follow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follow")
            .field("prefix", &self.prefix)
            .field("filtered", &self.filter.is_some())
            .field("revision", &self.revision())
            .field("ended", &self.watcher.is_none())
            .finish()
    }
}

impl Store {
    /// The objects under `prefix` that `filter` admits (all of them when `None`) as of
    /// now, and a [`Follow`] of the changes after that snapshot.
    pub fn follow(
        &self,
        prefix: &str,
        filter: Option<Filter>,
    ) -> Result<(Snapshot, Follow), StoreError> {
        let mut follow = Follow {
            store: self.clone(),
            prefix: prefix.into(),
            filter,
            watcher: None,
            ended_at: 0,
        };
        let snapshot = follow.relist()?;
        Ok((snapshot, follow))
    }

    /// A [`Follow`] of the changes under `prefix` after revision `after` (a client's
    /// resourceVersion), without a snapshot. `Expired` if `after` was compacted away.
    pub fn follow_after(
        &self,
        prefix: &str,
        after: Revision,
        filter: Option<Filter>,
    ) -> Result<Follow, StoreError> {
        let watcher = self.watch(prefix, after)?;
        Ok(Follow {
            store: self.clone(),
            prefix: prefix.into(),
            filter,
            watcher: Some(watcher),
            ended_at: after,
        })
    }
}

impl Follow {
    /// The next change in revision order. `Some(Err(_))` ends the follow: `Expired` when
    /// its position was compacted away (the caller decides whether to start again).
    /// `None` once the store is shut down, after every committed change was delivered.
    ///
    /// Cancel-safe: dropping the future loses nothing.
    pub async fn next(&mut self) -> Option<Result<Change, StoreError>> {
        loop {
            let next = self.watcher.as_mut()?.next().await;
            match next {
                Some(Ok(event)) => {
                    if let Some(kind) = self.kind_of(&event) {
                        return Some(Ok(Change { kind, event }));
                    }
                }
                Some(Err(lost)) => {
                    self.end();
                    return Some(Err(lost));
                }
                None => {
                    self.end();
                    return None;
                }
            }
        }
    }

    /// As [`Follow::next`], but a position compacted away is followed at once by a new
    /// snapshot of the current state (which reflects whatever happened in the gap).
    /// `Some(Err(_))` only when that snapshot cannot be taken (the store is closing).
    pub async fn next_or_relist(&mut self) -> Option<Result<Followed, StoreError>> {
        match self.next().await? {
            Ok(change) => Some(Ok(Followed::Change(change))),
            Err(StoreError::Expired { .. }) => Some(self.relist().map(Followed::Snapshot)),
            Err(other) => Some(Err(other)),
        }
    }

    /// The revision up to which every change has been delivered.
    pub fn revision(&self) -> Revision {
        self.watcher
            .as_ref()
            .map_or(self.ended_at, Watcher::revision)
    }

    /// List the current state and watch from its revision. A compaction between the two
    /// would leave the watch behind the snapshot: list again, the caller has seen nothing.
    fn relist(&mut self) -> Result<Snapshot, StoreError> {
        loop {
            let admits = |object: &Object| self.admits(&object.labels, &object.value);
            let page = self
                .store
                .list(&self.prefix, &ListOptions::default(), &admits)?;
            match self.store.watch(&self.prefix, page.revision) {
                Ok(watcher) => {
                    self.watcher = Some(watcher);
                    return Ok(Snapshot {
                        revision: page.revision,
                        objects: page.items,
                    });
                }
                Err(StoreError::Expired { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn end(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            self.ended_at = watcher.revision();
        }
    }

    fn admits(&self, labels: &Labels, bytes: &[u8]) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|admits| admits(labels, bytes))
    }

    /// How `event` changes the followed set, if it does.
    fn kind_of(&self, event: &Event) -> Option<ChangeKind> {
        let Some(admits) = &self.filter else {
            return Some(match event.kind {
                EventKind::Created => ChangeKind::Added,
                EventKind::Updated => ChangeKind::Modified,
                EventKind::Deleted => ChangeKind::Deleted,
            });
        };
        let now = admits(&event.labels, &event.value);
        match event.kind {
            EventKind::Created => now.then_some(ChangeKind::Added),
            // The tombstone carries the last state, so `now` is what it was.
            EventKind::Deleted => now.then_some(ChangeKind::Deleted),
            EventKind::Updated => {
                let before = event
                    .prev
                    .as_ref()
                    .is_some_and(|prev| admits(&event.prev_labels, prev));
                match (before, now) {
                    (true, true) => Some(ChangeKind::Modified),
                    (false, true) => Some(ChangeKind::Added),
                    (true, false) => Some(ChangeKind::Deleted),
                    (false, false) => None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
