//! Controllers that live inside the server: the garbage collector (ownerReferences,
//! Background / Foreground / Orphan), namespace termination, CRD cleanup and the `default`
//! ServiceAccount of every namespace; claims and volumes kept while in use
//! ([`storage_protection`]) and secret-based service-account tokens filled
//! ([`service_account_tokens`]), both steps of the collector's pass; and ClusterRole aggregation
//! ([`aggregation`]). RBAC needs aggregation, and the protection finalizers the server adds
//! need their release, under `steady server` as much as under `steady up`.
//!
//! One task follows every change in the store (a [`steady_store::Follow`]: a snapshot,
//! then its changes, and a new snapshot whenever its position is compacted away),
//! keeps indexes of objects by uid, of dependents by owner uid, of keys by namespace, of
//! namespaces by name and of CRDs by the store prefix of their custom resources, and after
//! each event re-examines
//! only the objects that event concerns: a delete wakes the namespace or CRD it was in only
//! when that one is waiting and now empty, never every waiting one. Work that fails is
//! retried after [`RETRY_INTERVAL`]. Everything iterates in a defined order (BTreeMap), so
//! the simulator sees the same sequence of writes for the same inputs.
//!
//! An object the collector cannot read (its JSON does not parse, or it has no uid) is known
//! by its key only: it is deleted straight from the store when its namespace terminates or
//! its CRD goes, so it never outlives them.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use steady_store::{Change, ChangeKind, Derived, Follow, Followed, Revision, Snapshot, StoreError};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::ApiServer;
use crate::crd::CLEANUP_FINALIZER;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::objects::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN, Target};
use crate::registry::ResourceType;
use crate::request::{DeleteOptions, Propagation, WriteOptions};

const RETRY_INTERVAL: Duration = Duration::from_secs(1);

const NAMESPACE_PREFIX: &str = "/core/namespaces/";

/// Start the in-server controllers; aggregated ClusterRoles are up to date on return.
pub async fn spawn_all(server: &ApiServer) -> Vec<JoinHandle<()>> {
    let gc = GarbageCollector::new(server.clone());
    let mut tasks = vec![tokio::spawn(gc.run())];
    if let Some((aggregator, follow)) = aggregation::RoleAggregator::start(server.clone()).await {
        tasks.push(tokio::spawn(aggregator.run(follow)));
    }
    tasks
}

const CRD_PREFIX: &str = "/apiextensions.k8s.io/customresourcedefinitions/";

/// Below this nesting a stored object parses whole (serde_json refuses 128 levels), so
/// reading only its metadata cannot call readable what the rest of the server cannot read.
const SKIM_DEPTH: usize = 100;

/// The metadata fields the collector reads, typed as a valid object stores them, so the
/// skim builds no `Value`. An object whose metadata does not fit (only a store written by
/// an older version could hold one) is read through [`Node::parse`] instead.
#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct SkeletonMetadata {
    uid: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    owner_references: Option<Vec<SkeletonOwner>>,
    deletion_timestamp: Option<String>,
    finalizers: Option<Vec<String>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SkeletonOwner {
    uid: Option<String>,
    block_owner_deletion: Option<bool>,
}

impl SkeletonMetadata {
    /// The same node [`Node::parse`] makes of an object with this metadata and no spec.
    fn into_node(self, key: &str) -> Option<(String, Node)> {
        let owners = self
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| {
                Some(Owner {
                    uid: r.uid?,
                    blocks: r.block_owner_deletion.unwrap_or(false),
                })
            })
            .collect();
        Some((
            self.uid?,
            Node {
                key: key.to_string(),
                namespace: self.namespace.filter(|ns| !ns.is_empty()),
                name: self.name.unwrap_or_default(),
                owners,
                deleting: self.deletion_timestamp.is_some(),
                finalizers: self.finalizers.unwrap_or_default(),
                namespace_finalizer: false,
                crd_prefix: None,
            },
        ))
    }
}

/// Whether `bytes` nest deeper than [`SKIM_DEPTH`].
fn deeper_than_skim_depth(bytes: &[u8]) -> bool {
    crate::request::json_deeper_than(bytes, SKIM_DEPTH)
}

#[derive(Debug, Clone)]
struct Owner {
    uid: String,
    blocks: bool,
}

/// What the collector remembers of one object.
#[derive(Debug, Clone)]
struct Node {
    key: String,
    namespace: Option<String>,
    name: String,
    owners: Vec<Owner>,
    deleting: bool,
    finalizers: Vec<String>,
    /// Namespaces waiting on `spec.finalizers: [kubernetes]`.
    namespace_finalizer: bool,
    /// For a CRD: the store prefix of its custom resources.
    crd_prefix: Option<String>,
}

/// What the collector reads of an object, derived by the write that stores it so that the
/// write's event carries it ([`steady_store::Event::derived`]): the collector reads every
/// write, and would otherwise decode the committed bytes again.
pub(crate) fn derived_for_collector(key: &str, object: &Value) -> Option<Derived> {
    Node::parse(key, object).map(|read| Derived(Arc::new(read)))
}

impl Node {
    /// What a write's event carries for the collector, if it is that.
    fn derived(derived: Option<&Derived>) -> Option<&(String, Node)> {
        derived?.0.downcast_ref()
    }

    /// The object's uid and what the collector needs of it, or why it cannot read it.
    fn read(key: &str, bytes: &[u8]) -> Result<(String, Node), String> {
        let no_uid = || "it has no metadata.uid".to_string();
        if !Node::reads_spec(key)
            && !deeper_than_skim_depth(bytes)
            && let Ok(metadata) = steady_store::metadata_of::<SkeletonMetadata>(bytes)
        {
            // The collector reads every write: decoding only the metadata it looks at,
            // and stopping at its end, skips spec, status and managedFields, most of an
            // object's bytes.
            return metadata
                .unwrap_or_default()
                .into_node(key)
                .ok_or_else(no_uid);
        }
        let obj: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        Node::parse(key, &obj).ok_or_else(no_uid)
    }

    /// Whether [`Node::parse`] looks at the object's spec (CRDs and namespaces only).
    fn reads_spec(key: &str) -> bool {
        key.starts_with(CRD_PREFIX) || key.starts_with(NAMESPACE_PREFIX)
    }

    fn parse(key: &str, obj: &Value) -> Option<(String, Node)> {
        let uid = meta::uid(obj)?.to_string();
        let owners = meta::owner_references(obj)
            .iter()
            .filter_map(|r| {
                Some(Owner {
                    uid: r.get("uid")?.as_str()?.to_string(),
                    blocks: r
                        .get("blockOwnerDeletion")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                })
            })
            .collect();
        let crd_prefix = key.starts_with(CRD_PREFIX).then(|| {
            let group = meta::str_at(obj, "/spec/group").unwrap_or("");
            let plural = meta::str_at(obj, "/spec/names/plural").unwrap_or("");
            format!("/{group}/{plural}/")
        });
        let namespace_finalizer = key.starts_with(NAMESPACE_PREFIX)
            && obj
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
        Some((
            uid,
            Node {
                key: key.to_string(),
                namespace: meta::namespace(obj).map(str::to_string),
                name: meta::name(obj).unwrap_or("").to_string(),
                owners,
                deleting: meta::deletion_timestamp(obj).is_some(),
                finalizers: meta::finalizers(obj),
                namespace_finalizer,
                crd_prefix,
            },
        ))
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }
}

/// A live object the collector cannot read: it knows its key, revision and namespace.
#[derive(Debug, Clone)]
struct Unreadable {
    revision: Revision,
    namespace: Option<String>,
}

/// What ends a wait for work.
enum Wake {
    Change(Change),
    /// The follow's position was compacted away: everything known is replaced.
    Snapshot(Snapshot),
    /// Failed steps are due for another try.
    Retry,
    /// The store is closed.
    Closed,
}

struct GarbageCollector {
    server: ApiServer,
    nodes: BTreeMap<String, Node>,
    uid_by_key: BTreeMap<String, String>,
    /// Namespace uid by name: what `uid_by_key` holds for namespaces, asked about on
    /// every object examined (is its namespace terminating?) without building its key.
    namespace_uids: BTreeMap<String, String>,
    unreadable: BTreeMap<String, Unreadable>,
    dependents: BTreeMap<String, BTreeSet<String>>,
    /// Keys of the live objects in each namespace (readable or not).
    contents: BTreeMap<String, BTreeSet<String>>,
    /// CRD uid by the store prefix of its custom resources.
    crd_by_prefix: BTreeMap<String, String>,
    /// Uids to examine now.
    dirty: BTreeSet<String>,
    /// Uids whose last step failed, examined again at `retry_at`.
    retry: BTreeSet<String>,
    retry_at: Option<Instant>,
    /// Deleted claims still protected, by namespace: held by a pod when last looked at.
    waiting_claims: BTreeMap<String, BTreeSet<String>>,
    /// Namespaces whose waiting claims are to be looked at again.
    claims_due: BTreeSet<String>,
    /// Keys of the Secrets whose bytes name the token type when last written.
    token_secrets: BTreeSet<String>,
    /// Keys of Secrets the token controller is to look at.
    tokens_due: BTreeSet<String>,
    /// Those whose last step failed, looked at again at `retry_at`.
    tokens_retry: BTreeSet<String>,
}

impl GarbageCollector {
    fn new(server: ApiServer) -> Self {
        GarbageCollector {
            server,
            nodes: BTreeMap::new(),
            uid_by_key: BTreeMap::new(),
            namespace_uids: BTreeMap::new(),
            unreadable: BTreeMap::new(),
            dependents: BTreeMap::new(),
            contents: BTreeMap::new(),
            crd_by_prefix: BTreeMap::new(),
            dirty: BTreeSet::new(),
            retry: BTreeSet::new(),
            retry_at: None,
            waiting_claims: BTreeMap::new(),
            claims_due: BTreeSet::new(),
            token_secrets: BTreeSet::new(),
            tokens_due: BTreeSet::new(),
            tokens_retry: BTreeSet::new(),
        }
    }

    async fn run(mut self) {
        let Some(mut follow) = self.start() else {
            return;
        };
        loop {
            let examined = self.settle().await;
            tracing::trace!(examined, "garbage collector pass");
            let wake = self.wait(&mut follow).await;
            if !self.take(wake) {
                return;
            }
        }
    }

    /// Act on what ended a wait; false once the store is closed.
    fn take(&mut self, wake: Wake) -> bool {
        match wake {
            Wake::Change(change) => self.apply(&change),
            Wake::Snapshot(snapshot) => self.rebuild(snapshot),
            Wake::Retry => {}
            Wake::Closed => return false,
        }
        true
    }

    /// Examine everything dirty (and the failed steps that are due) until nothing is left;
    /// returns how many objects were examined.
    async fn settle(&mut self) -> usize {
        if self.retry_at.is_some_and(|at| at <= Instant::now()) {
            self.retry_at = None;
            self.dirty.append(&mut self.retry);
            self.tokens_due.append(&mut self.tokens_retry);
        }
        let mut examined = 0;
        while !self.dirty.is_empty() || !self.claims_due.is_empty() || !self.tokens_due.is_empty() {
            examined += self.process_dirty().await;
            self.release_unused_claims().await;
            self.sync_token_secrets().await;
        }
        examined
    }

    async fn wait(&mut self, follow: &mut Follow) -> Wake {
        let next = match self.retry_at {
            None => follow.next_or_relist().await,
            Some(at) => tokio::select! {
                biased;
                next = follow.next_or_relist() => next,
                () = tokio::time::sleep_until(at) => return Wake::Retry,
            },
        };
        match next {
            Some(Ok(Followed::Change(change))) => Wake::Change(change),
            Some(Ok(Followed::Snapshot(snapshot))) => Wake::Snapshot(snapshot),
            Some(Err(e)) => could_not_list(e),
            None => Wake::Closed,
        }
    }

    /// Follow the whole store from a snapshot of it.
    fn start(&mut self) -> Option<Follow> {
        match self.server.store().follow("/", None) {
            Ok((snapshot, follow)) => {
                self.rebuild(snapshot);
                Some(follow)
            }
            Err(e) => {
                could_not_list(e);
                None
            }
        }
    }

    /// Rebuild the indexes from a consistent snapshot; every object gets examined once.
    fn rebuild(&mut self, snapshot: Snapshot) {
        let known_unreadable = std::mem::take(&mut self.unreadable);
        self.nodes.clear();
        self.uid_by_key.clear();
        self.namespace_uids.clear();
        self.dependents.clear();
        self.contents.clear();
        self.crd_by_prefix.clear();
        self.retry.clear();
        self.retry_at = None;
        self.waiting_claims.clear();
        self.claims_due.clear();
        self.token_secrets.clear();
        self.tokens_due.clear();
        self.tokens_retry.clear();
        for object in snapshot.objects {
            self.secret_written(&object.key, &object.value);
            if let Err(why) = self.observe(&object.key, object.revision, &object.value, None)
                && !known_unreadable.contains_key(&*object.key)
            {
                report_unreadable(&object.key, &why);
            }
        }
        self.dirty = self.nodes.keys().cloned().collect();
    }

    fn apply(&mut self, change: &Change) {
        let event = &change.event;
        let key = &*event.key;
        self.pod_changed(key, &event.value, change.kind == ChangeKind::Deleted);
        match change.kind {
            ChangeKind::Added | ChangeKind::Modified => {
                self.secret_written(key, &event.value);
                let known = self.unreadable.contains_key(key);
                let derived = event.derived.get();
                if let Err(why) = self.observe(key, event.revision, &event.value, derived.as_ref())
                    && !known
                {
                    report_unreadable(key, &why);
                }
            }
            ChangeKind::Deleted => {
                self.remove(key);
                self.token_object_gone(key);
            }
        }
    }

    /// Index the current state of `key`; `Err` says why the collector cannot read it.
    fn observe(
        &mut self,
        key: &str,
        revision: Revision,
        value: &[u8],
        derived: Option<&Derived>,
    ) -> Result<(), String> {
        let read = match Node::derived(derived) {
            Some(read) => Ok(read.clone()),
            None => Node::read(key, value),
        };
        match read {
            Ok((uid, node)) => {
                self.upsert(key, uid, node);
                Ok(())
            }
            Err(why) => {
                self.upsert_unreadable(key, revision);
                Err(why)
            }
        }
    }

    fn upsert(&mut self, key: &str, uid: String, node: Node) {
        // Most writes modify an object the collector already knows under its key: then
        // the key and namespace indexes already hold it, and only its node changes.
        let known = match self.uid_by_key.get(key) {
            Some(old) if *old == uid => true,
            Some(_) => {
                // Another object under the same key: the old one is gone.
                self.remove(key);
                false
            }
            None => false,
        };
        if self.unreadable.contains_key(key) {
            self.remove(key);
        }
        if let Some(old) = self.nodes.get(&uid) {
            for owner in &old.owners {
                self.dirty.insert(owner.uid.clone());
                if let Some(set) = self.dependents.get_mut(&owner.uid) {
                    set.remove(&uid);
                }
            }
            if let Some(prefix) = &old.crd_prefix {
                self.crd_by_prefix.remove(prefix);
            }
        }
        for owner in &node.owners {
            self.dependents
                .entry(owner.uid.clone())
                .or_default()
                .insert(uid.clone());
            self.dirty.insert(owner.uid.clone());
        }
        if !known {
            if let Some(ns) = &node.namespace
                && !key.starts_with(NAMESPACE_PREFIX)
            {
                self.contents
                    .entry(ns.clone())
                    .or_default()
                    .insert(key.to_string());
            }
            if let Some(namespace) = key.strip_prefix(NAMESPACE_PREFIX) {
                self.namespace_uids
                    .insert(namespace.to_string(), uid.clone());
            }
            self.uid_by_key.insert(key.to_string(), uid.clone());
        }
        if let Some(prefix) = &node.crd_prefix {
            self.crd_by_prefix.insert(prefix.clone(), uid.clone());
        }
        self.dirty.insert(uid.clone());
        self.nodes.insert(uid, node);
    }

    fn upsert_unreadable(&mut self, key: &str, revision: Revision) {
        if self.uid_by_key.contains_key(key) {
            self.remove(key);
        }
        let namespace = self.namespace_in_key(key);
        if let Some(ns) = &namespace {
            self.contents
                .entry(ns.clone())
                .or_default()
                .insert(key.to_string());
            if let Some(uid) = self.terminating_namespace(ns) {
                self.dirty.insert(uid);
            }
        }
        if let Some((uid, _)) = self.cleaning_crd_of(key) {
            self.dirty.insert(uid);
        }
        self.unreadable.insert(
            key.to_string(),
            Unreadable {
                revision,
                namespace,
            },
        );
    }

    /// Forget the object at `key`; wake what waited for it.
    fn remove(&mut self, key: &str) {
        let namespace = if let Some(entry) = self.unreadable.remove(key) {
            entry.namespace
        } else if let Some(uid) = self.uid_by_key.remove(key) {
            if let Some(namespace) = key.strip_prefix(NAMESPACE_PREFIX) {
                self.namespace_uids.remove(namespace);
            }
            let Some(node) = self.nodes.remove(&uid) else {
                return;
            };
            self.forget_claim(key, &uid, &node);
            for owner in &node.owners {
                if let Some(set) = self.dependents.get_mut(&owner.uid) {
                    set.remove(&uid);
                }
                self.dirty.insert(owner.uid.clone());
            }
            if let Some(dependents) = self.dependents.get(&uid) {
                self.dirty.extend(dependents.iter().cloned());
            }
            if let Some(prefix) = &node.crd_prefix
                && self.crd_by_prefix.get(prefix) == Some(&uid)
            {
                self.crd_by_prefix.remove(prefix);
            }
            node.namespace
        } else {
            return;
        };
        if let Some(ns) = &namespace
            && let Some(keys) = self.contents.get_mut(ns)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.contents.remove(ns);
                if let Some(uid) = self.terminating_namespace(ns) {
                    self.dirty.insert(uid);
                }
            }
        }
        if let Some((uid, prefix)) = self.cleaning_crd_of(key)
            && self.keys_under(&prefix).next().is_none()
        {
            self.dirty.insert(uid);
        }
    }

    /// The uid of namespace `ns` if it is terminating and has yet to be emptied.
    fn terminating_namespace(&self, ns: &str) -> Option<String> {
        let uid = self.namespace_uids.get(ns)?;
        let node = self.nodes.get(uid)?;
        (node.deleting && node.namespace_finalizer).then(|| uid.clone())
    }

    /// The uid and instance prefix of the CRD that `key` is an instance of, if that CRD is
    /// being deleted and waits for its instances to go.
    fn cleaning_crd_of(&self, key: &str) -> Option<(String, String)> {
        // `/<group>/<plural>/`: the key up to and including its third slash.
        let end = key.match_indices('/').nth(2)?.0 + 1;
        let prefix = &key[..end];
        let uid = self.crd_by_prefix.get(prefix)?;
        let node = self.nodes.get(uid)?;
        (node.deleting && node.has_finalizer(CLEANUP_FINALIZER))
            .then(|| (uid.clone(), prefix.to_owned()))
    }

    /// Whether the container of a live object (its namespace or its CRD) is going away.
    fn container_terminating(&self, node: &Node) -> bool {
        node.namespace
            .as_deref()
            .is_some_and(|ns| self.terminating_namespace(ns).is_some())
            || self.cleaning_crd_of(&node.key).is_some()
    }

    /// Live keys under `prefix`, readable or not.
    fn keys_under<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a String> + 'a {
        let from = (Bound::Included(prefix), Bound::Unbounded);
        let readable = self.uid_by_key.range::<str, _>(from).map(|(key, _)| key);
        let unreadable = self.unreadable.range::<str, _>(from).map(|(key, _)| key);
        readable
            .take_while(move |key| key.starts_with(prefix))
            .chain(unreadable.take_while(move |key| key.starts_with(prefix)))
    }

    /// The namespace of an object known only by its key.
    fn namespace_in_key(&self, key: &str) -> Option<String> {
        let mut parts = key.trim_start_matches('/').splitn(4, '/');
        let (_group, _plural, namespace) = (parts.next()?, parts.next()?, parts.next()?);
        let has_name_after = parts.next().is_some();
        let namespaced = self
            .resource_of(key)
            .map_or(has_name_after, |rt| rt.namespaced);
        (namespaced && has_name_after).then(|| namespace.to_string())
    }

    /// Examine every dirty object once; returns how many there were.
    async fn process_dirty(&mut self) -> usize {
        let dirty = std::mem::take(&mut self.dirty);
        let examined = dirty.len();
        for uid in dirty {
            if let Err(e) = self.process(&uid).await {
                self.failed(uid, &e);
            }
        }
        examined
    }

    /// A step on `uid` failed: it is examined again after [`RETRY_INTERVAL`].
    fn failed(&mut self, uid: String, e: &ApiError) {
        if e.code != 404 && e.code != 409 {
            tracing::warn!(%uid, error = %e, "garbage collection step failed; will retry");
        }
        self.retry.insert(uid);
        self.retry_at
            .get_or_insert_with(|| Instant::now() + RETRY_INTERVAL);
    }

    async fn process(&mut self, uid: &str) -> ApiResult<()> {
        let Some(node) = self.nodes.get(uid) else {
            return Ok(());
        };
        if self.is_settled(node) {
            return Ok(());
        }
        let node = node.clone();
        if !node.deleting {
            return self.process_live(uid, &node).await;
        }
        self.release_if_unused(uid, &node).await?;
        let dependents: Vec<String> = self
            .dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        if node.has_finalizer(FINALIZER_ORPHAN) {
            let owner: BTreeSet<String> = [uid.to_string()].into();
            for dep in &dependents {
                if let Some(dep_node) = self.nodes.get(dep).cloned() {
                    self.modify(dep, &dep_node, None, |obj| remove_owner_refs(obj, &owner))
                        .await?;
                    self.orphaned(uid, dep);
                }
            }
            self.modify(uid, &node, None, |obj| {
                remove_finalizer(obj, FINALIZER_ORPHAN)
            })
            .await?;
            self.finalized(uid, FINALIZER_ORPHAN);
            return Ok(());
        }
        if node.has_finalizer(FINALIZER_FOREGROUND) {
            let mut blocking = false;
            for dep in &dependents {
                let Some(dep_node) = self.nodes.get(dep).cloned() else {
                    continue;
                };
                blocking |= dep_node.owners.iter().any(|o| o.uid == uid && o.blocks);
                if !dep_node.deleting {
                    self.delete(dep, &dep_node, Propagation::Foreground).await?;
                }
            }
            if blocking {
                // Woken again when a dependent changes or goes (it names this owner).
                return Ok(());
            }
            self.modify(uid, &node, None, |obj| {
                remove_finalizer(obj, FINALIZER_FOREGROUND)
            })
            .await?;
            self.finalized(uid, FINALIZER_FOREGROUND);
            return Ok(());
        }
        if node.namespace_finalizer {
            return self.empty_namespace(uid, &node).await;
        }
        if let Some(prefix) = &node.crd_prefix
            && node.has_finalizer(CLEANUP_FINALIZER)
        {
            return self.empty_crd(uid, &node, prefix).await;
        }
        Ok(())
    }

    /// `dep` no longer names `owner`: known before its event comes, so that the owner is
    /// not examined again (and its other dependents rewritten again) for each of them.
    fn orphaned(&mut self, owner: &str, dep: &str) {
        if let Some(set) = self.dependents.get_mut(owner) {
            set.remove(dep);
        }
        if let Some(node) = self.nodes.get_mut(dep) {
            node.owners.retain(|o| o.uid != owner);
        }
    }

    /// `finalizer` was removed from `uid`: known before its event comes.
    fn finalized(&mut self, uid: &str, finalizer: &str) {
        if let Some(node) = self.nodes.get_mut(uid) {
            node.finalizers.retain(|f| f != finalizer);
        }
    }

    /// Whether `node` needs nothing from the collector: live, every owner present, not a
    /// namespace, and not in a namespace or CRD that is going. Most objects are, most of
    /// the time; deciding it from the index spares a copy of the node per write.
    fn is_settled(&self, node: &Node) -> bool {
        !node.deleting
            && node.owners.iter().all(|o| self.nodes.contains_key(&o.uid))
            && !node.key.starts_with(NAMESPACE_PREFIX)
            && !self.container_terminating(node)
            && !storage_protection::needs_protection(node)
    }

    /// A live object: collect it if its owners are gone or its namespace or CRD is going.
    async fn process_live(&mut self, uid: &str, node: &Node) -> ApiResult<()> {
        if !node.owners.is_empty() {
            let absent: BTreeSet<String> = node
                .owners
                .iter()
                .filter(|o| !self.nodes.contains_key(&o.uid))
                .map(|o| o.uid.clone())
                .collect();
            if absent.len() == node.owners.len() {
                return self.delete(uid, node, Propagation::Background).await;
            }
            if !absent.is_empty() {
                self.modify(uid, node, None, |obj| remove_owner_refs(obj, &absent))
                    .await?;
            }
        }
        if self.container_terminating(node) {
            return self.delete(uid, node, Propagation::Background).await;
        }
        if node.key.starts_with(NAMESPACE_PREFIX) {
            self.ensure_default_service_account(&node.name).await?;
        }
        if storage_protection::needs_protection(node) {
            self.protect(uid, node).await?;
        }
        Ok(())
    }

    /// Every live namespace has a `default` ServiceAccount (kube's serviceaccount
    /// controller); one deleted is created again when its namespace is next examined.
    async fn ensure_default_service_account(&self, namespace: &str) -> ApiResult<()> {
        crate::bootstrap::default_service_account(&self.server, namespace).await
    }

    /// Delete everything in a terminating namespace; finalize it once it is empty.
    /// Woken again when its last object goes.
    async fn empty_namespace(&mut self, uid: &str, node: &Node) -> ApiResult<()> {
        let keys: Vec<String> = self
            .contents
            .get(&node.name)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        if !keys.is_empty() {
            return self.clear_out(&keys).await;
        }
        self.modify(uid, node, Some("finalize"), |obj| {
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("finalizers");
            }
        })
        .await
    }

    /// Delete every custom resource of a deleting CRD; then release the CRD.
    /// Woken again when its last instance goes.
    async fn empty_crd(&mut self, uid: &str, node: &Node, prefix: &str) -> ApiResult<()> {
        let keys: Vec<String> = self.keys_under(prefix).cloned().collect();
        if !keys.is_empty() {
            return self.clear_out(&keys).await;
        }
        self.modify(uid, node, None, |obj| {
            remove_finalizer(obj, CLEANUP_FINALIZER)
        })
        .await
    }

    /// Start the deletion of `keys`, the contents of something going away: readable objects
    /// are examined (and deleted there, through the API's rules); unreadable ones are
    /// deleted from the store directly.
    async fn clear_out(&mut self, keys: &[String]) -> ApiResult<()> {
        let mut outcome = Ok(());
        for key in keys {
            if let Some(uid) = self.uid_by_key.get(key) {
                if self.nodes.get(uid).is_some_and(|n| !n.deleting) {
                    self.dirty.insert(uid.clone());
                }
            } else if let Err(e) = self.delete_unreadable(key).await {
                outcome = outcome.and(Err(e));
            }
        }
        outcome
    }

    /// An object nobody can read has no finalizers anyone can honour: remove it outright,
    /// unless it changed since it was seen (its new state gets examined then).
    async fn delete_unreadable(&self, key: &str) -> ApiResult<()> {
        let Some(entry) = self.unreadable.get(key) else {
            return Ok(());
        };
        let store = self.server.store();
        let outcome = match store.delete(key, Some(entry.revision)).await {
            // The store re-encodes the last state into the tombstone of a delete, which
            // it cannot do with a value it cannot parse: put a readable placeholder first.
            Err(StoreError::Backend(_) | StoreError::InvalidValue(_)) => {
                let placeholder = self.placeholder(key, entry);
                match store.update(key, placeholder, Some(entry.revision)).await {
                    Ok(replaced) => store.delete(key, Some(replaced.revision)).await,
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        match outcome {
            Ok(_) => {
                tracing::warn!(%key, "garbage collector deleted an object it cannot read, with its namespace or CRD");
                Ok(())
            }
            Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(ApiError::internal(format!(
                "deleting unreadable object {key}: {e}"
            ))),
        }
    }

    /// The least object that says what was at `key`: the last state its watchers see.
    fn placeholder(&self, key: &str, entry: &Unreadable) -> Value {
        let name = key.rsplit('/').next().unwrap_or_default();
        let mut metadata = json!({ "name": name });
        if let Some(ns) = &entry.namespace {
            metadata["namespace"] = json!(ns);
        }
        match self.resource_of(key) {
            Some(rt) => {
                json!({"apiVersion": rt.api_version(), "kind": rt.kind, "metadata": metadata})
            }
            None => json!({ "metadata": metadata }),
        }
    }

    fn resource_of(&self, key: &str) -> Option<Arc<ResourceType>> {
        let mut parts = key.trim_start_matches('/').splitn(3, '/');
        let group = match parts.next()? {
            "core" => "",
            g => g,
        };
        let plural = parts.next()?;
        self.server
            .registry()
            .all()
            .into_iter()
            .find(|t| t.group == group && t.plural == plural)
    }

    /// Delete through the API's rules (finalizers, grace, propagation), only if it is still
    /// the same object (uid). Once asked, the object counts as deleting until its next event.
    async fn delete(&mut self, uid: &str, node: &Node, propagation: Propagation) -> ApiResult<()> {
        let Some(rt) = self.resource_of(&node.key) else {
            return Ok(());
        };
        let opts = DeleteOptions {
            propagation: Some(propagation),
            precondition_uid: Some(uid.to_string()),
            ..Default::default()
        };
        tracing::debug!(key = %node.key, ?propagation, "garbage collector deletes");
        self.server
            .delete(&rt, node.namespace.as_deref(), &node.name, &opts)
            .await?;
        if let Some(node) = self.nodes.get_mut(uid) {
            node.deleting = true;
        }
        Ok(())
    }

    /// Read-modify-write of one object, only if it is still the same object (uid).
    async fn modify(
        &self,
        uid: &str,
        node: &Node,
        sub: Option<&str>,
        change: impl FnOnce(&mut Value),
    ) -> ApiResult<()> {
        self.modify_when(uid, node, sub, |obj| {
            change(obj);
            true
        })
        .await
        .map(drop)
    }

    /// [`Self::modify`], written only when `change` says it changed the object; returns
    /// whether it was written.
    async fn modify_when(
        &self,
        uid: &str,
        node: &Node,
        sub: Option<&str>,
        change: impl FnOnce(&mut Value) -> bool,
    ) -> ApiResult<bool> {
        let Some(rt) = self.resource_of(&node.key) else {
            return Ok(false);
        };
        let (mut obj, _) = self
            .server
            .get_value(&rt, node.namespace.as_deref(), &node.name)?;
        if meta::uid(&obj) != Some(uid) || !change(&mut obj) {
            return Ok(false);
        }
        self.server
            .update(
                Target::object(&rt, node.namespace.as_deref(), &node.name).subresource(sub),
                obj,
                &WriteOptions::default(),
            )
            .await
            .map(|_| true)
    }
}

/// The collector stops: the store is closed, or (never expected) cannot be listed.
fn could_not_list(e: StoreError) -> Wake {
    if !matches!(e, StoreError::Closed) {
        tracing::warn!(error = %e, "garbage collector could not list");
    }
    Wake::Closed
}

fn report_unreadable(key: &str, why: &str) {
    tracing::warn!(%key, reason = %why, "garbage collector cannot read this object; it will delete it with its namespace or CRD");
}

fn remove_owner_refs(obj: &mut Value, owners: &BTreeSet<String>) {
    let m = meta::metadata_mut(obj);
    if let Some(refs) = m.get_mut("ownerReferences").and_then(Value::as_array_mut) {
        refs.retain(|r| {
            !r.get("uid")
                .and_then(Value::as_str)
                .is_some_and(|u| owners.contains(u))
        });
        if refs.is_empty() {
            m.remove("ownerReferences");
        }
    }
}

fn remove_finalizer(obj: &mut Value, finalizer: &str) {
    let mut finalizers = meta::finalizers(obj);
    finalizers.retain(|f| f != finalizer);
    meta::set_finalizers(obj, &finalizers);
}

pub(crate) mod aggregation;
mod service_account_tokens;
mod storage_protection;
#[cfg(test)]
mod tests;
