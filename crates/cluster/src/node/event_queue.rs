//! How the simulated kubelets and scheduler record Events: as client-go's event
//! broadcaster does for the real ones. Each component queues its Events (at most
//! [`QUEUED_EVENTS`]) and one task writes them to the API in order, one at a time. The
//! component never waits for its Events, and when the API falls behind, the queue fills
//! and further Events are dropped: Events are best effort, and under load they give way
//! to the writes that matter (a kube-apiserver sees the same from a busy kubelet). The same
//! Event again (a crash-looping container's BackOff) patches the first one's count, as
//! client-go's correlator does ([`EventLog`]).

use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::Value;
use steady_runtime::event_log::{EventLog, Record};
use tokio::sync::mpsc;

/// Events one component holds before it drops new ones: client-go's `maxQueuedEvents`.
pub const QUEUED_EVENTS: usize = 1000;

/// The Events of one component, written by a task of their own.
pub(super) struct EventQueue {
    component: String,
    /// `None` when the component records no Events ([`EventQueue::discarding`]).
    queue: Option<mpsc::Sender<Value>>,
    dropped: AtomicU64,
}

impl EventQueue {
    /// A queue of `capacity` Events for `component`, written through `client` by a task
    /// that ends once the queue is dropped and drained.
    pub fn start(client: Client, component: String, capacity: usize) -> EventQueue {
        let (queue, events) = mpsc::channel(capacity.max(1));
        tokio::spawn(write_in_order(client, events));
        EventQueue {
            component,
            queue: Some(queue),
            dropped: AtomicU64::new(0),
        }
    }

    /// A queue that writes nothing (see `NodeConfig::record_events`).
    pub fn discarding(component: String) -> EventQueue {
        EventQueue {
            component,
            queue: None,
            dropped: AtomicU64::new(0),
        }
    }

    /// Queue `events` in order; those that find the queue full are dropped.
    pub fn record(&self, events: Vec<Value>) {
        let Some(queue) = &self.queue else {
            return;
        };
        for event in events {
            if let Err(mpsc::error::TrySendError::Full(event)) = queue.try_send(event) {
                self.drop_event(&event);
            }
        }
    }

    /// Count and log a dropped Event: a warning for the first and every thousandth, so a
    /// long overload says so without a line per Event.
    fn drop_event(&self, event: &Value) {
        let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        let reason = event["reason"].as_str().unwrap_or("");
        let object = event["involvedObject"]["name"].as_str().unwrap_or("");
        if dropped == 1 || dropped.is_multiple_of(1000) {
            tracing::warn!(
                component = %self.component,
                dropped,
                %reason,
                %object,
                "event queue full: dropping events until the API catches up"
            );
        } else {
            tracing::debug!(component = %self.component, %reason, %object, "event dropped");
        }
    }

    /// Events dropped so far because the queue was full.
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

async fn write_in_order(client: Client, mut events: mpsc::Receiver<Value>) {
    let mut log = EventLog::default();
    while let Some(mut event) = events.recv().await {
        let recorded = match log.observe(&mut event) {
            Record::Create => post_event(&client, &event).await,
            Record::Patch { name, patch } => match patch_event(&client, &event, &name, patch).await
            {
                // Gone (expired, deleted): recorded anew.
                Some(404) => post_event(&client, &event).await,
                status => status,
            },
        };
        if recorded.is_some_and(|status| status < 300) {
            log.recorded(&event);
        }
    }
}

/// POST `event` as it was built; the created Event the server returns is not read
/// (its name, count and first timestamp are the ones sent), so it is never decoded. A
/// failure only logs: client-go retries an Event that could not be sent, but the node's
/// client is in-process and a failure here is a rejection, which client-go does not
/// retry either. Returns the answer's status code, if there was one.
async fn post_event(client: &Client, event: &Value) -> Option<u16> {
    let events = events_api(client, event);
    let request = serde_json::to_vec(event)
        .map_err(kube::Error::SerdeError)
        .and_then(|body| {
            kube::core::Request::new(events.resource_url())
                .create(&PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)
        });
    send(client, request).await
}

/// Fold `event` into the Event `name` recorded before it: a strategic merge `patch` of its
/// count, last timestamp and message.
async fn patch_event(client: &Client, event: &Value, name: &str, patch: Value) -> Option<u16> {
    let events = events_api(client, event);
    let request = kube::core::Request::new(events.resource_url())
        .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .map_err(kube::Error::BuildRequest);
    send(client, request).await
}

fn events_api(client: &Client, event: &Value) -> Api<Event> {
    let namespace = event["metadata"]["namespace"].as_str().unwrap_or("default");
    Api::namespaced(client.clone(), namespace)
}

/// Send `request`, reading only the answer's status code.
async fn send(
    client: &Client,
    request: Result<http::Request<Vec<u8>>, kube::Error>,
) -> Option<u16> {
    let sent = match request {
        Ok(request) => client.send(request.map(kube::client::Body::from)).await,
        Err(e) => Err(e),
    };
    match sent {
        Ok(response) if response.status().is_success() => Some(response.status().as_u16()),
        Ok(response) => {
            tracing::debug!(status = %response.status(), "could not record event");
            Some(response.status().as_u16())
        }
        Err(e) => {
            tracing::debug!(error = %e, "could not record event");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::json;
    use tokio::sync::Semaphore;

    use super::*;

    /// A client whose server records each Event's reason and answers only when `answers`
    /// hands out a permit: the test decides when the API "catches up".
    fn stalled_client(answers: Arc<Semaphore>, seen: Arc<Mutex<Vec<String>>>) -> Client {
        let service = tower::service_fn(move |request: Request<Body>| {
            let answers = answers.clone();
            let seen = seen.clone();
            async move {
                let body = request.into_body().collect_bytes().await?;
                let event: Value = serde_json::from_slice(&body)?;
                seen.lock()
                    .unwrap()
                    .push(event["reason"].as_str().unwrap_or("").to_string());
                answers.acquire().await?.forget();
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(
                    Response::builder()
                        .status(201)
                        .body(Body::from(b"{}".to_vec()))?,
                )
            }
        });
        Client::new(service, "default")
    }

    fn event(reason: &str) -> Value {
        json!({"metadata": {"namespace": "default"}, "reason": reason, "involvedObject": {"name": "p"}})
    }

    #[tokio::test]
    async fn events_are_written_one_at_a_time_in_order_and_dropped_when_the_queue_is_full() {
        let answers = Arc::new(Semaphore::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let queue = EventQueue::start(
            stalled_client(answers.clone(), seen.clone()),
            "kubelet".into(),
            2,
        );
        queue.record(vec![event("first")]);
        // The writer takes the first Event and waits for the stalled API.
        while seen.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        queue.record(["second", "third", "fourth", "fifth"].map(event).to_vec());
        assert_eq!(
            queue.dropped(),
            2,
            "two fit in the queue behind the one in flight"
        );
        assert_eq!(*seen.lock().unwrap(), ["first"], "one write at a time");

        answers.add_permits(3);
        while seen.lock().unwrap().len() < 3 {
            tokio::task::yield_now().await;
        }
        queue.record(vec![event("sixth")]);
        answers.add_permits(1);
        while seen.lock().unwrap().len() < 4 {
            tokio::task::yield_now().await;
        }
        assert_eq!(*seen.lock().unwrap(), ["first", "second", "third", "sixth"]);
        assert_eq!(queue.dropped(), 2);
    }
}
