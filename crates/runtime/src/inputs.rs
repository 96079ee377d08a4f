//! A reconcile's declared inputs — its primary object and the objects it owns — by
//! resourceVersion, so the controller can skip a reconcile woken only by the echoes of the
//! previous one's own writes ([`Config::skip_unchanged`](crate::Config::skip_unchanged)).
//!
//! Each cached object carries a *stamp*, renewed by the cache whenever the object changes
//! in a way its watch wakes reconciles for and kept through changes it does not (a bare
//! resourceVersion bump, a field a projection leaves out, the event of a write the cache
//! already remembered). The rule: when a reconcile succeeds and, since it started, its
//! inputs changed only by what it wrote itself (each changed object now holds the stamp
//! its write got, each vanished one was deleted by it), the inputs it leaves behind are
//! *settled*: a later reconcile of the same key, woken only by events of its primary or
//! its owned objects, is skipped while the inputs still read the same. Any other change
//! (another writer, a pod's phase, a new owned object), any failure, and every resync,
//! requeue, retry and mapped-watch trigger runs the reconciler as usual.
//!
//! It knows nothing of the queue: the controller asks it, and decides.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use crate::object_cache::{Cached, ObjectCache, ObjectKey, Stamps};
use crate::queue::Trigger;

/// What identifies what a reconciler reads of an object: its uid and its cache stamp.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Version {
    uid: String,
    stamp: u64,
}

impl Version {
    pub(crate) fn of(obj: &impl Cached, stamp: u64) -> Self {
        Version {
            uid: obj.cache_meta().uid.unwrap_or_default().to_string(),
            stamp,
        }
    }
}

/// One write a reconcile made: the object's kind and key, the state the server returned
/// (`None`: the object is gone), and the stamp of the cached state that state replaced
/// (`None`: the key was not cached).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    pub(crate) kind: String,
    pub(crate) key: ObjectKey,
    pub(crate) version: Option<Version>,
    pub(crate) replaced: Option<u64>,
}

impl Written {
    /// A write that left `obj` cached with `stamps`.
    pub(crate) fn cached(kind: &str, obj: &impl Cached, stamps: Stamps) -> Self {
        Written {
            kind: kind.to_string(),
            key: obj.cache_key(),
            version: Some(Version::of(obj, stamps.stamp)),
            replaced: stamps.replaced,
        }
    }

    /// A delete that ended the object `key`.
    pub(crate) fn gone(kind: &str, key: ObjectKey) -> Self {
        Written {
            kind: kind.to_string(),
            key,
            version: None,
            replaced: None,
        }
    }
}

/// The inputs of one key as the caches hold them: every object by kind and key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Inputs(BTreeMap<(String, ObjectKey), Version>, Desired);

/// What of the primary's desired state only others change: its `generation` (status
/// writes never bump it) and whether it is being deleted. A reconcile that saw it change
/// while it ran is never settled, however its writes reached the cache: a status write's
/// reply carries someone else's spec change even when that change's own event was lost,
/// or reached the cache only after the reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct Desired {
    generation: Option<i64>,
    deleting: bool,
}

impl Inputs {
    fn insert(&mut self, kind: &str, obj: &impl Cached, stamp: u64) {
        self.0
            .insert((kind.to_string(), obj.cache_key()), Version::of(obj, stamp));
    }

    /// A short digest, kept per settled key instead of the whole set.
    pub(crate) fn digest(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        self.hash(&mut hasher);
        hasher.finish()
    }

    /// Whether `self` (read when a reconcile started) became `after` (read when it
    /// finished) by `writes` alone: the primary's desired state did not move (see
    /// [`Desired`]); every object that differs holds the stamp the reconcile's last write
    /// of it got, or is gone and its last write was a delete; and each of those writes
    /// replaced in the cache a state the reconcile read or wrote itself. A write that
    /// replaced another state (someone else's change, which reached the cache while the
    /// reconcile ran) explains nothing: a merge patch's reply carries that change, which
    /// no reconcile has seen.
    pub(crate) fn changed_only_by(&self, after: &Inputs, writes: &[Written]) -> bool {
        if self.1 != after.1 {
            return false;
        }
        let mut last_write = BTreeMap::new();
        for write in writes {
            last_write.insert((write.kind.as_str(), &write.key), write.version.as_ref());
        }
        let own_chain = |kind: &str, key: &ObjectKey| {
            let read = self
                .0
                .get(&(kind.to_string(), key.clone()))
                .map(|v| v.stamp);
            let of_object = || writes.iter().filter(|w| w.kind == kind && &w.key == key);
            // What a write may have replaced: the state read, a state written, or nothing
            // once the reconcile has deleted the object (a successor of the same name).
            let wrote = |replaced: Option<u64>| match replaced {
                Some(stamp) => {
                    of_object().any(|w| w.version.as_ref().is_some_and(|v| v.stamp == stamp))
                }
                None => of_object().any(|w| w.version.is_none()),
            };
            of_object().all(|w| w.version.is_none() || w.replaced == read || wrote(w.replaced))
        };
        let explained = |(kind, key): &(String, ObjectKey), now: Option<&Version>| {
            last_write.get(&(kind.as_str(), key)) == Some(&now) && own_chain(kind, key)
        };
        let changed_or_new = after
            .0
            .iter()
            .filter(|(id, version)| self.0.get(id) != Some(version))
            .all(|(id, version)| explained(id, Some(version)));
        let vanished = self
            .0
            .keys()
            .filter(|id| !after.0.contains_key(id))
            .all(|id| explained(id, None));
        changed_or_new && vanished
    }
}

/// A cache of owned objects, type-erased: adds what it holds of one owner to [`Inputs`].
pub(crate) trait OwnedInputs: Send + Sync {
    fn add_owned_by(&self, owner_uid: &str, inputs: &mut Inputs);
}

/// An owned kind's cache and its kind's name.
pub(crate) struct OwnedCache<C> {
    pub(crate) kind: String,
    pub(crate) cache: ObjectCache<C>,
}

impl<C: Cached + Send + Sync> OwnedInputs for OwnedCache<C> {
    fn add_owned_by(&self, owner_uid: &str, inputs: &mut Inputs) {
        for (obj, stamp) in self.cache.owned_by_stamped(owner_uid) {
            inputs.insert(&self.kind, obj.as_ref(), stamp);
        }
    }
}

/// Reads the inputs of a primary object: the object itself and what every owned cache
/// holds of it.
#[derive(Clone)]
pub(crate) struct InputReader {
    pub(crate) primary_kind: String,
    pub(crate) owned: Vec<Arc<dyn OwnedInputs>>,
}

impl InputReader {
    pub(crate) fn read<K: kube::Resource>(&self, primary: &K, stamp: u64) -> Inputs {
        let meta = primary.meta();
        let mut inputs = Inputs(
            BTreeMap::new(),
            Desired {
                generation: meta.generation,
                deleting: meta.deletion_timestamp.is_some(),
            },
        );
        inputs.insert(&self.primary_kind, primary, stamp);
        if let Some(uid) = primary.cache_meta().uid {
            for owned in &self.owned {
                owned.add_owned_by(uid, &mut inputs);
            }
        }
        inputs
    }
}

/// The reads of one key's inputs, `None` when its primary is gone.
pub(crate) type ReadInputs = Box<dyn Fn(&ObjectKey) -> Option<Inputs> + Send>;

/// The controller's record of settled keys: [`Config::skip_unchanged`]'s bookkeeping.
///
/// [`Config::skip_unchanged`]: crate::Config::skip_unchanged
pub(crate) struct Settled {
    read: ReadInputs,
    /// Digest of the inputs each settled key's last reconcile left behind.
    settled: BTreeMap<ObjectKey, u64>,
    /// Inputs of each running reconcile, as read when it started.
    started: BTreeMap<ObjectKey, Inputs>,
}

impl Settled {
    pub(crate) fn new(read: ReadInputs) -> Self {
        Settled {
            read,
            settled: BTreeMap::new(),
            started: BTreeMap::new(),
        }
    }

    /// Whether the reconcile of `key` for `triggers` can be skipped: only its primary's or
    /// its owned objects' events woke it, and its inputs are still what its last
    /// reconcile left. If not, the inputs are read for [`succeeded`](Self::succeeded).
    pub(crate) fn skip(&mut self, key: &ObjectKey, triggers: &[Trigger]) -> bool {
        let Some(now) = (self.read)(key) else {
            self.forget(key);
            return false;
        };
        let only_events = triggers
            .iter()
            .all(|t| matches!(t, Trigger::Primary | Trigger::Owned { .. }));
        if only_events && self.settled.get(key) == Some(&now.digest()) {
            return true;
        }
        self.started.insert(key.clone(), now);
        false
    }

    /// The reconcile of `key` succeeded after making `writes`: its inputs are settled if
    /// those writes alone changed them.
    pub(crate) fn succeeded(&mut self, key: &ObjectKey, writes: &[Written]) {
        let before = self.started.remove(key);
        match (before, (self.read)(key)) {
            (Some(before), Some(after)) if before.changed_only_by(&after, writes) => {
                self.settled.insert(key.clone(), after.digest());
            }
            _ => {
                self.settled.remove(key);
            }
        }
    }

    /// The reconcile of `key` failed, or its primary is gone: nothing is settled.
    pub(crate) fn forget(&mut self, key: &ObjectKey) {
        self.started.remove(key);
        self.settled.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(uid: &str, stamp: &str) -> Version {
        Version {
            uid: uid.into(),
            stamp: stamp.parse().expect("a number"),
        }
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(Some("ns"), name)
    }

    fn inputs(objects: &[(&str, &str, &str, &str)]) -> Inputs {
        Inputs(
            objects
                .iter()
                .map(|(kind, name, uid, stamp)| {
                    ((kind.to_string(), key(name)), version(uid, stamp))
                })
                .collect(),
            Desired::default(),
        )
    }

    /// A write of `name` that left it cached as `version`, replacing the cached state
    /// stamped `replaced`.
    fn written(kind: &str, name: &str, version: Option<Version>, replaced: &str) -> Written {
        Written {
            kind: kind.into(),
            key: key(name),
            version,
            replaced: replaced.parse().ok(),
        }
    }

    #[test]
    fn own_writes_explain_every_change() {
        let before = inputs(&[("Cache", "c", "u1", "5"), ("Pod", "c-0", "p0", "3")]);
        let after = inputs(&[("Cache", "c", "u1", "9"), ("Pod", "c-1", "p1", "8")]);
        let writes = [
            written("Pod", "c-1", Some(version("p1", "8")), "none"),
            written("Pod", "c-0", None, "3"),
            written("Cache", "c", Some(version("u1", "7")), "5"),
            written("Cache", "c", Some(version("u1", "9")), "7"),
        ];
        assert!(before.changed_only_by(&after, &writes));
        assert!(before.changed_only_by(&before, &[]));
        // A failed pod deleted and created again under its name: the create replaced
        // nothing, because the reconcile's own delete had emptied the key.
        let successor = inputs(&[("Cache", "c", "u1", "5"), ("Pod", "c-0", "p9", "8")]);
        let replace_pod = [
            written("Pod", "c-0", None, "3"),
            written("Pod", "c-0", Some(version("p9", "8")), "none"),
        ];
        assert!(before.changed_only_by(&successor, &replace_pod));
    }

    #[test]
    fn a_change_nobody_in_the_reconcile_wrote_is_not_explained() {
        let before = inputs(&[("Cache", "c", "u1", "5"), ("Pod", "c-0", "p0", "3")]);
        let pod_moved = inputs(&[("Cache", "c", "u1", "9"), ("Pod", "c-0", "p0", "4")]);
        let status = [written("Cache", "c", Some(version("u1", "9")), "5")];
        assert!(!before.changed_only_by(&pod_moved, &status));
        // Written, then changed again by someone else before the reconcile finished.
        let newer = inputs(&[("Cache", "c", "u1", "10"), ("Pod", "c-0", "p0", "3")]);
        assert!(!before.changed_only_by(&newer, &status));
        // Gone without the reconcile deleting it.
        let gone = inputs(&[("Cache", "c", "u1", "5")]);
        assert!(!before.changed_only_by(&gone, &[]));
        // Recreated under the same name by someone else.
        let recreated = inputs(&[("Cache", "c", "u1", "5"), ("Pod", "c-0", "p9", "3")]);
        assert!(!before.changed_only_by(&recreated, &[]));
        // Deleted by someone else, then created again by the reconcile: its create
        // replaced nothing, but it had read the object that was deleted.
        let created_again = inputs(&[("Cache", "c", "u1", "5"), ("Pod", "c-0", "p9", "6")]);
        let create = [written("Pod", "c-0", Some(version("p9", "6")), "none")];
        assert!(!before.changed_only_by(&created_again, &create));
    }

    /// The simulator's find: someone changes the spec (stamp 6) while the reconcile, which
    /// read stamp 5, writes status by merge patch; the reply (stamp 7) carries the new spec
    /// and replaced stamp 6 in the cache. The write explains nothing: the reconcile never
    /// saw stamp 6, so the run the spec change queued must not be skipped.
    #[test]
    fn a_write_over_a_state_the_reconcile_never_read_explains_nothing() {
        let before = inputs(&[("Cache", "c", "u1", "5")]);
        let after = inputs(&[("Cache", "c", "u1", "7")]);
        let over_foreign = [written("Cache", "c", Some(version("u1", "7")), "6")];
        assert!(!before.changed_only_by(&after, &over_foreign));
        let over_own = [written("Cache", "c", Some(version("u1", "7")), "5")];
        assert!(before.changed_only_by(&after, &over_own));
        // A created object replaced nothing; one cached meanwhile by someone else's
        // create (stamp 4) is not the reconcile's.
        let created = inputs(&[("Cache", "c", "u1", "5"), ("Pod", "c-0", "p0", "8")]);
        let create = [written("Pod", "c-0", Some(version("p0", "8")), "none")];
        assert!(before.changed_only_by(&created, &create));
        let over_theirs = [written("Pod", "c-0", Some(version("p0", "8")), "4")];
        assert!(!before.changed_only_by(&created, &over_theirs));
    }

    /// The simulator's other find: a spec change whose event was lost reached the cache
    /// only inside the echo of the reconcile's status write, which followed the state it
    /// read. No stamp says so; the generation does.
    #[test]
    fn a_primary_whose_generation_moved_during_the_reconcile_is_not_settled() {
        let before = inputs(&[("Cache", "c", "u1", "5")]);
        let mut after = inputs(&[("Cache", "c", "u1", "7")]);
        let status = [written("Cache", "c", Some(version("u1", "7")), "5")];
        assert!(before.changed_only_by(&after, &status));
        after.1.generation = Some(2);
        assert!(!before.changed_only_by(&after, &status));
        let mut deleted = before.clone();
        deleted.1.deleting = true;
        assert!(!before.changed_only_by(&deleted, &[]));
    }

    #[test]
    fn digests_tell_states_apart() {
        let a = inputs(&[("Cache", "c", "u1", "5")]);
        let b = inputs(&[("Cache", "c", "u1", "6")]);
        assert_eq!(a.digest(), a.clone().digest());
        assert_ne!(a.digest(), b.digest());
    }
}
