//! The objects of the controller's kinds, as the cluster has them: one kube watcher per
//! kind the recorder names (primary, owned, watched), a map of their current JSON, and a
//! bounded broadcast of changes for the page's feed.
//!
//! The map is what a reconnecting page gets first; changes are broadcast under the same
//! lock that updates it, so a subscriber that takes the snapshot after subscribing ends at
//! the current state whatever it receives twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use serde::Serialize;
use serde_json::Value;
use steady_runtime::observe::{ControllerState, Role, WatchedKind};
use tokio::sync::{broadcast, watch};

/// Changes a feed may fall behind before it must take a fresh snapshot.
const CHANGES_CAPACITY: usize = 4096;

/// One object of a watched kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Seen {
    /// How the controller uses the kind.
    pub role: Role,
    /// The kind.
    pub kind: String,
    /// The object (without `managedFields`); for a deletion, its last state.
    pub object: Value,
}

/// A change for the page.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Change {
    /// Created or changed.
    Apply(Seen),
    /// Gone.
    Delete(Seen),
}

type Key = (String, String, String);

/// The objects, shared. Cheap to clone.
#[derive(Clone)]
pub struct World {
    shared: Arc<WorldShared>,
}

struct WorldShared {
    objects: Mutex<BTreeMap<Key, Seen>>,
    changes: broadcast::Sender<Change>,
}

fn key_of(seen: &Seen) -> Key {
    let meta = &seen.object["metadata"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        seen.kind.clone(),
        text(&meta["namespace"]),
        text(&meta["name"]),
    )
}

impl World {
    /// Watch every kind `state` names, as it names them (the controller may start later).
    pub fn start(client: kube::Client, state: watch::Receiver<ControllerState>) -> World {
        let world = World {
            shared: Arc::new(WorldShared {
                objects: Mutex::default(),
                changes: broadcast::channel(CHANGES_CAPACITY).0,
            }),
        };
        tokio::spawn(world.clone().follow_kinds(client, state));
        world
    }

    /// Changes from now on; take [`snapshot`](Self::snapshot) after subscribing.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.shared.changes.subscribe()
    }

    /// Every object now, by kind, namespace and name.
    pub fn snapshot(&self) -> Vec<Seen> {
        self.shared
            .objects
            .lock()
            .map(|objects| objects.values().cloned().collect())
            .unwrap_or_default()
    }

    async fn follow_kinds(self, client: kube::Client, mut state: watch::Receiver<ControllerState>) {
        let mut watching = BTreeSet::new();
        loop {
            let kinds = state.borrow_and_update().kinds.clone();
            for kind in kinds {
                let id = (
                    kind.group.clone(),
                    kind.plural.clone(),
                    kind.namespace.clone(),
                );
                if watching.insert(id) {
                    tokio::spawn(self.clone().watch_kind(client.clone(), kind));
                }
            }
            if state.changed().await.is_err() {
                return;
            }
        }
    }

    async fn watch_kind(self, client: kube::Client, kind: WatchedKind) {
        let resource = ApiResource {
            group: kind.group.clone(),
            version: kind.version.clone(),
            api_version: match kind.group.as_str() {
                "" => kind.version.clone(),
                group => format!("{group}/{}", kind.version),
            },
            kind: kind.kind.clone(),
            plural: kind.plural.clone(),
        };
        let api: Api<DynamicObject> = match &kind.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &resource),
            None => Api::all_with(client, &resource),
        };
        let stream = watcher::watcher(api, watcher::Config::default());
        futures::pin_mut!(stream);
        let mut listed = BTreeSet::new();
        while let Some(event) = stream.next().await {
            let seen = |obj: DynamicObject| self.seen(&kind, obj);
            match event {
                Ok(Event::Init) => listed.clear(),
                Ok(Event::InitApply(obj)) => {
                    if let Some(seen) = seen(obj) {
                        listed.insert(key_of(&seen));
                        self.apply(seen);
                    }
                }
                Ok(Event::InitDone) => self.retain(&kind.kind, &std::mem::take(&mut listed)),
                Ok(Event::Apply(obj)) => {
                    if let Some(seen) = seen(obj) {
                        self.apply(seen);
                    }
                }
                Ok(Event::Delete(obj)) => {
                    if let Some(seen) = seen(obj) {
                        self.delete(&key_of(&seen));
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, kind = %kind.kind, "ui watch failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn seen(&self, kind: &WatchedKind, obj: DynamicObject) -> Option<Seen> {
        let mut object = serde_json::to_value(obj).ok()?;
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        object["kind"] = Value::String(kind.kind.clone());
        Some(Seen {
            role: kind.role,
            kind: kind.kind.clone(),
            object,
        })
    }

    fn apply(&self, seen: Seen) {
        if let Ok(mut objects) = self.shared.objects.lock() {
            let key = key_of(&seen);
            if objects.get(&key) != Some(&seen) {
                objects.insert(key, seen.clone());
                let _ = self.shared.changes.send(Change::Apply(seen));
            }
        }
    }

    fn delete(&self, key: &Key) {
        if let Ok(mut objects) = self.shared.objects.lock()
            && let Some(gone) = objects.remove(key)
        {
            let _ = self.shared.changes.send(Change::Delete(gone));
        }
    }

    /// After a (re)list of `kind`: forget its objects the list did not have.
    fn retain(&self, kind: &str, listed: &BTreeSet<Key>) {
        let gone: Vec<Key> = match self.shared.objects.lock() {
            Ok(objects) => objects
                .keys()
                .filter(|key| key.0 == kind && !listed.contains(*key))
                .cloned()
                .collect(),
            Err(_) => return,
        };
        for key in gone {
            self.delete(&key);
        }
    }
}
