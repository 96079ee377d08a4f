//! Object caches: one per watched kind, fed by its watch, read by reconcilers.
//!
//! [`ObjectCache`] plays the part of kube-runtime's reflector `Store` and
//! controller-runtime's informer cache. It is not called `Cache` (that is the Cache custom
//! resource, `steady_cache_operator::Cache`) nor `Store` (that is the embedded API server's
//! storage, `steady_store::Store`, which tests and the simulator import beside the runtime).
//!
//! Objects are kept in key order (namespace, name) and indexed by owner uid, so
//! "the pods this Cache owns" is a lookup, not a scan. A reconciler's own writes can be
//! remembered ([`ObjectCache::remember`]) so its next read sees them before the watch event
//! arrives (read-your-own-writes); a watch event never replaces a newer remembered state.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::Resource;

/// Namespace and name of an object: what the work queue holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectKey {
    /// The key of the object `name` in `namespace` (`None`: cluster-scoped).
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        ObjectKey {
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    /// The key of `obj`, from its metadata (an unnamed object gets an empty name).
    pub fn of<K: Resource>(obj: &K) -> Self {
        let meta = obj.meta();
        ObjectKey {
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// What a cache needs to know of what it holds: where it lives, which incarnation and
/// version it is, and who owns it. Implemented for every `kube::Resource` (from its
/// metadata) and for [`Projected`](crate::projection::Projected) objects (from the compact
/// metadata the runtime keeps for them).
pub trait Cached {
    /// Namespace, name, uid and resourceVersion.
    fn cache_meta(&self) -> CacheMeta<'_>;
    /// The object's ownerReferences.
    fn cached_owners(&self) -> impl Iterator<Item = OwnerView<'_>>;

    /// The cache key: namespace and name.
    fn cache_key(&self) -> ObjectKey {
        let meta = self.cache_meta();
        ObjectKey::new(meta.namespace, meta.name)
    }
}

/// The identity and version of a cached object, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheMeta<'a> {
    /// `metadata.namespace` (`None`: cluster-scoped).
    pub namespace: Option<&'a str>,
    /// `metadata.name` (empty when unnamed).
    pub name: &'a str,
    /// `metadata.uid`.
    pub uid: Option<&'a str>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<&'a str>,
}

/// One ownerReference of a cached object, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerView<'a> {
    /// The owner's `apiVersion`.
    pub api_version: &'a str,
    /// The owner's `kind`.
    pub kind: &'a str,
    /// The owner's name (in the object's namespace).
    pub name: &'a str,
    /// The owner's uid.
    pub uid: &'a str,
    /// Whether the owner is the object's controller.
    pub controller: bool,
}

impl<K: Resource> Cached for K {
    fn cache_meta(&self) -> CacheMeta<'_> {
        let meta = self.meta();
        CacheMeta {
            namespace: meta.namespace.as_deref(),
            name: meta.name.as_deref().unwrap_or_default(),
            uid: meta.uid.as_deref(),
            resource_version: meta.resource_version.as_deref(),
        }
    }

    fn cached_owners(&self) -> impl Iterator<Item = OwnerView<'_>> {
        self.meta()
            .owner_references
            .iter()
            .flatten()
            .map(|r| OwnerView {
                api_version: &r.api_version,
                kind: &r.kind,
                name: &r.name,
                uid: &r.uid,
                controller: r.controller == Some(true),
            })
    }
}

/// Shrinks an object before it is cached (see `Controller::trim`).
pub type Trim<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// Namespace and name, borrowed: how the cache looks objects up and orders them.
type KeyParts<'a> = (Option<&'a str>, &'a str);

/// Something ordered by a cache key. Both a cached [`Entry`] and a borrowed key implement
/// it, so the cache's sets are keyed by the objects they hold (no second copy of each key,
/// with its two string allocations, per map) and are still searched by key.
trait Keyed {
    fn key_parts(&self) -> KeyParts<'_>;
}

impl PartialEq for dyn Keyed + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.key_parts() == other.key_parts()
    }
}

impl Eq for dyn Keyed + '_ {}

impl PartialOrd for dyn Keyed + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Keyed + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key_parts().cmp(&other.key_parts())
    }
}

/// A key to look up with: `&KeyRef(..) as &dyn Keyed`.
struct KeyRef<'a>(KeyParts<'a>);

impl Keyed for KeyRef<'_> {
    fn key_parts(&self) -> KeyParts<'_> {
        self.0
    }
}

impl<'a> KeyRef<'a> {
    fn of_key(key: &'a ObjectKey) -> Self {
        KeyRef((key.namespace.as_deref(), &key.name))
    }

    fn of<K: Cached>(obj: &'a K) -> Self {
        let meta = obj.cache_meta();
        KeyRef((meta.namespace, meta.name))
    }
}

/// A cached object in a set ordered by its key, and its *stamp*: a number from the cache's
/// counter, renewed whenever the object changes in a way its watch wakes reconciles for,
/// and kept through changes it does not (only a resourceVersion, a field a projection
/// leaves out). Two reads of an object with the same uid and stamp read the same thing.
///
/// It also keeps the stamp of the state it followed in the cache (0: none), so a reply to
/// a write whose state the watch delivered first still says what it replaced.
struct Entry<K> {
    obj: Arc<K>,
    stamp: u64,
    follows: u64,
}

impl<K: Cached> Keyed for Entry<K> {
    fn key_parts(&self) -> KeyParts<'_> {
        let meta = self.obj.cache_meta();
        (meta.namespace, meta.name)
    }
}

impl<K: Cached> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        self.key_parts() == other.key_parts()
    }
}

impl<K: Cached> Eq for Entry<K> {}

impl<K: Cached> PartialOrd for Entry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Cached> Ord for Entry<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key_parts().cmp(&other.key_parts())
    }
}

impl<'a, K: Cached + 'a> Borrow<dyn Keyed + 'a> for Entry<K> {
    fn borrow(&self) -> &(dyn Keyed + 'a) {
        self
    }
}

/// Objects of one kind, ordered by key.
type Entries<K> = BTreeSet<Entry<K>>;

fn find<'s, K: Cached>(entries: &'s Entries<K>, key: &KeyRef<'_>) -> Option<&'s Arc<K>> {
    find_entry(entries, key).map(|entry| &entry.obj)
}

fn find_entry<'s, K: Cached>(entries: &'s Entries<K>, key: &KeyRef<'_>) -> Option<&'s Entry<K>> {
    entries.get(key as &dyn Keyed)
}

struct Inner<K> {
    objects: Entries<K>,
    by_owner: BTreeMap<Box<str>, Entries<K>>,
    /// What the runtime leaves out of every object cached, however it arrives (a watch
    /// event, a write through the context, a handle's `remember`): see
    /// [`Config::keep_managed_fields`](crate::Config::keep_managed_fields).
    normalize: Option<fn(&mut K)>,
    /// The fields `normalize` drops, which a write's reply may be decoded without.
    unread: &'static [&'static str],
    trim: Option<Trim<K>>,
    /// The last stamp handed out.
    last_stamp: u64,
    /// The revision the watch has delivered every change up to (0: none yet). An object
    /// the cache does not hold, written at or before it, has been deleted since (or has
    /// left the watch's selector): the reply to that write must not bring it back.
    watched_to: u64,
    /// Written states the watch has not delivered yet (see [`Unconfirmed`]); only keys
    /// with a write in flight, so usually empty.
    unconfirmed: BTreeMap<ObjectKey, Unconfirmed>,
}

/// A written state the cache holds before its watch delivered it: its resourceVersion,
/// and that of the state it replaced. A watch event of the same object between the two
/// (older than what the cache holds) is a change the writer never saw, folded into the
/// reply it got: a merge patch applies to whatever is stored. Refused as stale, it would
/// wake nobody, and no reconcile would see it until a resync; so it wakes, as it would
/// in client-go's informer (which caches no writes), and renews the entry's stamp.
#[derive(Debug, Clone, Copy)]
struct Unconfirmed {
    written: u64,
    replaced: u64,
}

/// A shared, cheaply cloned cache of the objects of one kind, as its watch last saw them
/// plus the reconciler's remembered writes.
pub struct ObjectCache<K> {
    inner: Arc<RwLock<Inner<K>>>,
}

impl<K> Clone for ObjectCache<K> {
    fn clone(&self) -> Self {
        ObjectCache {
            inner: self.inner.clone(),
        }
    }
}

impl<K> Default for ObjectCache<K> {
    fn default() -> Self {
        ObjectCache {
            inner: Arc::new(RwLock::new(Inner {
                objects: BTreeSet::new(),
                by_owner: BTreeMap::new(),
                normalize: None,
                unread: &[],
                trim: None,
                last_stamp: 0,
                watched_to: 0,
                unconfirmed: BTreeMap::new(),
            })),
        }
    }
}

/// The keys a (re)list delivered, held as the objects cached for them (one pointer each),
/// so a relist of a large kind does not copy every key.
pub(crate) struct Listed<K> {
    keys: Entries<K>,
    /// The newest resourceVersion among the listed objects (not among newer states the
    /// cache kept instead): the list's own revision is at least this.
    newest: u64,
}

impl<K> Default for Listed<K> {
    fn default() -> Self {
        Listed {
            keys: BTreeSet::new(),
            newest: 0,
        }
    }
}

impl<K: Cached> Listed<K> {
    /// The list delivered `obj`'s key (its stamp is not needed here) at `listed_version`.
    fn record(&mut self, obj: Arc<K>, listed_version: Option<u64>) {
        self.newest = self.newest.max(listed_version.unwrap_or(0));
        self.keys.replace(Entry {
            obj,
            stamp: 0,
            follows: 0,
        });
    }
}

/// Resource versions are opaque in Kubernetes but decimal in practice (etcd, steady), and
/// one sequence for every object of a kind: they are compared numerically when they parse.
fn version_of(resource_version: Option<&str>) -> Option<u64> {
    resource_version.and_then(|v| v.parse().ok())
}

/// Whether `incoming` is older than `current` (never when either does not parse: then
/// the incoming one is taken as newer).
fn is_older(incoming: Option<&str>, current: Option<&str>) -> bool {
    match (version_of(incoming), version_of(current)) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    }
}

/// How a state reaches the cache.
enum Arrival<K> {
    /// A watch event, with what says whether a change from the cached state wakes
    /// reconciles. Events come in revision order: each one moves the watch's mark.
    Event(fn(&K, &K) -> bool),
    /// One object of a (re)list: not in revision order, so the mark moves at its end.
    Listed(fn(&K, &K) -> bool),
    /// The reply to a write, which may arrive after the watch has moved past it.
    Written,
}

// Not derived: a derive would ask `K: Copy`.
impl<K> Clone for Arrival<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Arrival<K> {}

impl<K> Arrival<K> {
    fn wakes(self) -> Option<fn(&K, &K) -> bool> {
        match self {
            Arrival::Event(wakes) | Arrival::Listed(wakes) => Some(wakes),
            Arrival::Written => None,
        }
    }
}

fn owner_uids<K: Cached>(obj: &K) -> impl Iterator<Item = &str> {
    obj.cached_owners().map(|owner| owner.uid)
}

impl<K: Cached> Inner<K> {
    fn take(&mut self, key: &KeyRef<'_>) -> Option<Arc<K>> {
        let removed = self.objects.take(key as &dyn Keyed)?.obj;
        self.unindex(&removed);
        if !self.unconfirmed.is_empty() {
            self.unconfirmed.remove(&removed.cache_key());
        }
        Some(removed)
    }

    /// Cache `obj` with `stamp`, following the state stamped `follows`; returns the state
    /// it replaced.
    fn store(&mut self, obj: &Arc<K>, stamp: u64, follows: u64) -> Option<Arc<K>> {
        let previous = self
            .objects
            .replace(Entry {
                obj: obj.clone(),
                stamp,
                follows,
            })
            .map(|e| e.obj);
        if let Some(prev) = &previous {
            self.unindex(prev);
        }
        self.index(obj, stamp, follows);
        previous
    }

    fn next_stamp(&mut self) -> u64 {
        self.last_stamp += 1;
        self.last_stamp
    }

    /// A watched state (event or list) older than the cached one: if it lies between a
    /// written state and the state that write replaced, the cached state is stamped anew
    /// and the update wakes (see [`Unconfirmed`]). `None`: it is merely stale.
    fn unseen_change(&mut self, incoming: &K, cached: &Arc<K>, stamp: u64) -> Option<Update<K>> {
        if self.unconfirmed.is_empty() || incoming.cache_meta().uid != cached.cache_meta().uid {
            return None;
        }
        let version = version_of(incoming.cache_meta().resource_version)?;
        let written = self.unconfirmed.get_mut(&cached.cache_key())?;
        if version <= written.replaced || version >= written.written {
            return None;
        }
        // Seen now: the same event again (a duplicate) is merely stale.
        written.replaced = version;
        let renewed = self.next_stamp();
        let previous = self.store(cached, renewed, stamp);
        Some(Update {
            previous,
            current: cached.clone(),
            woke: true,
            stamp: renewed,
            replaced: Some(stamp),
        })
    }

    /// Note where a state the cache now holds came from: a write not yet delivered by the
    /// watch, or a watched state that confirms (reaches or passes) one.
    fn note_arrival(&mut self, obj: &K, arrival: Arrival<K>, replaced_version: Option<u64>) {
        let Some(version) = version_of(obj.cache_meta().resource_version) else {
            return;
        };
        match arrival {
            Arrival::Written => {
                if replaced_version != Some(version) {
                    let replaced = replaced_version.unwrap_or(0);
                    let written = Unconfirmed {
                        written: version,
                        replaced,
                    };
                    self.unconfirmed.insert(obj.cache_key(), written);
                }
            }
            Arrival::Event(_) | Arrival::Listed(_) => {
                if !self.unconfirmed.is_empty() {
                    let key = obj.cache_key();
                    if self
                        .unconfirmed
                        .get(&key)
                        .is_some_and(|w| version >= w.written)
                    {
                        self.unconfirmed.remove(&key);
                    }
                }
            }
        }
    }

    fn index(&mut self, obj: &Arc<K>, stamp: u64, follows: u64) {
        for uid in owner_uids(obj.as_ref()) {
            // The previous state was unindexed first; `replace` keeps this state even if
            // it was not.
            self.by_owner.entry(uid.into()).or_default().replace(Entry {
                obj: obj.clone(),
                stamp,
                follows,
            });
        }
    }

    fn unindex(&mut self, obj: &K) {
        let key = KeyRef::of(obj);
        for uid in owner_uids(obj) {
            if let Some(owned) = self.by_owner.get_mut(uid) {
                owned.remove(&key as &dyn Keyed);
                if owned.is_empty() {
                    self.by_owner.remove(uid);
                }
            }
        }
    }
}

impl<K: Cached> ObjectCache<K> {
    fn read(&self) -> RwLockReadGuard<'_, Inner<K>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<K>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached object at `key`, if any.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        find(&self.read().objects, &KeyRef::of_key(key)).cloned()
    }

    /// Every object, in key order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().objects.iter().map(|e| e.obj.clone()).collect()
    }

    /// The objects of one namespace (`None`: the cluster-scoped ones), in name order: a
    /// range of the key order, not a scan of the whole cache.
    pub fn in_namespace(&self, namespace: Option<&str>) -> Vec<Arc<K>> {
        let first = KeyRef((namespace, ""));
        self.read()
            .objects
            .range::<dyn Keyed, _>((Bound::Included(&first as &dyn Keyed), Bound::Unbounded))
            .take_while(|e| e.obj.cache_meta().namespace == namespace)
            .map(|e| e.obj.clone())
            .collect()
    }

    /// Every cached key, in order.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read()
            .objects
            .iter()
            .map(|e| e.obj.cache_key())
            .collect()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    /// Whether nothing is cached (also before the first list completes).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Objects with an ownerReference to `uid`, in key order.
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<K>> {
        self.read()
            .by_owner
            .get(uid)
            .map(|owned| owned.iter().map(|e| e.obj.clone()).collect())
            .unwrap_or_default()
    }

    /// The object at `key` and its stamp (see `Entry`).
    pub(crate) fn get_stamped(&self, key: &ObjectKey) -> Option<(Arc<K>, u64)> {
        find_entry(&self.read().objects, &KeyRef::of_key(key)).map(|e| (e.obj.clone(), e.stamp))
    }

    /// [`owned_by`](Self::owned_by), each object with its stamp.
    pub(crate) fn owned_by_stamped(&self, uid: &str) -> Vec<(Arc<K>, u64)> {
        self.read()
            .by_owner
            .get(uid)
            .map(|owned| owned.iter().map(|e| (e.obj.clone(), e.stamp)).collect())
            .unwrap_or_default()
    }

    /// Trim every object before it is cached from now on.
    pub(crate) fn set_trim(&self, trim: Trim<K>) {
        self.write().trim = Some(trim);
    }

    /// Apply `normalize`, which drops the fields at `unread`, to every object before it is
    /// cached (and before the trim).
    pub(crate) fn set_normalize(&self, normalize: fn(&mut K), unread: &'static [&'static str]) {
        let mut inner = self.write();
        inner.normalize = Some(normalize);
        inner.unread = unread;
    }

    /// The fields no object keeps in this cache (see [`Self::set_normalize`]).
    pub(crate) fn unread(&self) -> &'static [&'static str] {
        self.read().unread
    }

    /// Record a state the reconciler just wrote, so its next read sees it.
    pub fn remember(&self, obj: K) {
        // A stale remembered write only means the cache already knows better.
        let _ = self.apply(obj);
    }

    /// [`remember`](Self::remember), returning the stamp the written state got and the
    /// one it replaced (`None` when the cache already held a newer state).
    pub(crate) fn remember_stamped(&self, obj: K) -> Option<Stamps> {
        self.update_unless_newer(obj, Arrival::Written)
            .ok()
            .map(|u| Stamps {
                stamp: u.stamp,
                replaced: u.replaced,
            })
    }

    /// Record that the reconciler deleted `key`.
    pub fn forget(&self, key: &ObjectKey) {
        self.remove(key);
    }

    /// Insert or update unless the cache already holds a newer version. Returns the
    /// previous state when the cache changed, `Err(())` when the update was stale.
    pub(crate) fn apply(&self, obj: K) -> Result<Option<Arc<K>>, Stale> {
        self.update_unless_newer(obj, Arrival::Written)
            .map(|update| update.previous)
            .map_err(|_newer| Stale)
    }

    /// [`apply`](Self::apply) of a watch event's state, also returning the state now
    /// cached (trimmed) and whether `wakes` says the change from the previous one matters.
    pub(crate) fn update(&self, obj: K, wakes: fn(&K, &K) -> bool) -> Result<Update<K>, Stale> {
        self.update_unless_newer(obj, Arrival::Event(wakes))
            .map_err(|_newer| Stale)
    }

    /// [`update`](Self::update), or why not: `Err(Some(newer))` when the cache holds a
    /// newer state for the key (of this object, or of a successor with its name), and
    /// `Err(None)` for a written state of an object the watch has seen deleted since.
    fn update_unless_newer(
        &self,
        mut obj: K,
        arrival: Arrival<K>,
    ) -> Result<Update<K>, Rejected<K>> {
        let (normalize, trim) = {
            let inner = self.read();
            (inner.normalize, inner.trim.clone())
        };
        if let Some(normalize) = normalize {
            normalize(&mut obj);
        }
        if let Some(trim) = trim {
            trim(&mut obj);
        }
        let mut inner = self.write();
        let incoming_version = version_of(obj.cache_meta().resource_version);
        if let (Arrival::Event(_), Some(version)) = (arrival, incoming_version) {
            inner.watched_to = inner.watched_to.max(version);
        }
        let mut kept = None;
        let mut woke = true;
        let found = find_entry(&inner.objects, &KeyRef::of(&obj));
        let mut follows = found.map_or(0, |current| current.stamp);
        // Only a write's arrival needs the version it replaces (see `Unconfirmed`).
        let replaced_version = found
            .filter(|_| matches!(arrival, Arrival::Written))
            .and_then(|e| version_of(e.obj.cache_meta().resource_version));
        match found {
            Some(current) => {
                let (cached, incoming) = (current.obj.cache_meta(), obj.cache_meta());
                if is_older(incoming.resource_version, cached.resource_version) {
                    let (cached, stamp) = (current.obj.clone(), current.stamp);
                    if !matches!(arrival, Arrival::Written)
                        && let Some(update) = inner.unseen_change(&obj, &cached, stamp)
                    {
                        return Ok(update);
                    }
                    return Err(Some(cached));
                }
                if cached.uid == incoming.uid {
                    woke = arrival
                        .wakes()
                        .is_none_or(|wakes| wakes(&current.obj, &obj));
                    // The same state again (the event of a remembered write), or a change
                    // nobody is woken for: what a reconciler reads is unchanged.
                    if cached.resource_version == incoming.resource_version || !woke {
                        kept = Some(current.stamp);
                        follows = current.follows;
                    }
                }
            }
            None if matches!(arrival, Arrival::Written)
                && incoming_version.is_some_and(|v| v <= inner.watched_to) =>
            {
                return Err(None);
            }
            None => {}
        }
        inner.note_arrival(&obj, arrival, replaced_version);
        let stamp = kept.unwrap_or_else(|| inner.next_stamp());
        let current = Arc::new(obj);
        let previous = inner.store(&current, stamp, follows);
        Ok(Update {
            previous,
            current,
            woke,
            stamp,
            replaced: (follows != 0).then_some(follows),
        })
    }

    pub(crate) fn remove(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.write().take(&KeyRef::of_key(key))
    }

    /// A watch's DELETED event for `obj` (at the delete's revision): its key is removed,
    /// unless the cache holds a newer state for it, a successor with the same name the
    /// reconciler created and remembered before the event arrived.
    pub(crate) fn remove_watched(&self, obj: &K) -> Option<Arc<K>> {
        let mut inner = self.write();
        let deleted = obj.cache_meta().resource_version;
        if let Some(version) = version_of(deleted) {
            inner.watched_to = inner.watched_to.max(version);
        }
        let key = KeyRef::of(obj);
        let current = find(&inner.objects, &key)?;
        if is_older(deleted, current.cache_meta().resource_version) {
            return None;
        }
        inner.take(&key)
    }

    /// One object of a (re)list, recorded in `listed`. Applied as it arrives, so an
    /// unchanged object keeps its single copy and a relist never holds a second full copy
    /// of the kind in memory. Returns the states a trigger must see: the previous and the
    /// new one when the object changed (or only the new one when it is new), nothing when
    /// it did not.
    pub(crate) fn apply_listed(
        &self,
        obj: K,
        listed: &mut Listed<K>,
        wakes: fn(&K, &K) -> bool,
    ) -> Vec<Arc<K>> {
        let unchanged = {
            let inner = self.read();
            find(&inner.objects, &KeyRef::of(&obj))
                .filter(|current| {
                    let (current, incoming) = (current.cache_meta(), obj.cache_meta());
                    current.uid == incoming.uid
                        && current.resource_version == incoming.resource_version
                })
                .cloned()
        };
        let listed_version = version_of(obj.cache_meta().resource_version);
        if let Some(current) = unchanged {
            listed.record(current, listed_version);
            return Vec::new();
        }
        match self.update_unless_newer(obj, Arrival::Listed(wakes)) {
            Ok(Update {
                previous, current, ..
            }) => {
                listed.record(current.clone(), listed_version);
                previous.into_iter().chain([current]).collect()
            }
            Err(newer) => {
                if let Some(newer) = newer {
                    listed.record(newer, listed_version);
                }
                Vec::new()
            }
        }
    }

    /// The end of a (re)list that delivered `listed`: everything else is gone. Returns the
    /// removed objects, so a relist after a 410 misses no deletion.
    pub(crate) fn retain_listed(&self, listed: Listed<K>) -> Vec<Arc<K>> {
        let mut inner = self.write();
        inner.watched_to = inner.watched_to.max(listed.newest);
        let gone: Vec<ObjectKey> = inner
            .objects
            .iter()
            .filter(|entry| !listed.keys.contains(*entry as &dyn Keyed))
            .map(|entry| entry.obj.cache_key())
            .collect();
        gone.iter()
            .filter_map(|key| inner.take(&KeyRef::of_key(key)))
            .collect()
    }
}

/// What an accepted update did to the cache.
pub(crate) struct Update<K> {
    /// The state it replaced, if the key was cached.
    pub(crate) previous: Option<Arc<K>>,
    /// The state now cached (after the trim).
    pub(crate) current: Arc<K>,
    /// The change from `previous` matters to the watch's triggers (always, without a
    /// previous state of the same uid or without a `wakes` to ask).
    pub(crate) woke: bool,
    /// The state's stamp (see `Entry`).
    pub(crate) stamp: u64,
    /// The stamp of the state it replaced in the cache (when the same state was already
    /// cached, the stamp of the state that one replaced), if there was one.
    pub(crate) replaced: Option<u64>,
}

/// The stamp a written state got in the cache, and the stamp of the state it replaced
/// (`None`: the key was not cached). A write explains a change of its object only when
/// what it replaced is what its reconcile read or wrote before: see
/// `Inputs::changed_only_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamps {
    pub(crate) stamp: u64,
    pub(crate) replaced: Option<u64>,
}

/// Whether `new` differs from `old` in anything a reconciler can read: every field but
/// `metadata.resourceVersion` and `metadata.managedFields` (which change on every write,
/// and which no level-triggered decision may depend on).
pub(crate) fn differs_beyond_version<K: Resource + Clone + PartialEq>(old: &K, new: &K) -> bool {
    let mut new = new.clone();
    let (old_meta, new_meta) = (old.meta(), new.meta_mut());
    new_meta
        .resource_version
        .clone_from(&old_meta.resource_version);
    new_meta.managed_fields.clone_from(&old_meta.managed_fields);
    *old != new
}

/// Why a state was not cached: the newer state the cache holds for its key, or `None`
/// when the watch has seen the object deleted after the state was written.
type Rejected<K> = Option<Arc<K>>;

/// An update older than what the cache holds (a watch event behind a remembered write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale;

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn cm(name: &str, rv: &str, owner: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some(rv.into()),
                owner_references: owner.map(|o| {
                    vec![OwnerReference {
                        uid: o.into(),
                        name: "owner".into(),
                        kind: "Thing".into(),
                        api_version: "v1".into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn remembered_writes_are_not_overwritten_by_older_events() {
        let cache = ObjectCache::<ConfigMap>::default();
        cache.remember(cm("a", "10", None));
        assert_eq!(cache.apply(cm("a", "9", None)), Err(Stale));
        let key = ObjectKey::new(Some("ns"), "a");
        assert_eq!(
            cache
                .get(&key)
                .and_then(|c| c.metadata.resource_version.clone())
                .as_deref(),
            Some("10")
        );
        assert!(cache.apply(cm("a", "11", None)).is_ok());
    }

    #[test]
    fn trimmed_objects_are_cached_without_what_was_trimmed() {
        let cache = ObjectCache::<ConfigMap>::default();
        cache.set_trim(Arc::new(|cm: &mut ConfigMap| cm.data = None));
        let mut full = cm("a", "1", Some("o1"));
        full.data = Some([("big".to_string(), "x".repeat(1000))].into());
        cache.apply(full.clone()).ok();
        let mut newer = full;
        newer.metadata.resource_version = Some("2".into());
        cache.remember(newer);
        let cached = cache.get(&ObjectKey::new(Some("ns"), "a")).unwrap();
        assert_eq!(cached.data, None);
        assert_eq!(cached.metadata.resource_version.as_deref(), Some("2"));
        assert_eq!(cache.owned_by("o1").len(), 1);
    }

    #[test]
    fn a_namespace_reads_only_its_own_objects() {
        let cache = ObjectCache::<ConfigMap>::default();
        let in_ns = |namespace: Option<&str>, name: &str| {
            let mut object = cm(name, "1", None);
            object.metadata.namespace = namespace.map(str::to_string);
            cache.apply(object).ok();
        };
        in_ns(Some("a"), "x");
        in_ns(Some("ab"), "y");
        in_ns(Some("b"), "z");
        in_ns(Some("a"), "w");
        in_ns(None, "cluster");
        let names = |namespace| -> Vec<String> {
            let objects = cache.in_namespace(namespace);
            objects
                .iter()
                .map(|o| o.cache_meta().name.to_string())
                .collect()
        };
        assert_eq!(names(Some("a")), ["w", "x"]);
        assert_eq!(names(Some("ab")), ["y"]);
        assert_eq!(names(None), ["cluster"]);
        assert!(names(Some("c")).is_empty());
    }

    #[test]
    fn owner_index_follows_updates_and_deletes() {
        let cache = ObjectCache::<ConfigMap>::default();
        cache.apply(cm("a", "1", Some("o1"))).ok();
        cache.apply(cm("b", "2", Some("o1"))).ok();
        assert_eq!(cache.owned_by("o1").len(), 2);
        cache.apply(cm("a", "3", Some("o2"))).ok();
        assert_eq!(cache.owned_by("o1").len(), 1);
        assert_eq!(cache.owned_by("o2").len(), 1);
        cache.remove(&ObjectKey::new(Some("ns"), "b"));
        assert!(cache.owned_by("o1").is_empty());
    }

    #[test]
    fn owned_objects_are_read_at_their_latest_state() {
        let cache = ObjectCache::<ConfigMap>::default();
        cache.apply(cm("a", "1", Some("o1"))).ok();
        cache.apply(cm("a", "2", Some("o1"))).ok();
        let owned = cache.owned_by("o1");
        let versions: Vec<_> = owned
            .iter()
            .map(|c| c.metadata.resource_version.as_deref())
            .collect();
        assert_eq!(versions, [Some("2")]);
        let removed = cache.remove(&ObjectKey::new(Some("ns"), "a"));
        assert!(removed.is_some());
        assert!(cache.owned_by("o1").is_empty());
        assert!(cache.is_empty());
    }

    #[test]
    fn only_changes_that_survive_the_trim_count_beyond_the_version() {
        let cache = ObjectCache::<ConfigMap>::default();
        cache.set_trim(Arc::new(|cm: &mut ConfigMap| cm.data = None));
        let first = cache
            .remember_stamped(cm("a", "1", Some("o1")))
            .map(|stamps| stamps.stamp);
        let mut data_only = cm("a", "2", Some("o1"));
        data_only.data = Some([("k".to_string(), "v".to_string())].into());
        data_only.metadata.managed_fields = Some(Vec::new());
        let update = cache
            .update(data_only, differs_beyond_version)
            .expect("newer");
        assert!(update.previous.is_some());
        assert!(!update.woke, "only the version changed, once trimmed");
        assert_eq!(Some(update.stamp), first, "so the stamp is kept");

        let mut labelled = cm("a", "3", Some("o1"));
        labelled.metadata.labels = Some([("k".to_string(), "v".to_string())].into());
        let update = cache
            .update(labelled.clone(), differs_beyond_version)
            .expect("newer");
        assert!(update.woke);
        assert_ne!(Some(update.stamp), first, "a label is news: a new stamp");
        let labelled_stamp = update.stamp;
        let owned = cache.owned_by_stamped("o1");
        assert_eq!(owned.first().map(|(_, stamp)| *stamp), Some(labelled_stamp));

        // The same state again (the event of a remembered write) keeps the stamp even
        // where every update wakes.
        let again = cache.update(labelled, |_, _| true).expect("same");
        assert_eq!(again.stamp, labelled_stamp);
        let key = ObjectKey::new(Some("ns"), "a");
        assert_eq!(
            cache.get_stamped(&key).map(|(_, s)| s),
            Some(labelled_stamp)
        );
    }

    /// A whole list, as the watch delivers it.
    fn relist(cache: &ObjectCache<ConfigMap>, objects: Vec<ConfigMap>) -> Vec<Arc<ConfigMap>> {
        let mut listed = Listed::default();
        let mut changed: Vec<Arc<ConfigMap>> = objects
            .into_iter()
            .flat_map(|o| cache.apply_listed(o, &mut listed, differs_beyond_version))
            .collect();
        changed.extend(cache.retain_listed(listed));
        changed
    }

    #[test]
    fn a_relist_reports_every_difference_and_keeps_unchanged_copies() {
        let cache = ObjectCache::<ConfigMap>::default();
        relist(
            &cache,
            vec![
                cm("keep", "1", None),
                cm("change", "1", None),
                cm("gone", "1", Some("o1")),
            ],
        );
        let kept = cache.get(&ObjectKey::new(Some("ns"), "keep")).unwrap();
        let changed = relist(
            &cache,
            vec![
                cm("keep", "1", None),
                cm("change", "2", None),
                cm("new", "3", None),
            ],
        );
        let mut names: Vec<String> = changed
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        names.sort();
        assert_eq!(names, ["change", "change", "gone", "new"]);
        let still = cache.get(&ObjectKey::new(Some("ns"), "keep")).unwrap();
        assert!(
            Arc::ptr_eq(&kept, &still),
            "an unchanged object is not copied"
        );
        assert!(cache.owned_by("o1").is_empty());
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn a_relist_does_not_undo_a_newer_remembered_write() {
        let cache = ObjectCache::<ConfigMap>::default();
        relist(&cache, vec![cm("a", "1", None)]);
        cache.remember(cm("a", "5", None));
        relist(&cache, vec![cm("a", "4", None)]);
        let rv = cache
            .get(&ObjectKey::new(Some("ns"), "a"))
            .and_then(|c| c.metadata.resource_version.clone());
        assert_eq!(rv.as_deref(), Some("5"));
    }

    /// `cm(name, rv)` of another incarnation: a successor created with the same name.
    fn successor(name: &str, rv: &str) -> ConfigMap {
        let mut obj = cm(name, rv, None);
        obj.metadata.uid = Some(format!("uid-{name}-2"));
        obj
    }

    fn cached_uid(cache: &ObjectCache<ConfigMap>, name: &str) -> Option<String> {
        cache
            .get(&ObjectKey::new(Some("ns"), name))
            .and_then(|c| c.metadata.uid.clone())
    }

    /// The reply to a final delete can arrive after the watch's DELETED event: it must
    /// not put the gone object back (nothing would ever remove it again).
    #[test]
    fn a_write_reply_after_the_delete_event_does_not_bring_the_object_back() {
        let cache = ObjectCache::<ConfigMap>::default();
        assert!(
            cache
                .update(cm("a", "5", None), differs_beyond_version)
                .is_ok()
        );
        assert!(cache.remove_watched(&cm("a", "7", None)).is_some());
        assert_eq!(cache.remember_stamped(cm("a", "6", None)), None);
        assert!(cache.is_empty());
        // A write the watch has not reached yet is still read back at once.
        assert!(cache.remember_stamped(cm("b", "8", None)).is_some());
        assert_eq!(cached_uid(&cache, "b").as_deref(), Some("uid-b"));
    }

    /// Names come back (a StatefulSet's pods): a late reply about the old object must not
    /// replace its successor, whatever its uid.
    #[test]
    fn a_late_reply_does_not_replace_a_successor_with_the_same_name() {
        let cache = ObjectCache::<ConfigMap>::default();
        assert!(
            cache
                .update(cm("a", "5", None), differs_beyond_version)
                .is_ok()
        );
        cache.remove_watched(&cm("a", "7", None));
        assert!(
            cache
                .update(successor("a", "8"), differs_beyond_version)
                .is_ok()
        );
        assert_eq!(cache.remember_stamped(cm("a", "6", None)), None);
        assert_eq!(cached_uid(&cache, "a").as_deref(), Some("uid-a-2"));
    }

    /// A written state says which cached state it replaced, also when the watch
    /// delivered the same state first: then it is what that event's state replaced.
    #[test]
    fn a_written_state_names_the_state_it_replaced() {
        let cache = ObjectCache::<ConfigMap>::default();
        let read = cache.update(cm("a", "5", None), |_, _| true).expect("new");
        assert_eq!(read.replaced, None, "nothing was cached");
        let written = cache.remember_stamped(cm("a", "6", None)).expect("newer");
        assert_eq!(written.replaced, Some(read.stamp));
        // Someone else's change (7) arrives, then the watch delivers a write's state (8)
        // before its reply: the reply replaced 7, not the state the writer read.
        let theirs = cache
            .update(cm("a", "7", None), |_, _| true)
            .expect("newer");
        let echo = cache
            .update(cm("a", "8", None), |_, _| true)
            .expect("newer");
        let reply = cache.remember_stamped(cm("a", "8", None)).expect("same");
        assert_eq!(reply.stamp, echo.stamp, "the same state keeps its stamp");
        assert_eq!(reply.replaced, Some(theirs.stamp));
    }

    /// Someone changes an object (6) between the state the cache holds (5) and a write
    /// whose reply (7, carrying that change) the cache takes first: the change's event
    /// arrives older than the cached state, and still wakes, once, with a new stamp.
    #[test]
    fn an_event_between_a_write_and_the_state_it_replaced_still_wakes() {
        let cache = ObjectCache::<ConfigMap>::default();
        let every = |_: &ConfigMap, _: &ConfigMap| true;
        cache.update(cm("a", "5", None), every).expect("new");
        let written = cache.remember_stamped(cm("a", "7", None)).expect("newer");
        let theirs = cache
            .update(cm("a", "6", None), every)
            .expect("an unseen change");
        assert!(theirs.woke);
        assert_ne!(theirs.stamp, written.stamp, "what reconcilers read is news");
        assert_eq!(theirs.replaced, Some(written.stamp));
        assert_eq!(
            theirs.current.metadata.resource_version.as_deref(),
            Some("7"),
            "the written state, which holds the change, stays cached"
        );
        assert!(
            cache.update(cm("a", "6", None), every).is_err(),
            "a duplicate is stale"
        );
        // The write's own event confirms it: an older state is stale from then on.
        let echo = cache.update(cm("a", "7", None), every).expect("same state");
        assert_eq!(echo.stamp, theirs.stamp);
        let mut between = cm("a", "6", None);
        between.metadata.labels = Some([("k".to_string(), "v".to_string())].into());
        assert!(cache.update(between, every).is_err());
        // Older events of an object written over nothing the cache held, or of another
        // incarnation, are stale as before.
        cache.remember_stamped(cm("b", "9", None)).expect("new");
        let mut predecessor = cm("b", "8", None);
        predecessor.metadata.uid = Some("uid-b-before".into());
        assert!(cache.update(predecessor, every).is_err());
    }

    /// The reconciler deletes an object and creates its successor before the watch
    /// delivers the delete: the DELETED event must not remove the successor.
    #[test]
    fn a_delete_event_keeps_a_remembered_successor() {
        let cache = ObjectCache::<ConfigMap>::default();
        assert!(
            cache
                .update(cm("a", "5", None), differs_beyond_version)
                .is_ok()
        );
        cache.forget(&ObjectKey::new(Some("ns"), "a"));
        assert!(cache.remember_stamped(successor("a", "8")).is_some());
        assert!(cache.remove_watched(&cm("a", "7", None)).is_none());
        assert_eq!(cached_uid(&cache, "a").as_deref(), Some("uid-a-2"));
        // The successor's own deletion does remove it.
        assert!(cache.remove_watched(&successor("a", "9")).is_some());
        assert!(cache.is_empty());
    }

    /// A relist after a gap shows what was deleted meanwhile by leaving it out: a reply
    /// written before the list's revision, for an object it did not list, is of a gone
    /// object. Objects of the list whose cached state is newer do not move the mark.
    #[test]
    fn a_relist_marks_what_it_did_not_list_as_deleted() {
        let cache = ObjectCache::<ConfigMap>::default();
        assert!(cache.remember_stamped(cm("newer", "20", None)).is_some());
        relist(&cache, vec![cm("b", "9", None), cm("newer", "4", None)]);
        assert_eq!(cache.remember_stamped(cm("a", "5", None)), None);
        assert!(cache.remember_stamped(cm("c", "10", None)).is_some());
        assert_eq!(cache.len(), 3, "b, newer and c");
    }
}
