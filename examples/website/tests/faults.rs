//! The Website operator under injected faults (missed and duplicated events, stale lists,
//! failed and lost writes, crashes between writes): every seed converges, stays converged,
//! ends as the fault-free run does, proxies to the backend's final port, and leaves only the
//! live Website's hostname registered.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::CustomResourceExt;
use serde_json::{Value, json};
use steady_example_website::{MemoryRegistry, Website, controller, reconcile};
use steady_sim::{Scenario, Simulation, Step};

fn object<K: serde::de::DeserializeOwned>(kind: &str, name: &str, spec: Value) -> K {
    let api_version = if kind == "Service" {
        "v1"
    } else {
        "example.steady.dev/v1alpha1"
    };
    let metadata = json!({ "name": name, "namespace": "default" });
    let object =
        json!({ "apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec });
    serde_json::from_value(object).expect("a valid object")
}

fn website(name: &str) -> Website {
    let spec =
        json!({ "hostname": format!("{name}.example.com"), "backend": "api", "replicas": 2 });
    object("Website", name, spec)
}

fn scenario(registry: Arc<MemoryRegistry>) -> Scenario {
    let backend: Service = object("Service", "api", json!({ "ports": [{ "port": 8080 }] }));
    let port = json!({ "spec": { "ports": [{ "port": 9090 }] } });
    let at = Duration::from_secs;
    Scenario::new("website")
        .crd(Website::crd())
        .create(&website("blog"))
        .create(&website("old"))
        .at(at(2), Step::create(&backend))
        .at(at(6), Step::patch::<Service>("default", "api", port))
        .at(at(9), Step::delete::<ConfigMap>("default", "blog-nginx"))
        .at(at(12), Step::delete::<Website>("default", "old"))
        .controller(move |client, launch| {
            let (controller, state) = controller(client, registry.clone());
            async move {
                launch.run(controller, reconcile, state).await.ok();
            }
        })
        .goal("nginx proxies to the backend's final port", |world| {
            let conf = world
                .get::<ConfigMap>("default", "blog-nginx")
                .and_then(|c| c.data);
            match conf.as_ref().and_then(|data| data.get("site.conf")) {
                Some(conf) if conf.contains("http://api:9090") => Ok(()),
                other => Err(format!("site.conf is {other:?}")),
            }
        })
}

#[test]
fn websites_converge_under_faults() {
    for seed in 0..12 {
        let registry = Arc::new(MemoryRegistry::default());
        Simulation::default().check(&scenario(registry.clone()), [seed]);
        assert_eq!(registry.hostnames(), ["blog.example.com"], "seed {seed}");
    }
}
