//! What client-go's `EventLogger` remembers of the Events a component recorded, so that
//! the same Event again (same source, object, type, reason and message) is folded into the
//! first, its `count` and `lastTimestamp` patched, instead of creating another object:
//! `kubectl describe` then shows `(x5 over 3m)`, as on a cluster, and a crash-looping pod
//! costs one Event, not one per back-off.
//!
//! Events are JSON values here (core/v1 `Event` as sent), so both the runtime's
//! [`Recorder`](crate::events::Recorder) and components that build their own Events use
//! it.

use std::collections::{HashMap, VecDeque};

use serde_json::{Value, json};

/// How many Events a log remembers (client-go's `maxLruCacheEntries`); the oldest
/// remembered is forgotten first.
pub const REMEMBERED_EVENTS: usize = 4096;

/// The Events a component recorded, by what makes two of them the same.
#[derive(Debug)]
pub struct EventLog {
    entries: HashMap<String, Logged>,
    order: VecDeque<String>,
    capacity: usize,
}

/// What is kept of a recorded Event.
#[derive(Debug, Clone)]
struct Logged {
    name: String,
    count: i64,
    first_timestamp: Value,
}

/// How to send an Event the log has seen.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// Create it: the first of its kind (or one the log forgot).
    Create,
    /// Patch the Event named `name` with `patch` (a strategic merge patch of its `count`,
    /// `lastTimestamp` and `message`); if it is gone, create it instead.
    Patch {
        /// The Event recorded first.
        name: String,
        /// The patch's body.
        patch: Value,
    },
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog::with_capacity(REMEMBERED_EVENTS)
    }
}

impl EventLog {
    /// A log remembering up to `capacity` Events.
    pub fn with_capacity(capacity: usize) -> Self {
        EventLog {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Fold `event` into the same Event recorded before, if there is one: `event` takes
    /// that Event's name, its first timestamp and its count plus one (client-go's
    /// `eventObserve`), and the answer says to patch it. Call
    /// [`recorded`](Self::recorded) once the server accepted the write.
    pub fn observe(&mut self, event: &mut Value) -> Record {
        let Some(logged) = self.entries.get(&key(event)) else {
            return Record::Create;
        };
        let count = logged.count.saturating_add(1);
        event["metadata"]["name"] = json!(logged.name);
        event["count"] = json!(count);
        event["firstTimestamp"] = logged.first_timestamp.clone();
        let patch = json!({
            "count": count,
            "lastTimestamp": event["lastTimestamp"],
            "message": event["message"],
        });
        Record::Patch {
            name: logged.name.clone(),
            patch,
        }
    }

    /// Remember `event` as the server stored it (its name, count and first timestamp).
    pub fn recorded(&mut self, event: &Value) {
        let key = key(event);
        let logged = Logged {
            name: event["metadata"]["name"].as_str().unwrap_or("").to_string(),
            count: event["count"].as_i64().unwrap_or(1),
            first_timestamp: event["firstTimestamp"].clone(),
        };
        if self.entries.insert(key.clone(), logged).is_none() {
            self.order.push_back(key);
        }
        while self.entries.len() > self.capacity {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }
}

/// What makes two Events the same (client-go's `getEventKey`).
fn key(event: &Value) -> String {
    let text = |pointer: &str| event.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    [
        "/source/component",
        "/source/host",
        "/involvedObject/kind",
        "/involvedObject/namespace",
        "/involvedObject/name",
        "/involvedObject/fieldPath",
        "/involvedObject/uid",
        "/involvedObject/apiVersion",
        "/type",
        "/reason",
        "/message",
    ]
    .iter()
    .map(|pointer| text(pointer))
    .collect::<Vec<_>>()
    .join("\u{0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn back_off(at: &str, message: &str) -> Value {
        json!({
            "metadata": {"name": format!("web-0.{at}"), "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "default", "uid": "u1",
                "apiVersion": "v1", "fieldPath": "spec.containers{app}"},
            "source": {"component": "kubelet", "host": "node-0"},
            "type": "Warning", "reason": "BackOff", "message": message,
            "firstTimestamp": at, "lastTimestamp": at, "count": 1,
        })
    }

    #[test]
    fn the_same_event_again_patches_the_first_with_its_count() {
        let mut log = EventLog::default();
        let mut first = back_off("t1", "Back-off restarting failed container app");
        assert_eq!(log.observe(&mut first), Record::Create);
        log.recorded(&first);
        let mut again = back_off("t2", "Back-off restarting failed container app");
        let Record::Patch { name, patch } = log.observe(&mut again) else {
            panic!("a second identical event is a patch");
        };
        assert_eq!(name, "web-0.t1");
        assert_eq!(
            patch,
            json!({"count": 2, "lastTimestamp": "t2", "message": "Back-off restarting failed container app"})
        );
        assert_eq!(
            (&again["count"], &again["firstTimestamp"]),
            (&json!(2), &json!("t1"))
        );
        log.recorded(&again);
        let mut third = back_off("t3", "Back-off restarting failed container app");
        assert!(matches!(log.observe(&mut third), Record::Patch { .. }));
        assert_eq!(third["count"], 3);
        let mut other = back_off("t4", "another message");
        assert_eq!(
            log.observe(&mut other),
            Record::Create,
            "the message is part of the key"
        );
    }

    #[test]
    fn the_oldest_event_is_forgotten_past_the_capacity() {
        let mut log = EventLog::with_capacity(2);
        for message in ["a", "b", "c"] {
            let mut event = back_off("t", message);
            log.observe(&mut event);
            log.recorded(&event);
        }
        assert_eq!(
            log.observe(&mut back_off("t", "a")),
            Record::Create,
            "forgotten"
        );
        assert!(matches!(
            log.observe(&mut back_off("t", "c")),
            Record::Patch { .. }
        ));
    }
}
