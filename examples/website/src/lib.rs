//! An example operator on steady: a `Website` is nginx in front of a backend Service,
//! reachable at a hostname registered outside the cluster.
//!
//! Different in shape from the Cache operator on purpose. It owns a Deployment, a ConfigMap
//! and a Secret, each written with server-side apply (one idempotent apply per object: at
//! the fixed point the server changes nothing); it watches the backend Service it does not
//! own (a mapped watch: the Service's port goes into nginx's configuration); and it holds a
//! finalizer, so the hostname leaves the external [`Registry`] before the Website goes.

use std::fmt::Debug;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::{ByteString, NamespaceResourceScope};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use steady_runtime::finalizer::{FinalizerError, FinalizerEvent, finalizer};
use steady_runtime::{Action, Config, Context, Controller, ObjectCache, ObjectKey};

mod types;
pub use types::{Registry, Website, WebsiteSpec, WebsiteStatus};

/// What a reconcile reads besides the Website.
pub struct State {
    /// The backend Services, from the controller's mapped watch.
    pub services: ObjectCache<Service>,
    /// The external system the finalizer protects.
    pub registry: Arc<dyn Registry>,
}

/// The field manager of every apply, and the finalizer's name.
pub const MANAGER: &str = "example.steady.dev/website";

/// A reconcile that failed; the runtime retries it with backoff.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Error(#[from] FinalizerError<kube::Error>);

/// The Website controller: owns Deployments, ConfigMaps and Secrets, follows Services.
pub fn controller(client: Client) -> (Controller<Website>, ObjectCache<Service>) {
    let config = Config {
        name: "website".into(),
        ..Config::default()
    };
    let mut controller = Controller::new(Api::all(client.clone()), config);
    controller.owns(Api::<Deployment>::all(client.clone()));
    controller.owns(Api::<ConfigMap>::all(client.clone()));
    controller.owns(Api::<Secret>::all(client.clone()));
    let sites = controller.primary_cache();
    let services = controller.watches(Api::<Service>::all(client), move |svc: &Service| {
        let proxies_to = |site: &Website| {
            site.namespace() == svc.namespace() && site.spec.backend == svc.name_any()
        };
        sites
            .list()
            .iter()
            .filter(|s| proxies_to(s))
            .map(|s| ObjectKey::of(s.as_ref()))
            .collect()
    });
    (controller, services)
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
    done.await?;
    Ok(Action::done())
}

async fn apply(site: &Website, ctx: &Context<State>) -> Result<(), kube::Error> {
    let (ns, name) = (site.namespace().unwrap_or_default(), site.name_any());
    let backend = ObjectKey::new(Some(&ns), &site.spec.backend);
    let service = ctx.data().services.get(&backend);
    let port = service.and_then(|svc| Some(svc.spec.as_ref()?.ports.as_ref()?.first()?.port));
    let conf = match port {
        Some(port) => format!(
            "location / {{ proxy_pass http://{}:{port}; }}",
            backend.name
        ),
        None => "location / { return 503; }".to_string(), // until the backend exists
    };
    let htpasswd = site.spec.htpasswd.join("\n");
    let mut hasher = DefaultHasher::new(); // fixed keys: equal content, equal hash
    (&conf, &htpasswd).hash(&mut hasher);
    let (conf_name, auth_name) = (format!("{name}-nginx"), format!("{name}-auth"));
    let auth = ByteString(htpasswd.into_bytes());
    put::<ConfigMap>(
        ctx,
        site,
        &conf_name,
        json!({ "data": { "site.conf": conf } }),
    )
    .await?;
    put::<Secret>(ctx, site, &auth_name, json!({ "data": { "auth": auth } })).await?;
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
    put::<Deployment>(ctx, site, &name, json!({ "spec": spec })).await?;
    ctx.data()
        .registry
        .register(&site.spec.hostname, &format!("{ns}/{name}"));
    let status = WebsiteStatus {
        backend_port: port,
        observed_generation: site.metadata.generation,
    };
    let status =
        json!({ "apiVersion": Website::api_version(&()), "kind": "Website", "status": status });
    let apply = PatchParams::apply(MANAGER).force();
    ctx.api::<Website>(&ns)
        .patch_status(&name, &apply, &Patch::Apply(status))
        .await?;
    Ok(())
}

/// Server-side apply `body` as the object `name` of kind `K`, controlled by `site`.
async fn put<K>(
    ctx: &Context<State>,
    site: &Website,
    name: &str,
    mut body: Value,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + 'static,
{
    body["apiVersion"] = K::api_version(&()).into();
    body["kind"] = K::kind(&()).into();
    body["metadata"] = json!({ "name": name, "ownerReferences": [site.controller_owner_ref(&())] });
    let api = ctx.api::<K>(&site.namespace().unwrap_or_default());
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(body),
    )
    .await?;
    Ok(())
}
