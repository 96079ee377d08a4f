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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
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

struct Inner<K> {
    objects: BTreeMap<ObjectKey, Arc<K>>,
    by_owner: BTreeMap<String, BTreeSet<ObjectKey>>,
    trim: Option<Trim<K>>,
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
                objects: BTreeMap::new(),
                by_owner: BTreeMap::new(),
                trim: None,
            })),
        }
    }
}

/// Resource versions are opaque in Kubernetes but decimal in practice (etcd, steady):
/// compare numerically when both parse, otherwise treat the incoming one as newer.
fn is_older(incoming: Option<&str>, current: Option<&str>) -> bool {
    match (
        incoming.and_then(|v| v.parse::<u64>().ok()),
        current.and_then(|v| v.parse::<u64>().ok()),
    ) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    }
}

fn owner_uids<K: Cached>(obj: &K) -> impl Iterator<Item = &str> {
    obj.cached_owners().map(|owner| owner.uid)
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
        self.read().objects.get(key).cloned()
    }

    /// Every object, in key order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().objects.values().cloned().collect()
    }

    /// Every cached key, in order.
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.read().objects.keys().cloned().collect()
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
        let inner = self.read();
        inner
            .by_owner
            .get(uid)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| inner.objects.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Trim every object before it is cached from now on.
    pub(crate) fn set_trim(&self, trim: Trim<K>) {
        self.write().trim = Some(trim);
    }

    /// Record a state the reconciler just wrote, so its next read sees it.
    pub fn remember(&self, obj: K) {
        // A stale remembered write only means the cache already knows better.
        let _ = self.apply(obj);
    }

    /// Record that the reconciler deleted `key`.
    pub fn forget(&self, key: &ObjectKey) {
        self.remove(key);
    }

    /// Insert or update unless the cache already holds a newer version. Returns the
    /// previous state when the cache changed, `Err(())` when the update was stale.
    pub(crate) fn apply(&self, obj: K) -> Result<Option<Arc<K>>, Stale> {
        self.update(obj).map(|update| update.previous)
    }

    /// [`apply`](Self::apply), also returning the state now cached (trimmed), so a watch
    /// can tell whether what a reconciler reads changed.
    pub(crate) fn update(&self, mut obj: K) -> Result<Update<K>, Stale> {
        let key = obj.cache_key();
        if let Some(trim) = self.read().trim.clone() {
            trim(&mut obj);
        }
        let mut inner = self.write();
        if let Some(current) = inner.objects.get(&key) {
            let (current, incoming) = (current.cache_meta(), obj.cache_meta());
            if current.uid == incoming.uid
                && is_older(incoming.resource_version, current.resource_version)
            {
                return Err(Stale);
            }
        }
        let current = Arc::new(obj);
        let previous = inner.objects.insert(key.clone(), current.clone());
        if let Some(prev) = &previous {
            let owners: Vec<String> = owner_uids(prev.as_ref()).map(str::to_string).collect();
            unindex(&mut inner.by_owner, &owners, &key);
        }
        for uid in owner_uids(current.as_ref()) {
            inner
                .by_owner
                .entry(uid.to_string())
                .or_default()
                .insert(key.clone());
        }
        Ok(Update { previous, current })
    }

    pub(crate) fn remove(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let mut inner = self.write();
        let removed = inner.objects.remove(key)?;
        let owners: Vec<String> = owner_uids(removed.as_ref()).map(str::to_string).collect();
        unindex(&mut inner.by_owner, &owners, key);
        Some(removed)
    }

    /// One object of a (re)list. Applied as it arrives, so an unchanged object keeps its
    /// single copy and a relist never holds a second full copy of the kind in memory.
    /// Returns the states a trigger must see: the previous and the new one when the object
    /// changed (or only the new one when it is new), nothing when it did not.
    pub(crate) fn apply_listed(&self, obj: K) -> Vec<Arc<K>> {
        let key = obj.cache_key();
        let unchanged = self.read().objects.get(&key).is_some_and(|current| {
            let (current, incoming) = (current.cache_meta(), obj.cache_meta());
            current.uid == incoming.uid && current.resource_version == incoming.resource_version
        });
        if unchanged {
            return Vec::new();
        }
        match self.apply(obj) {
            Ok(previous) => previous.into_iter().chain(self.get(&key)).collect(),
            Err(Stale) => Vec::new(),
        }
    }

    /// The end of a (re)list that contained `listed`: everything else is gone. Returns the
    /// removed objects, so a relist after a 410 misses no deletion.
    pub(crate) fn retain_listed(&self, listed: &BTreeSet<ObjectKey>) -> Vec<Arc<K>> {
        let gone: Vec<ObjectKey> = self
            .read()
            .objects
            .keys()
            .filter(|key| !listed.contains(*key))
            .cloned()
            .collect();
        gone.iter().filter_map(|key| self.remove(key)).collect()
    }
}

/// What an accepted update did to the cache.
pub(crate) struct Update<K> {
    /// The state it replaced, if the key was cached.
    pub(crate) previous: Option<Arc<K>>,
    /// The state now cached (after the trim).
    pub(crate) current: Arc<K>,
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

/// An update older than what the cache holds (a watch event behind a remembered write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale;

fn unindex(
    by_owner: &mut BTreeMap<String, BTreeSet<ObjectKey>>,
    owners: &[String],
    key: &ObjectKey,
) {
    for uid in owners {
        if let Some(set) = by_owner.get_mut(uid) {
            set.remove(key);
            if set.is_empty() {
                by_owner.remove(uid);
            }
        }
    }
}

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
    fn only_changes_that_survive_the_trim_count_beyond_the_version() {
        let cache = ObjectCache::<ConfigMap>::default();
        cache.set_trim(Arc::new(|cm: &mut ConfigMap| cm.data = None));
        cache.apply(cm("a", "1", Some("o1"))).ok();
        let mut data_only = cm("a", "2", Some("o1"));
        data_only.data = Some([("k".to_string(), "v".to_string())].into());
        data_only.metadata.managed_fields = Some(Vec::new());
        let update = cache.update(data_only).expect("newer");
        let previous = update.previous.expect("was cached");
        assert!(!differs_beyond_version(
            previous.as_ref(),
            update.current.as_ref()
        ));

        let mut labelled = cm("a", "3", Some("o1"));
        labelled.metadata.labels = Some([("k".to_string(), "v".to_string())].into());
        let update = cache.update(labelled).expect("newer");
        let previous = update.previous.expect("was cached");
        assert!(differs_beyond_version(
            previous.as_ref(),
            update.current.as_ref()
        ));
    }

    /// A whole list, as the watch delivers it.
    fn relist(cache: &ObjectCache<ConfigMap>, objects: Vec<ConfigMap>) -> Vec<Arc<ConfigMap>> {
        let listed: BTreeSet<ObjectKey> = objects.iter().map(ObjectKey::of).collect();
        let mut changed: Vec<Arc<ConfigMap>> = objects
            .into_iter()
            .flat_map(|o| cache.apply_listed(o))
            .collect();
        changed.extend(cache.retain_listed(&listed));
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
}
