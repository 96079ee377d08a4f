//! The simulated cluster's controllers: the part of kube-controller-manager that makes
//! workloads run. Jobs, StatefulSets and DaemonSets become pods here (the simulated node
//! then runs them), and each writes the status and conditions kube-controller-manager 1.32
//! writes, so `kubectl get/wait/rollout` read them as on a real cluster.
//!
//! Owns: one controller per kind (`job`, `statefulset`, `daemonset`), each a reconciler
//! on steady's own runtime (`steady_runtime::Controller`: watches, caches, queue, backoff),
//! and [`run`], which runs them all.
//! Must not know: the API server's internals or the store. Like a kube-controller-manager,
//! it talks to the API only through `kube::Client`, so it runs against any server.

use std::future::Future;

use kube::{Client, Resource};
use steady_runtime::events::{EventType, Recorder};

pub mod daemonset;
pub mod job;
mod pods;
mod revision;
pub mod statefulset;

/// Why one reconcile failed (the runtime retries the key with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// Run every controller of this crate against `client` until `shutdown` completes (then
/// let running reconciles finish) or one of them stops on its own.
pub async fn run(
    client: Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), steady_runtime::Error> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let signal = || {
        let mut stopped = stopped.clone();
        async move {
            // A dropped sender also means stop.
            let _ = stopped.wait_for(|stop| *stop).await;
        }
    };
    let controllers = futures::future::try_join3(
        job::run(client.clone(), signal()),
        statefulset::run(client.clone(), signal()),
        daemonset::run(client, signal()),
    );
    tokio::pin!(controllers);
    tokio::select! {
        result = &mut controllers => return result.map(|_| ()),
        () = shutdown => {}
    }
    let _ = stop.send(true);
    controllers.await.map(|_| ())
}

/// Events are best effort: a failure is logged, never retried.
async fn publish<K: Resource<DynamicType = ()>>(
    events: &Recorder,
    object: &K,
    kind: EventType,
    reason: &str,
    message: &str,
) {
    if let Err(e) = events.publish(object, kind, reason, message).await {
        let name = object.meta().name.as_deref().unwrap_or("");
        tracing::debug!(kind = %K::kind(&()), %name, error = %e, "could not record an event");
    }
}

/// The runtime settings every controller here shares, named after its controller.
fn runtime_config(name: &str) -> steady_runtime::Config {
    steady_runtime::Config {
        name: name.into(),
        ..steady_runtime::Config::default()
    }
}
