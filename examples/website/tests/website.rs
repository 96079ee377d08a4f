//! The Website operator against steady's in-process API server on a paused clock: what it
//! writes, that it follows its backend Service, and that deleting a Website deregisters its
//! hostname before the Website goes.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::json;
use steady_example_website::{MemoryRegistry, Website, controller, reconcile};
use steady_test_support::{create_json, eventually};

const WAIT: Duration = Duration::from_secs(30);

async fn conf(client: &Client) -> Option<String> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    maps.get_opt("blog-nginx")
        .await
        .ok()??
        .data?
        .remove("site.conf")
}

#[tokio::test(start_paused = true)]
async fn website_converges_follows_its_backend_and_deregisters_on_delete() {
    let server = steady_apiserver::ApiServer::in_memory(Default::default())
        .await
        .unwrap();
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Website::crd())
        .await
        .unwrap();
    let registry = Arc::new(MemoryRegistry::default());
    let (controller, state) = controller(client.clone(), registry.clone());
    let running = tokio::spawn(controller.run(reconcile, state, std::future::pending::<()>()));

    let sites: Api<Website> = Api::namespaced(client.clone(), "default");
    let site = json!({ "apiVersion": "example.steady.dev/v1alpha1", "kind": "Website",
        "metadata": { "name": "blog", "namespace": "default" },
        "spec": { "hostname": "blog.example.com", "backend": "api", "replicas": 2,
                  "htpasswd": ["ann:{SHA}x"] } });
    let _: Website = eventually("the Website CRD to be served", WAIT, || async {
        sites
            .create(
                &PostParams::default(),
                &serde_json::from_value(site.clone()).ok()?,
            )
            .await
            .ok()
    })
    .await;

    // No backend yet: nginx answers 503, and everything else is in place.
    let first = eventually("the nginx config", WAIT, || conf(&client)).await;
    assert!(first.contains("return 503"), "{first}");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment = eventually("the Deployment", WAIT, || async {
        deployments.get_opt("blog").await.ok()?
    })
    .await;
    assert_eq!(deployment.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = secrets.get("blog-auth").await.unwrap();
    assert_eq!(secret.data.unwrap()["auth"].0, b"ann:{SHA}x");
    eventually("the hostname registered", WAIT, || async {
        registry.get("blog.example.com")
    })
    .await;

    // The backend appears (a Service the Website does not own): the mapped watch re-renders.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let _: Service = create_json(
        &services,
        json!({ "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "api" }, "spec": { "ports": [{ "port": 8080 }] } }),
    )
    .await;
    eventually("nginx to proxy to api:8080", WAIT, || async {
        conf(&client)
            .await
            .filter(|c| c.contains("http://api:8080"))
    })
    .await;
    let rolled = eventually("the pods to roll for the new config", WAIT, || async {
        let now = deployments.get("blog").await.ok()?;
        (now.spec?.template != deployment.clone().spec?.template).then_some(())
    });
    rolled.await;
    let port = eventually("status.backendPort", WAIT, || async {
        sites.get("blog").await.ok()?.status?.backend_port
    });
    assert_eq!(port.await, 8080);

    // At the fixed point a resync changes nothing: the applies are no-ops on the server.
    let before = sites.get("blog").await.unwrap().metadata.resource_version;
    let cm_before = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get("blog-nginx")
        .await
        .unwrap();
    sites
        .patch(
            "blog",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"poke": "1"}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cm_after = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get("blog-nginx")
        .await
        .unwrap();
    assert_eq!(
        cm_before.metadata.resource_version,
        cm_after.metadata.resource_version
    );
    assert_ne!(
        before,
        sites.get("blog").await.unwrap().metadata.resource_version
    );

    // Delete: the finalizer deregisters the hostname, then the Website goes.
    sites
        .delete("blog", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Website to go", WAIT, || async {
        sites.get_opt("blog").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(registry.get("blog.example.com"), None);
    running.abort();
}
