//! Rejected requests, sent raw into the Router: every error is a `Status` whose `code`
//! matches the HTTP status, and no rejected write changes the store revision.

mod common;

use common::{Raw, raw, server};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;
use steady_apiserver::ApiServer;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const WIDGETS: &str = "/apis/example.steady.dev/v1/namespaces/default/widgets";

async fn with_widgets() -> ApiServer {
    let s = server().await;
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.steady.dev"},
        "spec": {
            "group": "example.steady.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "string"}}},
                }}}}],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(s.client())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let created = raw(
        &s,
        "POST",
        CMS,
        Some("application/json"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing"}})
            .to_string(),
    )
    .await;
    assert_eq!(created.status, 201);
    let created = raw(
        &s,
        "POST",
        WIDGETS,
        Some("application/json"),
        json!({"apiVersion": "example.steady.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "s"}}).to_string(),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    s
}

/// Send a write that must be rejected; check the Status and that nothing was written.
async fn rejected(
    s: &ApiServer,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: impl Into<axum::body::Body>,
    code: u16,
    reason: &str,
) -> serde_json::Value {
    let before = s.store().revision();
    let response: Raw = raw(s, method, uri, content_type, body).await;
    let status = response.assert_status(code, reason);
    assert_eq!(
        s.store().revision(),
        before,
        "{method} {uri} was rejected but changed the store"
    );
    status
}

#[tokio::test]
async fn malformed_bodies_are_400() {
    let s = with_widgets().await;
    let status = rejected(
        &s,
        "POST",
        CMS,
        Some("application/json"),
        r#"{"metadata": {"name": "x"}"#,
        400,
        "BadRequest",
    )
    .await;
    assert!(
        status["message"].as_str().unwrap().contains("line"),
        "says where: {status}"
    );
    rejected(&s, "POST", CMS, None, "not json", 400, "BadRequest").await;
    rejected(
        &s,
        "POST",
        CMS,
        Some("application/json"),
        "[1, 2]",
        400,
        "BadRequest",
    )
    .await;
    rejected(
        &s,
        "PUT",
        &format!("{CMS}/existing"),
        Some("application/json"),
        "{",
        400,
        "BadRequest",
    )
    .await;
    rejected(
        &s,
        "PATCH",
        &format!("{CMS}/existing"),
        Some("application/merge-patch+json"),
        "{",
        400,
        "BadRequest",
    )
    .await;
    rejected(
        &s,
        "PATCH",
        &format!("{CMS}/existing"),
        Some("application/json-patch+json"),
        r#"{"op": "add"}"#,
        400,
        "BadRequest",
    )
    .await;
    rejected(
        &s,
        "DELETE",
        &format!("{CMS}/existing"),
        Some("application/json"),
        "{oops",
        400,
        "BadRequest",
    )
    .await;
    rejected(
        &s,
        "POST",
        WIDGETS,
        Some("application/json"),
        "{",
        400,
        "BadRequest",
    )
    .await;
}

#[tokio::test]
async fn wrong_kind_or_api_version_is_400() {
    let s = with_widgets().await;
    let cases = [
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
        json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"}),
    ];
    for body in cases {
        rejected(
            &s,
            "POST",
            CMS,
            Some("application/json"),
            body.to_string(),
            400,
            "BadRequest",
        )
        .await;
        rejected(
            &s,
            "PUT",
            &format!("{CMS}/existing"),
            Some("application/json"),
            body.to_string(),
            400,
            "BadRequest",
        )
        .await;
    }
    rejected(
        &s,
        "POST",
        WIDGETS,
        Some("application/json"),
        json!({"apiVersion": "example.steady.dev/v1", "kind": "Gadget", "metadata": {"name": "x"}})
            .to_string(),
        400,
        "BadRequest",
    )
    .await;
    rejected(
        &s,
        "POST",
        WIDGETS,
        Some("application/json"),
        json!({"apiVersion": "other.steady.dev/v1", "kind": "Widget", "metadata": {"name": "x"}})
            .to_string(),
        400,
        "BadRequest",
    )
    .await;
    // Namespace in the body differs from the URL.
    rejected(
        &s, "POST", CMS, Some("application/json"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "kube-system"}}).to_string(),
        400, "BadRequest",
    ).await;
}

#[tokio::test]
async fn invalid_names_are_422_with_causes() {
    let s = with_widgets().await;
    for name in ["Bad_Name", "-leading", "a..b", "", &"x".repeat(254)] {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        let status = rejected(
            &s,
            "POST",
            CMS,
            Some("application/json"),
            body.to_string(),
            422,
            "Invalid",
        )
        .await;
        let causes = status["details"]["causes"]
            .as_array()
            .expect("details.causes");
        assert!(!causes.is_empty(), "{status}");
        assert!(
            causes
                .iter()
                .all(|c| c["field"] == "metadata.name" && c["reason"].is_string()),
            "{status}"
        );
        assert_eq!(status["details"]["kind"], "ConfigMap");
    }
    // A namespace name must be a DNS label (no dots).
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}});
    rejected(
        &s,
        "POST",
        "/api/v1/namespaces",
        Some("application/json"),
        body.to_string(),
        422,
        "Invalid",
    )
    .await;
    // Creating into a missing namespace is 404.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    rejected(
        &s,
        "POST",
        "/api/v1/namespaces/nope/configmaps",
        Some("application/json"),
        body.to_string(),
        404,
        "NotFound",
    )
    .await;
    // Duplicates and stale writes.
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing"}});
    rejected(
        &s,
        "POST",
        CMS,
        Some("application/json"),
        body.to_string(),
        409,
        "AlreadyExists",
    )
    .await;
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing", "resourceVersion": "1"}, "data": {"a": "b"}});
    rejected(
        &s,
        "PUT",
        &format!("{CMS}/existing"),
        Some("application/json"),
        body.to_string(),
        409,
        "Conflict",
    )
    .await;
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}});
    rejected(
        &s,
        "PUT",
        &format!("{CMS}/existing"),
        Some("application/json"),
        body.to_string(),
        400,
        "BadRequest",
    )
    .await;
    rejected(
        &s,
        "PUT",
        &format!("{CMS}/missing"),
        Some("application/json"),
        body.to_string().replace("other", "missing"),
        404,
        "NotFound",
    )
    .await;
}

/// Label keys and values and annotation keys follow kube's qualified-name rules, and
/// annotations are bounded in total, on every write (create, patch) and every kind.
#[tokio::test]
async fn invalid_labels_and_annotations_are_422() {
    let s = with_widgets().await;
    let bad_metadata = [
        json!({"labels": {"bad key": "v"}}),
        json!({"labels": {"app": "has spaces"}}),
        json!({"labels": {"app": "x".repeat(64)}}),
        json!({"annotations": {"-leading": "v"}}),
        json!({"annotations": {"big": "x".repeat(256 * 1024)}}),
    ];
    for metadata in &bad_metadata {
        let mut metadata = metadata.clone();
        metadata["name"] = json!("labelled");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata});
        let status = rejected(
            &s,
            "POST",
            CMS,
            Some("application/json"),
            body.to_string(),
            422,
            "Invalid",
        )
        .await;
        let field = status["details"]["causes"][0]["field"]
            .as_str()
            .unwrap_or_default();
        // As kube-apiserver: the cause's message is the error body alone (kubectl prints
        // `field: message`), not prefixed with the field again.
        let message = status["details"]["causes"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            message.starts_with("Invalid value") || message.starts_with("Too long"),
            "{status}"
        );
        assert!(
            field.starts_with("metadata.labels") || field.starts_with("metadata.annotations"),
            "{status}"
        );

        let widget =
            json!({"apiVersion": "example.steady.dev/v1", "kind": "Widget", "metadata": metadata});
        rejected(
            &s,
            "POST",
            WIDGETS,
            Some("application/json"),
            widget.to_string(),
            422,
            "Invalid",
        )
        .await;

        let patch = json!({"metadata": {"labels": metadata.get("labels"), "annotations": metadata.get("annotations")}});
        rejected(
            &s,
            "PATCH",
            &format!("{CMS}/existing"),
            Some("application/merge-patch+json"),
            patch.to_string(),
            422,
            "Invalid",
        )
        .await;
    }
}

#[tokio::test]
async fn strict_field_validation_on_custom_resources() {
    let s = with_widgets().await;
    let body = json!({"apiVersion": "example.steady.dev/v1", "kind": "Widget", "metadata": {"name": "x"}, "spec": {"size": "s", "bogus": 1}});
    let status = rejected(
        &s,
        "POST",
        &format!("{WIDGETS}?fieldValidation=Strict"),
        Some("application/json"),
        body.to_string(),
        400,
        "BadRequest",
    )
    .await;
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec.bogus\""),
        "{status}"
    );
    rejected(
        &s,
        "PATCH",
        &format!("{WIDGETS}/w?fieldValidation=Strict"),
        Some("application/merge-patch+json"),
        json!({"spec": {"bogus": 1}}).to_string(),
        400,
        "BadRequest",
    )
    .await;
    // Warn: accepted with a Warning header; Ignore (and the default): silently dropped.
    let warned = raw(
        &s,
        "POST",
        &format!("{WIDGETS}?fieldValidation=Warn"),
        Some("application/json"),
        body.to_string(),
    )
    .await;
    assert_eq!(warned.status, 201);
    assert!(warned.headers.get("warning").is_some(), "Warning header");
    assert!(warned.json()["spec"].get("bogus").is_none());
    let body = body.to_string().replace("\"x\"", "\"y\"");
    let ignored = raw(
        &s,
        "POST",
        &format!("{WIDGETS}?fieldValidation=Ignore"),
        Some("application/json"),
        body,
    )
    .await;
    assert_eq!(ignored.status, 201);
    assert!(ignored.json()["spec"].get("bogus").is_none());
}

#[tokio::test]
async fn oversized_body_is_413() {
    let s = with_widgets().await;
    let big = "x".repeat(3 * 1024 * 1024 + 1);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"x": big}});
    rejected(
        &s,
        "POST",
        CMS,
        Some("application/json"),
        body.to_string(),
        413,
        "RequestEntityTooLarge",
    )
    .await;
    rejected(
        &s,
        "PUT",
        &format!("{CMS}/existing"),
        Some("application/json"),
        body.to_string(),
        413,
        "RequestEntityTooLarge",
    )
    .await;
}

#[tokio::test]
async fn unsupported_patch_types_are_415() {
    let s = with_widgets().await;
    rejected(
        &s,
        "PATCH",
        &format!("{CMS}/existing"),
        Some("text/plain"),
        "{}",
        415,
        "UnsupportedMediaType",
    )
    .await;
    rejected(
        &s,
        "PATCH",
        &format!("{CMS}/existing"),
        None,
        "{}",
        415,
        "UnsupportedMediaType",
    )
    .await;
    rejected(
        &s,
        "PATCH",
        &format!("{WIDGETS}/w"),
        Some("application/strategic-merge-patch+json"),
        json!({"spec": {"size": "m"}}).to_string(),
        415,
        "UnsupportedMediaType",
    )
    .await;
    rejected(
        &s,
        "POST",
        CMS,
        Some("application/xml"),
        "<x/>",
        415,
        "UnsupportedMediaType",
    )
    .await;
    // Apply needs a field manager.
    rejected(
        &s,
        "PATCH",
        &format!("{CMS}/existing"),
        Some("application/apply-patch+yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\n",
        400,
        "BadRequest",
    )
    .await;
}

#[tokio::test]
async fn bad_query_parameters_are_400() {
    let s = with_widgets().await;
    for query in [
        "labelSelector=a%20in%20(b",
        "labelSelector=%21%21",
        "fieldSelector=spec.unknown%3Dx",
        "limit=abc",
        "continue=garbage",
    ] {
        raw(&s, "GET", &format!("{CMS}?{query}"), None, "")
            .await
            .assert_status(400, "BadRequest");
    }
    // A watch validates its selectors before the 200.
    for query in [
        "labelSelector=a%20in%20(b",
        "labelSelector=%21%21",
        "fieldSelector=spec.unknown%3Dx",
    ] {
        raw(&s, "GET", &format!("{CMS}?watch=true&{query}"), None, "")
            .await
            .assert_status(400, "BadRequest");
    }
    raw(
        &s,
        "GET",
        &format!("{CMS}?resourceVersionMatch=Exact"),
        None,
        "",
    )
    .await
    .assert_status(422, "Invalid");
    raw(
        &s,
        "GET",
        &format!("{CMS}?resourceVersion=notanumber&resourceVersionMatch=Exact"),
        None,
        "",
    )
    .await
    .assert_status(400, "BadRequest");
}

#[tokio::test(start_paused = true)]
async fn watch_from_compacted_revision_is_200_with_one_error_line() {
    let s = with_widgets().await;
    let old = s.store().revision();
    for i in 0..3 {
        let body =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}")}});
        assert_eq!(
            raw(&s, "POST", CMS, None, body.to_string()).await.status,
            201
        );
    }
    s.store().compact(s.store().revision()).await.unwrap();
    for uri in [
        format!("{CMS}?watch=true&resourceVersion={}", old - 1),
        format!(
            "{CMS}?&watch=1&resourceVersion={}&allowWatchBookmarks=true",
            old - 1
        ),
        format!("{WIDGETS}?watch=true&resourceVersion=1"),
    ] {
        let response = raw(&s, "GET", &uri, None, "").await;
        assert_eq!(response.status, 200, "{uri}");
        assert_eq!(
            response.headers.get("content-type").unwrap(),
            "application/json"
        );
        let text = String::from_utf8(response.body.to_vec()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(text.ends_with('\n'));
        let event: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(event["type"], "ERROR");
        let status = &event["object"];
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["apiVersion"], "v1");
        assert_eq!(status["status"], "Failure");
        assert_eq!(status["reason"], "Expired");
        assert_eq!(status["code"], 410);
    }
    // A list at a compacted exact revision is 410 too.
    raw(
        &s,
        "GET",
        &format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=Exact",
            old - 1
        ),
        None,
        "",
    )
    .await
    .assert_status(410, "Expired");
}

#[tokio::test]
async fn unknown_paths_and_methods() {
    let s = with_widgets().await;
    for uri in [
        "/api/v1/namespaces/default/foos",
        "/api/v1/namespaces/default/foos/x",
        "/apis/nope.example.com/v1/things",
        "/apis/example.steady.dev/v2/namespaces/default/widgets",
        "/api/v1/namespaces/default/configmaps/existing/status",
        "/api/v1/namespaces/default/configmaps/existing/scale",
        "/api/v1/namespaces/default/configmaps/missing",
        "/api/v1/namespaces/default/namespaces",
        "/nothing/here",
        "/api/v2",
    ] {
        raw(&s, "GET", uri, None, "")
            .await
            .assert_status(404, "NotFound");
    }
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}).to_string();
    rejected(
        &s,
        "POST",
        "/api/v1/namespaces/default/foos",
        Some("application/json"),
        body.clone(),
        404,
        "NotFound",
    )
    .await;
    rejected(
        &s,
        "POST",
        &format!("{CMS}/existing"),
        Some("application/json"),
        body.clone(),
        405,
        "MethodNotAllowed",
    )
    .await;
    rejected(
        &s,
        "PUT",
        CMS,
        Some("application/json"),
        body.clone(),
        405,
        "MethodNotAllowed",
    )
    .await;
    rejected(
        &s,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/missing",
        None,
        "",
        404,
        "NotFound",
    )
    .await;
    rejected(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/missing",
        Some("application/merge-patch+json"),
        "{}",
        404,
        "NotFound",
    )
    .await;
    raw(&s, "POST", "/version", None, "")
        .await
        .assert_status(405, "MethodNotAllowed");
}
