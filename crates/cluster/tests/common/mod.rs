//! A cluster for the controllers' tests: steady's in-process API server with the
//! simulated node (pods really bind, start, fail or complete), and one of this crate's
//! controllers running beside it, as kube-controller-manager would.

#![allow(dead_code)]

use std::future::Future;

use futures::FutureExt;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use steady_test_support::eventually;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const NS: &str = "default";

/// Long enough for anything these tests wait for on the paused clock.
pub const LIMIT: Duration = Duration::from_secs(300);

pub struct Cluster {
    pub server: steady_apiserver::ApiServer,
    pub client: Client,
    stop: Option<oneshot::Sender<()>>,
    controller: Option<JoinHandle<Result<(), steady_runtime::Error>>>,
}

/// The server, and the controller `start` returns, running until the cluster is stopped.
pub async fn cluster<F, Fut>(start: F) -> Cluster
where
    F: FnOnce(Client, oneshot::Receiver<()>) -> Fut,
    Fut: Future<Output = Result<(), steady_runtime::Error>> + Send + 'static,
{
    cluster_of_nodes(1, start).await
}

/// [`cluster`] with `nodes` simulated nodes (`steady-node-0`, … when more than one).
pub async fn cluster_of_nodes<F, Fut>(nodes: usize, start: F) -> Cluster
where
    F: FnOnce(Client, oneshot::Receiver<()>) -> Fut,
    Fut: Future<Output = Result<(), steady_runtime::Error>> + Send + 'static,
{
    let server = nodes_server(nodes).await;
    let client = server.client();
    let (stop, stopped) = oneshot::channel();
    let controller = tokio::spawn(start(client.clone(), stopped));
    Cluster {
        server,
        client,
        stop: Some(stop),
        controller: Some(controller),
    }
}

/// [`cluster`] running the one controller `start`, named `name`.
pub async fn controller_cluster(start: steady_cluster::Start, name: &'static str) -> Cluster {
    controller_cluster_of_nodes(1, start, name).await
}

/// [`controller_cluster`] with `nodes` simulated nodes.
pub async fn controller_cluster_of_nodes(
    nodes: usize,
    start: steady_cluster::Start,
    name: &'static str,
) -> Cluster {
    cluster_of_nodes(nodes, move |client, stopped| {
        steady_cluster::run_one(start, name, client, until(stopped))
    })
    .await
}

/// The DaemonSet `name` of one `image` container, its pods labelled `app: <name>`, with
/// `pod_spec` merged into their spec.
pub fn daemon_set(name: &str, image: &str, pod_spec: Value) -> Value {
    let mut spec = json!({"containers": [{"name": name, "image": image}]});
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), pod_spec) {
        spec.extend(extra);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    })
}

/// [`cluster`] running each of `controllers` (entry point and name) side by side, as
/// `steady up` runs them, with kind's default StorageClass, as `steady up` creates it.
pub async fn controllers_cluster(
    controllers: &'static [(steady_cluster::Start, &'static str)],
) -> Cluster {
    let cluster = cluster(move |client, stopped| {
        let stopped = futures::FutureExt::shared(until(stopped));
        let running = controllers.iter().map(|&(start, name)| {
            steady_cluster::run_one(start, name, client.clone(), stopped.clone())
        });
        futures::future::try_join_all(running).map(|joined| joined.map(drop))
    })
    .await;
    steady_cluster::volumes::ensure_default_class(&cluster.client)
        .await
        .expect("the default class");
    cluster
}

/// steady's in-process API server with the simulated node, its randomness seeded.
pub async fn node_server() -> steady_apiserver::ApiServer {
    nodes_server(1).await
}

/// steady's in-process API server alone (no node), its randomness seeded.
pub async fn bare_server() -> steady_apiserver::ApiServer {
    let config = steady_apiserver::Config {
        seed: Some(1),
        ..Default::default()
    };
    steady_apiserver::ApiServer::in_memory(config)
        .await
        .expect("server")
}

/// [`node_server`] with `count` simulated nodes (`steady-node-0`, … when more than one).
pub async fn nodes_server(count: usize) -> steady_apiserver::ApiServer {
    let server = bare_server().await;
    let nodes = steady_cluster::node::NodeConfig {
        seed: Some(1),
        nodes: count,
        ..Default::default()
    };
    steady_cluster::node::spawn(server.client(), nodes);
    server
}

/// A shutdown future from the receiver `cluster` hands the controller.
pub async fn until(stopped: oneshot::Receiver<()>) {
    let _ = stopped.await;
}

impl Cluster {
    /// Wait until `name`, of kind `K` in [`NS`], passes `check`, and return it.
    pub async fn wait_for<K>(&self, name: &str, what: &str, check: impl Fn(&K) -> bool) -> K
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api = self.api::<K>();
        eventually(what, LIMIT, || {
            let api = api.clone();
            let check = &check;
            async move {
                let object = api.get(name).await.ok()?;
                check(&object).then_some(object)
            }
        })
        .await
    }

    /// Let 30 s pass on the paused clock and check that the controller did not write
    /// `settled` again (a reconcile at the fixed point writes nothing).
    pub async fn assert_left_alone<K>(&self, settled: &K)
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        tokio::time::sleep(Duration::from_secs(30)).await;
        let name = settled.meta().name.as_deref().unwrap_or_default();
        let later = self.api::<K>().get(name).await.expect("object still there");
        assert_eq!(
            later.meta().resource_version,
            settled.meta().resource_version,
            "{name} was written again"
        );
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), NS)
    }

    /// The pods whose labels match `selector`, by name.
    pub async fn pods(&self, selector: &str) -> Vec<Pod> {
        let mut pods = self
            .api::<Pod>()
            .list(&ListParams::default().labels(selector))
            .await
            .expect("list pods")
            .items;
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    }

    /// Stop the controller cleanly; it must not have failed.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(controller) = self.controller.take() {
            controller
                .await
                .expect("controller task")
                .expect("controller stopped cleanly");
        }
    }
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// The first Event of `reason` in [`NS`], once one is recorded.
pub async fn event_with_reason(client: &Client, reason: &str) -> k8s_openapi::api::core::v1::Event {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NS);
    eventually(&format!("the {reason} event"), LIMIT, || async {
        let listed = events.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason))
    })
    .await
}

/// Each child's name and uid, and the uid of its controller ("" for an orphan).
pub type Children = std::collections::BTreeMap<String, (String, String)>;

/// The children `list` returns, as [`Children`].
pub fn children<K: kube::Resource>(list: &[K]) -> Children {
    list.iter()
        .map(|child| {
            let meta = child.meta();
            let controller = meta
                .owner_references
                .iter()
                .flatten()
                .find(|r| r.controller == Some(true))
                .map(|r| r.uid.clone())
                .unwrap_or_default();
            let uid = meta.uid.clone().unwrap_or_default();
            (meta.name.clone().unwrap_or_default(), (uid, controller))
        })
        .collect()
}

/// `kubectl delete --cascade=orphan` of the controller `name`, then `manifest` created
/// again once the garbage collector has released every child `current` lists; then the
/// new controller must take back the very same children. Returns the new controller.
pub async fn orphan_then_recreate<K, C, Fut>(
    api: &Api<K>,
    name: &str,
    manifest: serde_json::Value,
    current: impl Fn() -> Fut,
) -> K
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    C: kube::Resource,
    Fut: Future<Output = Vec<C>>,
{
    let before = children(&current().await);
    assert!(!before.is_empty(), "{name} has children to orphan");
    let orphan = kube::api::DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
        ..Default::default()
    };
    api.delete(name, &orphan).await.expect("orphaning delete");
    eventually("the children released", LIMIT, || async {
        let now = children(&current().await);
        let released = now.len() == before.len() && now.values().all(|(_, c)| c.is_empty());
        (released && api.get_opt(name).await.ok()?.is_none()).then_some(())
    })
    .await;
    let created = steady_test_support::create_json(api, manifest).await;
    let uid = created.meta().uid.clone().expect("a uid");
    let adopted: Children = before
        .iter()
        .map(|(child, (child_uid, _))| (child.clone(), (child_uid.clone(), uid.clone())))
        .collect();
    eventually("the same children adopted", LIMIT, || async {
        (children(&current().await) == adopted).then_some(())
    })
    .await;
    created
}
