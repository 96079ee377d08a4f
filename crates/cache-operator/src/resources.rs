//! The objects a `Cache` owns, as the reconciler wants them: pods and the Service.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements, Service,
    ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, Preconditions};
use steady_runtime::{Projected, Projection};

use crate::types::{Cache, CacheSpec, GROUP, VERSION};

/// Label naming the Cache a pod belongs to (the Service's selector).
pub const CACHE_LABEL: &str = "steady.dev/cache";
/// Label carrying the hash of the pod template a pod was created from.
pub const TEMPLATE_HASH_LABEL: &str = "steady.dev/template-hash";
/// Name of the memcached container and of the Service port.
pub const CONTAINER_NAME: &str = "memcached";

/// A stable hash (FNV-1a, 64 bit) of everything that shapes a pod: image, port, memory.
/// Stable across processes and Rust versions, so a restarted operator agrees with itself.
pub fn template_hash(spec: &CacheSpec) -> String {
    let input = format!("{}\n{}\n{}", spec.image, spec.port, spec.memory_mib);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in input.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The pods' label selector, as the scale subresource reports it.
pub fn selector(cache_name: &str) -> String {
    format!("{CACHE_LABEL}={cache_name}")
}

/// The name of the pod with `ordinal`.
pub fn pod_name(cache_name: &str, ordinal: i32) -> String {
    format!("{cache_name}-{ordinal}")
}

/// The ordinal of a pod named `<cache>-<ordinal>`, if the name has that shape.
pub fn ordinal_of(cache_name: &str, pod_name: &str) -> Option<i32> {
    let rest = pod_name.strip_prefix(cache_name)?.strip_prefix('-')?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if rest.len() > 1 && rest.starts_with('0') {
        return None;
    }
    rest.parse().ok()
}

/// Delete options that delete a pod only as it was read (its uid), never a pod created
/// since under the same name.
pub fn this_incarnation(pod: &CachedPod) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: pod.meta().uid().map(str::to_string),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

/// A controller ownerReference to `cache` (the garbage collector deletes what it owns).
pub fn owner_reference(cache: &Cache) -> OwnerReference {
    OwnerReference {
        api_version: format!("{GROUP}/{VERSION}"),
        kind: "Cache".into(),
        name: cache.metadata.name.clone().unwrap_or_default(),
        uid: cache.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `owner` (a uid) is the controller of `meta`.
pub fn is_controlled_by(meta: &ObjectMeta, owner: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == owner)
}

fn labels(cache_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(CACHE_LABEL.to_string(), cache_name.to_string())])
}

/// The pod with `ordinal` as the spec wants it.
pub fn desired_pod(cache: &Cache, ordinal: i32, hash: &str) -> Pod {
    let name = cache.metadata.name.clone().unwrap_or_default();
    let spec = &cache.spec;
    let mut pod_labels = labels(&name);
    pod_labels.insert(TEMPLATE_HASH_LABEL.into(), hash.to_string());
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(&name, ordinal)),
            namespace: cache.metadata.namespace.clone(),
            labels: Some(pod_labels),
            owner_references: Some(vec![owner_reference(cache)]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: CONTAINER_NAME.into(),
                image: Some(spec.image.clone()),
                args: Some(vec![
                    "-m".into(),
                    spec.memory_mib.to_string(),
                    "-p".into(),
                    spec.port.to_string(),
                ]),
                ports: Some(vec![ContainerPort {
                    name: Some(CONTAINER_NAME.into()),
                    container_port: spec.port,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                resources: Some(ResourceRequirements {
                    limits: Some(BTreeMap::from([(
                        "memory".to_string(),
                        Quantity(format!("{}Mi", spec.memory_mib)),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// The Service `<cache>` as the spec wants it.
pub fn desired_service(cache: &Cache) -> Service {
    let name = cache.metadata.name.clone().unwrap_or_default();
    Service {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: cache.metadata.namespace.clone(),
            labels: Some(labels(&name)),
            owner_references: Some(vec![owner_reference(cache)]),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(labels(&name)),
            ports: Some(vec![service_port(cache.spec.port)]),
            ..Default::default()
        }),
        status: None,
    }
}

fn service_port(port: i32) -> ServicePort {
    ServicePort {
        name: Some(CONTAINER_NAME.into()),
        port,
        target_port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// What the reconciler reads of its Service besides its metadata: the selector and the
/// ports. The Cache controller caches Services as this projection ([`CachedService`]);
/// the cluster IP, status and managed fields are never decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSummary {
    selector: Option<BTreeMap<String, String>>,
    ports: Box<[PortSummary]>,
}

/// A Service port as far as the Cache reconciler compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PortSummary {
    name: Option<Box<str>>,
    port: i32,
    target_port: Option<IntOrString>,
}

impl Projection for ServiceSummary {
    type Kind = Service;

    const UNREAD: &'static [&'static str] = &["metadata.managedFields", "status"];

    fn project(service: &Service) -> Self {
        let spec = service.spec.as_ref();
        let ports = spec.and_then(|s| s.ports.as_deref()).unwrap_or_default();
        ServiceSummary {
            selector: spec.and_then(|s| s.selector.clone()),
            ports: ports
                .iter()
                .map(|p| PortSummary {
                    name: p.name.as_deref().map(Box::from),
                    port: p.port,
                    target_port: p.target_port.clone(),
                })
                .collect(),
        }
    }
}

/// A Service as the Cache controller caches it: the runtime's metadata and a
/// [`ServiceSummary`].
pub type CachedService = Projected<ServiceSummary>;

/// If `existing` differs from what the spec wants (selector, port), the JSON merge patch
/// that makes it so: the selector's other keys removed, the one port replaced. Fields the
/// server or others own (clusterIP, metadata) are left alone.
pub fn service_patch(cache: &Cache, existing: &ServiceSummary) -> Option<serde_json::Value> {
    let name = cache.metadata.name.clone().unwrap_or_default();
    let want_selector = labels(&name);
    let port_ok = match &*existing.ports {
        [p] => {
            p.port == cache.spec.port
                && p.name.as_deref() == Some(CONTAINER_NAME)
                && p.target_port
                    .as_ref()
                    .is_none_or(|t| *t == IntOrString::Int(cache.spec.port))
        }
        _ => false,
    };
    if existing.selector.as_ref() == Some(&want_selector) && port_ok {
        return None;
    }
    let unwanted = existing.selector.iter().flatten();
    let removed = unwanted.filter(|(key, _)| !want_selector.contains_key(*key));
    let mut selector: serde_json::Map<String, serde_json::Value> = removed
        .map(|(key, _)| (key.clone(), serde_json::Value::Null))
        .collect();
    selector.extend(want_selector.into_iter().map(|(k, v)| (k, v.into())));
    Some(serde_json::json!({
        "spec": {"selector": selector, "ports": [service_port(cache.spec.port)]},
    }))
}

/// Whether the pod's `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    ready_status(pod) == Some("True")
}

/// The status of the pod's `Ready` condition, if it has one.
fn ready_status(pod: &Pod) -> Option<&str> {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// What the reconciler reads of a pod besides its metadata (name, uid, owners, deletion):
/// the template it runs, its phase and its readiness. The Cache controller caches pods as
/// this projection ([`CachedPod`]), a few hundred bytes instead of a decoded `Pod`'s
/// several kilobytes; an update that changes nothing here (a probe time, the pod IP, the
/// node binding) wakes no reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSummary {
    template_hash: Option<ShortText>,
    phase: Option<Cow<'static, str>>,
    /// The `Ready` condition's status (`True`, `False`, `Unknown`), if the pod has one.
    ready: Option<Cow<'static, str>>,
}

/// A pod's phases and a condition's statuses: cached pods share these instead of each
/// allocating its own copy (an allocation costs at least 32 bytes with its header).
const PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];
const CONDITION_STATUSES: [&str; 3] = ["True", "False", "Unknown"];

/// A string kept inline when it is short (a template hash is 16 bytes), boxed otherwise:
/// one allocation fewer per cached pod.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ShortText {
    Inline { len: u8, bytes: [u8; SHORT_TEXT] },
    Boxed(Box<str>),
}

/// The longest [`ShortText::Inline`]: with its tag and length, as big as a `Box<str>` and
/// its `Option` tag.
const SHORT_TEXT: usize = 22;

impl ShortText {
    fn new(text: &str) -> Self {
        let mut bytes = [0; SHORT_TEXT];
        match (bytes.get_mut(..text.len()), u8::try_from(text.len())) {
            (Some(prefix), Ok(len)) => {
                prefix.copy_from_slice(text.as_bytes());
                ShortText::Inline { len, bytes }
            }
            _ => ShortText::Boxed(text.into()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Always a whole `&str` copied in `new`, so valid UTF-8.
            ShortText::Inline { len, bytes } => bytes
                .get(..usize::from(*len))
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default(),
            ShortText::Boxed(text) => text,
        }
    }
}

/// `value`, shared when it is one of `known`, copied otherwise.
fn shared(value: &str, known: &[&'static str]) -> Cow<'static, str> {
    match known.iter().find(|k| **k == value) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(value.to_string()),
    }
}

impl Projection for PodSummary {
    type Kind = Pod;

    /// The biggest parts of a pod, none of which [`PodSummary`] reads.
    const UNREAD: &'static [&'static str] = &[
        "metadata.managedFields",
        "spec",
        "status.containerStatuses",
        "status.initContainerStatuses",
    ];

    fn project(pod: &Pod) -> Self {
        PodSummary {
            template_hash: hash_of(pod).map(ShortText::new),
            phase: phase(pod).map(|p| shared(p, &PHASES)),
            ready: ready_status(pod).map(|r| shared(r, &CONDITION_STATUSES)),
        }
    }
}

impl PodSummary {
    /// The pod's template-hash label.
    pub fn template_hash(&self) -> Option<&str> {
        self.template_hash.as_ref().map(ShortText::as_str)
    }

    /// Whether the pod's `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.ready.as_deref() == Some("True")
    }

    /// Whether the pod's phase is `Failed`.
    pub fn is_failed(&self) -> bool {
        self.phase.as_deref() == Some(FAILED)
    }
}

/// A pod as the Cache controller caches it: the runtime's metadata and a [`PodSummary`].
pub type CachedPod = Projected<PodSummary>;

/// The `Pod` as far as its projection knows it (name, namespace, uid, owners, deletion,
/// template-hash label, phase, Ready condition): for code written against `Pod`s that
/// reads a projected cache.
pub fn pod_of(pod: &CachedPod) -> Pod {
    let meta = pod.meta();
    let owners = meta.owners().map(|r| OwnerReference {
        api_version: r.api_version.into(),
        kind: r.kind.into(),
        name: r.name.into(),
        uid: r.uid.into(),
        controller: Some(r.controller),
        ..OwnerReference::default()
    });
    let labels = pod
        .template_hash()
        .map(|hash| BTreeMap::from([(TEMPLATE_HASH_LABEL.to_string(), hash.to_string())]));
    let ready = pod.ready.as_deref().map(|status| PodCondition {
        type_: "Ready".into(),
        status: status.into(),
        ..PodCondition::default()
    });
    Pod {
        metadata: ObjectMeta {
            name: Some(meta.name().into()),
            namespace: meta.namespace().map(str::to_string),
            uid: meta.uid().map(str::to_string),
            resource_version: meta.resource_version().map(str::to_string),
            deletion_timestamp: meta.deletion_timestamp().cloned(),
            owner_references: Some(owners.collect()),
            labels,
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: pod.phase.as_deref().map(str::to_string),
            conditions: Some(ready.into_iter().collect()),
            ..PodStatus::default()
        }),
    }
}

/// Whether the cached pod is being deleted.
pub fn is_deleting(pod: &CachedPod) -> bool {
    pod.meta().deletion_timestamp().is_some()
}

const FAILED: &str = "Failed";

/// Whether the pod's phase is `Failed`.
pub fn is_failed(pod: &Pod) -> bool {
    phase(pod) == Some(FAILED)
}

/// Whether the pod is being deleted.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The pod's template-hash label.
pub fn hash_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(TEMPLATE_HASH_LABEL))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn short_text_keeps_every_string_whole_inline_or_boxed() {
        let exactly = "x".repeat(SHORT_TEXT);
        let longer = "y".repeat(SHORT_TEXT + 1);
        for text in [
            "",
            "0123456789abcdef",
            "é-ü-ß",
            exactly.as_str(),
            longer.as_str(),
        ] {
            let short = ShortText::new(text);
            assert_eq!(short.as_str(), text);
            let inline = matches!(short, ShortText::Inline { .. });
            assert_eq!(inline, text.len() <= SHORT_TEXT, "{text:?}");
        }
        assert_eq!(
            size_of::<Option<ShortText>>(),
            size_of::<Option<Box<str>>>() + 8
        );
    }

    fn cache_c(port: i32) -> Cache {
        serde_json::from_value(json!({
            "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
            "spec": {"replicas": 2, "port": port}
        }))
        .expect("a Cache")
    }

    /// `desired_service`, as the server stores it (clusterIP and protocol defaulted), then
    /// changed by `edit`.
    fn served_service(edit: impl FnOnce(&mut serde_json::Value)) -> ServiceSummary {
        let mut served = serde_json::to_value(desired_service(&cache_c(11211))).expect("json");
        served["spec"]["clusterIP"] = json!("10.96.0.7");
        edit(&mut served);
        ServiceSummary::project(&serde_json::from_value(served).expect("a Service"))
    }

    #[test]
    fn the_desired_service_needs_no_patch() {
        assert_eq!(
            service_patch(&cache_c(11211), &served_service(|_| {})),
            None
        );
    }

    #[test]
    fn a_port_change_patches_the_one_port() {
        let patch = service_patch(&cache_c(11311), &served_service(|_| {})).expect("a patch");
        assert_eq!(patch["spec"]["ports"][0]["port"], json!(11311));
        assert_eq!(patch["spec"]["ports"][0]["targetPort"], json!(11311));
        assert_eq!(patch["spec"]["ports"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn a_selector_edited_by_someone_else_is_put_back_exactly() {
        let edited = served_service(|s| {
            s["spec"]["selector"] = json!({"steady.dev/cache": "other", "extra": "x"});
        });
        let patch = service_patch(&cache_c(11211), &edited).expect("a patch");
        assert_eq!(
            patch["spec"]["selector"],
            json!({"steady.dev/cache": "c", "extra": null}),
            "the extra key removed (null in a merge patch), ours restored"
        );
    }

    #[test]
    fn a_projected_pod_answers_every_question_the_reconciler_asks_alike() {
        let cache: Cache = serde_json::from_value(serde_json::json!({
            "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
            "spec": {"replicas": 2}
        }))
        .expect("a Cache");
        let mut pod = desired_pod(&cache, 1, &template_hash(&cache.spec));
        pod.metadata.uid = Some("p1".into());
        pod.metadata.deletion_timestamp = Some(
            serde_json::from_value(serde_json::json!("2026-12-02T12:00:00Z")).expect("a time"),
        );
        for (phase, ready) in [
            ("Running", "True"),
            ("Failed", "False"),
            ("Pending", "Unknown"),
        ] {
            pod.status = Some(
                serde_json::from_value(serde_json::json!({
                    "phase": phase, "podIP": "10.0.0.1",
                    "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": ready}],
                }))
                .expect("a status"),
            );
            let projected = CachedPod::of(&pod);
            assert_eq!(projected.is_ready(), is_ready(&pod));
            assert_eq!(projected.is_failed(), is_failed(&pod));
            assert_eq!(is_deleting(&projected), is_terminating(&pod));
            assert_eq!(projected.template_hash(), hash_of(&pod));
            assert!(projected.meta().is_controlled_by("u1"));
            assert!(!projected.meta().is_controlled_by("p1"));
            assert_eq!(ordinal_of("c", projected.meta().name()), Some(1));
            let precondition = this_incarnation(&projected)
                .preconditions
                .and_then(|p| p.uid);
            assert_eq!(precondition.as_deref(), Some("p1"));
        }
    }

    #[test]
    fn ordinals_parse_only_canonical_names() {
        assert_eq!(ordinal_of("x", "x-0"), Some(0));
        assert_eq!(ordinal_of("x", "x-12"), Some(12));
        assert_eq!(ordinal_of("x", "x-01"), None);
        assert_eq!(ordinal_of("x", "x-"), None);
        assert_eq!(ordinal_of("x", "x-a"), None);
        assert_eq!(ordinal_of("x", "xy-1"), None);
        assert_eq!(ordinal_of("x-1", "x-1-2"), Some(2));
    }

    #[test]
    fn template_hash_is_stable_and_sensitive() {
        let spec = CacheSpec::default();
        assert_eq!(template_hash(&spec), template_hash(&spec.clone()));
        assert_eq!(template_hash(&spec), "904c8fb88ff16e0b");
        let replicas = CacheSpec {
            replicas: 5,
            ..spec.clone()
        };
        assert_eq!(template_hash(&spec), template_hash(&replicas));
        for other in [
            CacheSpec {
                image: "memcached:1.7".into(),
                ..spec.clone()
            },
            CacheSpec {
                port: 11212,
                ..spec.clone()
            },
            CacheSpec {
                memory_mib: 128,
                ..spec.clone()
            },
        ] {
            assert_ne!(template_hash(&spec), template_hash(&other));
        }
    }
}
