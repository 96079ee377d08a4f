//! The Cache operator on kube-rs's `kube::runtime::Controller`, as a kube-rs user writes it:
//! `owns()` for Pods and Services, an error policy that requeues, periodic resync by
//! requeueing converged objects, and — having no cache of the owned objects — a LIST of
//! the Cache's pods by label and a GET of its Service in every reconcile.
//!
//! The decisions are steady's own reconciler ([`reconcile_with`]): only the runtime and
//! the way owned objects are read differ, which is what the benchmark compares. This code
//! exists only in the benchmark.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams};
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};
use steady_cache_operator::reconcile::REQUEUE_WHILE_PROGRESSING;
use steady_cache_operator::resources::{CachedPod, CachedService, selector};
use steady_cache_operator::{Cache, Error, Ledger, Outcome, View, reconcile_with};

/// Reads owned objects from the API server on every reconcile.
struct ApiView {
    client: Client,
}

impl View for ApiView {
    async fn owned_pods(
        &self,
        cache: &Cache,
        namespace: &str,
        _uid: &str,
    ) -> Result<Vec<Arc<CachedPod>>, Error> {
        let name = cache.name_any();
        let pods = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default().labels(&selector(&name)))
            .await
            .map_err(Error::api("listing the pods of", "Cache", namespace, &name))?;
        let projected = pods.items.iter().map(CachedPod::of);
        Ok(projected.map(Arc::new).collect())
    }

    async fn service(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<CachedService>>, Error> {
        let service = Api::<Service>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(Error::api("reading", "Service", namespace, name))?;
        Ok(service.map(|s| Arc::new(CachedService::of(&s))))
    }
}

struct Shared {
    client: Client,
    ledger: Ledger,
    resync: Duration,
    reconciles: Arc<AtomicU64>,
}

async fn reconcile(cache: Arc<Cache>, shared: Arc<Shared>) -> Result<Action, Error> {
    shared.reconciles.fetch_add(1, Ordering::Relaxed);
    let view = ApiView {
        client: shared.client.clone(),
    };
    Ok(
        match reconcile_with(&cache, shared.client.clone(), &shared.ledger, &view).await? {
            Outcome::Converged => Action::requeue(shared.resync),
            Outcome::Progressing => Action::requeue(REQUEUE_WHILE_PROGRESSING),
        },
    )
}

fn error_policy(_cache: Arc<Cache>, _error: &Error, _shared: Arc<Shared>) -> Action {
    Action::requeue(Duration::from_secs(1))
}

/// Run until `shutdown` completes, counting reconciles in `reconciles`.
pub async fn run(
    client: Client,
    concurrency: u16,
    resync: Duration,
    reconciles: Arc<AtomicU64>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let shared = Arc::new(Shared {
        client: client.clone(),
        ledger: Ledger::default(),
        resync,
        reconciles,
    });
    Controller::new(
        Api::<Cache>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
    .owns(Api::<Service>::all(client), watcher::Config::default())
    .with_config(ControllerConfig::default().concurrency(concurrency))
    .graceful_shutdown_on(shutdown)
    .run(reconcile, error_policy, shared)
    .for_each(|_| async {})
    .await;
}
