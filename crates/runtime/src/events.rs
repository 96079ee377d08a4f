//! An event recorder: core/v1 Events about an object, so `kubectl describe` and
//! `kubectl get events` show what the operator did, on steady and on real clusters alike.

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use rand::Rng;
use serde_json::json;

/// Normal or Warning, as `kubectl describe` groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something a person may need to look at.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Publishes Events as one component (e.g. `cache-operator`) and instance (a pod name).
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    component: String,
    instance: String,
}

impl Recorder {
    /// A recorder writing through `client` as `component` (the reporting controller) on
    /// `instance` (e.g. the pod it runs in).
    pub fn new(client: Client, component: impl Into<String>, instance: impl Into<String>) -> Self {
        Recorder {
            client,
            component: component.into(),
            instance: instance.into(),
        }
    }

    /// Record that `reason` happened to `obj`. `message` is for people: say what and why.
    pub async fn publish<K>(
        &self,
        obj: &K,
        kind: EventType,
        reason: &str,
        message: &str,
    ) -> Result<Event, kube::Error>
    where
        K: Resource<DynamicType = ()>,
    {
        let meta = obj.meta();
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let suffix: u64 = rand::rng().random();
        let event = json!({
            "metadata": {"name": format!("{name}.{suffix:016x}"), "namespace": namespace},
            "involvedObject": {
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "name": name,
                "namespace": meta.namespace,
                "uid": meta.uid,
                "resourceVersion": meta.resource_version,
            },
            "reason": reason,
            "message": message,
            "type": kind.as_str(),
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let event: Event = serde_json::from_value(event).map_err(kube::Error::SerdeError)?;
        Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await
    }
}
