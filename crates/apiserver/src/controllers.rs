//! Controllers that live inside the server: the garbage collector (ownerReferences,
//! Background / Foreground / Orphan), namespace termination and CRD cleanup.
//!
//! One task follows every change in the store (list, then watch; relist on `Expired`),
//! keeps an index of objects by uid and of dependents by owner uid, and after each event
//! re-examines only the objects that event concerns. Work that fails is retried on a timer.
//! Everything iterates in a defined order (BTreeMap), so the simulator sees the same
//! sequence of writes for the same inputs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use steady_store::{EventKind, ListOptions, StoreError};
use tokio::task::JoinHandle;

use crate::ApiServer;
use crate::crd::CLEANUP_FINALIZER;
use crate::error::ApiResult;
use crate::meta;
use crate::objects::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use crate::registry::ResourceType;
use crate::request::{DeleteOptions, Propagation, WriteOptions};

const RETRY_INTERVAL: Duration = Duration::from_secs(1);

pub fn spawn_all(server: &ApiServer) -> Vec<JoinHandle<()>> {
    let gc = GarbageCollector::new(server.clone());
    let mut tasks = vec![tokio::spawn(gc.run())];
    if let Some(config) = server.config().node.clone() {
        let node = crate::node::NodeSimulator::new(server.clone(), config);
        tasks.push(tokio::spawn(node.run()));
    }
    tasks
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

impl Node {
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
        let crd_prefix = key
            .starts_with("/apiextensions.k8s.io/customresourcedefinitions/")
            .then(|| {
                let group = obj
                    .pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let plural = obj
                    .pointer("/spec/names/plural")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("/{group}/{plural}/")
            });
        let namespace_finalizer = key.starts_with("/core/namespaces/")
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

struct GarbageCollector {
    server: ApiServer,
    nodes: BTreeMap<String, Node>,
    uid_by_key: BTreeMap<String, String>,
    dependents: BTreeMap<String, BTreeSet<String>>,
    dirty: BTreeSet<String>,
    /// Objects that wait for other objects to go away (terminating namespaces, deleting CRDs, foreground owners).
    waiting: BTreeSet<String>,
}

impl GarbageCollector {
    fn new(server: ApiServer) -> Self {
        GarbageCollector {
            server,
            nodes: BTreeMap::new(),
            uid_by_key: BTreeMap::new(),
            dependents: BTreeMap::new(),
            dirty: BTreeSet::new(),
            waiting: BTreeSet::new(),
        }
    }

    async fn run(mut self) {
        loop {
            let Some(mut watcher) = self.relist() else {
                return;
            };
            loop {
                self.process_dirty().await;
                let event = if self.dirty.is_empty() {
                    watcher.next().await
                } else {
                    tokio::select! {
                        biased;
                        event = watcher.next() => event,
                        _ = tokio::time::sleep(RETRY_INTERVAL) => continue,
                    }
                };
                match event {
                    None => return,
                    Some(Err(_)) => break,
                    Some(Ok(event)) => self.apply(&event.key, event.kind, &event.value),
                }
            }
        }
    }

    /// Rebuild the index from a consistent snapshot; every object gets examined once.
    fn relist(&mut self) -> Option<steady_store::Watcher> {
        let store = self.server.store().clone();
        let revision = store.revision();
        let options = ListOptions {
            at: Some(revision),
            start_after: None,
            limit: None,
        };
        let page = match store.list("/", &options, &|_| true) {
            Ok(page) => page,
            Err(StoreError::Closed) => return None,
            Err(e) => {
                tracing::warn!(error = %e, "garbage collector could not list");
                return None;
            }
        };
        self.nodes.clear();
        self.uid_by_key.clear();
        self.dependents.clear();
        for object in page.items {
            if let Ok(value) = serde_json::from_slice::<Value>(&object.value) {
                self.upsert(&object.key, &value);
            }
        }
        self.dirty = self.nodes.keys().cloned().collect();
        store.watch("/", page.revision).ok()
    }

    fn upsert(&mut self, key: &str, obj: &Value) {
        let Some((uid, node)) = Node::parse(key, obj) else {
            return;
        };
        if let Some(old) = self.nodes.get(&uid) {
            for owner in &old.owners {
                self.dirty.insert(owner.uid.clone());
                if let Some(set) = self.dependents.get_mut(&owner.uid) {
                    set.remove(&uid);
                }
            }
        }
        for owner in &node.owners {
            self.dependents
                .entry(owner.uid.clone())
                .or_default()
                .insert(uid.clone());
            self.dirty.insert(owner.uid.clone());
        }
        self.uid_by_key.insert(key.to_string(), uid.clone());
        self.dirty.insert(uid.clone());
        self.nodes.insert(uid, node);
    }

    fn apply(&mut self, key: &str, kind: EventKind, value: &[u8]) {
        match kind {
            EventKind::Created | EventKind::Updated => {
                if let Ok(obj) = serde_json::from_slice::<Value>(value) {
                    self.upsert(key, &obj);
                }
            }
            EventKind::Deleted => {
                let Some(uid) = self.uid_by_key.remove(key) else {
                    return;
                };
                if let Some(node) = self.nodes.remove(&uid) {
                    for owner in &node.owners {
                        if let Some(set) = self.dependents.get_mut(&owner.uid) {
                            set.remove(&uid);
                        }
                        self.dirty.insert(owner.uid.clone());
                    }
                }
                self.dirty
                    .extend(self.dependents.get(&uid).cloned().unwrap_or_default());
                self.dirty.extend(self.waiting.iter().cloned());
                self.waiting.remove(&uid);
            }
        }
    }

    async fn process_dirty(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        let mut failed = BTreeSet::new();
        for uid in dirty {
            if let Err(e) = self.process(&uid).await {
                if e.code != 404 && e.code != 409 {
                    tracing::warn!(%uid, error = %e, "garbage collection step failed; will retry");
                }
                failed.insert(uid);
            }
        }
        self.dirty.extend(failed);
    }

    async fn process(&mut self, uid: &str) -> ApiResult<()> {
        let Some(node) = self.nodes.get(uid).cloned() else {
            return Ok(());
        };
        if !node.owners.is_empty() && !node.deleting {
            let absent: Vec<&Owner> = node
                .owners
                .iter()
                .filter(|o| !self.nodes.contains_key(&o.uid))
                .collect();
            if absent.len() == node.owners.len() {
                return self.delete(uid, &node, Propagation::Background).await;
            }
            if !absent.is_empty() {
                let gone: BTreeSet<String> = absent.iter().map(|o| o.uid.clone()).collect();
                self.modify(uid, &node, None, |obj| remove_owner_refs(obj, &gone))
                    .await?;
            }
        }
        if !node.deleting {
            return Ok(());
        }
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
                }
            }
            self.modify(uid, &node, None, |obj| {
                remove_finalizer(obj, FINALIZER_ORPHAN)
            })
            .await?;
            return Ok(());
        }
        if node.has_finalizer(FINALIZER_FOREGROUND) {
            let mut blocking = false;
            for dep in &dependents {
                let Some(dep_node) = self.nodes.get(dep).cloned() else {
                    continue;
                };
                let blocks = dep_node.owners.iter().any(|o| o.uid == uid && o.blocks);
                blocking |= blocks;
                if !dep_node.deleting {
                    self.delete(dep, &dep_node, Propagation::Foreground).await?;
                }
            }
            if blocking {
                self.waiting.insert(uid.to_string());
                return Ok(());
            }
            self.modify(uid, &node, None, |obj| {
                remove_finalizer(obj, FINALIZER_FOREGROUND)
            })
            .await?;
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

    /// Delete everything in a terminating namespace; finalize it once it is empty.
    async fn empty_namespace(&mut self, uid: &str, node: &Node) -> ApiResult<()> {
        let contents: Vec<(String, Node)> = self
            .nodes
            .iter()
            .filter(|(_, n)| {
                n.namespace.as_deref() == Some(node.name.as_str())
                    && !n.key.starts_with("/core/namespaces/")
            })
            .map(|(u, n)| (u.clone(), n.clone()))
            .collect();
        if !contents.is_empty() {
            self.waiting.insert(uid.to_string());
            for (dep_uid, dep) in contents.iter().filter(|(_, n)| !n.deleting) {
                self.delete(dep_uid, dep, Propagation::Background).await?;
            }
            return Ok(());
        }
        self.modify(uid, node, Some("finalize"), |obj| {
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("finalizers");
            }
        })
        .await
    }

    /// Delete every custom resource of a deleting CRD; then release the CRD.
    async fn empty_crd(&mut self, uid: &str, node: &Node, prefix: &str) -> ApiResult<()> {
        let instances: Vec<(String, Node)> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.key.starts_with(prefix))
            .map(|(u, n)| (u.clone(), n.clone()))
            .collect();
        if !instances.is_empty() {
            self.waiting.insert(uid.to_string());
            for (dep_uid, dep) in instances.iter().filter(|(_, n)| !n.deleting) {
                self.delete(dep_uid, dep, Propagation::Background).await?;
            }
            return Ok(());
        }
        self.modify(uid, node, None, |obj| {
            remove_finalizer(obj, CLEANUP_FINALIZER)
        })
        .await
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

    async fn delete(&self, uid: &str, node: &Node, propagation: Propagation) -> ApiResult<()> {
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
            .await
            .map(|_| ())
    }

    /// Read-modify-write of one object, only if it is still the same object (uid).
    async fn modify(
        &self,
        uid: &str,
        node: &Node,
        sub: Option<&str>,
        change: impl Fn(&mut Value),
    ) -> ApiResult<()> {
        let Some(rt) = self.resource_of(&node.key) else {
            return Ok(());
        };
        let (mut obj, _) = self
            .server
            .get_value(&rt, node.namespace.as_deref(), &node.name)?;
        if meta::uid(&obj) != Some(uid) {
            return Ok(());
        }
        change(&mut obj);
        self.server
            .update(
                &rt,
                node.namespace.as_deref(),
                &node.name,
                sub,
                obj,
                &WriteOptions::default(),
            )
            .await
            .map(|_| ())
    }
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
