//! An event recorder: core/v1 Events about an object, so `kubectl describe` and
//! `kubectl get events` show what the operator did, on steady and on real clusters alike.
//!
//! Events are named as client-go and kube-rs name them, `<object>.<hex nanoseconds>`, from
//! the recorder's [`Clock`]: under the simulator that is the simulated clock, so a seed's
//! Events carry the same names and times in every run. The same Event again is folded
//! into the first ([`EventLog`]), its `count` and `lastTimestamp` patched, as client-go's
//! recorder does.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::{Value, json};

use crate::event_log::{EventLog, Record};

/// A source of wall-clock time for what a controller stamps (Event names and times,
/// condition times): the system clock in a process, the simulated one in `steady-sim`.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The system's wall clock.
pub fn system_clock() -> Clock {
    Arc::new(Utc::now)
}

/// Names tried before a create's 409 is returned: another recorder (another process, or
/// another recorder on a clock that stood still) may have taken a name.
const NAME_ATTEMPTS: usize = 5;

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
    clock: Clock,
    /// The last name suffix this recorder (and its clones) used, in nanoseconds: the next
    /// is later even when the clock stands still, as a paused one does.
    last_suffix: Arc<AtomicI64>,
    /// The Events this recorder (and its clones) recorded, to fold repeats into.
    log: Arc<Mutex<EventLog>>,
}

impl Recorder {
    /// A recorder writing through `client` as `component` (the reporting controller) on
    /// `instance` (e.g. the pod it runs in).
    pub fn new(client: Client, component: impl Into<String>, instance: impl Into<String>) -> Self {
        Recorder {
            client,
            component: component.into(),
            instance: instance.into(),
            clock: system_clock(),
            last_suffix: Arc::new(AtomicI64::new(i64::MIN)),
            log: Arc::default(),
        }
    }

    /// The same recorder, reading the time from `clock` (the simulated one in a test).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// A name suffix for an Event recorded at `now`: its nanoseconds since the epoch, or
    /// one more than the last suffix when that is not earlier.
    fn next_suffix(&self, now: DateTime<Utc>) -> i64 {
        let nanos = now.timestamp_nanos_opt().unwrap_or(i64::MAX);
        let next = |last: i64| nanos.max(last.saturating_add(1));
        let previous = self
            .last_suffix
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some(next(last))
            })
            .unwrap_or_else(|last| last);
        next(previous)
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
        let now = (self.clock)();
        let time = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut event = json!({
            "metadata": {"namespace": namespace},
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
            "firstTimestamp": time,
            "lastTimestamp": time,
            "count": 1,
        });
        let api = Api::<Event>::namespaced(self.client.clone(), &namespace);
        let record = self.lock_log().observe(&mut event);
        let written = match record {
            Record::Patch { name, patch } => {
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                {
                    // Gone (expired, deleted): recorded anew.
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        self.create(&api, &name, now, event).await
                    }
                    patched => patched,
                }
            }
            Record::Create => self.create(&api, &name, now, event).await,
        }?;
        let stored = serde_json::to_value(&written).map_err(kube::Error::SerdeError)?;
        self.lock_log().recorded(&stored);
        Ok(written)
    }

    fn lock_log(&self) -> std::sync::MutexGuard<'_, EventLog> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Create `event` about the object `object`, under a name of its own.
    async fn create(
        &self,
        api: &Api<Event>,
        object: &str,
        now: DateTime<Utc>,
        event: Value,
    ) -> Result<Event, kube::Error> {
        let mut event: Event = serde_json::from_value(event).map_err(kube::Error::SerdeError)?;
        let mut attempt = 1;
        loop {
            event.metadata.name = Some(format!("{object}.{:x}", self.next_suffix(now)));
            match api.create(&PostParams::default(), &event).await {
                Err(kube::Error::Api(status)) if status.code == 409 && attempt < NAME_ATTEMPTS => {
                    attempt += 1;
                }
                created => return created,
            }
        }
    }
}
