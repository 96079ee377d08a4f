//! Requests that are answered rather than stored: the authorization and authentication
//! reviews, TokenRequest (`serviceaccounts/<name>/token`), pod eviction and binding, and
//! the clear refusal of exec / attach / portforward (no container runs on steady's node).
//!
//! The administrator (`system:masters`) may do anything; any other identity — a service
//! account's token, a user impersonated with `kubectl --as`, the subject of a
//! SubjectAccessReview — is judged by the stored RBAC objects ([`rbac`]). Service-account
//! tokens steady issues are HMAC-SHA256-signed JWTs that a TokenReview, and the API's
//! authentication ([`crate::auth`]), verify. This module knows the object operations, not
//! HTTP.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{Method, StatusCode};
use ring::hmac;
use serde_json::{Value, json};

use crate::ApiServer;
use crate::auth::Identity;
use crate::error::{ApiError, ApiResult};
use crate::eviction;
use crate::legacy_token;
use crate::meta;
use crate::objects::{Target, check_uid_and_revision};
use crate::rbac;
use crate::registry::ResourceType;
use crate::request::WriteOptions;
use crate::schema::{FieldError, FieldErrorReason};

/// The issuer and default audience of the service-account tokens steady signs.
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const DEFAULT_TOKEN_SECONDS: i64 = 3600;
/// kube-apiserver refuses shorter token lifetimes.
const MIN_TOKEN_SECONDS: i64 = 600;

/// What a request on a resource or subresource that is answered, not stored, asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// One of the `*Review` kinds, by plural.
    Review,
    /// `pods/exec`, `pods/attach`, `pods/portforward`: nothing runs to connect to.
    Stream(&'static str),
    Eviction,
    Binding,
    Token,
}

impl Action {
    /// exec and its kin are refused before their body (a stream upgrade) matters.
    pub fn reads_body(&self) -> bool {
        !matches!(self, Action::Stream(_))
    }

    /// The action of a request on `rt` (its `sub`resource), or None for a stored object.
    pub fn of(rt: &ResourceType, sub: Option<&str>) -> Option<Action> {
        let pods = rt.builtin && rt.group.is_empty() && rt.plural == "pods";
        match sub {
            None if rt.builtin && rt.group.is_empty() && rt.plural == "bindings" => {
                Some(Action::Binding)
            }
            None if rt.is_create_only() => Some(Action::Review),
            Some("exec") if pods => Some(Action::Stream("exec")),
            Some("attach") if pods => Some(Action::Stream("attach")),
            Some("portforward") if pods => Some(Action::Stream("portforward")),
            Some("eviction") if pods => Some(Action::Eviction),
            Some("binding") if pods => Some(Action::Binding),
            Some("token") if rt.builtin && rt.plural == "serviceaccounts" => Some(Action::Token),
            _ => None,
        }
    }
}

/// The key that signs and verifies service-account tokens.
pub struct TokenKeys {
    signing: hmac::Key,
    admin_token: Option<String>,
}

impl TokenKeys {
    /// Keys derived from the administrator's token (stable across restarts of one data
    /// directory), or random ones for a server without a token (in-process clients).
    pub fn new(admin_token: Option<String>, random: [u8; 32]) -> TokenKeys {
        let seed = match &admin_token {
            Some(token) => {
                let derive = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
                hmac::sign(&derive, b"steady service-account token signing key")
                    .as_ref()
                    .to_vec()
            }
            None => random.to_vec(),
        };
        TokenKeys {
            signing: hmac::Key::new(hmac::HMAC_SHA256, &seed),
            admin_token,
        }
    }

    pub(crate) fn sign(&self, claims: &Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signed = format!("{header}.{payload}");
        let signature = hmac::sign(&self.signing, signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }

    /// The claims of a token this server signed, or None.
    fn verify(&self, token: &str) -> Option<Value> {
        let (signed, signature) = token.rsplit_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        hmac::verify(&self.signing, signed.as_bytes(), &signature).ok()?;
        let (_, payload) = signed.split_once('.')?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
    }

    fn is_admin_token(&self, token: &str) -> bool {
        // Comparing the token's MAC with the admin token's is constant-time (ring's verify).
        self.admin_token.as_deref().is_some_and(|admin| {
            let admin_tag = hmac::sign(&self.signing, admin.as_bytes());
            hmac::verify(&self.signing, token.as_bytes(), admin_tag.as_ref()).is_ok()
        })
    }
}

/// Answer `action` on `rt`; `body` is the decoded request body (Null without one).
#[allow(clippy::too_many_arguments)]
pub async fn answer(
    server: &ApiServer,
    identity: &Identity,
    action: Action,
    method: &Method,
    rt: &ResourceType,
    ns: Option<&str>,
    name: Option<&str>,
    body: Value,
) -> ApiResult<(StatusCode, Value)> {
    let answered = match action {
        Action::Stream(what) => return Err(stream_refusal(server, ns, name, what)),
        _ if method != Method::POST => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            )));
        }
        Action::Review => review(server, identity, rt, ns, body)?,
        Action::Eviction => eviction::evict(server, ns, required(name)?, &body).await?,
        Action::Binding => bind(server, ns, name, &body).await?,
        Action::Token => token_request(server, ns, required(name)?, body)?,
    };
    Ok((StatusCode::CREATED, answered))
}

fn required(name: Option<&str>) -> ApiResult<&str> {
    name.ok_or_else(ApiError::path_not_found)
}

fn stream_refusal(
    server: &ApiServer,
    ns: Option<&str>,
    name: Option<&str>,
    what: &str,
) -> ApiError {
    if let (Some(pods), Some(name)) = (server.registry().builtin("", "pods"), name)
        && let Err(e) = server.get_stored(&pods, ns, name)
    {
        return e;
    }
    ApiError::bad_request(format!(
        "steady's simulated node runs no containers; {what} is not supported (use a real cluster)"
    ))
}

/// A review object with its `status` filled in, as kube-apiserver returns it.
fn reviewed(mut body: Value, rt: &ResourceType, status: Value) -> Value {
    body["apiVersion"] = json!(rt.api_version());
    body["kind"] = json!(rt.kind);
    if !body.get("metadata").is_some_and(Value::is_object) {
        body["metadata"] = json!({});
    }
    body["metadata"]["creationTimestamp"] = Value::Null;
    body["status"] = status;
    body
}

const ALLOWED_AS_MASTER: &str = "RBAC: allowed by ClusterRoleBinding \"cluster-admin\" of ClusterRole \"cluster-admin\" to Group \"system:masters\"";

fn review(
    server: &ApiServer,
    identity: &Identity,
    rt: &ResourceType,
    ns: Option<&str>,
    body: Value,
) -> ApiResult<Value> {
    if !body.is_object() {
        return Err(ApiError::bad_request(format!(
            "a {} body is required",
            rt.kind
        )));
    }
    let status = match rt.plural.as_str() {
        "selfsubjectaccessreviews" => {
            let mut asked = body["spec"].clone();
            asked["user"] = json!(identity.user);
            asked["groups"] = json!(identity.groups);
            subject_access(server, &asked)
        }
        "subjectaccessreviews" | "localsubjectaccessreviews" => {
            if let (Some(ns), Some(asked)) = (
                ns,
                body.pointer("/spec/resourceAttributes/namespace")
                    .and_then(Value::as_str),
            ) && ns != asked
            {
                return Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must match namespace: {ns}"
                )));
            }
            subject_access(server, &body["spec"])
        }
        "selfsubjectrulesreviews" => {
            let namespace = body
                .pointer("/spec/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            rbac::rules_review(server, identity, namespace)
        }
        "selfsubjectreviews" => json!({"userInfo": identity.user_info()}),
        "tokenreviews" => token_review(server, &body["spec"]),
        other => {
            return Err(ApiError::method_not_allowed(format!(
                "{other} cannot be created on steady"
            )));
        }
    };
    Ok(reviewed(body, rt, status))
}

/// `system:masters` may do anything; anyone else is judged by the stored RBAC objects.
fn subject_access(server: &ApiServer, spec: &Value) -> Value {
    let access = rbac::Access::of_spec(spec);
    if access.groups.contains(&"system:masters") {
        return json!({"allowed": true, "reason": ALLOWED_AS_MASTER});
    }
    match rbac::allowed_by(server, &access) {
        Some(reason) => json!({"allowed": true, "reason": reason}),
        None => json!({"allowed": false}),
    }
}

/// Who a token is, or why it is refused: the administrator's, or a service-account token
/// this server signed that has not expired and names a service account that still exists.
fn authenticate_token(server: &ApiServer, token: &str) -> Result<(Identity, Vec<Value>), String> {
    let keys = server.token_keys();
    if keys.is_admin_token(token) {
        return Ok((Identity::admin(), vec![json!(ISSUER)]));
    }
    let claims = keys.verify(token).ok_or("invalid bearer token")?;
    if legacy_token::is_legacy(&claims) {
        // Valid for the API's own audience, as kube's implicit audiences.
        let identity = legacy_token::authenticate(server, token, &claims)?;
        return Ok((identity, vec![json!(ISSUER)]));
    }
    let expires = claims.get("exp").and_then(Value::as_i64).unwrap_or(0);
    if expires <= server.now().timestamp() {
        return Err("service account token has expired".into());
    }
    let sa = &claims["kubernetes.io"]["serviceaccount"];
    let ns = claims["kubernetes.io"]["namespace"].as_str().unwrap_or("");
    let name = sa["name"].as_str().unwrap_or("");
    let uid = sa["uid"].as_str().unwrap_or("");
    if service_account_uid(server, ns, name).as_deref() != Some(uid) {
        return Err("service account token has been invalidated".into());
    }
    let audiences = claims["aud"].as_array().cloned().unwrap_or_default();
    Ok((
        Identity::service_account(ns, name, Some(uid.to_string())),
        audiences,
    ))
}

/// The service account a bearer token on the API stands for: a token steady issued for
/// the API's audience (the default), still valid.
pub(crate) fn service_account_identity(server: &ApiServer, token: &str) -> Option<Identity> {
    let (identity, audiences) = authenticate_token(server, token).ok()?;
    audiences.contains(&json!(ISSUER)).then_some(identity)
}

fn token_review(server: &ApiServer, spec: &Value) -> Value {
    let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
    let unauthenticated = |why: &str| json!({"authenticated": false, "user": {}, "error": why});
    let (identity, token_audiences) = match authenticate_token(server, token) {
        Ok(found) => found,
        Err(why) => return unauthenticated(&why),
    };
    let asked: Vec<Value> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let audiences: Vec<Value> = if asked.is_empty() {
        token_audiences
    } else {
        asked
            .into_iter()
            .filter(|a| token_audiences.contains(a))
            .collect()
    };
    if audiences.is_empty() {
        return unauthenticated("token audiences is invalid for the target audiences");
    }
    json!({"authenticated": true, "user": identity.user_info(), "audiences": audiences})
}

fn service_account_uid(server: &ApiServer, ns: &str, name: &str) -> Option<String> {
    let rt = server.registry().builtin("", "serviceaccounts")?;
    let (sa, _) = server.get_value(&rt, Some(ns), name).ok()?;
    meta::uid(&sa).map(str::to_string)
}

/// `POST serviceaccounts/<name>/token`: a signed token for the service account.
fn token_request(
    server: &ApiServer,
    ns: Option<&str>,
    name: &str,
    mut body: Value,
) -> ApiResult<Value> {
    let rt = server
        .registry()
        .builtin("", "serviceaccounts")
        .ok_or_else(ApiError::path_not_found)?;
    let (sa, _) = server.get_value(&rt, ns, name)?;
    let ns = ns.unwrap_or("");
    let uid = meta::uid(&sa).unwrap_or("").to_string();
    if !body.is_object() {
        body = json!({});
    }
    let seconds = match body.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_TOKEN_SECONDS,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ApiError::bad_request("spec.expirationSeconds must be an integer"))?,
    };
    if seconds < MIN_TOKEN_SECONDS {
        return Err(ApiError::invalid(
            "TokenRequest",
            name,
            &[FieldError {
                field: "spec.expirationSeconds".to_string(),
                reason: FieldErrorReason::Invalid,
                message: format!(
                    "Invalid value: {seconds}: may not specify a duration less than 10 minutes"
                ),
            }],
        ));
    }
    let audiences = match body.pointer("/spec/audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!([ISSUER]),
    };
    let now = server.now();
    let expires = now + chrono::Duration::seconds(seconds);
    let claims = json!({
        "iss": ISSUER,
        "sub": format!("system:serviceaccount:{ns}:{name}"),
        "aud": audiences,
        "iat": now.timestamp(),
        "nbf": now.timestamp(),
        "exp": expires.timestamp(),
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": uid}},
    });
    let token = server.token_keys().sign(&claims);
    body["apiVersion"] = json!("authentication.k8s.io/v1");
    body["kind"] = json!("TokenRequest");
    body["metadata"] = json!({"name": name, "namespace": ns, "creationTimestamp": Value::Null});
    body["spec"]["audiences"] = audiences;
    body["spec"]["expirationSeconds"] = json!(seconds);
    body["status"] = json!({
        "token": token,
        "expirationTimestamp": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    Ok(body)
}

/// The `Status` answered to a create that stores nothing (an eviction, a binding).
pub(crate) fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

/// `POST pods/<name>/binding` (or `bindings`): assign the pod to the target node as
/// kube-apiserver's `BindingREST` does, in one write: `spec.nodeName`, the Binding's
/// annotations, and the `PodScheduled=True` condition. A pod that is terminating, already
/// assigned or still gated by `schedulingGates` is refused with 409 on `pods/binding`;
/// the Binding's `metadata.uid` and `resourceVersion`, when set, are preconditions on the
/// pod. Concurrent writes to the pod are retried, not reported.
async fn bind(
    server: &ApiServer,
    ns: Option<&str>,
    name: Option<&str>,
    body: &Value,
) -> ApiResult<Value> {
    let pod_name = match (name, meta::name(body)) {
        (Some(url), Some(named)) if url != named => {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Binding object: {url} != {named}"
            )));
        }
        (Some(url), _) => url,
        (None, Some(named)) => named,
        (None, None) => return Err(ApiError::bad_request("Binding has no metadata.name")),
    };
    let node = meta::str_at(body, "/target/name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request("Binding has no target.name"))?;
    let pods = server
        .registry()
        .builtin("", "pods")
        .ok_or_else(ApiError::path_not_found)?;
    let target = Target::object(&pods, ns, pod_name).subresource(Some("binding"));
    let modified = ApiError::modified(&pods.qualified_name(), pod_name);
    for () in crate::objects::attempts_until_applied() {
        let (mut pod, revision) = server.get_value(&pods, ns, pod_name)?;
        // The Binding's uid and resourceVersion, when set, are preconditions on the pod.
        let uid = meta::uid(body).filter(|uid| !uid.is_empty());
        let resource_version = meta::resource_version(body);
        check_uid_and_revision(&pods, pod_name, &pod, revision, uid, resource_version)?;
        assign_to_node(&mut pod, node, body, &server.timestamp())
            .map_err(|why| ApiError::conflict("pods/binding", pod_name, &why))?;
        meta::metadata_mut(&mut pod).insert(
            "resourceVersion".into(),
            Value::String(revision.to_string()),
        );
        match server.update(target, pod, &WriteOptions::default()).await {
            // Another writer got there first: read the pod again, as GuaranteedUpdate does.
            Err(e) if e == modified => continue,
            written => return written.map(|_| success()),
        }
    }
    Err(modified)
}

/// Set the pod's node, merge the Binding's annotations and mark it scheduled; `Err` says
/// why the pod cannot be bound (kube-apiserver's words).
fn assign_to_node(pod: &mut Value, node: &str, binding: &Value, now: &str) -> Result<(), String> {
    let name = meta::name(pod).unwrap_or("").to_string();
    if meta::deletion_timestamp(pod).is_some() {
        return Err(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    if let Some(assigned) = meta::str_at(pod, "/spec/nodeName").filter(|n| !n.is_empty()) {
        return Err(format!(
            "pod {name} is already assigned to node \"{assigned}\""
        ));
    }
    if pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gates| !gates.is_empty())
    {
        return Err(format!("pod {name} has non-empty .spec.schedulingGates"));
    }
    pod["spec"]["nodeName"] = json!(node);
    if let Some(annotations) = binding
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .filter(|a| !a.is_empty())
    {
        let metadata = meta::metadata_mut(pod);
        let merged = metadata.entry("annotations").or_insert_with(|| json!({}));
        if let Some(merged) = merged.as_object_mut() {
            merged.extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        } else {
            *merged = Value::Object(annotations.clone());
        }
    }
    set_condition_true(pod, "PodScheduled", now);
    Ok(())
}

/// `podutil.UpdatePodCondition` with a bare `status: True` condition: the condition is
/// replaced, keeping its `lastTransitionTime` only if it was already true.
fn set_condition_true(pod: &mut Value, kind: &str, now: &str) {
    let conditions = &mut pod["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(conditions) = conditions.as_array_mut() else {
        return;
    };
    let existing = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(kind));
    let transition = existing
        .map(|i| &conditions[i])
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now));
    let condition = json!({
        "type": kind,
        "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": transition,
    });
    match existing {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}
