//! The operations a request performs: create, update, patch, get, list, watch, delete,
//! delete collection, subresources, discovery, unknown paths and odd methods.

use http::Method;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};

use super::bodies::{
    encode, hostile_body, mutate_value, object_body, to_json, to_yaml, valid_object,
};
use super::query::{
    FIELD_SELECTORS, LABEL_SELECTORS, Query, RESOURCE_VERSIONS, TIMEOUTS, read_query, write_query,
};
use super::targets::{Kind, collection_path, object_path, pick_kind, pick_namespace, target};
use super::{FuzzRequest, small_text};

pub(super) fn create(rng: &mut StdRng) -> FuzzRequest {
    let (kind, namespace, name) = target(rng);
    let mut request = FuzzRequest::new(Method::POST, collection_path(kind, namespace.as_deref()));
    let (content_type, body) = object_body(rng, kind, namespace.as_deref(), &name);
    let mut query = Query::new();
    write_query(rng, &mut query);
    request.query = query.encode();
    request.with_body(content_type.as_deref(), body)
}

pub(super) fn update(rng: &mut StdRng) -> FuzzRequest {
    let (kind, namespace, name) = target(rng);
    let path = object_path(kind, namespace.as_deref(), &name);
    // Sometimes the body names another object than the path.
    let body_name = if rng.random_bool(0.05) {
        "other".to_string()
    } else {
        name
    };
    let (content_type, body) = object_body(rng, kind, namespace.as_deref(), &body_name);
    let mut query = Query::new();
    write_query(rng, &mut query);
    let mut request = FuzzRequest::new(Method::PUT, path);
    request.query = query.encode();
    request.with_body(content_type.as_deref(), body)
}

pub(super) fn patch(rng: &mut StdRng) -> FuzzRequest {
    let (kind, namespace, name) = target(rng);
    let path = object_path(kind, namespace.as_deref(), &name);
    patch_at(rng, kind, namespace.as_deref(), &name, path)
}

/// A PATCH of every type at `path`.
fn patch_at(
    rng: &mut StdRng,
    kind: &Kind,
    namespace: Option<&str>,
    name: &str,
    path: String,
) -> FuzzRequest {
    let mut request = FuzzRequest::new(Method::PATCH, path);
    let mut query = Query::new();
    write_query(rng, &mut query);
    let (content_type, body) = match rng.random_range(0..100) {
        0..25 => ("application/merge-patch+json", to_json(&merge_patch(rng))),
        25..45 => (
            "application/strategic-merge-patch+json",
            to_json(&strategic_patch(rng)),
        ),
        45..70 => ("application/json-patch+json", to_json(&json_patch(rng))),
        70..90 => {
            if rng.random_bool(0.9) {
                query.add("fieldManager", "fuzz");
            }
            query.maybe(rng, 0.3, "force", &["true", "false", "maybe"]);
            let object = valid_object(rng, kind, namespace, name);
            if rng.random_bool(0.5) {
                ("application/apply-patch+yaml", to_yaml(&object))
            } else {
                ("application/apply-patch+json", to_json(&object))
            }
        }
        _ => ("application/merge-patch+json", b"{\"a\":".to_vec()),
    };
    let (content_type, body) = if rng.random_bool(0.12) {
        // Hostile bodies under patch content types too (deep apply-patch YAML etc.).
        let object = valid_object(rng, kind, namespace, name);
        let (_, body) = hostile_body(rng, object);
        (content_type, body)
    } else {
        (content_type, body)
    };
    request.query = query.encode();
    request.with_body(Some(content_type), body)
}

fn merge_patch(rng: &mut StdRng) -> Value {
    match rng.random_range(0..6) {
        0 => json!({"metadata": {"labels": {"fuzz": "y", "patched": "1"}}}),
        1 => json!({"data": {"k": null, "p": small_text(rng)}}),
        2 => json!({"spec": {"replicas": rng.random_range(0..4)}}),
        3 => json!({"metadata": {"annotations": null}}),
        4 => json!({"metadata": {"name": "renamed"}}),
        _ => json!({"metadata": {"finalizers": null}}),
    }
}

fn strategic_patch(rng: &mut StdRng) -> Value {
    match rng.random_range(0..6) {
        0 => json!({"metadata": {"labels": {"fuzz": "z"}}}),
        1 => json!({"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}),
        2 => json!({"$patch": "delete"}),
        3 => json!({"spec": {"$retainKeys": ["replicas"], "replicas": 1}}),
        4 => json!({"metadata": {"$setElementOrder/finalizers": [1, 2]}}),
        _ => json!({"spec": {"containers": [{"$patch": "replace"}]}}),
    }
}

fn json_patch(rng: &mut StdRng) -> Value {
    let ops = [
        json!({"op": "add", "path": "/metadata/labels", "value": {"fuzz": "x"}}),
        json!({"op": "add", "path": "/metadata/labels/patched", "value": "1"}),
        json!({"op": "replace", "path": "/data/k", "value": "v"}),
        json!({"op": "remove", "path": "/metadata/annotations"}),
        json!({"op": "test", "path": "/metadata/name", "value": "nope"}),
        json!({"op": "move", "from": "/data", "path": "/data/k"}),
        json!({"op": "copy", "from": "/metadata", "path": "/metadata/labels/x"}),
        json!({"op": "add", "path": "/spec/containers/-", "value": {"name": "d", "image": "x"}}),
        json!({"op": "add", "path": "/spec/containers/99999999999999999999", "value": 1}),
        json!({"op": "frob", "path": "/a"}),
        json!({"op": "add", "path": "no-slash", "value": 1}),
        json!({"op": "add", "path": "/data/~2", "value": 1}),
        json!({"op": "replace", "path": "", "value": {"a": 1}}),
        json!({"op": "add"}),
        json!({"op": "add", "path": "/metadata/name", "value": 7}),
        json!({"op": "remove", "path": "/metadata"}),
    ];
    match rng.random_range(0..10) {
        0 => json!({"not": "an array"}),
        1 => json!([]),
        _ => {
            let count = rng.random_range(1..4);
            Value::Array(
                (0..count)
                    .map(|_| ops.choose(rng).cloned().unwrap_or(Value::Null))
                    .collect(),
            )
        }
    }
}

pub(super) fn get(rng: &mut StdRng) -> FuzzRequest {
    let (kind, namespace, name) = target(rng);
    let mut request = FuzzRequest::new(Method::GET, object_path(kind, namespace.as_deref(), &name));
    let mut query = Query::new();
    query.maybe(rng, 0.1, "resourceVersion", RESOURCE_VERSIONS);
    request.query = query.encode();
    request
}

/// A GET of a random kind's collection, in one namespace or cluster-wide (namespaced kinds
/// too).
fn collection_get(rng: &mut StdRng) -> FuzzRequest {
    let kind = pick_kind(rng);
    let namespace = (kind.namespaced && rng.random_bool(0.7)).then(|| pick_namespace(rng));
    FuzzRequest::new(Method::GET, collection_path(kind, namespace.as_deref()))
}

pub(super) fn list(rng: &mut StdRng) -> FuzzRequest {
    let mut request = collection_get(rng);
    let mut query = Query::new();
    read_query(rng, &mut query);
    query.maybe(
        rng,
        0.3,
        "limit",
        &["1", "2", "5", "0", "-1", "99999999999999999999", "abc"],
    );
    query.maybe(
        rng,
        0.05,
        "continue",
        &[
            "garbage",
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJhIn0",
            "%%%",
            "",
        ],
    );
    query.maybe(rng, 0.05, "timeoutSeconds", TIMEOUTS);
    request.query = query.encode();
    request
}

pub(super) fn watch(rng: &mut StdRng) -> FuzzRequest {
    let mut request = collection_get(rng);
    let mut query = Query::new();
    query.add("watch", *["1", "true", "True"].choose(rng).unwrap_or(&"1"));
    if rng.random_bool(0.85) {
        query.add("timeoutSeconds", "1");
    } else {
        query.maybe(rng, 1.0, "timeoutSeconds", TIMEOUTS);
    }
    read_query(rng, &mut query);
    query.maybe(rng, 0.2, "allowWatchBookmarks", &["true", "false", "x"]);
    query.maybe(rng, 0.1, "sendInitialEvents", &["true", "false"]);
    request.query = query.encode();
    request.watch = true;
    request
}

pub(super) fn delete(rng: &mut StdRng) -> FuzzRequest {
    let (kind, namespace, name) = target(rng);
    let mut request = FuzzRequest::new(
        Method::DELETE,
        object_path(kind, namespace.as_deref(), &name),
    );
    let mut query = Query::new();
    delete_query(rng, &mut query);
    request.query = query.encode();
    if rng.random_bool(0.2) {
        let (content_type, body) = delete_options(rng);
        request = request.with_body(content_type.as_deref(), body);
    }
    request
}

fn delete_query(rng: &mut StdRng, query: &mut Query) {
    query.maybe(
        rng,
        0.2,
        "propagationPolicy",
        &["Foreground", "Background", "Orphan", "bogus"],
    );
    query.maybe(
        rng,
        0.15,
        "gracePeriodSeconds",
        &["0", "1", "-1", "30", "9223372036854775807", "x"],
    );
    query.maybe(rng, 0.05, "dryRun", &["All", "bogus"]);
    query.maybe(rng, 0.03, "orphanDependents", &["true", "false"]);
}

fn delete_options(rng: &mut StdRng) -> (Option<String>, Vec<u8>) {
    let body = match rng.random_range(0..6) {
        0 => {
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
        }
        1 => json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "nope"}}),
        2 => {
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "1"}})
        }
        3 => json!({"gracePeriodSeconds": "soon"}),
        4 => json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}),
        _ => json!([1]),
    };
    encode(rng, &body)
}

pub(super) fn delete_collection(rng: &mut StdRng) -> FuzzRequest {
    // Not namespaces nor CRDs: one such request would end the namespaces and the custom
    // resources the rest of the run builds up state in.
    let kind = loop {
        let kind = pick_kind(rng);
        if !matches!(kind.plural, "namespaces" | "customresourcedefinitions") {
            break kind;
        }
    };
    let namespace = kind.namespaced.then(|| pick_namespace(rng));
    let mut request = FuzzRequest::new(Method::DELETE, collection_path(kind, namespace.as_deref()));
    let mut query = Query::new();
    // Mostly a selector, so one request does not wipe all the state built so far.
    query.maybe(rng, 0.8, "labelSelector", LABEL_SELECTORS);
    query.maybe(rng, 0.1, "fieldSelector", FIELD_SELECTORS);
    delete_query(rng, &mut query);
    request.query = query.encode();
    request
}

pub(super) fn subresource(rng: &mut StdRng) -> FuzzRequest {
    let (kind, namespace, name) = target(rng);
    let sub = kind.subresources.choose(rng).copied().unwrap_or(
        *["status", "scale", "finalize", "log", "exec", "bogus"]
            .choose(rng)
            .unwrap_or(&"status"),
    );
    let path = format!("{}/{}", object_path(kind, namespace.as_deref(), &name), sub);
    match (sub, rng.random_range(0..3)) {
        ("log", _) => {
            let mut request = FuzzRequest::new(Method::GET, path);
            let mut query = Query::new();
            query.maybe(rng, 0.3, "tailLines", &["1", "-1", "99999999999999999999"]);
            query.maybe(rng, 0.2, "container", &["c", "nope"]);
            query.maybe(rng, 0.1, "follow", &["false"]);
            request.query = query.encode();
            request
        }
        (_, 0) => FuzzRequest::new(Method::GET, path),
        ("scale", 1) => {
            let mut scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"replicas": rng.random_range(0..4)}});
            if rng.random_bool(0.2) {
                scale["spec"]["replicas"] = json!(["many"]);
            }
            let (content_type, body) = encode(rng, &scale);
            FuzzRequest::new(Method::PUT, path).with_body(content_type.as_deref(), body)
        }
        (_, 1) => {
            let mut object = valid_object(rng, kind, namespace.as_deref(), &name);
            object["status"] = json!({"phase": "Fuzzed", "replicas": rng.random_range(0..3)});
            if sub == "finalize" {
                let finalizer = ["kubernetes", "x/y"].choose(rng).unwrap_or(&"x");
                object["spec"] = json!({"finalizers": [finalizer]});
            }
            let (content_type, body) = object_body_from(rng, object);
            FuzzRequest::new(Method::PUT, path).with_body(content_type.as_deref(), body)
        }
        _ => patch_at(rng, kind, namespace.as_deref(), &name, path),
    }
}

fn object_body_from(rng: &mut StdRng, mut object: Value) -> (Option<String>, Vec<u8>) {
    if rng.random_bool(0.1) {
        mutate_value(rng, &mut object);
    }
    if rng.random_bool(0.05) {
        return hostile_body(rng, object);
    }
    encode(rng, &object)
}

pub(super) fn discovery(rng: &mut StdRng) -> FuzzRequest {
    let path = [
        "/version",
        "/healthz",
        "/readyz",
        "/livez",
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps",
        "/apis/apps/v1",
        "/apis/fuzz.steady.dev/v1",
        "/apis/apiextensions.k8s.io/v1",
        "/openapi/v3",
        "/openapi/v3/api/v1",
        "/openapi/v3/apis/fuzz.steady.dev/v1",
        "/openapi/v2",
    ]
    .choose(rng)
    .unwrap_or(&"/version")
    .to_string();
    FuzzRequest::new(Method::GET, path)
}

pub(super) fn unknown_path(rng: &mut StdRng) -> FuzzRequest {
    let long = format!(
        "/api/v1/namespaces/default/configmaps/{}",
        "l".repeat(rng.random_range(300..9000))
    );
    let path = [
        "/",
        "/nope",
        "/api/v2/pods",
        "/api/v1/nopes",
        "/apis/nope.dev/v1/things",
        "/apis/apps/v9/deployments",
        "/api/v1/namespaces/default/configmaps/a/b/c/d",
        "/api/v1/namespaces/default/configmaps/a/bogus",
        "/api/v1/namespaces/default/namespaces",
        "/api/v1/namespaces/default/nodes/n",
        "//api//v1//configmaps",
        "/api/v1/configmaps/",
        "/api/v1/namespaces//configmaps",
        "/api/v1/namespaces/%2e%2e/configmaps",
        "/api/v1/namespaces/default/configmaps/%2e%2e",
        "/api/v1/namespaces/default/configmaps/%00",
        "/api/v1/namespaces/default/configmaps/%ff%fe",
        "/api/v1/namespaces/default/configmaps/a%2Fb",
        "/api/v1/namespaces/default/configmaps/%",
        "/api/v1/namespaces/default/configmaps/%zz",
        "/api/v1/../../etc/passwd",
        "/apis/fuzz.steady.dev/v1/namespaces/default/widgets/a/scale/extra",
        "/api/v1/namespaces/default/pods/a/exec",
        "/api/v1/namespaces/default/pods/a/portforward",
        "/api/v1/namespaces/default/pods/a/proxy/x",
        "/metrics",
        "/debug/pprof",
    ]
    .choose(rng)
    .map(|p| p.to_string())
    .unwrap_or_default();
    let path = if rng.random_bool(0.1) { long } else { path };
    let method = [Method::GET, Method::POST, Method::DELETE, Method::PUT]
        .choose(rng)
        .cloned()
        .unwrap_or(Method::GET);
    let request = FuzzRequest::new(method.clone(), path);
    if method == Method::POST || method == Method::PUT {
        request.with_body(Some("application/json"), b"{}".to_vec())
    } else {
        request
    }
}

pub(super) fn odd_method(rng: &mut StdRng) -> FuzzRequest {
    let (kind, namespace, name) = target(rng);
    let path = if rng.random_bool(0.5) {
        object_path(kind, namespace.as_deref(), &name)
    } else {
        collection_path(kind, namespace.as_deref())
    };
    let method = [
        "HEAD", "OPTIONS", "TRACE", "PROPFIND", "FUZZ", "PATCH", "POST",
    ]
    .choose(rng)
    .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
    .unwrap_or(Method::OPTIONS);
    // POST on an object path and PATCH on a collection are wrong for the path.
    let body = if matches!(method, Method::PATCH | Method::POST) {
        b"{}".to_vec()
    } else {
        Vec::new()
    };
    let content_type = (!body.is_empty()).then_some("application/merge-patch+json");
    FuzzRequest::new(method, path).with_body(content_type, body)
}
