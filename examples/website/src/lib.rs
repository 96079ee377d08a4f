//! An example operator on steady: a `Website` is nginx in front of a backend Service,
//! reachable at a hostname registered outside the cluster.
//!
//! Different in shape from the Cache operator on purpose. It owns a Deployment, a ConfigMap
//! and a Secret, each written with server-side apply (one idempotent apply per object: at
//! the fixed point the server changes nothing); it watches the backend Service it does not
//! own (a mapped watch: the Service's port goes into nginx's configuration); and it holds a
//! finalizer, so the hostname leaves the external [`Registry`] before the Website goes.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::Api;
use kube::{Client, ResourceExt};
use serde_json::json;
use steady_runtime::finalizer::{FinalizerError, FinalizerEvent, finalizer};
use steady_runtime::{Action, Config, Context, Controller, ObjectCache, ObjectKey};

mod types;
pub use types::{MemoryRegistry, Registry, Website, WebsiteSpec, WebsiteStatus};

/// What a reconcile reads besides the Website.
pub struct State {
    /// The backend Services, from the controller's mapped watch.
    pub services: ObjectCache<Service>,
    /// The external system the finalizer protects.
    pub registry: Arc<dyn Registry>,
}

/// The field manager of every apply, and the finalizer's name.
pub const MANAGER: &str = "example.steady.dev/website";

/// A reconcile that failed (a write, or the finalizer's own); the runtime retries it with
/// backoff.
pub type Error = FinalizerError<kube::Error>;

/// The Website controller (owns Deployments, ConfigMaps and Secrets, follows Services)
/// and what its reconciles read, with hostnames kept in `registry`.
pub fn controller(
    client: Client,
    registry: Arc<dyn Registry>,
) -> (Controller<Website>, Arc<State>) {
    let mut controller = Controller::new(Api::all(client.clone()), Config::named("website"));
    controller.owns(Api::<Deployment>::all(client.clone()));
    controller.owns(Api::<ConfigMap>::all(client.clone()));
    controller.owns(Api::<Secret>::all(client.clone()));
    let services = controller.watches_references(Api::<Service>::all(client), |site: &Website| {
        [ObjectKey::new(
            site.namespace().as_deref(),
            &site.spec.backend,
        )]
    });
    (controller, Arc::new(State { services, registry }))
}

/// Converge one Website: see the [crate docs](crate).
pub async fn reconcile(site: Arc<Website>, ctx: Arc<Context<State>>) -> Result<Action, Error> {
    let api = Api::<Website>::namespaced(ctx.client(), &site.namespace().unwrap_or_default());
    let done = finalizer(&api, MANAGER, site, |event| async {
        match event {
            FinalizerEvent::Apply(site) => apply(&site, &ctx).await,
            FinalizerEvent::Cleanup(site) => {
                ctx.data().registry.deregister(&site.spec.hostname);
                Ok(())
            }
        }
    });
    done.await.map(|_| Action::done())
}

async fn apply(site: &Website, ctx: &Context<State>) -> Result<(), kube::Error> {
    let (ns, name) = (site.namespace().unwrap_or_default(), site.name_any());
    let backend = &site.spec.backend;
    let service = ctx.data().services.get(&ObjectKey::new(Some(&ns), backend));
    let port = service.and_then(|svc| Some(svc.spec.as_ref()?.ports.as_ref()?.first()?.port));
    let conf = match port {
        Some(port) => format!("location / {{ proxy_pass http://{backend}:{port}; }}"),
        None => "location / { return 503; }".to_string(), // until the backend exists
    };
    let htpasswd = ByteString(site.spec.htpasswd.join("\n").into_bytes());
    let mut hasher = DefaultHasher::new(); // fixed keys: equal content, equal hash
    (&conf, &htpasswd.0).hash(&mut hasher);
    let (conf_name, auth_name) = (format!("{name}-nginx"), format!("{name}-auth"));
    let conf = json!({ "data": { "site.conf": conf } });
    ctx.apply_owned::<ConfigMap, _>(site, &conf_name, MANAGER, conf)
        .await?;
    let auth = json!({ "data": { "auth": htpasswd } });
    ctx.apply_owned::<Secret, _>(site, &auth_name, MANAGER, auth)
        .await?;
    let labels = json!({ "website": name });
    let pod = json!({
        // A new configuration rolls the pods: nginx reads it only at start.
        "metadata": { "labels": labels,
            "annotations": { MANAGER: format!("{:x}", hasher.finish()) } },
        "spec": { "containers": [{ "name": "nginx", "image": "nginx:1.27", "volumeMounts": [
                { "name": "conf", "mountPath": "/etc/nginx/conf.d" },
                { "name": "auth", "mountPath": "/etc/nginx/auth" }] }],
            "volumes": [{ "name": "conf", "configMap": { "name": conf_name } },
                { "name": "auth", "secret": { "secretName": auth_name } }] } });
    let spec = json!({ "replicas": site.spec.replicas, "template": pod,
        "selector": { "matchLabels": labels } });
    ctx.apply_owned::<Deployment, _>(site, &name, MANAGER, json!({ "spec": spec }))
        .await?;
    ctx.data()
        .registry
        .register(&site.spec.hostname, &format!("{ns}/{name}"));
    let status = WebsiteStatus {
        backend_port: port,
        observed_generation: site.metadata.generation,
    };
    ctx.apply_status(site, MANAGER, status).await?;
    Ok(())
}
