//! Admission and conversion webhooks called over real HTTPS: a tiny webhook server runs in
//! the test (a self-signed CA from rcgen, axum behind tokio-rustls on 127.0.0.1:0) and the
//! API server calls it with the CA as `caBundle`. Validating webhooks deny with their own
//! message, mutating ones patch, failure policies, timeouts, selectors, a `service`
//! reference, and a conversion webhook between two versions of a CRD on read and write.

mod common;

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use base64::Engine;
use futures::{StreamExt, TryStreamExt};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams, WatchEvent,
    WatchParams,
};
use serde_json::{Value, json};
use steady_apiserver::ApiServer;

use common::{install_crd, merge_patch, server};

/// Every AdmissionReview and ConversionReview request the webhook server received.
type Seen = Arc<Mutex<Vec<Value>>>;

struct WebhookServer {
    base: String,
    port: u16,
    ca_bundle: String,
    seen: Seen,
}

impl WebhookServer {
    /// A webhook `clientConfig` for `url`, trusting this server's CA.
    fn client_config(&self, url: &str) -> Value {
        json!({"url": url, "caBundle": self.ca_bundle})
    }

    /// A webhook `clientConfig` for `path` on this server.
    fn at(&self, path: &str) -> Value {
        self.client_config(&format!("{}{path}", self.base))
    }
}

fn allow(request: &Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": request["uid"], "allowed": true}})
}

fn answer(response: Value) -> Json<Value> {
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// Denies creating anything named `bad-*` and deleting anything named `keep-*`.
async fn deny(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    let request = review["request"].clone();
    seen.lock().unwrap().push(request.clone());
    let name = request["name"].as_str().unwrap_or("");
    let refused = match request["operation"].as_str() {
        Some("CREATE") => name.starts_with("bad-"),
        Some("DELETE") => name.starts_with("keep-"),
        _ => false,
    };
    if !refused {
        return Json(allow(&request));
    }
    answer(json!({"uid": request["uid"], "allowed": false,
        "status": {"code": 403, "reason": "Forbidden", "message": format!("{name} is not allowed")}}))
}

/// Adds the label `mutated: "yes"` with a JSON patch, and a warning.
async fn label(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    let request = review["request"].clone();
    seen.lock().unwrap().push(request.clone());
    let patch = if request.pointer("/object/metadata/labels").is_some() {
        json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
    } else {
        json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
    };
    let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
    answer(
        json!({"uid": request["uid"], "allowed": true, "patchType": "JSONPatch",
        "patch": patch, "warnings": ["labelled by the test"]}),
    )
}

/// Adds the annotation `stamped: "yes"` (not recorded in `seen`).
async fn stamp(Json(review): Json<Value>) -> Json<Value> {
    let request = &review["request"];
    let patch =
        json!([{"op": "add", "path": "/metadata/annotations", "value": {"stamped": "yes"}}]);
    let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
    answer(
        json!({"uid": request["uid"], "allowed": true, "patchType": "JSONPatch", "patch": patch}),
    )
}

/// Caps a Scale's replicas at 5 with a JSON patch.
async fn cap(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    let request = review["request"].clone();
    seen.lock().unwrap().push(request.clone());
    if request
        .pointer("/object/spec/replicas")
        .and_then(Value::as_i64)
        <= Some(5)
    {
        return Json(allow(&request));
    }
    let patch = json!([{"op": "replace", "path": "/spec/replicas", "value": 5}]);
    let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
    answer(
        json!({"uid": request["uid"], "allowed": true, "patchType": "JSONPatch", "patch": patch}),
    )
}

/// Never answers: the caller's timeout must end the call.
async fn hang(Json(_): Json<Value>) -> Json<Value> {
    std::future::pending().await
}

/// Gadgets: v1 has `spec.color`, v2 calls it `spec.colour`.
async fn convert(State(seen): State<Seen>, Json(review): Json<Value>) -> Json<Value> {
    let request = review["request"].clone();
    seen.lock().unwrap().push(request.clone());
    let desired = request["desiredAPIVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let converted: Vec<Value> = request["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|object| {
            let mut object = object.clone();
            let spec = object["spec"].as_object_mut().expect("a spec");
            let (from, to) = if desired.ends_with("/v2") {
                ("color", "colour")
            } else {
                ("colour", "color")
            };
            if let Some(value) = spec.remove(from) {
                spec.insert(to.into(), value);
            }
            object["apiVersion"] = json!(desired);
            object
        })
        .collect();
    Json(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": request["uid"], "result": {"status": "Success"}, "convertedObjects": converted}}),
    )
}

/// Start the webhook server with a certificate for 127.0.0.1 and `hooks.default.svc`.
async fn start_webhooks() -> WebhookServer {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let names = vec!["127.0.0.1".to_string(), "hooks.default.svc".to_string()];
    let cert = CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let seen = Seen::default();
    let router = Router::new()
        .route("/deny", post(deny))
        .route("/label", post(label))
        .route("/hang", post(hang))
        .route("/stamp", post(stamp))
        .route("/cap", post(cap))
        .route("/convert", post(convert))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = TowerToHyperService::new(router);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    WebhookServer {
        base: format!("https://127.0.0.1:{port}"),
        port,
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca_cert.pem()),
        seen,
    }
}

/// A port nothing listens on.
async fn dead_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

fn configmap_rule(operations: &[&str]) -> Value {
    json!([{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}])
}

const VALIDATING: &str = "validatingwebhookconfigurations";
const MUTATING: &str = "mutatingwebhookconfigurations";

async fn configure(client: &Client, plural: &str, name: &str, webhooks: Value) {
    let kind = match plural {
        MUTATING => "MutatingWebhookConfiguration",
        _ => "ValidatingWebhookConfiguration",
    };
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
        plural,
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let config: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": webhooks,
    }))
    .unwrap();
    api.create(&PostParams::default(), &config).await.unwrap();
}

fn webhook(name: &str, client_config: Value, rules: Value) -> Value {
    json!({"name": name, "clientConfig": client_config, "rules": rules,
        "sideEffects": "None", "admissionReviewVersions": ["v1"]})
}

/// A webhook called for the `operations` on ConfigMaps.
fn configmap_webhook(name: &str, client_config: Value, operations: &[&str]) -> Value {
    webhook(name, client_config, configmap_rule(operations))
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

/// The value of the label `key` of `object`, if it has one.
fn label_of<'a>(object: &'a ConfigMap, key: &str) -> Option<&'a str> {
    object
        .metadata
        .labels
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn default_configmaps(client: &Client) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), "default")
}

async fn create_configmap(api: &Api<ConfigMap>, name: &str) -> kube::Result<ConfigMap> {
    api.create(&PostParams::default(), &configmap(name)).await
}

fn api_error(result: Result<impl std::fmt::Debug, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn setup() -> (ApiServer, Client, WebhookServer) {
    let server = server().await;
    let client = server.client();
    (server, client, start_webhooks().await)
}

#[tokio::test]
async fn a_validating_webhook_denies_with_its_own_status() {
    let (server, client, hooks) = setup().await;
    let hook = configmap_webhook("deny.steady.dev", hooks.at("/deny"), &["CREATE", "DELETE"]);
    configure(&client, VALIDATING, "deny", json!([hook])).await;
    let configmaps = default_configmaps(&client);

    let denied = api_error(create_configmap(&configmaps, "bad-one").await);
    assert_eq!(denied.code, 403);
    assert_eq!(denied.reason, "Forbidden");
    assert_eq!(
        denied.message,
        "admission webhook \"deny.steady.dev\" denied the request: bad-one is not allowed"
    );
    assert!(
        configmaps.get_opt("bad-one").await.unwrap().is_none(),
        "nothing stored"
    );

    create_configmap(&configmaps, "keep-me").await.unwrap();
    let refused = api_error(configmaps.delete("keep-me", &DeleteParams::default()).await);
    assert_eq!(refused.code, 403);
    assert!(
        configmaps.get_opt("keep-me").await.unwrap().is_some(),
        "not deleted"
    );

    let seen = hooks.seen.lock().unwrap().clone();
    let create = seen
        .iter()
        .find(|r| r["name"] == "keep-me" && r["operation"] == "CREATE")
        .expect("create reviewed");
    assert_eq!(
        create["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        create["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(create["namespace"], "default");
    assert_eq!(create["object"]["data"]["k"], "v");
    assert_eq!(create["oldObject"], Value::Null);
    assert_eq!(create["options"]["kind"], "CreateOptions");
    assert_eq!(create["userInfo"]["username"], "kubernetes-admin");
    let delete = seen
        .iter()
        .find(|r| r["operation"] == "DELETE")
        .expect("delete reviewed");
    assert_eq!(delete["oldObject"]["metadata"]["name"], "keep-me");
    assert_eq!(delete["object"], Value::Null);

    // Webhooks see who asks: here a user the administrator impersonates.
    let alice = common::authenticated_client(
        &server,
        &[
            ("authorization", format!("Bearer {}", common::ADMIN_TOKEN)),
            ("impersonate-user", "alice".into()),
            ("impersonate-group", "system:masters".into()),
        ],
    );
    let refused = api_error(create_configmap(&default_configmaps(&alice), "bad-alice").await);
    assert_eq!(refused.code, 403);
    let seen = hooks.seen.lock().unwrap().clone();
    let by_alice = seen
        .iter()
        .find(|r| r["name"] == "bad-alice")
        .expect("alice's create reviewed");
    assert_eq!(
        by_alice["userInfo"],
        json!({"username": "alice", "groups": ["system:masters", "system:authenticated"]})
    );
}

#[tokio::test]
async fn a_mutating_webhook_patches_what_is_stored() {
    let (_server, client, hooks) = setup().await;
    let hook = configmap_webhook(
        "label.steady.dev",
        hooks.at("/label"),
        &["CREATE", "UPDATE"],
    );
    configure(&client, MUTATING, "label", json!([hook])).await;
    let configmaps = default_configmaps(&client);
    let created = create_configmap(&configmaps, "plain").await.unwrap();
    assert_eq!(label_of(&created, "mutated"), Some("yes"));
    let stored = configmaps.get("plain").await.unwrap();
    assert_eq!(label_of(&stored, "mutated"), Some("yes"));

    // An update that drops the label gets it back.
    let patch = json!({"metadata": {"labels": {"mutated": null, "other": "x"}}});
    let patched = merge_patch(&configmaps, "plain", &patch).await.unwrap();
    let labels = &patched.metadata.labels;
    assert_eq!(label_of(&patched, "mutated"), Some("yes"), "{labels:?}");
    assert_eq!(label_of(&patched, "other"), Some("x"));
}

#[tokio::test]
async fn failure_policy_ignore_survives_a_dead_webhook_and_fail_answers_500() {
    let (_server, client, hooks) = setup().await;
    let dead = format!("https://127.0.0.1:{}/deny", dead_port().await);
    let mut ignored = configmap_webhook(
        "dead-ignored.steady.dev",
        hooks.client_config(&dead),
        &["CREATE"],
    );
    ignored["failurePolicy"] = json!("Ignore");
    configure(&client, VALIDATING, "a-ignored", json!([ignored])).await;
    let configmaps = default_configmaps(&client);
    create_configmap(&configmaps, "survives").await.unwrap();

    let failing = configmap_webhook("dead.steady.dev", hooks.client_config(&dead), &["CREATE"]);
    configure(&client, VALIDATING, "b-failing", json!([failing])).await;
    let error = api_error(create_configmap(&configmaps, "fails").await);
    assert_eq!(error.code, 500);
    assert_eq!(error.reason, "InternalError");
    let expected = format!(
        "Internal error occurred: failed calling webhook \"dead.steady.dev\": failed to call webhook: Post \"{dead}?timeout=10s\": dial tcp 127.0.0.1:"
    );
    assert!(error.message.starts_with(&expected), "{}", error.message);
}

#[tokio::test]
async fn a_webhook_that_does_not_answer_in_time_fails_the_write() {
    let (_server, client, hooks) = setup().await;
    let url = format!("{}/hang", hooks.base);
    let mut slow = configmap_webhook("slow.steady.dev", hooks.client_config(&url), &["CREATE"]);
    slow["timeoutSeconds"] = json!(1);
    configure(&client, VALIDATING, "slow", json!([slow])).await;
    let configmaps = default_configmaps(&client);
    let error = api_error(create_configmap(&configmaps, "late").await);
    assert_eq!(error.code, 500);
    assert_eq!(
        error.message,
        format!(
            "Internal error occurred: failed calling webhook \"slow.steady.dev\": failed to call webhook: Post \"{url}?timeout=1s\": context deadline exceeded"
        )
    );
}

#[tokio::test]
async fn object_and_namespace_selectors_choose_what_is_sent() {
    let (_server, client, hooks) = setup().await;
    // Reached through a service reference: 127.0.0.1:<port>, verified as hooks.default.svc.
    let service = json!({"service": {"namespace": "default", "name": "hooks", "port": hooks.port, "path": "/deny"}, "caBundle": hooks.ca_bundle});
    let mut by_object = configmap_webhook("objects.steady.dev", service.clone(), &["CREATE"]);
    by_object["objectSelector"] = json!({"matchLabels": {"checked": "yes"}});
    by_object["namespaceSelector"] =
        json!({"matchExpressions": [{"key": "webhooks", "operator": "DoesNotExist"}]});
    let mut by_namespace = configmap_webhook("namespaces.steady.dev", service, &["CREATE"]);
    by_namespace["namespaceSelector"] = json!({"matchLabels": {"webhooks": "on"}});
    configure(
        &client,
        VALIDATING,
        "selective",
        json!([by_object, by_namespace]),
    )
    .await;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let watched: Namespace = serde_json::from_value(
        json!({"metadata": {"name": "watched", "labels": {"webhooks": "on"}}}),
    )
    .unwrap();
    namespaces
        .create(&PostParams::default(), &watched)
        .await
        .unwrap();

    let default: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create_configmap(&default, "bad-unchecked")
        .await
        .expect("no selector matches");
    let mut checked = configmap("bad-checked");
    checked.metadata.labels = Some([("checked".to_string(), "yes".to_string())].into());
    let error = api_error(default.create(&PostParams::default(), &checked).await);
    assert!(
        error
            .message
            .starts_with("admission webhook \"objects.steady.dev\" denied"),
        "{}",
        error.message
    );

    let in_watched: Api<ConfigMap> = Api::namespaced(client.clone(), "watched");
    let error = api_error(create_configmap(&in_watched, "bad-anything").await);
    assert!(
        error
            .message
            .starts_with("admission webhook \"namespaces.steady.dev\" denied"),
        "{}",
        error.message
    );
}

fn gadget_crd(hooks: &WebhookServer) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.steady.dev"},
        "spec": {
            "group": "example.steady.dev", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": schema},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": hooks.at("/convert"),
            }},
        },
    })
}

/// The type and `spec` of the next event on a watch of gadgets, within the guard.
async fn next_gadget_event<S>(events: &mut S) -> (&'static str, Value)
where
    S: futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin,
{
    let event = tokio::time::timeout(common::GUARD, events.try_next())
        .await
        .expect("an event in time")
        .expect("a watch event");
    match event {
        Some(WatchEvent::Added(object)) => ("ADDED", object.data["spec"].clone()),
        Some(WatchEvent::Modified(object)) => ("MODIFIED", object.data["spec"].clone()),
        other => panic!("expected a gadget, got {other:?}"),
    }
}

fn gadgets(client: &Client, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.steady.dev", version, "Gadget"),
        "gadgets",
    );
    Api::namespaced_with(client.clone(), "default", &resource)
}

/// A v2 Gadget `name` whose spec says `colour: red` (v1 spells it `color`).
fn red_v2_gadget(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.steady.dev/v2", "kind": "Gadget",
        "metadata": {"name": name}, "spec": {"colour": "red"},
    }))
    .expect("a Gadget")
}

#[tokio::test]
async fn a_conversion_webhook_converts_on_write_and_read() {
    let (server, client, hooks) = setup().await;
    install_crd(&server, gadget_crd(&hooks)).await;
    let (v1, v2) = (gadgets(&client, "v1"), gadgets(&client, "v2"));
    let gadget = red_v2_gadget("g");
    let created = v2.create(&PostParams::default(), &gadget).await.unwrap();
    assert_eq!(
        created.data["spec"],
        json!({"colour": "red"}),
        "answered in v2"
    );

    // Stored in the storage version, v1.
    let stored = server
        .store()
        .get("/example.steady.dev/gadgets/default/g", None)
        .unwrap()
        .unwrap();
    let stored: Value = serde_json::from_slice(&stored.value).unwrap();
    assert_eq!(stored["apiVersion"], "example.steady.dev/v1");
    assert_eq!(stored["spec"], json!({"color": "red"}));

    assert_eq!(
        v1.get("g").await.unwrap().data["spec"],
        json!({"color": "red"})
    );
    assert_eq!(
        v2.get("g").await.unwrap().data["spec"],
        json!({"colour": "red"})
    );
    let listed = v2.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items[0].data["spec"], json!({"colour": "red"}));

    // A patch through v2 applies to the v2 view, and is stored as v1.
    let patch = json!({"spec": {"colour": "blue"}});
    let patched = merge_patch(&v2, "g", &patch).await.unwrap();
    assert_eq!(patched.data["spec"], json!({"colour": "blue"}));
    assert_eq!(
        v1.get("g").await.unwrap().data["spec"],
        json!({"color": "blue"})
    );

    // A watch through v2 sees v2 objects, the initial ones and the changes.
    let mut events = v2
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        next_gadget_event(&mut events).await,
        ("ADDED", json!({"colour": "blue"}))
    );
    let patch = json!({"spec": {"color": "green"}});
    merge_patch(&v1, "g", &patch).await.unwrap();
    assert_eq!(
        next_gadget_event(&mut events).await,
        ("MODIFIED", json!({"colour": "green"}))
    );

    let requests = hooks.seen.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .any(|r| r["desiredAPIVersion"] == "example.steady.dev/v1")
    );
    assert!(
        requests
            .iter()
            .any(|r| r["desiredAPIVersion"] == "example.steady.dev/v2")
    );
}

#[tokio::test]
async fn a_dead_conversion_webhook_answers_500() {
    let (server, client, hooks) = setup().await;
    let mut crd = gadget_crd(&hooks);
    crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] =
        json!(format!("https://127.0.0.1:{}/convert", dead_port().await));
    install_crd(&server, crd).await;
    let gadget = red_v2_gadget("g");
    let error = api_error(
        gadgets(&client, "v2")
            .create(&PostParams::default(), &gadget)
            .await,
    );
    assert_eq!(error.code, 500);
    assert!(
        error.message.starts_with("conversion webhook for example.steady.dev/v2, Kind=Gadget failed: Post \"https://127.0.0.1:"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn an_equivalent_match_sends_the_version_the_rules_name() {
    let (server, client, hooks) = setup().await;
    install_crd(&server, gadget_crd(&hooks)).await;
    let rules = json!([{"operations": ["CREATE"], "apiGroups": ["example.steady.dev"],
        "apiVersions": ["v1"], "resources": ["gadgets"]}]);
    let config = hooks.at("/deny");
    configure(
        &client,
        VALIDATING,
        "gadgets",
        json!([webhook("gadgets.steady.dev", config, rules)]),
    )
    .await;
    let gadget = red_v2_gadget("bad-gadget");
    let error = api_error(
        gadgets(&client, "v2")
            .create(&PostParams::default(), &gadget)
            .await,
    );
    assert_eq!(error.code, 403, "{}", error.message);

    let seen = hooks.seen.lock().unwrap().clone();
    let review = seen
        .iter()
        .find(|r| r["name"] == "bad-gadget")
        .expect("reviewed");
    assert_eq!(review["kind"]["version"], "v1");
    assert_eq!(review["requestKind"]["version"], "v2");
    assert_eq!(review["resource"]["version"], "v1");
    assert_eq!(review["object"]["apiVersion"], "example.steady.dev/v1");
    assert_eq!(
        review["object"]["spec"],
        json!({"color": "red"}),
        "converted by the webhook"
    );
}

#[tokio::test]
async fn a_webhook_without_v1_reviews_is_a_call_failure() {
    let (_server, client, hooks) = setup().await;
    let config = hooks.at("/deny");
    let mut old = configmap_webhook("old.steady.dev", config, &["CREATE"]);
    old["admissionReviewVersions"] = json!(["v1beta1"]);
    configure(&client, VALIDATING, "old", json!([old])).await;
    let configmaps = default_configmaps(&client);
    let error = api_error(create_configmap(&configmaps, "any").await);
    assert_eq!(error.code, 500);
    assert!(
        error.message.contains("does not accept v1 AdmissionReview"),
        "{}",
        error.message
    );
    assert!(hooks.seen.lock().unwrap().is_empty(), "never called");
}

#[tokio::test]
async fn webhook_configurations_are_defaulted_and_validated() {
    let (_server, client, hooks) = setup().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
        ),
        "validatingwebhookconfigurations",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let config = |webhooks: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "checked"}, "webhooks": webhooks,
        }))
        .unwrap()
    };
    let mut bad = configmap_webhook(
        "short.name",
        json!({"url": "http://127.0.0.1:1/"}),
        &["CREATE"],
    );
    bad["sideEffects"] = json!("Some");
    bad["timeoutSeconds"] = json!(31);
    let error = api_error(
        api.create(&PostParams::default(), &config(json!([bad])))
            .await,
    );
    assert_eq!(error.code, 422);
    for expected in [
        "webhooks[0].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots",
        "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
        "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        "webhooks[0].clientConfig.url: Invalid value: \"http://127.0.0.1:1/\": 'https' is the only allowed URL scheme",
    ] {
        assert!(
            error.message.contains(expected),
            "{expected} in {}",
            error.message
        );
    }

    let good = configmap_webhook("good.steady.dev", hooks.at("/deny"), &["CREATE"]);
    let created = api
        .create(&PostParams::default(), &config(json!([good])))
        .await
        .unwrap();
    let hook = &created.data["webhooks"][0];
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["matchPolicy"], "Equivalent");
    assert_eq!(hook["timeoutSeconds"], 10);
    assert_eq!(hook["namespaceSelector"], json!({}));
    assert_eq!(hook["rules"][0]["scope"], "*");
}

#[tokio::test]
async fn an_if_needed_webhook_runs_again_after_a_later_change() {
    let (_server, client, hooks) = setup().await;
    let mut first = configmap_webhook("label.steady.dev", hooks.at("/label"), &["CREATE"]);
    first["reinvocationPolicy"] = json!("IfNeeded");
    configure(&client, MUTATING, "a-label", json!([first])).await;
    let second = configmap_webhook("stamp.steady.dev", hooks.at("/stamp"), &["CREATE"]);
    configure(&client, MUTATING, "b-stamp", json!([second])).await;

    let configmaps = default_configmaps(&client);
    let created = create_configmap(&configmaps, "twice").await.unwrap();
    let annotations = created.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("stamped").map(String::as_str), Some("yes"));
    let labelled = hooks.seen.lock().unwrap().clone();
    assert_eq!(
        labelled.len(),
        2,
        "called, then called again after the stamp"
    );
    assert_eq!(
        labelled[1]["object"]["metadata"]["annotations"]["stamped"],
        "yes"
    );
}

/// A webhook on `deployments/scale` is sent the `autoscaling/v1` Scale a scale write
/// writes, and its patch of the Scale's replicas is what is stored; one on `deployments`
/// is not called for it.
#[tokio::test]
async fn a_scale_write_is_sent_as_a_scale() {
    let (_server, client, hooks) = setup().await;
    let scale_rule = json!([{"operations": ["UPDATE"], "apiGroups": ["apps"],
        "apiVersions": ["v1"], "resources": ["deployments/scale"]}]);
    let deployment_rule = json!([{"operations": ["UPDATE"], "apiGroups": ["apps"],
        "apiVersions": ["v1"], "resources": ["deployments"]}]);
    let hooks_config = json!([
        webhook("cap.steady.dev", hooks.at("/cap"), scale_rule),
        webhook("stamp.steady.dev", hooks.at("/stamp"), deployment_rule),
    ]);
    configure(&client, MUTATING, "scale", hooks_config).await;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::default_namespaced(client.clone());
    let deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let scaled = deployments
        .patch_scale(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(
        scaled.spec.and_then(|s| s.replicas),
        Some(5),
        "the webhook's cap"
    );
    let stored = deployments.get("web").await.unwrap();
    assert_eq!(stored.spec.and_then(|s| s.replicas), Some(5));
    assert_eq!(
        stored.metadata.annotations, None,
        "the webhook on deployments is not called for a scale write"
    );
    let seen = hooks.seen.lock().unwrap().clone();
    let request = seen.last().expect("the cap webhook was called");
    assert_eq!(
        request["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(request["subResource"], "scale");
    assert_eq!(request["object"]["kind"], "Scale");
    assert_eq!(request["object"]["spec"]["replicas"], 9);
    assert_eq!(request["oldObject"]["spec"]["replicas"], 1);
}

/// The generation counts the spec as mutating admission leaves it, as kube's
/// `PrepareForUpdate` (after mutation) counts it: a scale-up a webhook caps back to what
/// was stored is no spec change.
#[tokio::test]
async fn a_change_a_mutating_webhook_undoes_does_not_count_in_the_generation() {
    use k8s_openapi::api::apps::v1::Deployment;
    let (_server, client, hooks) = setup().await;
    let rules = json!([{"apiGroups": ["apps"], "apiVersions": ["v1"],
        "operations": ["UPDATE"], "resources": ["deployments"]}]);
    configure(
        &client,
        MUTATING,
        "cap",
        json!([webhook("cap.steady.dev", hooks.at("/cap"), rules)]),
    )
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let labels = json!({"app": "web"});
    let deployment: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"replicas": 5, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}))
    .unwrap();
    let created = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let capped = merge_patch(&deployments, "web", &json!({"spec": {"replicas": 10}}))
        .await
        .unwrap();
    assert_eq!(capped.spec.and_then(|s| s.replicas), Some(5));
    assert_eq!(capped.metadata.generation, Some(1));
}
