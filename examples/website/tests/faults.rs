//! The Website operator under injected faults (missed and duplicated events, stale lists,
//! failed and lost writes, crashes between writes): every seed converges, stays converged,
//! ends as the fault-free run does, proxies to the backend's final port, and leaves only the
//! live Website's hostname registered.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::CustomResourceExt;
use serde_json::json;
use steady_example_website::{Registry, State, Website, controller, reconcile};
use steady_sim::{Scenario, Simulation, Step};

#[derive(Default)]
struct Hostnames(Mutex<BTreeSet<String>>);

impl Registry for Hostnames {
    fn register(&self, hostname: &str, _website: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(hostname.into());
    }
    fn deregister(&self, hostname: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(hostname);
    }
}

fn website(name: &str) -> Website {
    serde_json::from_value(json!({ "apiVersion": "example.steady.dev/v1alpha1",
        "kind": "Website", "metadata": { "name": name, "namespace": "default" },
        "spec": { "hostname": format!("{name}.example.com"), "backend": "api", "replicas": 2 } }))
    .expect("a Website")
}

fn scenario(registry: Arc<Hostnames>) -> Scenario {
    let backend: Service = serde_json::from_value(json!({ "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "api", "namespace": "default" },
        "spec": { "ports": [{ "port": 8080 }] } }))
    .expect("a Service");
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
            let registry = registry.clone();
            async move {
                let (controller, services) = controller(client);
                let _ = launch.run(controller, reconcile, Arc::new(State { services, registry })).await;
            }
        })
        .goal("nginx proxies to the backend's port", |world| {
            let conf = world.get::<ConfigMap>("default", "blog-nginx").and_then(|c| c.data);
            match conf.as_ref().and_then(|d| d.get("site.conf")) {
                Some(conf) if conf.contains("http://api:9090") => Ok(()),
                other => Err(format!("site.conf is {other:?}")),
            }
        })
}

#[test]
fn websites_converge_under_faults() {
    for seed in 0..12 {
        let registry = Arc::new(Hostnames::default());
        Simulation::default().check(&scenario(registry.clone()), [seed]);
        let registered = registry.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(registered, BTreeSet::from(["blog.example.com".to_string()]), "seed {seed}");
    }
}
