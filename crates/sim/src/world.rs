//! A snapshot of everything the simulated API server stores, for invariants and for the
//! end-state comparison with the fault-free run.
//!
//! Read straight from the store (not through the API, so taking one injects no fault and
//! counts no request); objects are decoded only when asked for.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use steady_runtime::unread::deserialize_skipping;
use steady_store::{ListOptions, Store};

/// Every object the API server stores at one instant, by store key.
///
/// ```
/// # use steady_sim::World;
/// # use k8s_openapi::api::core::v1::Pod;
/// fn no_failed_pod(world: &World) -> Result<(), String> {
///     for pod in world.list::<Pod>() {
///         let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
///         if phase == "Failed" {
///             return Err(format!("pod {:?} failed", pod.metadata.name));
///         }
///     }
///     Ok(())
/// }
/// assert!(no_failed_pod(&World::default()).is_ok());
/// ```
#[derive(Debug, Clone, Default)]
pub struct World {
    objects: BTreeMap<Arc<str>, Bytes>,
    decodes: Arc<Decodes>,
}

/// The metadata earlier snapshots of one run decoded, by store key and the bytes decoded.
/// A run takes a snapshot every simulated second (pod faults, invariants) and most objects
/// have not changed since the last one: their decodes are reused, not repeated.
#[derive(Debug, Default)]
pub(crate) struct Decodes(Mutex<HashMap<Arc<str>, Decoded>>);

/// The bytes decoded, and their metadata (`None`: they do not decode).
type Decoded = (Bytes, Option<ObjectMeta>);

impl Decodes {
    /// The metadata of `bytes` (stored at `key`), decoded unless it was before.
    fn metadata(&self, key: &Arc<str>, bytes: &Bytes) -> Option<ObjectMeta> {
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, decoded)) = memo.get(key)
            && seen == bytes
        {
            return decoded.clone();
        }
        let decoded = steady_store::metadata_of::<Unmanaged>(bytes)
            .ok()
            .map(|metadata| {
                metadata
                    .map(|Unmanaged(metadata)| metadata)
                    .unwrap_or_default()
            });
        memo.insert(key.clone(), (bytes.clone(), decoded.clone()));
        decoded
    }
}

/// The name prefix of the token volume the server adds to every pod.
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// What neither a snapshot's metadata nor the end-state comparison keeps.
const MANAGED_FIELDS: &[&str] = &["metadata.managedFields"];

/// Kinds whose objects are records of what happened, not state a controller converges:
/// left out of the end-state comparison (events.k8s.io Events are stored as core ones).
const HISTORY_KINDS: [&str; 2] = ["/core/events/", "/coordination.k8s.io/leases/"];

impl World {
    /// The store's current contents; `decodes` are what earlier snapshots of the same
    /// run decoded.
    pub(crate) fn read(store: &Store, decodes: &Arc<Decodes>) -> World {
        let objects = store
            .list("/", &ListOptions::default(), &|_| true)
            .map(|page| page.items.into_iter().map(|o| (o.key, o.value)).collect())
            .unwrap_or_default();
        World {
            objects,
            decodes: decodes.clone(),
        }
    }

    /// Every stored object of kind `K`, in namespace then name order (objects that do not
    /// decode as `K` are skipped).
    pub fn list<K>(&self) -> Vec<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        self.of_kind::<K>()
            .filter_map(|(_, value)| serde_json::from_slice(value).ok())
            .collect()
    }

    /// The metadata of every stored object of kind `K`, in namespace then name order,
    /// without `managedFields`: what invariants about names, owners, labels and deletion
    /// need, several times cheaper than [`list`](Self::list) (spec and status are skipped,
    /// not decoded).
    ///
    /// ```
    /// # use steady_sim::World;
    /// # use k8s_openapi::api::core::v1::Pod;
    /// fn no_terminating_pod(world: &World) -> Result<(), String> {
    ///     match world.metadata::<Pod>().iter().find(|m| m.deletion_timestamp.is_some()) {
    ///         Some(pod) => Err(format!("pod {:?} is terminating", pod.name)),
    ///         None => Ok(()),
    ///     }
    /// }
    /// assert!(no_terminating_pod(&World::default()).is_ok());
    /// ```
    pub fn metadata<K>(&self) -> Vec<ObjectMeta>
    where
        K: Resource<DynamicType = ()>,
    {
        self.of_kind::<K>()
            .filter_map(|(key, value)| self.decodes.metadata(key, value))
            .collect()
    }

    fn of_kind<K: Resource<DynamicType = ()>>(&self) -> impl Iterator<Item = (&Arc<str>, &Bytes)> {
        let prefix = prefix_of::<K>();
        self.objects
            .range::<str, _>((
                std::ops::Bound::Included(prefix.clone().as_str()),
                std::ops::Bound::Unbounded,
            ))
            .take_while(move |(key, _)| key.starts_with(&prefix))
    }

    /// The object of kind `K` named `name` in `namespace` (`""` for a cluster-scoped kind).
    pub fn get<K>(&self, namespace: &str, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let key = match namespace {
            "" => format!("{}{name}", prefix_of::<K>()),
            ns => format!("{}{ns}/{name}", prefix_of::<K>()),
        };
        let value = self.objects.get(key.as_str())?;
        serde_json::from_slice(value).ok()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The world with what legitimately differs between two runs of one scenario masked:
    /// uids, resourceVersions, timestamps, generated names, the order of status conditions;
    /// events and leases left out, and
    /// so are the terminated pods a ReplicaSet leaves behind (see `left_for_pod_gc`).
    /// One line per object, in key order.
    pub fn normalised(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .objects
            .iter()
            .filter(|(key, _)| !HISTORY_KINDS.iter().any(|p| key.starts_with(p)))
            .filter_map(|(key, value)| normalised_once(key, value))
            .collect();
        lines.sort();
        lines
    }
}

/// Lines already normalised, by store key and the bytes they were made from, shared by the
/// runs of the process: every run starts from one image of the API server's bootstrap
/// objects, and the objects no run changes are normalised once, not once a run.
static NORMALISED: LazyLock<Mutex<NormalisedLines>> = LazyLock::new(Mutex::default);

/// A line (`None`: the object is left out) by store key and bytes.
type NormalisedLines = HashMap<(Arc<str>, Bytes), Option<String>>;

/// Emptied when it holds this many lines, so that no campaign grows it without bound.
const NORMALISED_KEPT: usize = 4096;

/// [`normalised_line`], computed once for the same key and bytes.
fn normalised_once(key: &Arc<str>, value: &Bytes) -> Option<String> {
    let lock = || NORMALISED.lock().unwrap_or_else(PoisonError::into_inner);
    let memo_key = (key.clone(), value.clone());
    if let Some(line) = lock().get(&memo_key) {
        return line.clone();
    }
    let line = normalised_line(key, value);
    let mut memo = lock();
    if memo.len() >= NORMALISED_KEPT {
        memo.clear();
    }
    memo.insert(memo_key, line.clone());
    line
}

/// One object's line of [`World::normalised`], unless it is left out.
fn normalised_line(key: &str, value: &[u8]) -> Option<String> {
    // Normalising drops the managed fields: they are skipped, never built.
    let mut deserializer = serde_json::Deserializer::from_slice(value);
    let object: Map<String, Value> =
        deserialize_skipping(&mut deserializer, MANAGED_FIELDS).ok()?;
    let mut object = Value::Object(object);
    if left_for_pod_gc(&object) {
        return None;
    }
    mask_generation(&mut object);
    sort_conditions(&mut object);
    let generated = normalise_metadata(&mut object);
    mask_allocated_addresses(&mut object);
    mask_varying_strings(&mut object);
    let key = match generated {
        Some((name, masked)) => key.replace(&name, &masked),
        None => key.to_string(),
    };
    Some(format!("{key} {object}"))
}

/// An object's metadata without its managed fields, whose field sets are most of a
/// metadata decode's cost: [`Decodes::metadata`] skips them without building them, and
/// reads nothing after the metadata.
struct Unmanaged(ObjectMeta);

impl<'de> Deserialize<'de> for Unmanaged {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_skipping(deserializer, &["managedFields"]).map(Unmanaged)
    }
}

/// The store-key prefix of every object of `K` (`/<group or core>/<plural>/`).
fn prefix_of<K: Resource<DynamicType = ()>>() -> String {
    let group = K::group(&());
    let group = if group.is_empty() { "core" } else { &group };
    format!("/{group}/{}/", K::plural(&()))
}

/// Drops identity and bookkeeping fields; a generated name becomes `<generateName>*`.
/// Returns `(name, masked)` when the name was generated.
fn normalise_metadata(object: &mut Value) -> Option<(String, String)> {
    let meta = object.get_mut("metadata")?.as_object_mut()?;
    for field in ["uid", "resourceVersion", "managedFields", "selfLink"] {
        meta.remove(field);
    }
    if let Some(references) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        for reference in references.iter_mut().filter_map(Value::as_object_mut) {
            reference.remove("uid");
        }
    }
    let prefix = meta.get("generateName")?.as_str()?.to_string();
    let name = meta.get("name")?.as_str()?.to_string();
    if prefix.is_empty() || !name.starts_with(&prefix) {
        return None;
    }
    let masked = format!("{prefix}*");
    meta.insert("name".into(), Value::String(masked.clone()));
    Some((name, masked))
}

/// A pod that failed (or succeeded) under a ReplicaSet: the ReplicaSet replaces it but
/// leaves it in place for the pod garbage collector, which kube-controller-manager runs only
/// above 12,500 terminated pods. How many there are depends on how many pods the faults
/// failed, not on where the controllers converged.
fn left_for_pod_gc(object: &Value) -> bool {
    let is_pod = object.get("kind").and_then(Value::as_str) == Some("Pod");
    let phase = object.pointer("/status/phase").and_then(Value::as_str);
    let terminated = matches!(phase, Some("Failed" | "Succeeded"));
    let under_replica_set = object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|owner| {
            owner.get("controller") == Some(&Value::Bool(true))
                && owner.get("kind").and_then(Value::as_str) == Some("ReplicaSet")
        });
    is_pod && terminated && under_replica_set
}

/// Status conditions are a map keyed by `type` (`listType=map`); their order says only
/// which changed last (kube's `SetDeploymentCondition` moves a changed condition to the
/// end), and faults change that — a Deployment whose pod was deleted turns `Available`
/// False and True again.
fn sort_conditions(object: &mut Value) {
    if let Some(conditions) = object
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        conditions.sort_by(|a, b| condition_type(a).cmp(&condition_type(b)));
    }
}

fn condition_type(condition: &Value) -> Option<&str> {
    condition.get("type").and_then(Value::as_str)
}

/// `metadata.generation` counts the spec changes an object went through, and faults change
/// how many intermediate states a controller wrote on the way to the same spec. What
/// matters at the end is whether the status describes the spec: an `observedGeneration`
/// equal to the generation becomes `<generation>`, a lagging one keeps its number.
fn mask_generation(object: &mut Value) {
    let Some(generation) = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|meta| meta.remove("generation"))
    else {
        return;
    };
    if let Some(observed) = object.pointer_mut("/status/observedGeneration")
        && *observed == generation
    {
        *observed = Value::String("<generation>".into());
    }
}

/// Addresses the server allocates (a Service's cluster IP, a pod's IP) depend on how many
/// were allocated before, as uids do.
fn mask_allocated_addresses(object: &mut Value) {
    for (section, fields) in [
        ("spec", ["clusterIP", "clusterIPs"]),
        ("status", ["podIP", "podIPs"]),
    ] {
        if let Some(section) = object.get_mut(section).and_then(Value::as_object_mut) {
            for field in fields {
                if let Some(value) = section.get_mut(field) {
                    *value = Value::String("<allocated>".into());
                }
            }
        }
    }
}

/// Strings that depend on the faults: every RFC 3339 timestamp becomes `<time>` (when
/// something happened), and a pod's token volume name, `kube-api-access-<suffix>`,
/// `kube-api-access-*` (its suffix is drawn as generated names are).
fn mask_varying_strings(value: &mut Value) {
    match value {
        Value::String(s) if chrono::DateTime::parse_from_rfc3339(s).is_ok() => {
            *s = "<time>".into();
        }
        Value::String(s) if s.starts_with(TOKEN_VOLUME_PREFIX) => {
            *s = format!("{TOKEN_VOLUME_PREFIX}*");
        }
        Value::Array(items) => items.iter_mut().for_each(mask_varying_strings),
        Value::Object(fields) => fields.values_mut().for_each(mask_varying_strings),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalising_drops_the_managed_fields_of_the_metadata_only() {
        let object = serde_json::json!({
            "kind": "ConfigMap",
            "metadata": {"name": "c", "managedFields": [{"manager": "m"}]},
            "data": {"managedFields": "kept"},
        });
        let bytes = serde_json::to_vec(&object).expect("encodes");
        let line = normalised_line("/core/configmaps/default/c", &bytes).expect("normalised");
        assert_eq!(
            line,
            r#"/core/configmaps/default/c {"data":{"managedFields":"kept"},"kind":"ConfigMap","metadata":{"name":"c"}}"#
        );
    }

    #[test]
    fn normalising_masks_identity_times_and_generated_names() {
        let mut world = World::default();
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-x7k2p", "generateName": "web-", "namespace": "default",
                "uid": "u-1", "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:05Z",
                "ownerReferences": [{"kind": "Web", "name": "web", "uid": "u-0"}]},
            "status": {"podIP": "10.244.0.7"},
        });
        world.objects.insert(
            Arc::from("/core/pods/default/web-x7k2p"),
            Bytes::from(pod.to_string()),
        );
        world.objects.insert(
            Arc::from("/core/events/default/web.1"),
            Bytes::from_static(b"{}"),
        );
        let lines = world.normalised();
        assert_eq!(lines.len(), 1, "events are history: {lines:?}");
        assert!(
            lines[0].starts_with("/core/pods/default/web-* "),
            "{}",
            lines[0]
        );
        for gone in ["u-1", "u-0", "\"42\"", "2026-01-01", "x7k2p", "10.244"] {
            assert!(!lines[0].contains(gone), "{gone} in {}", lines[0]);
        }
        assert_eq!(world.list::<k8s_openapi::api::core::v1::Pod>().len(), 1);
        let metadata = world.metadata::<k8s_openapi::api::core::v1::Pod>();
        let full = world.list::<k8s_openapi::api::core::v1::Pod>()[0]
            .metadata
            .clone();
        assert_eq!(
            metadata,
            [full],
            "all but managedFields, which the pod has none of"
        );
        assert!(
            world
                .get::<k8s_openapi::api::core::v1::Pod>("default", "web-x7k2p")
                .is_some()
        );
    }

    #[test]
    fn snapshots_of_a_run_decode_an_object_again_only_when_it_changed() {
        let decodes = Arc::<Decodes>::default();
        let key: Arc<str> = Arc::from("/core/pods/default/web");
        let snapshot = |labels: serde_json::Value| {
            let pod = serde_json::json!({"metadata": {"name": "web", "labels": labels}});
            let objects = [(key.clone(), Bytes::from(pod.to_string()))]
                .into_iter()
                .collect();
            World {
                objects,
                decodes: decodes.clone(),
            }
        };
        let labels = |world: &World| {
            world.metadata::<k8s_openapi::api::core::v1::Pod>()[0]
                .labels
                .clone()
                .unwrap_or_default()
        };
        let first = snapshot(serde_json::json!({"v": "1"}));
        assert_eq!(labels(&first)["v"], "1");
        assert_eq!(labels(&snapshot(serde_json::json!({"v": "1"})))["v"], "1");
        assert_eq!(
            labels(&snapshot(serde_json::json!({"v": "2"})))["v"],
            "2",
            "changed bytes"
        );
        assert_eq!(
            labels(&first)["v"],
            "1",
            "an older snapshot still reads its own bytes"
        );
    }

    #[test]
    fn normalising_leaves_out_the_terminated_pods_a_replica_set_leaves_behind() {
        let pod = |name: &str, owner: &str, phase: &str| {
            let pod = serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default",
                    "ownerReferences": [{"kind": owner, "name": "web", "controller": true}]},
                "status": {"phase": phase},
            });
            (
                Arc::from(format!("/core/pods/default/{name}").as_str()),
                Bytes::from(pod.to_string()),
            )
        };
        let world = World {
            objects: [
                pod("rs-failed", "ReplicaSet", "Failed"),
                pod("rs-running", "ReplicaSet", "Running"),
                pod("cache-failed", "Cache", "Failed"),
            ]
            .into_iter()
            .collect(),
            ..World::default()
        };
        let kept: Vec<String> = world
            .normalised()
            .iter()
            .filter_map(|line| line.split(' ').next().map(str::to_string))
            .collect();
        assert_eq!(
            kept,
            [
                "/core/pods/default/cache-failed",
                "/core/pods/default/rs-running"
            ],
            "an operator's own failed pod is state it must handle"
        );
    }

    #[test]
    fn normalising_ignores_the_order_of_status_conditions() {
        let normalised = |conditions: Value| {
            let mut world = World::default();
            let object = serde_json::json!({
                "metadata": {"name": "web"}, "status": {"conditions": conditions},
            });
            world.objects.insert(
                Arc::from("/apps/deployments/d/web"),
                Bytes::from(object.to_string()),
            );
            world.normalised().remove(0)
        };
        let available = serde_json::json!({"type": "Available", "status": "True"});
        let progressing = serde_json::json!({"type": "Progressing", "status": "True"});
        assert_eq!(
            normalised(serde_json::json!([available, progressing])),
            normalised(serde_json::json!([progressing, available]))
        );
    }

    #[test]
    fn normalising_keeps_only_whether_the_status_observed_the_generation() {
        let normalised = |generation: i64, observed: i64| {
            let mut world = World::default();
            let object = serde_json::json!({
                "metadata": {"name": "web", "generation": generation},
                "status": {"observedGeneration": observed},
            });
            world.objects.insert(
                Arc::from("/apps/deployments/d/web"),
                Bytes::from(object.to_string()),
            );
            world.normalised().remove(0)
        };
        assert_eq!(
            normalised(2, 2),
            normalised(5, 5),
            "history is not the end state"
        );
        assert_ne!(normalised(5, 5), normalised(5, 4), "a status that lags is");
    }
}
