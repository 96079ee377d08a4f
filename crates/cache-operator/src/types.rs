//! The `Cache` resource: Rust types that are the one source of truth for its CRD.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use steady_runtime::conditions::Condition;

/// API group of the `Cache` kind.
pub const GROUP: &str = "steady.dev";
/// API version of the `Cache` kind.
pub const VERSION: &str = "v1alpha1";
/// Condition type: every desired pod runs the current template and is Ready.
pub const CONDITION_READY: &str = "Ready";
/// Condition type: pods are being created, replaced or removed.
pub const CONDITION_PROGRESSING: &str = "Progressing";
/// Condition type: something needs a person's attention (a pod failed, a name is taken).
pub const CONDITION_DEGRADED: &str = "Degraded";

/// A memcached cache: `replicas` pods named `<cache>-<ordinal>` and a Service `<cache>`.
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "steady.dev",
    version = "v1alpha1",
    kind = "Cache",
    plural = "caches",
    singular = "cache",
    shortname = "cache",
    namespaced,
    status = "CacheStatus",
    derive = "PartialEq",
    doc = "A memcached cache managed by steady's Cache operator.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CacheSpec {
    /// Number of memcached pods (0 keeps only the Service).
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// Container image of every pod.
    #[serde(default = "default_image")]
    #[schemars(length(min = 1))]
    pub image: String,
    /// Port memcached listens on, and the Service's port.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Memory for items, in MiB (memcached `-m`, and the container's memory limit).
    #[serde(default = "default_memory_mib")]
    #[serde(rename = "memoryMiB")]
    #[schemars(range(min = 1))]
    pub memory_mib: i32,
}

fn default_replicas() -> i32 {
    1
}

fn default_image() -> String {
    "memcached:1.6".to_string()
}

fn default_port() -> i32 {
    11211
}

fn default_memory_mib() -> i32 {
    64
}

impl Default for CacheSpec {
    fn default() -> Self {
        CacheSpec {
            replicas: default_replicas(),
            image: default_image(),
            port: default_port(),
            memory_mib: default_memory_mib(),
        }
    }
}

/// What the operator last observed.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheStatus {
    /// Pods that exist and are owned by this Cache.
    #[serde(default)]
    pub replicas: i32,
    /// Ready pods running the current template.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Label selector of the pods (for the scale subresource).
    #[serde(default)]
    pub selector: String,
    /// `Ready`, `Progressing` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// `metav1.Condition` as a list keyed by `type`.
fn conditions_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": {"type": "string"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "observedGeneration": {"type": "integer", "format": "int64"}
            }
        }
    })
}

/// The CRD of `Cache`, generated from the types above.
pub fn crd() -> CustomResourceDefinition {
    <Cache as kube::CustomResourceExt>::crd()
}

/// The CRD as YAML (for `kubectl apply -f -`).
pub fn crd_yaml() -> String {
    // A CRD built from plain structs always serializes; an empty document is never applied.
    serde_yaml::to_string(&crd()).unwrap_or_default()
}
