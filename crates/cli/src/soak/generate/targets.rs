//! What a request targets: the kinds the fuzzer writes (built-in and custom), namespaces,
//! names (valid and odd) and the paths built from them.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};

use super::{CRD_GROUP, CRD_PLURAL, NAMES, STABLE_NAMESPACES, VOLATILE_NAMESPACES, small_text};

/// A kind the fuzzer writes: where it lives and a valid object of it.
pub(super) struct Kind {
    /// `/api/v1` or `/apis/GROUP/VERSION`.
    pub(super) prefix: &'static str,
    pub(super) plural: &'static str,
    pub(super) api_version: &'static str,
    pub(super) kind: &'static str,
    pub(super) namespaced: bool,
    /// The object's content beside `apiVersion`, `kind` and `metadata`.
    pub(super) content: fn(&mut StdRng) -> Value,
    /// Subresources it serves.
    pub(super) subresources: &'static [&'static str],
}

const KINDS: &[Kind] = &[
    Kind {
        prefix: "/api/v1",
        plural: "configmaps",
        api_version: "v1",
        kind: "ConfigMap",
        namespaced: true,
        content: |rng| json!({"data": {"k": small_text(rng), "n": rng.random::<u32>().to_string()}}),
        subresources: &[],
    },
    Kind {
        prefix: "/api/v1",
        plural: "secrets",
        api_version: "v1",
        kind: "Secret",
        namespaced: true,
        content: |_| json!({"type": "Opaque", "data": {"k": "c2VjcmV0"}, "stringData": {"s": "plain"}}),
        subresources: &[],
    },
    Kind {
        prefix: "/api/v1",
        plural: "serviceaccounts",
        api_version: "v1",
        kind: "ServiceAccount",
        namespaced: true,
        content: |_| json!({}),
        subresources: &[],
    },
    Kind {
        prefix: "/api/v1",
        plural: "services",
        api_version: "v1",
        kind: "Service",
        namespaced: true,
        content: |rng| json!({"spec": {"ports": [{"port": rng.random_range(1..65535), "protocol": "TCP"}], "selector": {"app": "x"}}}),
        subresources: &["status"],
    },
    Kind {
        prefix: "/api/v1",
        plural: "pods",
        api_version: "v1",
        kind: "Pod",
        namespaced: true,
        content: |_| json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        subresources: &["status", "log"],
    },
    Kind {
        prefix: "/api/v1",
        plural: "events",
        api_version: "v1",
        kind: "Event",
        namespaced: true,
        content: |_| json!({"involvedObject": {"kind": "Pod", "name": "a"}, "reason": "Fuzz", "message": "m", "type": "Normal"}),
        subresources: &[],
    },
    Kind {
        prefix: "/api/v1",
        plural: "namespaces",
        api_version: "v1",
        kind: "Namespace",
        namespaced: false,
        content: |_| json!({}),
        subresources: &["status", "finalize"],
    },
    Kind {
        prefix: "/apis/apps/v1",
        plural: "deployments",
        api_version: "apps/v1",
        kind: "Deployment",
        namespaced: true,
        content: |rng| {
            json!({"spec": {
            "replicas": rng.random_range(0..3),
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        },
        subresources: &["status", "scale"],
    },
    Kind {
        prefix: "/apis/coordination.k8s.io/v1",
        plural: "leases",
        api_version: "coordination.k8s.io/v1",
        kind: "Lease",
        namespaced: true,
        content: |rng| json!({"spec": {"holderIdentity": small_text(rng), "leaseDurationSeconds": 15}}),
        subresources: &[],
    },
    Kind {
        prefix: "/apis/rbac.authorization.k8s.io/v1",
        plural: "clusterroles",
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        namespaced: false,
        content: |_| json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        subresources: &[],
    },
    Kind {
        prefix: "/apis/fuzz.steady.dev/v1",
        plural: CRD_PLURAL,
        api_version: "fuzz.steady.dev/v1",
        kind: "Widget",
        namespaced: true,
        content: |rng| {
            json!({"spec": {"replicas": rng.random_range(0..5), "size": small_text(rng),
                                        "free": {"any": [1, "two", {"three": 3.0}]}}})
        },
        subresources: &["status", "scale"],
    },
    Kind {
        prefix: "/apis/apiextensions.k8s.io/v1",
        plural: "customresourcedefinitions",
        api_version: "apiextensions.k8s.io/v1",
        kind: "CustomResourceDefinition",
        namespaced: false,
        content: |_| crd_content("gadgets", "Gadget"),
        subresources: &["status"],
    },
];

/// The CRD content (spec) for `plural.fuzz.steady.dev`: a free-form spec, status and scale.
fn crd_content(plural: &str, kind: &str) -> Value {
    json!({"spec": {
        "group": CRD_GROUP,
        "scope": "Namespaced",
        "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind},
        "versions": [{
            "name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"replicas": {"type": "integer"}}},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                           "properties": {"replicas": {"type": "integer"}}}}}},
            "subresources": {"status": {}, "scale": {
                "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}
        }]
    }})
}

/// The CRD installed before the run (widgets).
pub fn widget_crd() -> Value {
    let mut crd = crd_content(CRD_PLURAL, "Widget");
    crd["apiVersion"] = json!("apiextensions.k8s.io/v1");
    crd["kind"] = json!("CustomResourceDefinition");
    crd["metadata"] = json!({"name": format!("{CRD_PLURAL}.{CRD_GROUP}")});
    crd
}

pub(super) fn pick_kind(rng: &mut StdRng) -> &'static Kind {
    // Namespaces and CRDs are heavyweight (a namespace deletion cascades): fewer of them.
    loop {
        let kind = KINDS.choose(rng).unwrap_or(&KINDS[0]);
        let rare = matches!(kind.plural, "namespaces" | "customresourcedefinitions");
        if !rare || rng.random_bool(0.3) {
            return kind;
        }
    }
}

pub(super) fn pick_namespace(rng: &mut StdRng) -> String {
    match rng.random_range(0..100) {
        0..75 => STABLE_NAMESPACES
            .choose(rng)
            .unwrap_or(&"default")
            .to_string(),
        75..93 => VOLATILE_NAMESPACES
            .choose(rng)
            .unwrap_or(&"fuzz-tmp-0")
            .to_string(),
        _ => odd_name(rng),
    }
}

/// A name for an object of `kind`: mostly from a small pool, sometimes hostile.
fn pick_name(rng: &mut StdRng, kind: &Kind) -> String {
    if rng.random_bool(0.08) {
        return odd_name(rng);
    }
    match kind.plural {
        "namespaces" => VOLATILE_NAMESPACES
            .choose(rng)
            .unwrap_or(&"fuzz-tmp-0")
            .to_string(),
        "customresourcedefinitions" => ["gadgets.fuzz.steady.dev", "gadgets", "gadgets.other.dev"]
            .choose(rng)
            .unwrap_or(&"gadgets")
            .to_string(),
        _ => NAMES.choose(rng).unwrap_or(&"a").to_string(),
    }
}

/// Names a validating server refuses (or must at least store and serve back).
fn odd_name(rng: &mut StdRng) -> String {
    match rng.random_range(0..16) {
        0 => String::new(),
        1 => "UPPER".to_string(),
        2 => "with space".to_string(),
        3 => "q?x=1".to_string(),
        4 => "a/b".to_string(),
        5 => "a".repeat(253),
        6 => "b".repeat(254),
        7 => "c".repeat(5000),
        8 => "..".to_string(),
        9 => ".".to_string(),
        10 => "-lead".to_string(),
        11 => "ünïcødé".to_string(),
        12 => "a%2Fb".to_string(),
        13 => "tab\there".to_string(),
        14 => "semi;colon".to_string(),
        _ => "name#frag".to_string(),
    }
}

/// Percent-encode one path segment (everything but RFC 3986 unreserved characters).
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

pub(super) fn collection_path(kind: &Kind, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) if kind.namespaced => {
            format!(
                "{}/namespaces/{}/{}",
                kind.prefix,
                encode_segment(ns),
                kind.plural
            )
        }
        _ => format!("{}/{}", kind.prefix, kind.plural),
    }
}

pub(super) fn object_path(kind: &Kind, namespace: Option<&str>, name: &str) -> String {
    format!(
        "{}/{}",
        collection_path(kind, namespace),
        encode_segment(name)
    )
}

/// The target of an object request: kind, namespace (for namespaced kinds) and name.
pub(super) fn target(rng: &mut StdRng) -> (&'static Kind, Option<String>, String) {
    let kind = pick_kind(rng);
    let namespace = kind.namespaced.then(|| pick_namespace(rng));
    let name = pick_name(rng, kind);
    (kind, namespace, name)
}
