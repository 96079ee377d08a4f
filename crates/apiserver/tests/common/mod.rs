//! Shared helpers for the apiserver integration tests: an in-memory server, bounded
//! polling under tokio's paused clock, and raw HTTP requests against the Router.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::discovery::Discovery;
use serde_json::Value;
use steady_apiserver::{ApiServer, Config};
use tower::ServiceExt;

/// Overall guard for anything asynchronous (virtual time under a paused clock).
pub const GUARD: Duration = Duration::from_secs(30);

#[allow(unused_imports)] // not every suite reads API errors or clears finalizers
pub use steady_test_support::{
    api_code, clear_finalizers, create_json, get_existing, list_count, merge_patch,
    merge_patch_subresource,
};

/// What kube-rs's discovery finds through `client`: through the aggregated documents (one
/// request per API root) when `aggregated`, else one request per group version.
pub async fn discover(client: kube::Client, aggregated: bool) -> Discovery {
    let discovery = Discovery::new(client);
    let found = if aggregated {
        discovery.run_aggregated().await
    } else {
        discovery.run().await
    };
    found.unwrap_or_else(|e| panic!("discovery (aggregated: {aggregated}): {e}"))
}

pub async fn server() -> ApiServer {
    ApiServer::in_memory(Config::default())
        .await
        .expect("server starts")
}

/// A server whose simulated node (steady-cluster's) binds and runs pods.
pub async fn server_with_node() -> ApiServer {
    let server = server().await;
    steady_cluster::node::spawn(server.client(), steady_cluster::node::NodeConfig::default());
    server
}

/// A fresh server (kept alive by the caller) and its ConfigMaps in `default`.
pub async fn default_configmaps() -> (ApiServer, Api<ConfigMap>) {
    let s = server().await;
    let api = Api::namespaced(s.client(), "default");
    (s, api)
}

/// Poll `check` until it returns `Some`, bounded by [`GUARD`] on tokio's clock.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    steady_test_support::eventually(what, GUARD, check).await
}

/// Wait until `name` is gone from `api` (a failed read counts as not gone yet).
pub async fn eventually_gone<K>(api: &Api<K>, name: &str)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(&format!("{name} to be gone"), move || async move {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await
}

pub struct Raw {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: bytes::Bytes,
}

impl Raw {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Asserts the body is a failure `Status` whose code matches the HTTP status.
    pub fn assert_status(&self, code: u16, reason: &str) -> Value {
        let body = self.json();
        assert_eq!(self.status.as_u16(), code, "HTTP status; body: {body}");
        assert_eq!(
            self.headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
            Some("application/json"),
            "content type"
        );
        assert_eq!(body["kind"], "Status", "{body}");
        assert_eq!(body["apiVersion"], "v1", "{body}");
        assert_eq!(body["status"], "Failure", "{body}");
        assert_eq!(body["code"], code, "{body}");
        assert_eq!(body["reason"], reason, "{body}");
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "message: {body}"
        );
        assert!(body["metadata"].is_object(), "{body}");
        body
    }
}

/// One request straight into the Router (no socket), body read in full under the guard.
pub async fn raw(
    server: &ApiServer,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> Raw {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        request = request.header(http::header::CONTENT_TYPE, ct);
    }
    send(server, request.body(body.into()).expect("request")).await
}

/// `GET uri`.
pub async fn get(server: &ApiServer, uri: &str) -> Raw {
    raw(server, "GET", uri, None, "").await
}

/// `POST uri` with no body (connect subresources such as `exec`).
pub async fn post_empty(server: &ApiServer, uri: &str) -> Raw {
    raw(server, "POST", uri, None, "").await
}

/// `POST uri` with `body` as JSON.
pub async fn post_json(server: &ApiServer, uri: &str, body: &Value) -> Raw {
    raw(server, "POST", uri, JSON, body.to_string()).await
}

/// Send `request` straight into the Router (no socket); read the body in full under the guard.
pub async fn send(server: &ApiServer, request: Request<Body>) -> Raw {
    let response = server.router().oneshot(request).await.expect("infallible");
    let (parts, body) = response.into_parts();
    let body = tokio::time::timeout(GUARD, body.collect())
        .await
        .expect("response body ends")
        .expect("body")
        .to_bytes();
    Raw {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

pub const JSON: Option<&str> = Some("application/json");
pub const MERGE_PATCH: Option<&str> = Some("application/merge-patch+json");

/// A request a test sends raw and expects refused.
pub struct Write {
    pub method: &'static str,
    pub uri: String,
    pub content_type: Option<&'static str>,
    pub body: String,
}

pub fn write(
    method: &'static str,
    uri: impl Into<String>,
    content_type: Option<&'static str>,
    body: impl Into<String>,
) -> Write {
    Write {
        method,
        uri: uri.into(),
        content_type,
        body: body.into(),
    }
}

/// Send a write that must be rejected; check its Status and that nothing was written.
pub async fn rejected(server: &ApiServer, request: Write, code: u16, reason: &str) -> Value {
    let Write {
        method,
        uri,
        content_type,
        body,
    } = request;
    let before = server.store().revision();
    let status = raw(server, method, &uri, content_type, body)
        .await
        .assert_status(code, reason);
    assert_eq!(
        server.store().revision(),
        before,
        "{method} {uri} was rejected but changed the store"
    );
    status
}

/// [`rejected`] for each request, all refused with the same code and reason.
pub async fn all_rejected(
    server: &ApiServer,
    requests: impl IntoIterator<Item = Write>,
    code: u16,
    reason: &str,
) {
    for request in requests {
        rejected(server, request, code, reason).await;
    }
}

/// `name` is marked for deletion and held by its finalizers: clear them, so that it goes.
pub async fn release_held(api: &Api<ConfigMap>, name: &str) {
    let held = api.get(name).await.expect("the held object");
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "{name} is marked for deletion"
    );
    clear_finalizers(api, name).await;
}

/// Install the CRD `crd` (JSON, as a user writes it) and return once the server accepted it.
pub async fn install_crd(server: &ApiServer, crd: Value) {
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("a CRD");
    Api::<CustomResourceDefinition>::all(server.client())
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
}

/// A CRD of the group `example.steady.dev` that serves and stores one version, v1, whose
/// objects follow `schema`; `names` as a CRD spells them (`plural` and `kind` at least).
/// Subresources, when a test needs them, go in `spec.versions[0].subresources`.
pub fn example_crd(scope: &str, names: Value, schema: Value) -> Value {
    let plural = names["plural"].as_str().expect("names.plural");
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.steady.dev")},
        "spec": {
            "group": "example.steady.dev", "scope": scope, "names": names,
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}}],
        },
    })
}

/// Install a namespaced `widgets.example.steady.dev` (kind Widget, version v1) whose objects
/// follow `schema`.
pub async fn install_widgets(server: &ApiServer, schema: Value) {
    let names = serde_json::json!({"plural": "widgets", "kind": "Widget"});
    install_crd(server, example_crd("Namespaced", names, schema)).await;
}

/// The message of a create through kube-rs that must be refused with 403 Forbidden (an
/// admission plugin's refusal: a quota, a LimitRange).
pub async fn forbidden_create<K>(api: &Api<K>, object: Value) -> String
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let typed: K = serde_json::from_value(object).expect("object");
    match api.create(&PostParams::default(), &typed).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (403, "Forbidden"),
                "{status:?}"
            );
            status.message
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The administrator's token of [`authenticated_client`]'s servers.
pub const ADMIN_TOKEN: &str = "the-admin-token";

/// A kube-rs client that sends `headers` with every request (a bearer token, impersonation),
/// through the server's authentication as an HTTPS client would reach it.
pub fn authenticated_client(
    server: &ApiServer,
    headers: &[(&'static str, String)],
) -> kube::Client {
    let headers: Vec<(&'static str, http::HeaderValue)> = headers
        .iter()
        .map(|(name, value)| {
            (
                *name,
                http::HeaderValue::from_str(value).expect("a header value"),
            )
        })
        .collect();
    let service = tower::ServiceBuilder::new()
        .map_request(move |mut r: http::Request<kube::client::Body>| {
            for (name, value) in &headers {
                r.headers_mut().append(*name, value.clone());
            }
            r.map(axum::body::Body::new)
        })
        .service(steady_apiserver::auth::authenticate(
            server.router(),
            server,
            ADMIN_TOKEN,
        ));
    kube::Client::new(service, "default")
}
