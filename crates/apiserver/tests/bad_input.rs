//! Rejected requests, sent raw into the Router: every error is a `Status` whose `code`
//! matches the HTTP status, and no rejected write changes the store revision.

mod common;

use common::{
    JSON, MERGE_PATCH, Write, all_rejected, install_widgets, raw, rejected, server, write,
};
use serde_json::json;
use steady_apiserver::ApiServer;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const WIDGETS: &str = "/apis/example.steady.dev/v1/namespaces/default/widgets";
/// Selectors that do not parse (or name a field ConfigMaps do not have).
const BAD_SELECTORS: [&str; 3] = [
    "labelSelector=a%20in%20(b",
    "labelSelector=%21%21",
    "fieldSelector=spec.unknown%3Dx",
];

fn configmap(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).to_string()
}

fn existing() -> String {
    format!("{CMS}/existing")
}

/// `body` sent as a new ConfigMap and as the replacement of the existing one.
fn create_and_replace(body: String) -> [Write; 2] {
    [
        write("POST", CMS, JSON, body.clone()),
        write("PUT", existing(), JSON, body),
    ]
}

async fn with_widgets() -> ApiServer {
    let s = server().await;
    install_widgets(
        &s,
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "string"}}},
        }}),
    )
    .await;
    let created = raw(&s, "POST", CMS, JSON, configmap("existing")).await;
    assert_eq!(created.status, 201);
    let created = raw(
        &s,
        "POST",
        WIDGETS,
        JSON,
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

#[tokio::test]
async fn malformed_bodies_are_400() {
    let s = with_widgets().await;
    let truncated = write("POST", CMS, JSON, r#"{"metadata": {"name": "x"}"#);
    let status = rejected(&s, truncated, 400, "BadRequest").await;
    assert!(
        status["message"].as_str().unwrap().contains("line"),
        "says where: {status}"
    );
    let json_patch = Some("application/json-patch+json");
    all_rejected(
        &s,
        [
            write("POST", CMS, None, "not json"),
            write("POST", CMS, JSON, "[1, 2]"),
            write("PUT", existing(), JSON, "{"),
            write("PATCH", existing(), MERGE_PATCH, "{"),
            write("PATCH", existing(), json_patch, r#"{"op": "add"}"#),
            write("DELETE", existing(), JSON, "{oops"),
            write("POST", WIDGETS, JSON, "{"),
        ],
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
        let body = body.to_string();
        all_rejected(&s, create_and_replace(body), 400, "BadRequest").await;
    }
    all_rejected(
        &s,
        [
            write(
                "POST",
                WIDGETS,
                JSON,
                json!({"apiVersion": "example.steady.dev/v1", "kind": "Gadget", "metadata": {"name": "x"}}).to_string(),
            ),
            write(
                "POST",
                WIDGETS,
                JSON,
                json!({"apiVersion": "other.steady.dev/v1", "kind": "Widget", "metadata": {"name": "x"}}).to_string(),
            ),
            // Namespace in the body differs from the URL.
            write(
                "POST",
                CMS,
                JSON,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "kube-system"}}).to_string(),
            ),
        ],
        400,
        "BadRequest",
    )
    .await;
}

#[tokio::test]
async fn invalid_names_are_422_with_causes() {
    let s = with_widgets().await;
    for name in ["Bad_Name", "-leading", "a..b", "", &"x".repeat(254)] {
        let status = rejected(
            &s,
            write("POST", CMS, JSON, configmap(name)),
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
    let stale = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing", "resourceVersion": "1"}, "data": {"a": "b"}});
    for (request, code, reason) in [
        // A namespace name must be a DNS label (no dots).
        (
            write(
                "POST",
                "/api/v1/namespaces",
                JSON,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}})
                    .to_string(),
            ),
            422,
            "Invalid",
        ),
        // Creating into a missing namespace is 404.
        (
            write(
                "POST",
                "/api/v1/namespaces/nope/configmaps",
                JSON,
                configmap("x"),
            ),
            404,
            "NotFound",
        ),
        // Duplicates and stale writes.
        (
            write("POST", CMS, JSON, configmap("existing")),
            409,
            "AlreadyExists",
        ),
        (
            write("PUT", existing(), JSON, stale.to_string()),
            409,
            "Conflict",
        ),
        (
            write("PUT", existing(), JSON, configmap("other")),
            400,
            "BadRequest",
        ),
        (
            write("PUT", format!("{CMS}/missing"), JSON, configmap("missing")),
            404,
            "NotFound",
        ),
    ] {
        rejected(&s, request, code, reason).await;
    }
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
            write("POST", CMS, JSON, body.to_string()),
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
        let patch = json!({"metadata": {"labels": metadata.get("labels"), "annotations": metadata.get("annotations")}});
        all_rejected(
            &s,
            [
                write("POST", WIDGETS, JSON, widget.to_string()),
                write("PATCH", existing(), MERGE_PATCH, patch.to_string()),
            ],
            422,
            "Invalid",
        )
        .await;
    }
}

#[tokio::test]
async fn config_map_and_secret_contents_are_checked_as_kube_checks_them() {
    let s = with_widgets().await;
    let secrets = "/api/v1/namespaces/default/secrets";
    // (where, body, the cause's field, its message)
    let cases = [
        (
            CMS,
            json!({"metadata": {"name": "paths"}, "data": {"conf/app.yaml": "x"}}),
            "data[conf/app.yaml]",
            "Invalid value: \"conf/app.yaml\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        ),
        (
            CMS,
            json!({"metadata": {"name": "big"}, "data": {"a": "x".repeat(1024 * 1024), "b": "y"}}),
            "[]",
            "Too long: may not be more than 1048576 bytes",
        ),
        (
            secrets,
            // stringData is merged into data first, so its keys are data's.
            json!({"metadata": {"name": "dots"}, "stringData": {"..data": "x"}}),
            "data[..data]",
            "Invalid value: \"..data\": must not start with '..'",
        ),
        (
            secrets,
            json!({"metadata": {"name": "cert"}, "type": "kubernetes.io/tls", "stringData": {"tls.crt": "c"}}),
            "data[tls.key]",
            "Required value",
        ),
        (
            secrets,
            json!({"metadata": {"name": "token"}, "type": "kubernetes.io/service-account-token"}),
            "metadata.annotations[kubernetes.io/service-account.name]",
            "Required value",
        ),
    ];
    for (uri, mut body, field, message) in cases {
        let kind = if uri == CMS { "ConfigMap" } else { "Secret" };
        body["apiVersion"] = json!("v1");
        body["kind"] = json!(kind);
        let status = rejected(
            &s,
            write("POST", uri, JSON, body.to_string()),
            422,
            "Invalid",
        )
        .await;
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        assert_eq!(
            status["message"],
            format!("{kind} \"{name}\" is invalid: {field}: {message}"),
            "{status}"
        );
        assert_eq!(status["details"]["causes"][0]["field"], field, "{status}");
    }
    // An update is held to the same rules.
    rejected(
        &s,
        write(
            "PATCH",
            existing(),
            MERGE_PATCH,
            json!({"data": {"a b": "x"}}).to_string(),
        ),
        422,
        "Invalid",
    )
    .await;
}

#[tokio::test]
async fn strict_field_validation_on_custom_resources() {
    let s = with_widgets().await;
    let body = json!({"apiVersion": "example.steady.dev/v1", "kind": "Widget", "metadata": {"name": "x"}, "spec": {"size": "s", "bogus": 1}});
    let strict = format!("{WIDGETS}?fieldValidation=Strict");
    let status = rejected(
        &s,
        write("POST", strict, JSON, body.to_string()),
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
    let strict_patch = write(
        "PATCH",
        format!("{WIDGETS}/w?fieldValidation=Strict"),
        MERGE_PATCH,
        json!({"spec": {"bogus": 1}}).to_string(),
    );
    rejected(&s, strict_patch, 400, "BadRequest").await;
    // Warn: accepted with a Warning header; Ignore (and the default): silently dropped.
    let warned = raw(
        &s,
        "POST",
        &format!("{WIDGETS}?fieldValidation=Warn"),
        JSON,
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
        JSON,
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
    let body = body.to_string();
    all_rejected(&s, create_and_replace(body), 413, "RequestEntityTooLarge").await;
}

#[tokio::test]
async fn unsupported_patch_types_are_415() {
    let s = with_widgets().await;
    let strategic_merge = Some("application/strategic-merge-patch+json");
    all_rejected(
        &s,
        [
            write("PATCH", existing(), Some("text/plain"), "{}"),
            write("PATCH", existing(), None, "{}"),
            write(
                "PATCH",
                format!("{WIDGETS}/w"),
                strategic_merge,
                json!({"spec": {"size": "m"}}).to_string(),
            ),
            write("POST", CMS, Some("application/xml"), "<x/>"),
        ],
        415,
        "UnsupportedMediaType",
    )
    .await;
    // Apply needs a field manager.
    let apply = write(
        "PATCH",
        existing(),
        Some("application/apply-patch+yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: existing\n",
    );
    rejected(&s, apply, 400, "BadRequest").await;
}

#[tokio::test]
async fn bad_query_parameters_are_400() {
    let s = with_widgets().await;
    for query in BAD_SELECTORS
        .into_iter()
        .chain(["limit=abc", "continue=garbage"])
    {
        raw(&s, "GET", &format!("{CMS}?{query}"), None, "")
            .await
            .assert_status(400, "BadRequest");
    }
    // A watch validates its selectors before the 200.
    for query in BAD_SELECTORS {
        raw(&s, "GET", &format!("{CMS}?watch=true&{query}"), None, "")
            .await
            .assert_status(400, "BadRequest");
    }
    for (query, code, reason) in [
        ("resourceVersionMatch=Exact", 422, "Invalid"),
        (
            "resourceVersion=notanumber&resourceVersionMatch=Exact",
            400,
            "BadRequest",
        ),
    ] {
        raw(&s, "GET", &format!("{CMS}?{query}"), None, "")
            .await
            .assert_status(code, reason);
    }
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
    let missing = "/api/v1/namespaces/default/configmaps/missing";
    for (request, code, reason) in [
        (
            write(
                "POST",
                "/api/v1/namespaces/default/foos",
                JSON,
                configmap("x"),
            ),
            404,
            "NotFound",
        ),
        (
            write("POST", existing(), JSON, configmap("x")),
            405,
            "MethodNotAllowed",
        ),
        (
            write("PUT", CMS, JSON, configmap("x")),
            405,
            "MethodNotAllowed",
        ),
        (write("DELETE", missing, None, ""), 404, "NotFound"),
        (write("PATCH", missing, MERGE_PATCH, "{}"), 404, "NotFound"),
    ] {
        rejected(&s, request, code, reason).await;
    }
    raw(&s, "POST", "/version", None, "")
        .await
        .assert_status(405, "MethodNotAllowed");
}
