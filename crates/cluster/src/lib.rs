//! The simulated cluster's controllers: what kube-controller-manager runs so that
//! workloads come alive (Deployment → ReplicaSet → Pods, Job (and its TTL after it
//! finished), CronJob, StatefulSet,
//! DaemonSet, Endpoints and EndpointSlices of Services, PodDisruptionBudgets' status,
//! PersistentVolumeClaims bound and provisioned, and made for pods' ephemeral volumes,
//! pods whose node is gone collected), each a controller on steady's own
//! runtime, each writing the status fields and conditions kube-controller-manager 1.32
//! writes, so `kubectl get/wait/rollout` read them as on a real cluster.
//!
//! Owns: the workload controllers' decisions (which children to create, scale or delete,
//! and their status and conditions), one module per controller, what they share about
//! pods and templates (`pod_template`), ControllerRevisions (`revision`), events and
//! status writes (here), and [`run`], which runs them all on one [`Clock`] (`clock`).
//! Must not know: the API server's internals or the store. Like kube-controller-manager it
//! talks to the API only through `kube::Client`, so it runs unchanged against steady's
//! embedded server or a real cluster. The workload controllers only create and delete pods;
//! [`node`] (apart from [`run`]) simulates the nodes that bind and run them.

use std::future::Future;
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt, Shared};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use steady_runtime::events::{EventType, Recorder};
use steady_runtime::{CachingApi, Controller, ObjectCache};

mod claim;
pub mod clock;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod ephemeral;
pub mod job;
pub mod node;
mod node_affinity;
pub mod pod_template;
pub mod podgc;
pub mod replicaset;
mod revision;
pub mod statefulset;
pub mod ttl_after_finished;
pub mod volumes;

pub use clock::Clock;

/// Why a reconcile failed (the runtime logs it and retries the key with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API refused or failed a request.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// The object lacks what a controller needs to act on it (a name, a uid, a namespace).
    #[error("{0}")]
    Incomplete(String),
    /// A child's name is taken by an object the controller cannot use: it bumped the
    /// collision count and tries another name on the next reconcile.
    #[error("{0}")]
    NameCollision(String),
    /// An orphan could not be adopted: the controller, read again, is gone or being
    /// deleted (kube's `canAdopt`), or could not be read.
    #[error("{0}")]
    CannotAdopt(String),
    /// What the controller must create exists under its name, controlled by another
    /// (a claim an ephemeral volume's pod does not own): reported, and retried.
    #[error("{0}")]
    Taken(String),
}

/// A stop signal every controller can wait for.
pub type Shutdown = Shared<BoxFuture<'static, ()>>;

/// A running controller: completes when it stops.
pub type Running = BoxFuture<'static, Result<(), steady_runtime::Error>>;

/// What a controller starts with.
#[derive(Clone)]
pub struct Setup {
    /// Its way to the API.
    pub client: Client,
    /// Its runtime settings.
    pub config: steady_runtime::Config,
    /// Where it reads the time (every timestamp it writes, every duration it judges).
    pub clock: Clock,
}

impl Setup {
    fn into_parts(self) -> (Client, steady_runtime::Config, Clock) {
        (self.client, self.config, self.clock)
    }
}

/// A controller's entry point: run until `Shutdown`, as `Setup` says.
pub type Start = fn(Setup, Shutdown) -> Running;

/// Every controller of the simulated cluster, by name (one line per module).
pub const CONTROLLERS: &[(&str, Start)] = &[
    ("deployment", deployment::start),
    ("replicaset", replicaset::start),
    ("job", job::start),
    ("statefulset", statefulset::start),
    ("daemonset", daemonset::start),
    ("cronjob", cronjob::start),
    ("ttl-after-finished", ttl_after_finished::start),
    ("endpoints", endpoints::start),
    ("disruption", disruption::start),
    ("persistentvolume-binder", volumes::start),
    ("ephemeral-volume", ephemeral::start),
    ("pod-garbage-collector", podgc::start),
];

/// Why the cluster's controllers stopped other than by shutdown.
#[derive(Debug, thiserror::Error)]
#[error("the {controller} controller stopped: {source}")]
pub struct Stopped {
    /// The controller's name in [`CONTROLLERS`].
    pub controller: &'static str,
    /// Its runtime's reason.
    pub source: steady_runtime::Error,
}

/// Run every controller in [`CONTROLLERS`] against `client` until `shutdown` completes,
/// each with the runtime's default settings under its own name, on the wall clock
/// advancing with tokio's.
pub async fn run(
    client: Client,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Stopped> {
    let setup = Setup {
        client,
        config: steady_runtime::Config::default(),
        clock: clock::starting_now(),
    };
    run_with(setup, shutdown).await
}

/// [`run`] as `setup` says: its config is every controller's runtime settings (the name
/// replaced by the controller's), its clock theirs. Tests pin the seed and the
/// concurrency, the simulator its clock.
pub async fn run_with(
    setup: Setup,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Stopped> {
    let shutdown = shutdown_signal(shutdown);
    let running = CONTROLLERS.iter().map(|(name, start)| {
        let named = Setup {
            config: named(&setup.config, name),
            ..setup.clone()
        };
        start(named, shutdown.clone()).map(move |result| {
            result.map_err(|source| Stopped {
                controller: name,
                source,
            })
        })
    });
    futures::future::try_join_all(running).await.map(drop)
}

/// Run the one controller `start` (with the runtime's default settings, named `name`, on
/// the wall clock advancing with tokio's) until `shutdown` completes: what a test of one
/// controller runs.
pub async fn run_one(
    start: Start,
    name: &str,
    client: Client,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), steady_runtime::Error> {
    let setup = Setup {
        client,
        config: named(&steady_runtime::Config::default(), name),
        clock: clock::starting_now(),
    };
    start(setup, shutdown_signal(shutdown)).await
}

/// What the runtime needs of a kind a controller reconciles.
trait Kind:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> Kind for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// A controller of every `K` in all namespaces, reading and writing through `client`:
/// how each workload controller begins.
fn controller_for<K: Kind>(client: &Client, config: steady_runtime::Config) -> Controller<K> {
    Controller::new(Api::all(client.clone()), config)
}

/// Own the pods carrying `label` (the controllers' children), caching only those; an
/// orphan among them wakes every controller of its namespace that `claims` it, for the
/// reconcile to adopt (see `claim`).
fn adopts_pods_labelled<K: Kind>(
    controller: &mut Controller<K>,
    client: &Client,
    label: &str,
    claims: fn(&K, &Pod) -> bool,
) -> ObjectCache<Pod> {
    let labelled = watcher::Config::default().labels(label);
    controller.owns_or_adopts_with(Api::all(client.clone()), labelled, claims)
}

fn shutdown_signal(shutdown: impl Future<Output = ()> + Send + 'static) -> Shutdown {
    shutdown.boxed().shared()
}

fn named(config: &steady_runtime::Config, name: &str) -> steady_runtime::Config {
    steady_runtime::Config {
        name: name.to_string(),
        ..config.clone()
    }
}

/// The event recorder of the controller `component`, on the cluster's clock. One per
/// controller, shared by its reconciles: the names it gives stay distinct while the
/// clock stands still.
fn recorder(client: &Client, component: &str, clock: &Clock) -> Recorder {
    Recorder::new(client.clone(), component, component).with_clock(clock.clone())
}

/// Publish an event about `object`. Events are best effort: a failure is logged, never
/// retried, and never fails the reconcile.
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

/// Publish a Normal event about `object` in the background, as client-go's event
/// broadcaster does: the reconcile does not wait for it (the ReplicaSet and Deployment
/// controllers, whose events come one per pod and scale).
fn publish_in_background<K>(events: Recorder, object: Arc<K>, reason: &str, message: String)
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    let reason = reason.to_string();
    tokio::spawn(async move {
        publish(
            &events,
            object.as_ref(),
            EventType::Normal,
            &reason,
            &message,
        )
        .await;
    });
}

/// The message of a failed request, as kube's controllers print an error: the API's
/// own message for a refusal.
fn error_message(error: &Error) -> String {
    match error {
        Error::Api(kube::Error::Api(status)) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Write `status` to `name`'s status subresource as a merge patch, unless it equals
/// `current` (a reconcile at the fixed point writes nothing). kube omits counts that are
/// zero; `omitted_counts` names those the patch must then remove with `null`.
/// Returns whether it wrote.
async fn write_status<K, S>(
    api: &CachingApi<K>,
    name: &str,
    current: Option<&S>,
    status: &S,
    omitted_counts: &[&str],
) -> Result<bool, Error>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + Serialize
        + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if current == Some(status) {
        return Ok(false);
    }
    let body = status_body(status, omitted_counts)?;
    let patch = Patch::Merge(serde_json::json!({ "status": body }));
    api.patch_status(name, &PatchParams::default(), &patch)
        .await?;
    Ok(true)
}

/// `status` as the body of a merge patch: the `omitted_counts` it leaves out (zero, as
/// kube omits them) are `null`, so the patch removes them.
fn status_body<S: Serialize>(
    status: &S,
    omitted_counts: &[&str],
) -> Result<serde_json::Value, Error> {
    let mut body = serde_json::to_value(status).map_err(kube::Error::SerdeError)?;
    if let serde_json::Value::Object(fields) = &mut body {
        for field in omitted_counts {
            fields
                .entry(field.to_string())
                .or_insert(serde_json::Value::Null);
        }
    }
    Ok(body)
}

/// Whether the API refused a create because the namespace is being deleted (client-go's
/// `HasStatusCause(err, NamespaceTerminatingCause)`): every create there fails, and
/// kube's controllers do not report it as their own failure.
fn namespace_terminating(error: &Error) -> bool {
    let Error::Api(kube::Error::Api(status)) = error else {
        return false;
    };
    let causes = status.details.iter().flat_map(|d| &d.causes);
    causes
        .into_iter()
        .any(|c| c.reason == "NamespaceTerminating")
}

/// kube's Warning `FailedCreate` about `owner` when the API refused one of its creates
/// (but for a terminating namespace); `message` words it from the API's message (pod
/// control's `Error creating: …`, the StatefulSet's own). Returns the error, for the
/// reconcile to fail with and retry.
async fn failed_create<K: Resource<DynamicType = ()>>(
    events: &Recorder,
    owner: &K,
    message: impl FnOnce(&str) -> String,
    error: kube::Error,
) -> Error {
    let error = Error::from(error);
    if !namespace_terminating(&error) {
        let message = message(&error_message(&error));
        publish(events, owner, EventType::Warning, "FailedCreate", &message).await;
    }
    error
}

/// Record a Normal event about `owner`, the object a reconcile is for: how the pod-owning
/// controllers report each pod or claim they create (`SuccessfulCreate`) or delete
/// (`SuccessfulDelete`).
async fn record_normal<K: Resource<DynamicType = ()>>(
    events: &Recorder,
    owner: &K,
    reason: &str,
    message: &str,
) {
    publish(events, owner, EventType::Normal, reason, message).await;
}
