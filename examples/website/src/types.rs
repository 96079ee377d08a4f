//! The `Website` resource and the external system its finalizer protects.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// nginx serving `hostname` by proxying to the Service `backend` in the same namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "example.steady.dev",
    version = "v1alpha1",
    kind = "Website",
    namespaced
)]
#[kube(status = "WebsiteStatus", derive = "PartialEq")]
pub struct WebsiteSpec {
    /// The public name, registered in the [`Registry`] while the Website exists.
    pub hostname: String,
    /// The Service nginx proxies to (not owned: the Website follows its port).
    pub backend: String,
    /// nginx pods.
    pub replicas: i32,
    /// htpasswd lines (`user:{SHA}…`) for basic auth; empty serves everyone.
    #[serde(default)]
    pub htpasswd: Vec<String>,
}

/// What the operator last made of the spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebsiteStatus {
    /// The backend Service's port, or none while the Service is missing (nginx answers 503).
    pub backend_port: Option<i32>,
    /// The generation this status describes.
    pub observed_generation: Option<i64>,
}

/// Where hostnames live outside the cluster (a DNS provider, a CDN): why the finalizer exists.
pub trait Registry: Send + Sync {
    /// Point `hostname` at the Website `namespace/name` (idempotent).
    fn register(&self, hostname: &str, website: &str);
    /// Remove `hostname` (idempotent).
    fn deregister(&self, hostname: &str);
}
