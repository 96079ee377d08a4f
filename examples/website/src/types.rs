//! The `Website` resource and the external system its finalizer protects.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

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

/// A [`Registry`] in memory (hostname → `namespace/name`), for tests and demos.
#[derive(Default)]
pub struct MemoryRegistry(Mutex<BTreeMap<String, String>>);

impl MemoryRegistry {
    /// The Website `hostname` points at, if registered.
    pub fn get(&self, hostname: &str) -> Option<String> {
        self.names().get(hostname).cloned()
    }

    /// Every registered hostname, sorted.
    pub fn hostnames(&self) -> Vec<String> {
        self.names().keys().cloned().collect()
    }

    fn names(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Registry for MemoryRegistry {
    fn register(&self, hostname: &str, website: &str) {
        self.names().insert(hostname.into(), website.into());
    }

    fn deregister(&self, hostname: &str) {
        self.names().remove(hostname);
    }
}
