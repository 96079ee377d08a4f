//! Hostile input, sent raw into the Router: bodies nested past the limit every stored object
//! obeys, adversarial YAML, extreme query values, names that are not names, encoded paths,
//! and reads of revisions the store has not reached.

mod common;

use std::time::Duration;

use common::{JSON, Raw, install_widgets, raw, rejected, server, write};
use http::Request;
use serde_json::{Value, json};
use steady_apiserver::ApiServer;
use tower::ServiceExt;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
/// ControllerRevisions carry any JSON in `data`, so they can nest as deep as a body may.
const REVISIONS: &str = "/apis/apps/v1/namespaces/default/controllerrevisions";
const WIDGETS: &str = "/apis/example.steady.dev/v1/namespaces/default/widgets";
const APPLY: &str = "application/apply-patch+yaml";
/// The nesting limit the server documents (`request::MAX_NESTING_DEPTH`).
const LIMIT: usize = 100;

/// `{"a": {"a": … 1}}` with `levels` objects.
fn nested(levels: usize) -> Value {
    (0..levels).fold(json!(1), |inner, _| json!({ "a": inner }))
}

/// A ControllerRevision whose whole object nests `depth` levels (itself and `data` are two).
fn deep_revision(name: &str, depth: usize) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": name},
        "revision": 1, "data": {"x": nested(depth - 2)}})
}

fn yaml(value: &Value) -> String {
    serde_yaml::to_string(value).expect("YAML")
}

/// Every ControllerRevision still reads back: LIST (namespace and cluster-wide) answers 200.
async fn revisions_read_back(s: &ApiServer) {
    for uri in [REVISIONS, "/apis/apps/v1/controllerrevisions"] {
        let listed = raw(s, "GET", uri, None, "").await;
        assert_eq!(
            listed.status,
            200,
            "{}",
            String::from_utf8_lossy(&listed.body)
        );
    }
}

fn message(status: &Value) -> &str {
    status["message"].as_str().unwrap_or("")
}

#[tokio::test]
async fn bodies_nested_past_the_limit_are_400_in_every_format() {
    let s = server().await;
    // The case: 127 levels of YAML were stored, then could not be read back.
    for (ct, body) in [
        ("application/yaml", yaml(&deep_revision("deep", 127))),
        ("application/yaml", yaml(&deep_revision("deep", LIMIT + 1))),
        (
            "application/json",
            deep_revision("deep", LIMIT + 1).to_string(),
        ),
    ] {
        let status = rejected(
            &s,
            write("POST", REVISIONS, Some(ct), body),
            400,
            "BadRequest",
        )
        .await;
        assert!(
            message(&status).contains("nested too deeply: more than 100 levels"),
            "{status}"
        );
    }
    // At the limit: stored, and every operation on it works.
    let created = raw(
        &s,
        "POST",
        REVISIONS,
        Some("application/yaml"),
        yaml(&deep_revision("deep", LIMIT)),
    )
    .await;
    assert_eq!(created.status, 201);
    revisions_read_back(&s).await;
    let patched = raw(
        &s,
        "PATCH",
        &format!("{REVISIONS}/deep"),
        Some("application/merge-patch+json"),
        json!({"metadata": {"labels": {"l": "v"}}}).to_string(),
    )
    .await;
    assert_eq!(patched.status, 200);
    let deleted = raw(&s, "DELETE", &format!("{REVISIONS}/deep"), None, "").await;
    assert_eq!(deleted.status, 200);
}

/// Managed fields nest a few levels deeper than the fields they describe: an object near
/// the limit is stored without them, not refused, and a dry run of it says the same.
#[tokio::test]
async fn an_object_whose_managed_fields_would_be_too_deep_is_stored_without_them() {
    let s = server().await;
    let created = |name: &str, depth: usize, query: &str| {
        let uri = format!("{REVISIONS}?fieldManager=deep-writer{query}");
        let body = deep_revision(name, depth).to_string();
        let s = &s;
        async move {
            let created = raw(s, "POST", &uri, JSON, body).await;
            assert_eq!(
                created.status,
                201,
                "{}",
                String::from_utf8_lossy(&created.body)
            );
            created.json()
        }
    };
    let managers = |object: &Value| object["metadata"]["managedFields"].as_array().map(Vec::len);
    // The object is within the limit; its field set, under metadata.managedFields, is not.
    for query in ["&dryRun=All", ""] {
        let near = created("near", LIMIT - 4, query).await;
        assert_eq!(managers(&near), None, "{query}: {near}");
    }
    let read = raw(&s, "GET", &format!("{REVISIONS}/near"), None, "").await;
    let near = read.json();
    assert_eq!(managers(&near), None);
    // Applied as it is by another manager, it changes nothing: only who owns its fields
    // would change, in managed fields still too deep to keep.
    let uri = format!("{REVISIONS}/near?fieldManager=another-writer");
    let again = raw(&s, "PATCH", &uri, Some(APPLY), yaml(&near)).await;
    assert_eq!(
        again.status,
        200,
        "{}",
        String::from_utf8_lossy(&again.body)
    );
    assert_eq!(
        again.json()["metadata"]["resourceVersion"],
        near["metadata"]["resourceVersion"]
    );
    // A shallower object keeps them.
    let shallow = created("shallow", LIMIT - 10, "").await;
    assert_eq!(managers(&shallow), Some(1), "{shallow}");
    revisions_read_back(&s).await;
}

#[tokio::test]
async fn a_too_deep_apply_is_rejected_before_commit() {
    let s = server().await;
    let uri = format!("{REVISIONS}/applied?fieldManager=test");
    let body = yaml(&deep_revision("applied", 128));
    rejected(
        &s,
        write("PATCH", uri, Some(APPLY), body),
        400,
        "BadRequest",
    )
    .await;
    let missing = raw(&s, "GET", &format!("{REVISIONS}/applied"), None, "").await;
    missing.assert_status(404, "NotFound");
    revisions_read_back(&s).await;
}

#[tokio::test]
async fn patches_cannot_make_a_stored_object_too_deep() {
    let s = server().await;
    let created = raw(
        &s,
        "POST",
        REVISIONS,
        JSON,
        deep_revision("grown", 72).to_string(),
    )
    .await;
    assert_eq!(created.status, 201);
    // The body is within the limit; the object it would make (142 levels) is not. (A merge
    // patch cannot nest deeper than itself or the object it merges into.)
    let deep_path = format!("/data/x{}", "/a".repeat(69));
    let json_patch = json!([{"op": "add", "path": format!("{deep_path}/b"), "value": nested(70)}]);
    let status = rejected(
        &s,
        write(
            "PATCH",
            format!("{REVISIONS}/grown"),
            Some("application/json-patch+json"),
            json_patch.to_string(),
        ),
        422,
        "Invalid",
    )
    .await;
    assert!(message(&status).contains("nested too deeply"), "{status}");
    revisions_read_back(&s).await;
}

#[tokio::test]
async fn adversarial_yaml_is_rejected_by_its_depth() {
    let s = server().await;
    // Quadratic in libyaml without the token pre-scan (10 s for the first).
    for body in [
        "{a: ".repeat(50_000),
        "[".repeat(200_000),
        format!("{}1{}", "{a: ".repeat(20_000), "}".repeat(20_000)),
    ] {
        let status = rejected(
            &s,
            write("POST", REVISIONS, Some("application/yaml"), body),
            400,
            "BadRequest",
        )
        .await;
        assert!(
            message(&status).contains("more than 100 levels"),
            "{status}"
        );
    }
    // Deep block nesting, and an apply body (YAML) of the flow kind.
    let block: String = (0..LIMIT + 5)
        .map(|i| format!("{}a:\n", " ".repeat(i)))
        .collect();
    rejected(
        &s,
        write("POST", REVISIONS, Some("application/yaml"), block),
        400,
        "BadRequest",
    )
    .await;
    rejected(
        &s,
        write(
            "PATCH",
            format!("{REVISIONS}/x?fieldManager=m"),
            Some(APPLY),
            "{a: ".repeat(50_000),
        ),
        400,
        "BadRequest",
    )
    .await;
}

/// A body past the inline limit is parsed on the blocking pool: on this current-thread
/// runtime, `/healthz` is answered while the big request is still waiting for its parse. A
/// parse on the worker would have run the big request to completion (its namespace does
/// not exist, so nothing after the parse waits) before `/healthz` got the thread.
#[tokio::test]
async fn big_bodies_parse_off_the_async_worker() {
    let s = server().await;
    let data: serde_json::Map<String, Value> = (0..20_000)
        .map(|i| (format!("key-{i}"), json!(format!("value {i}"))))
        .collect();
    let body = yaml(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big"}, "data": data}));
    let request = Request::builder()
        .method("POST")
        .uri("/api/v1/namespaces/missing/configmaps")
        .header(http::header::CONTENT_TYPE, "application/yaml")
        .body(axum::body::Body::from(body))
        .expect("request");
    let big = tokio::spawn(s.router().oneshot(request));
    tokio::task::yield_now().await;
    let health = raw(&s, "GET", "/healthz", None, "").await;
    assert_eq!(health.status, 200);
    assert!(
        !big.is_finished(),
        "the big body was parsed on the async worker"
    );
    let response = big.await.expect("joined").expect("infallible");
    assert_eq!(
        response.status(),
        404,
        "parsed, then the namespace is missing"
    );
}

/// The head of a response (watches stream on; their body is not read).
async fn head(s: &ApiServer, method: &str, uri: &str) -> http::response::Parts {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(axum::body::Body::empty())
        .expect("request");
    let response = s.router().oneshot(request).await.expect("infallible");
    response.into_parts().0
}

#[tokio::test(start_paused = true)]
async fn extreme_durations_are_clamped() {
    let s = server().await;
    for timeout in ["9223372036854775807", "-9223372036854775808", "0"] {
        let parts = head(
            &s,
            "GET",
            &format!("{REVISIONS}?watch=1&timeoutSeconds={timeout}"),
        )
        .await;
        assert_eq!(parts.status, 200, "timeoutSeconds={timeout}");
    }
    // A bound pod waits its grace period: the largest one must not overflow the timestamp.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": i64::MAX,
            "containers": [{"name": "c", "image": "i"}]}});
    let pods = "/api/v1/namespaces/default/pods";
    let created = raw(&s, "POST", pods, JSON, pod.to_string()).await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let deleted = raw(
        &s,
        "DELETE",
        &format!("{pods}/p?gracePeriodSeconds=9223372036854775807"),
        None,
        "",
    )
    .await;
    assert_eq!(
        deleted.status,
        200,
        "{}",
        String::from_utf8_lossy(&deleted.body)
    );
    assert!(deleted.json()["metadata"]["deletionTimestamp"].is_string());
}

async fn with_widgets() -> ApiServer {
    let s = server().await;
    install_widgets(
        &s,
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    )
    .await;
    s
}

fn widget(meta: Value) -> String {
    json!({"apiVersion": "example.steady.dev/v1", "kind": "Widget", "metadata": meta}).to_string()
}

#[tokio::test]
async fn custom_resource_names_are_rfc_1123_subdomains() {
    let s = with_widgets().await;
    let bad_names = ["has space", "what?", "UPPER", &"a".repeat(5000)]
        .map(|name| (json!({ "name": name }), "metadata.name"));
    let bad_prefix = (json!({"generateName": "Bad_"}), "metadata.generateName");
    for (meta, field) in bad_names.into_iter().chain([bad_prefix]) {
        let create = write("POST", WIDGETS, JSON, widget(meta));
        let status = rejected(&s, create, 422, "Invalid").await;
        assert_eq!(status["details"]["causes"][0]["field"], field);
    }
    for meta in [json!({"name": "ok.name-1"}), json!({"generateName": "w-"})] {
        let created = raw(&s, "POST", WIDGETS, JSON, widget(meta)).await;
        assert_eq!(created.status, 201);
    }
}

#[tokio::test]
async fn path_segments_are_percent_decoded() {
    let s = server().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a.b"}});
    let created = raw(&s, "POST", CMS, JSON, cm.to_string()).await;
    assert_eq!(created.status, 201);
    let got = raw(&s, "GET", &format!("{CMS}/a%2Eb"), None, "").await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json()["metadata"]["name"], "a.b");
    // An encoded `/` stays inside its segment: a name, not one more path segment.
    let status = raw(&s, "GET", &format!("{CMS}/a%2Fb"), None, "")
        .await
        .assert_status(404, "NotFound");
    assert!(message(&status).contains("\"a/b\""), "{status}");
    for bad in ["%FF", "%zz", "a%2"] {
        raw(&s, "GET", &format!("{CMS}/{bad}"), None, "")
            .await
            .assert_status(400, "BadRequest");
    }
    let deleted = raw(
        &s,
        "DELETE",
        "/api/v1/namespaces/def%61ult/configmaps/a%2Eb",
        None,
        "",
    )
    .await;
    assert_eq!(deleted.status, 200);
}

fn assert_too_large(response: &Raw) {
    let status = response.assert_status(504, "Timeout");
    assert!(
        message(&status).starts_with("Too large resource version"),
        "{status}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    assert_eq!(
        response
            .headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
}

#[tokio::test(start_paused = true)]
async fn reads_of_a_future_revision_wait_then_answer_504() {
    let s = server().await;
    let future = s.store().revision() + 100;
    let started = tokio::time::Instant::now();
    for query in [
        format!("resourceVersion={future}"),
        format!("resourceVersion={future}&resourceVersionMatch=NotOlderThan"),
        format!("resourceVersion={future}&resourceVersionMatch=Exact"),
        format!("resourceVersion={future}&watch=1"),
    ] {
        assert_too_large(&raw(&s, "GET", &format!("{CMS}?{query}"), None, "").await);
    }
    assert!(started.elapsed() >= Duration::from_secs(3 * 4));
    // A revision that arrives within the wait is served.
    let next = s.store().revision() + 1;
    let writer = s.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}});
        raw(&writer, "POST", CMS, JSON, cm.to_string()).await
    });
    let listed = raw(
        &s,
        "GET",
        &format!("{CMS}?resourceVersion={next}"),
        None,
        "",
    )
    .await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.json()["items"][0]["metadata"]["name"], "late");
}
