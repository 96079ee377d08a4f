//! The objects this server wrote last, kept decoded.
//!
//! A write reads the object it replaces, and that object was most often written moments
//! before: a pod's binding after its create, the kubelet's status after the binding, a
//! controller's status patch after a user's spec patch. Every write already holds its new
//! object decoded (the store leaves it exactly as stored, see
//! `steady_store::Store::update_derived`), so keeping it spares the next write of that
//! object parsing the stored bytes again, which is most of what reading it costs.
//!
//! An entry is the object at one revision; a revision names one version of one object,
//! so a stale entry (the object written since by a path that keeps nothing) is never
//! returned. A write takes its entry out rather than copying it: two writes of one object
//! at once find it once, and the other parses the bytes, as without this. What is kept is
//! bounded by the size of the stored bytes; the oldest entries go first.
//!
//! Only with `Config::keep_recent_writes` (the simulator sets it): with many clients
//! writing in parallel a kept object is cold, often on another core, by the time it is
//! taken or evicted, and measured no cheaper than parsing (docs/BENCHMARKS.md, session 12).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use steady_store::Revision;

/// How many bytes of stored JSON the kept objects may add up to. Decoded, an object takes
/// a few times its JSON's size; a pod's JSON is a few KiB, so this keeps the last few
/// hundred objects written.
pub(crate) const KEPT_BYTES: usize = 256 << 10;

/// Objects larger than this are not kept: one would crowd out hundreds of others.
const LARGEST_KEPT: usize = 32 << 10;

#[derive(Default)]
pub(crate) struct RecentWrites {
    inner: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    by_key: HashMap<Arc<str>, Entry>,
    /// Keys by when they were kept (a sequence number), oldest first.
    by_age: BTreeMap<u64, Arc<str>>,
    next: u64,
    bytes: usize,
}

struct Entry {
    revision: Revision,
    value: Value,
    /// The length of its stored JSON.
    bytes: usize,
    kept_as: u64,
}

impl RecentWrites {
    /// Keep `value`, the object `key` as stored at `revision` in `bytes` of JSON.
    pub(crate) fn keep(&self, key: &Arc<str>, revision: Revision, value: Value, bytes: usize) {
        if bytes > LARGEST_KEPT {
            self.forget(key);
            return;
        }
        let evicted = {
            let mut kept = self.lock();
            let replaced = kept.remove(key);
            let kept_as = kept.next;
            kept.next += 1;
            kept.by_age.insert(kept_as, key.clone());
            kept.bytes += bytes;
            kept.by_key.insert(
                key.clone(),
                Entry {
                    revision,
                    value,
                    bytes,
                    kept_as,
                },
            );
            let mut evicted = Vec::from_iter(replaced);
            while kept.bytes > KEPT_BYTES {
                let Some((_, oldest)) = kept.by_age.pop_first() else {
                    break;
                };
                evicted.extend(kept.remove(&oldest));
            }
            evicted
        };
        // Freed outside the lock: dropping a large object takes a while.
        drop(evicted);
    }

    /// The object `key` at `revision`, if it is kept; it is kept no longer.
    pub(crate) fn take(&self, key: &str, revision: Revision) -> Option<Value> {
        let entry = self.lock().remove(key)?;
        (entry.revision == revision).then_some(entry.value)
    }

    /// Keep nothing of `key` (deleted, or written at a size not kept).
    pub(crate) fn forget(&self, key: &str) {
        let forgotten = self.lock().remove(key);
        drop(forgotten);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Kept {
    fn remove(&mut self, key: &str) -> Option<Entry> {
        let entry = self.by_key.remove(key)?;
        self.by_age.remove(&entry.kept_as);
        self.bytes -= entry.bytes;
        Some(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(key: &str) -> Arc<str> {
        key.into()
    }

    #[test]
    fn an_object_is_found_once_and_only_at_its_revision() {
        let recent = RecentWrites::default();
        recent.keep(&key("/a"), 5, json!({"n": 5}), 10);
        assert_eq!(recent.take("/a", 4), None);
        // A miss at another revision drops the entry: it can only be older than the store's.
        assert_eq!(recent.take("/a", 5), None);
        recent.keep(&key("/a"), 6, json!({"n": 6}), 10);
        assert_eq!(recent.take("/a", 6), Some(json!({"n": 6})));
        assert_eq!(recent.take("/a", 6), None);
    }

    #[test]
    fn a_newer_version_replaces_the_kept_one_and_forget_drops_it() {
        let recent = RecentWrites::default();
        recent.keep(&key("/a"), 1, json!(1), 10);
        recent.keep(&key("/a"), 2, json!(2), 10);
        assert_eq!(recent.lock().bytes, 10);
        recent.forget("/a");
        assert_eq!(recent.take("/a", 2), None);
        assert_eq!(recent.lock().bytes, 0);
    }

    #[test]
    fn the_oldest_objects_go_first_once_the_bytes_are_used_up() {
        let recent = RecentWrites::default();
        let fitting = (KEPT_BYTES / LARGEST_KEPT) as u64;
        for n in 0..fitting {
            recent.keep(&key(&format!("/{n}")), n, json!(n), LARGEST_KEPT);
        }
        // Rewriting /0 makes it the newest: /1 is now the oldest.
        recent.keep(&key("/0"), 100, json!(100), LARGEST_KEPT);
        recent.keep(&key("/new"), 101, json!(101), LARGEST_KEPT);
        assert_eq!(recent.take("/1", 1), None);
        assert_eq!(recent.take("/0", 100), Some(json!(100)));
        assert_eq!(recent.take("/new", 101), Some(json!(101)));
        assert_eq!(recent.take("/2", 2), Some(json!(2)));
        let kept = recent.lock();
        assert_eq!(kept.bytes, (fitting as usize - 3) * LARGEST_KEPT);
        assert_eq!(kept.by_age.len(), kept.by_key.len());
    }

    #[test]
    fn an_object_too_large_to_keep_also_drops_its_older_version() {
        let recent = RecentWrites::default();
        recent.keep(&key("/a"), 1, json!(1), 10);
        recent.keep(&key("/a"), 2, json!(2), LARGEST_KEPT + 1);
        assert_eq!(recent.take("/a", 1), None);
        assert_eq!(recent.lock().bytes, 0);
    }
}
