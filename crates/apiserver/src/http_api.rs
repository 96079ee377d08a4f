//! The HTTP front: one axum handler that parses the path, negotiates bodies, dispatches to
//! the object operations and renders results and `Status` errors.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;
use serde::Serialize;
use serde_json::{Value, json};

use crate::ApiServer;
use crate::auth::{ADMIN, Identity};
use crate::discovery::{self, DiscoveryRoot};
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::negotiate::{self, Endpoint, Representation};
use crate::objects::Target;
use crate::patch::{self, PatchType};
use crate::rbac;
use crate::registry::ResourceType;
use crate::request::{
    DeleteOptions, ObjectPath, Params, Route, WriteOptions, decode_json_object, decode_yaml_object,
};
use crate::review;
use crate::table;
use crate::watch;

pub fn router(server: ApiServer) -> Router {
    Router::new().fallback(handle).with_state(server)
}

async fn handle(State(server): State<ApiServer>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let params = Params::parse(parts.uri.query());
    // In-process clients carry no identity: they are the administrator.
    let identity = parts.extensions.get::<Identity>().unwrap_or(&ADMIN);
    let result = match read_body(&server, body).await {
        Ok(body) => {
            let request = Incoming {
                identity,
                method: &parts.method,
                path: parts.uri.path(),
                headers: &parts.headers,
                params: &params,
            };
            // Boxed: the request's state lives in one place instead of being copied with
            // every layer's future that wraps this one.
            Box::pin(dispatch(&server, &request, body)).await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(response) => response,
        Err(e) => {
            tracing::debug!(method = %parts.method, path = %parts.uri.path(), code = e.code, reason = e.reason, "request failed");
            e.into_response()
        }
    }
}

async fn read_body(server: &ApiServer, body: Body) -> ApiResult<Bytes> {
    let limit = server.config().max_body_bytes;
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ApiError::too_large(limit))
        }
        Err(e) => Err(ApiError::bad_request(format!(
            "reading the request body failed: {e}"
        ))),
    }
}

pub fn json_response(status: StatusCode, body: impl Into<Body>) -> Response {
    let mut response = (status, body.into()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn json_value(status: StatusCode, value: &impl Serialize) -> Response {
    json_response(status, serde_json::to_vec(value).unwrap_or_default())
}

/// A request as the handlers read it: who sent it, and what it asks.
struct Incoming<'a> {
    identity: &'a Identity,
    method: &'a Method,
    path: &'a str,
    headers: &'a HeaderMap,
    params: &'a Params,
}

async fn dispatch(server: &ApiServer, request: &Incoming<'_>, body: Bytes) -> ApiResult<Response> {
    let Incoming {
        identity,
        method,
        path,
        headers,
        params,
    } = *request;
    let route = crate::request::route(path)?;
    authorize(server, request, &route)?;
    let registry = server.registry();
    let found = |doc: Option<Value>| {
        doc.map(|d| json_value(StatusCode::OK, &d))
            .ok_or_else(ApiError::path_not_found)
    };
    if !matches!(route, Route::Object(_)) && method != Method::GET {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({method})"
        )));
    }
    match route {
        Route::Version => Ok(json_value(StatusCode::OK, &discovery::version())),
        Route::Health => Ok((StatusCode::OK, "ok").into_response()),
        Route::CoreVersions => discovery_root(server, headers, DiscoveryRoot::Core),
        Route::Groups => discovery_root(server, headers, DiscoveryRoot::Named),
        Route::Group(group) => found(discovery::group(registry, &group)),
        Route::Resources { group, version } => {
            found(discovery::resources(registry, &group, &version))
        }
        Route::OpenApiV3Root => Ok(json_value(
            StatusCode::OK,
            &discovery::openapi_index(registry),
        )),
        Route::OpenApiV3 { path } => found(discovery::openapi_document(registry, &path)),
        Route::Object(target) => {
            object_request(server, identity, method, headers, params, &target, body).await
        }
    }
}

/// `/api` or `/apis`: the aggregated discovery document when the client asks for one
/// (kubectl ≥ 1.30, kube's `Discovery::run_aggregated`), the legacy one otherwise.
fn discovery_root(
    server: &ApiServer,
    headers: &HeaderMap,
    root: DiscoveryRoot,
) -> ApiResult<Response> {
    let representation = negotiate::negotiate(headers, Endpoint::Discovery)?;
    let document = match (&representation, root) {
        (Representation::AggregatedDiscovery { version }, _) => {
            discovery::aggregated(server.registry(), root, version)
        }
        (_, DiscoveryRoot::Core) => discovery::core_versions(),
        (_, DiscoveryRoot::Named) => discovery::groups(server.registry()),
    };
    let body = serde_json::to_vec(&document).unwrap_or_default();
    let mut response = negotiated_response(&representation, body);
    // The same URL answers two documents: caches must key on Accept.
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    Ok(response)
}

/// A 200 whose Content-Type names the negotiated representation.
fn negotiated_response(representation: &Representation, body: impl Into<Body>) -> Response {
    let mut response = json_response(StatusCode::OK, body);
    if let Ok(content_type) = HeaderValue::from_str(&representation.content_type()) {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
    }
    response
}

/// Resolve the resource a path names, rejecting scope and subresource mismatches.
fn resolve(server: &ApiServer, target: &ObjectPath) -> ApiResult<Arc<ResourceType>> {
    let rt = server
        .registry()
        .get(&target.group, &target.version, &target.plural)
        .ok_or_else(ApiError::path_not_found)?;
    if target.namespace.is_some() && !rt.namespaced {
        return Err(ApiError::path_not_found());
    }
    let sub_ok = match target.subresource.as_deref() {
        None => true,
        Some(sub) => rt.has_subresource(sub),
    };
    if !sub_ok {
        return Err(ApiError::path_not_found());
    }
    Ok(rt)
}

/// Bodies larger than this (and every YAML body larger than [`YAML_INLINE_LIMIT`]) are
/// parsed on the blocking pool, so a client sending big bodies cannot hold up `/healthz`
/// and the other requests sharing the async workers. Parsing is linear in the body, whose
/// size `read_body` has already bounded.
const PARSE_INLINE_LIMIT: usize = 64 * 1024;
/// YAML parses about a hundred times slower than JSON.
const YAML_INLINE_LIMIT: usize = 4 * 1024;

/// Run `parse` on `body`, off the async workers when the body is large.
async fn parse_body<T: Send + 'static>(
    body: Bytes,
    inline_limit: usize,
    parse: impl FnOnce(&[u8]) -> T + Send + 'static,
) -> ApiResult<T> {
    if body.len() <= inline_limit {
        return Ok(parse(&body));
    }
    tokio::task::spawn_blocking(move || parse(&body))
        .await
        .map_err(|e| ApiError::internal(format!("parsing the request body failed: {e}")))
}

fn is_yaml(content_type: &str) -> bool {
    matches!(
        content_type,
        "application/yaml" | "application/x-yaml" | "text/yaml"
    )
}

/// Decode a request body by its Content-Type (none means JSON, as the Python client sends).
async fn decode_body(headers: &HeaderMap, body: Bytes) -> ApiResult<Value> {
    let content_type = content_type(headers);
    match content_type.as_str() {
        "" | "application/json" | "*/*" => {
            parse_body(body, PARSE_INLINE_LIMIT, decode_json_object).await?
        }
        ct if is_yaml(ct) => parse_body(body, YAML_INLINE_LIMIT, decode_yaml_object).await?,
        crate::protobuf::PROTOBUF_CONTENT_TYPE => {
            parse_body(body, PARSE_INLINE_LIMIT, decode_protobuf).await?
        }
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

fn decode_protobuf(body: &[u8]) -> ApiResult<Value> {
    crate::protobuf::decode(body).map_err(|e| match e {
        crate::protobuf::ProtobufError::Malformed(_) => ApiError::bad_request(e.to_string()),
        crate::protobuf::ProtobufError::UnsupportedKind { .. } => {
            ApiError::unsupported_media_type(crate::protobuf::PROTOBUF_CONTENT_TYPE)
                .with_message(e.to_string())
        }
    })
}

/// Decode a PATCH body of the type its Content-Type names.
async fn decode_patch_body(
    patch_type: PatchType,
    body: Bytes,
) -> ApiResult<Result<patch::DecodedPatch, patch::PatchError>> {
    let inline_limit = if patch_type == PatchType::Apply {
        YAML_INLINE_LIMIT
    } else {
        PARSE_INLINE_LIMIT
    };
    parse_body(body, inline_limit, move |body| {
        patch::decode_patch(patch_type, body)
    })
    .await
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

fn written_response(status: StatusCode, written: crate::objects::Written) -> Response {
    let mut response = json_response(status, written.object);
    for warning in written.warnings {
        if let Ok(value) = HeaderValue::from_str(&format!("299 - {:?}", warning)) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

/// RBAC for identities outside `system:masters`, with the attributes kube-apiserver's
/// request info gives the authorizer (a namespace's own requests are in that namespace).
fn authorize(server: &ApiServer, request: &Incoming<'_>, route: &Route) -> ApiResult<()> {
    if request.identity.is_master() {
        return Ok(());
    }
    let Route::Object(target) = route else {
        let verb = request.method.as_str().to_ascii_lowercase();
        return rbac::authorize(
            server,
            request.identity,
            &verb,
            &rbac::Target::path(request.path),
        );
    };
    let Some(verb) = request_verb(request.method, target.name.as_deref(), request.params) else {
        return Ok(());
    };
    // A list or watch of one object by `metadata.name` is about that name, as kube's
    // request info has it (a role limited to `resourceNames` allows it).
    let selected = || {
        let selector = request.params.get("fieldSelector")?;
        selector.split(',').find_map(|term| {
            let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
            (field.trim() == "metadata.name").then(|| value.trim())
        })
    };
    let name = target
        .name
        .as_deref()
        .or_else(|| matches!(verb, "list" | "watch").then(selected).flatten());
    let mut namespace = target.namespace.as_deref().unwrap_or("");
    if target.group.is_empty() && target.plural == "namespaces" {
        namespace = name.unwrap_or(namespace);
    }
    let attributes = rbac::Target {
        group: &target.group,
        resource: &target.plural,
        subresource: target.subresource.as_deref().unwrap_or(""),
        name: name.unwrap_or(""),
        namespace,
        path: None,
    };
    rbac::authorize(server, request.identity, verb, &attributes)
}

async fn object_request(
    server: &ApiServer,
    identity: &Identity,
    method: &Method,
    headers: &HeaderMap,
    params: &Params,
    target: &ObjectPath,
    body: Bytes,
) -> ApiResult<Response> {
    let rt = resolve(server, target)?;
    let ns = target.namespace.as_deref();
    let sub = target.subresource.as_deref();
    let name = target.name.as_deref();
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let write_options = || {
        WriteOptions::from_params(params)
            .map(|o| o.with_user_agent(user_agent).with_requester(identity))
    };
    if let Some(action) = review::Action::of(&rt, sub) {
        let body = match method {
            &Method::POST if action.reads_body() => decode_body(headers, body).await?,
            _ => Value::Null,
        };
        let (code, answer) =
            review::answer(server, identity, action, method, &rt, ns, name, body).await?;
        return Ok(json_value(code, &answer));
    }
    if sub.is_none() {
        check_verb(&rt, method, name, params)?;
    }
    if method == Method::GET {
        server.wait_for_revision(params).await;
    }
    match (method.clone(), name) {
        (Method::GET, None) if params.flag("watch") => {
            watch_response(server, rt, ns, None, headers, params)
        }
        (Method::GET, Some(name)) if params.flag("watch") => {
            watch_response(server, rt, ns, Some(name), headers, params)
        }
        (Method::GET, None) => {
            let representation = negotiate::negotiate(headers, Endpoint::List)?;
            let include = table_include(&representation, params)?;
            let listed = server.list(&rt, ns, params).await?;
            let body = match (&representation, include) {
                (_, Some(include)) => {
                    table::of_resource(&rt, &listed.items, server.now(), include, listed.metadata)?
                }
                (Representation::MetadataList { version }, None) => {
                    negotiate::metadata_list(&listed.metadata, &listed.items, version)?
                }
                _ => listed.body(&rt),
            };
            Ok(negotiated_response(&representation, body))
        }
        (Method::GET, Some(name)) if sub == Some("log") => {
            server.get_stored(&rt, ns, name)?;
            Err(ApiError::bad_request(format!(
                "pod \"{name}\" has no logs: steady's simulated node runs no containers (use a real cluster for logs)"
            )))
        }
        (Method::GET, Some(name)) if sub == Some("scale") => Ok(json_value(
            StatusCode::OK,
            &server.get_scale(&rt, ns, name)?,
        )),
        (Method::GET, Some(name)) => {
            let representation = negotiate::negotiate(headers, Endpoint::Object)?;
            let include = table_include(&representation, params)?;
            let object = server.get(Target::object(&rt, ns, name), params).await?;
            let body = match (&representation, include) {
                (_, Some(include)) => {
                    table::of_resource(&rt, &[object], server.now(), include, json!({}))?
                }
                (Representation::Metadata { version }, None) => {
                    negotiate::metadata_of(&object, version)?
                }
                _ => object,
            };
            Ok(negotiated_response(&representation, body))
        }
        (Method::POST, None) if rt.namespaced && ns.is_none() => Err(ApiError::method_not_allowed(
            "create is only allowed on the namespaced path of a namespaced resource (/namespaces/<ns>/...)",
        )),
        (Method::POST, None) => {
            let obj = decode_body(headers, body).await?;
            let written = server.create(&rt, ns, obj, &write_options()?).await?;
            Ok(written_response(StatusCode::CREATED, written))
        }
        (Method::PUT, Some(name)) if sub == Some("scale") => {
            let obj = decode_body(headers, body).await?;
            Ok(json_value(
                StatusCode::OK,
                &server
                    .update_scale(&rt, ns, name, obj, &write_options()?)
                    .await?,
            ))
        }
        (Method::PUT, Some(name)) => {
            let obj = decode_body(headers, body).await?;
            let target = Target::object(&rt, ns, name).subresource(sub);
            let written = server.update(target, obj, &write_options()?).await?;
            Ok(written_response(StatusCode::OK, written))
        }
        (Method::PATCH, Some(name)) => {
            let ct = content_type(headers);
            let patch_type = PatchType::from_content_type(&ct)
                .ok_or_else(|| ApiError::unsupported_media_type(&ct))?;
            let options = write_options()?;
            let patch = decode_patch_body(patch_type, body)
                .await?
                .map_err(crate::objects::patch_error)?;
            let target = Target::object(&rt, ns, name).subresource(sub);
            let written = server.patch(target, &patch, &options).await?;
            let status = if written.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(written_response(status, written))
        }
        (Method::DELETE, name) => {
            let options_body = if body.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                Some(parse_body(body, PARSE_INLINE_LIMIT, decode_json_object).await??)
            };
            let options = DeleteOptions {
                requester: crate::request::requester(identity),
                ..DeleteOptions::parse(options_body.as_ref(), params)?
            };
            match name {
                None => Ok(json_response(
                    StatusCode::OK,
                    server.delete_collection(&rt, ns, params, &options).await?,
                )),
                Some(name) => {
                    let (object, gone) = server.delete(&rt, ns, name, &options).await?;
                    if gone && !rt.builtin {
                        return Ok(json_value(
                            StatusCode::OK,
                            &deleted_status(&rt, name, &object),
                        ));
                    }
                    // kube-apiserver's one signal of a pending delete, kept only for
                    // clients that ask the deprecated way (see `orphan_dependents`).
                    let status = if !gone && options.orphan_dependents == Some(false) {
                        StatusCode::ACCEPTED
                    } else {
                        StatusCode::OK
                    };
                    Ok(json_response(status, object))
                }
            }
        }
        (_, None) | (Method::POST, Some(_)) => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({method})"
        ))),
        _ => Err(ApiError::method_not_allowed(format!(
            "method {method} is not supported"
        ))),
    }
}

/// kube-apiserver answers 405 to a verb a resource does not serve (a list of reviews, a
/// delete of all namespaces).
/// The API verb of a request on a resource, as kube's request info names it.
fn request_verb(method: &Method, name: Option<&str>, params: &Params) -> Option<&'static str> {
    Some(match (method.as_str(), name) {
        ("GET", _) if params.flag("watch") => "watch",
        ("GET", None) => "list",
        ("GET", Some(_)) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", None) => "deletecollection",
        ("DELETE", Some(_)) => "delete",
        _ => return None,
    })
}

fn check_verb(
    rt: &ResourceType,
    method: &Method,
    name: Option<&str>,
    params: &Params,
) -> ApiResult<()> {
    let Some(verb) = request_verb(method, name, params) else {
        return Ok(());
    };
    if rt.verbs().contains(&verb) {
        return Ok(());
    }
    Err(ApiError::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({method})"
    )))
}

/// `Some(include)` when the client asked for a `meta.k8s.io` Table (`kubectl get` does):
/// which part of each object its rows carry, from `includeObject`.
fn table_include(
    representation: &Representation,
    params: &Params,
) -> ApiResult<Option<table::IncludeObject>> {
    if !matches!(representation, Representation::Table { .. }) {
        return Ok(None);
    }
    let include = params.get("includeObject").unwrap_or("");
    table::IncludeObject::parse(include)
        .map(Some)
        .ok_or_else(|| ApiError::bad_request(format!("includeObject: unsupported value {include:?}: supported values: \"None\", \"Metadata\", \"Object\"")))
}

/// The `Status` kube-apiserver returns when a custom resource is deleted at once.
fn deleted_status(rt: &ResourceType, name: &str, object: &[u8]) -> Value {
    let uid = serde_json::from_slice::<Value>(object)
        .ok()
        .and_then(|o| meta::uid(&o).map(str::to_string))
        .unwrap_or_default();
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": uid},
    })
}

fn watch_response(
    server: &ApiServer,
    rt: Arc<ResourceType>,
    ns: Option<&str>,
    name: Option<&str>,
    headers: &HeaderMap,
    params: &Params,
) -> ApiResult<Response> {
    let representation = negotiate::negotiate(headers, Endpoint::Watch)?;
    let event_object = match (&representation, table_include(&representation, params)?) {
        (_, Some(include)) => watch::EventObject::Table(include),
        (Representation::Metadata { version }, None) => watch::EventObject::Metadata {
            version: version.clone(),
        },
        _ => watch::EventObject::Resource,
    };
    let stream = watch::start(server, rt, ns, name, params, event_object)?;
    let mut response = Response::new(Body::from_stream(stream.into_stream()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(response)
}
