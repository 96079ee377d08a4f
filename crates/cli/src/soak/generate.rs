//! Request generation for `steady soak fuzz`: request number `i` of seed `s` is a pure
//! function of `(s, i)`, so a run is reproducible whatever the concurrency, and one
//! request can be replayed alone (`--only i`).
//!
//! Most requests are valid (creates, updates and patches of a small pool of names in a few
//! namespaces, so state builds up and later requests hit existing objects); the rest are
//! hostile: odd paths and names, methods, content types, mutated, deep, huge or broken
//! bodies, garbage query parameters.

use http::Method;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// The CRD the fuzzer installs before it starts, so custom resources are fuzzed too.
pub const CRD_GROUP: &str = "fuzz.steady.dev";
pub const CRD_PLURAL: &str = "widgets";
/// Namespaces created before the run and never deleted by it.
pub const STABLE_NAMESPACES: [&str; 3] = ["default", "fuzz-a", "fuzz-b"];
/// Namespaces the fuzzer itself creates and deletes.
const VOLATILE_NAMESPACES: [&str; 3] = ["fuzz-tmp-0", "fuzz-tmp-1", "fuzz-tmp-2"];
const NAMES: [&str; 8] = ["a", "b", "c", "obj-1", "obj-2", "obj-3", "x.y", "z-9"];
/// kube-apiserver's request body limit: bodies just below and above it are sent.
const BODY_LIMIT: usize = 3 * 1024 * 1024;

/// One generated request.
#[derive(Clone, Debug)]
pub struct FuzzRequest {
    pub method: Method,
    pub path: String,
    /// Already encoded, without the `?`.
    pub query: String,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// A watch: the answer is a stream, read for a moment only.
    pub watch: bool,
}

impl FuzzRequest {
    fn new(method: Method, path: String) -> FuzzRequest {
        FuzzRequest {
            method,
            path,
            query: String::new(),
            content_type: None,
            body: Vec::new(),
            watch: false,
        }
    }

    pub fn uri(&self) -> String {
        if self.query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, self.query)
        }
    }

    /// Whether a query parameter is present (used to judge documented 504s).
    pub fn has_param(&self, key: &str) -> bool {
        self.query
            .split('&')
            .any(|pair| pair.split('=').next() == Some(key))
    }

    fn with_body(mut self, content_type: Option<&str>, body: Vec<u8>) -> FuzzRequest {
        self.content_type = content_type.map(str::to_string);
        self.body = body;
        self
    }
}

/// A kind the fuzzer writes: where it lives and a valid object of it.
struct Kind {
    /// `/api/v1` or `/apis/GROUP/VERSION`.
    prefix: &'static str,
    plural: &'static str,
    api_version: &'static str,
    kind: &'static str,
    namespaced: bool,
    /// The object's content beside `apiVersion`, `kind` and `metadata`.
    content: fn(&mut StdRng) -> Value,
    /// Subresources it serves.
    subresources: &'static [&'static str],
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

fn small_text(rng: &mut StdRng) -> String {
    let len = rng.random_range(0..40);
    (0..len)
        .map(|_| *b"abcdefghij0123456789-_. ".choose(rng).unwrap_or(&b'a') as char)
        .collect()
}

/// The RNG of request `index` of `seed` (splitmix64 of both, so neighbouring indexes are
/// unrelated streams).
fn rng_for(seed: u64, index: u64) -> StdRng {
    let mut z = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    StdRng::seed_from_u64(z ^ (z >> 31))
}

/// Request number `index` of the campaign `seed`.
pub fn request(seed: u64, index: u64) -> FuzzRequest {
    let rng = &mut rng_for(seed, index);
    let roll = rng.random_range(0..1000);
    let mut request = match roll {
        0..220 => create(rng),
        220..340 => update(rng),
        340..480 => patch(rng),
        480..610 => get(rng),
        610..720 => list(rng),
        720..770 => watch(rng),
        770..830 => delete(rng),
        830..845 => delete_collection(rng),
        845..920 => subresource(rng),
        920..950 => discovery(rng),
        950..975 => unknown_path(rng),
        _ => odd_method(rng),
    };
    // Hostile content types on any request with a body, now and then.
    if !request.body.is_empty() && rng.random_bool(0.03) {
        request.content_type = Some(bogus_content_type(rng));
    }
    request
}

// ---- targets: kinds, namespaces, names, paths ----

fn pick_kind(rng: &mut StdRng) -> &'static Kind {
    // Namespaces and CRDs are heavyweight (a namespace deletion cascades): fewer of them.
    loop {
        let kind = KINDS.choose(rng).unwrap_or(&KINDS[0]);
        let rare = matches!(kind.plural, "namespaces" | "customresourcedefinitions");
        if !rare || rng.random_bool(0.3) {
            return kind;
        }
    }
}

fn pick_namespace(rng: &mut StdRng) -> String {
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

fn collection_path(kind: &Kind, namespace: Option<&str>) -> String {
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

fn object_path(kind: &Kind, namespace: Option<&str>, name: &str) -> String {
    format!(
        "{}/{}",
        collection_path(kind, namespace),
        encode_segment(name)
    )
}

/// The target of an object request: kind, namespace (for namespaced kinds) and name.
fn target(rng: &mut StdRng) -> (&'static Kind, Option<String>, String) {
    let kind = pick_kind(rng);
    let namespace = kind.namespaced.then(|| pick_namespace(rng));
    let name = pick_name(rng, kind);
    (kind, namespace, name)
}

// ---- bodies ----

fn valid_object(rng: &mut StdRng, kind: &Kind, namespace: Option<&str>, name: &str) -> Value {
    let mut object = (kind.content)(rng);
    if kind.plural == "customresourcedefinitions" && name != "gadgets.fuzz.steady.dev" {
        // Its name must match the spec; a mismatch is one more invalid case.
        object["spec"]["names"]["plural"] = json!(name.split('.').next().unwrap_or(name));
    }
    object["apiVersion"] = json!(kind.api_version);
    object["kind"] = json!(kind.kind);
    let mut metadata = json!({"name": name});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    if rng.random_bool(0.5) {
        let value = ["x", "y", "z"].choose(rng).unwrap_or(&"x");
        metadata["labels"] = json!({"fuzz": value, "app": "x"});
    }
    if rng.random_bool(0.2) {
        metadata["annotations"] = json!({"fuzz.steady.dev/note": small_text(rng)});
    }
    if rng.random_bool(0.05) {
        metadata["finalizers"] = json!(["fuzz.steady.dev/hold"]);
    }
    object["metadata"] = metadata;
    object
}

/// An object body for a create or update: valid most of the time, else mutated.
fn object_body(
    rng: &mut StdRng,
    kind: &Kind,
    namespace: Option<&str>,
    name: &str,
) -> (Option<String>, Vec<u8>) {
    let mut object = valid_object(rng, kind, namespace, name);
    if rng.random_bool(0.15) {
        mutate_value(rng, &mut object);
    }
    if rng.random_bool(0.12) {
        return hostile_body(rng, object);
    }
    encode(rng, &object)
}

/// The same value, as JSON mostly, sometimes as YAML, with or without a Content-Type.
fn encode(rng: &mut StdRng, value: &Value) -> (Option<String>, Vec<u8>) {
    match rng.random_range(0..100) {
        0..80 => (Some("application/json".into()), to_json(value)),
        80..92 => (Some("application/yaml".into()), to_yaml(value)),
        92..96 => (None, to_json(value)),
        _ => (
            Some("application/json; charset=utf-8".into()),
            to_json(value),
        ),
    }
}

fn to_json(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

fn to_yaml(value: &Value) -> Vec<u8> {
    serde_yaml::to_string(value)
        .map(String::into_bytes)
        .unwrap_or_else(|_| to_json(value))
}

/// Wrong types and missing fields, in place.
fn mutate_value(rng: &mut StdRng, object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match rng.random_range(0..14) {
        0 => {
            map.remove("metadata");
        }
        1 => {
            map.remove("apiVersion");
        }
        2 => {
            map.remove("kind");
        }
        3 => {
            map.insert("metadata".into(), json!("not an object"));
        }
        4 => {
            map.insert("metadata".into(), json!({"name": 5}));
        }
        5 => {
            map.insert("metadata".into(), json!({"name": "a", "labels": {"k": 1}}));
        }
        6 => {
            map.insert("data".into(), json!([1, 2, 3]));
        }
        7 => {
            map.insert("spec".into(), json!({"replicas": "three"}));
        }
        8 => {
            map.insert("kind".into(), json!("Pod"));
        }
        9 => {
            map.insert("apiVersion".into(), json!("nope/v9"));
        }
        10 => {
            map.insert("extra".into(), json!(1e300));
        }
        11 => {
            map.insert(
                "metadata".into(),
                json!({"name": "a", "resourceVersion": "not-a-number", "uid": 7}),
            );
        }
        12 => {
            map.insert("status".into(), json!({"phase": ["x"], "replicas": -1}));
        }
        _ => {
            map.insert(
                "metadata".into(),
                json!({"name": "a", "generateName": "g-", "ownerReferences": [{"uid": "x"}]}),
            );
        }
    }
}

/// Deep, huge, broken or non-object bodies.
fn hostile_body(rng: &mut StdRng, object: Value) -> (Option<String>, Vec<u8>) {
    let json_type = Some("application/json".to_string());
    let yaml_type = Some("application/yaml".to_string());
    match rng.random_range(0..100) {
        0..30 => deep_body(rng, object),
        30..32 => huge_body(rng, object),
        32 if rng.random_bool(0.2) => {
            // Flow-style nesting far past any depth limit (250 KB): a parser must refuse it
            // quickly, not after seconds of CPU.
            let depth = 50_000;
            let mut body =
                b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flow}\nextra: ".to_vec();
            body.extend_from_slice("{a: ".repeat(depth).as_bytes());
            body.extend_from_slice(b"1");
            body.extend_from_slice("}".repeat(depth).as_bytes());
            (yaml_type, body)
        }
        32..42 => {
            let bytes = to_json(&object);
            let cut = rng.random_range(0..bytes.len().max(1));
            (json_type, bytes[..cut].to_vec())
        }
        42..50 => {
            let mut bytes = to_json(&object);
            let at = rng.random_range(0..bytes.len().max(1));
            bytes.splice(at..at, [0xff, 0xfe, 0xc3, 0x28]);
            (json_type, bytes)
        }
        50..56 => {
            // Invalid UTF-8 inside a string value, which a lenient decoder might store.
            let mut bytes =
                br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"utf"},"data":{"k":""#
                    .to_vec();
            bytes.extend_from_slice(&[0xc3, 0x28, 0xa0, 0xa1, 0xed, 0xa0, 0x80]);
            bytes.extend_from_slice(br#""}}"#);
            (json_type, bytes)
        }
        56..66 => {
            let scalar = [
                "null",
                "[]",
                "[1,2]",
                "42",
                "\"str\"",
                "true",
                "",
                " ",
                "{}",
                "{\"a\":1}{",
            ];
            (
                json_type,
                scalar.choose(rng).unwrap_or(&"").as_bytes().to_vec(),
            )
        }
        66..72 => (
            yaml_type,
            [
                "- a\n- b\n",
                "a: [1, 2\n",
                "metadata: {name: a\n",
                "? complex\n: key\n",
                "--- \n...\n--- {}\n",
                "a: !!binary ???\n",
                "a: &x 1\nb: *y\n",
                "\t\tbad: indent\n",
            ]
            .choose(rng)
            .unwrap_or(&"- a\n")
            .as_bytes()
            .to_vec(),
        ),
        72..76 => (yaml_type, yaml_alias_bomb(rng.random_range(3..9))),
        76..84 => {
            // Protobuf: the magic prefix, then junk or a truncated envelope.
            let mut bytes = b"k8s\0".to_vec();
            let len = rng.random_range(0..64);
            bytes.extend((0..len).map(|_| rng.random::<u8>()));
            (Some("application/vnd.kubernetes.protobuf".into()), bytes)
        }
        84..88 => {
            let bytes = (0..rng.random_range(0..256))
                .map(|_| rng.random::<u8>())
                .collect();
            (Some("application/vnd.kubernetes.protobuf".into()), bytes)
        }
        88..94 => {
            // Numbers and keys at the edges of what a JSON reader takes.
            let body = [
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n"},"x":1e999}"#,
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n","name":"m"}}"#,
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n"},"x":-0,"y":123456789012345678901234567890}"#,
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"\u0000"}}"#,
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n"},"data":{"k":"\ud800"}}"#,
            ];
            (
                json_type,
                body.choose(rng).unwrap_or(&"{}").as_bytes().to_vec(),
            )
        }
        _ => encode(rng, &object),
    }
}

/// Nesting depths around the 128 levels JSON readers and the store draw the line at.
fn pick_depth(rng: &mut StdRng) -> usize {
    *[64, 126, 127, 128, 129, 130, 200, 1000, 10_000]
        .choose(rng)
        .unwrap_or(&128)
}

/// The object with a deeply nested value under `spec`/`extra`, as JSON or YAML (flow or
/// block style).
fn deep_body(rng: &mut StdRng, object: Value) -> (Option<String>, Vec<u8>) {
    let depth = pick_depth(rng);
    let field = if object.get("spec").is_some() {
        "spec"
    } else {
        "extra"
    };
    let mut base = object;
    if let Some(map) = base.as_object_mut() {
        map.remove(field);
    }
    let prefix = to_json(&base);
    let prefix = &prefix[..prefix.len().saturating_sub(1)]; // drop the closing brace
    let arrays = rng.random_bool(0.5);
    let (open, close) = if arrays { ("[", "]") } else { ("{\"a\":", "}") };
    match rng.random_range(0..3) {
        0 => {
            let mut body = prefix.to_vec();
            body.extend_from_slice(format!(",\"{field}\":").as_bytes());
            body.extend_from_slice(open.repeat(depth).as_bytes());
            body.extend_from_slice(b"1");
            body.extend_from_slice(close.repeat(depth).as_bytes());
            body.push(b'}');
            (Some("application/json".into()), body)
        }
        1 => {
            let (open, close) = if arrays { ("[", "]") } else { ("{a: ", "}") };
            let mut body = to_yaml(&base);
            body.extend_from_slice(format!("{field}: ").as_bytes());
            body.extend_from_slice(open.repeat(depth).as_bytes());
            body.extend_from_slice(b"1");
            body.extend_from_slice(close.repeat(depth).as_bytes());
            body.push(b'\n');
            (Some("application/yaml".into()), body)
        }
        _ => {
            // Block style: one more level of indentation per line (kept to moderate depths,
            // the body grows with the square of the depth).
            let depth = depth.min(1000);
            let mut body = to_yaml(&base);
            body.extend_from_slice(format!("{field}:\n").as_bytes());
            for level in 1..=depth {
                body.extend_from_slice(" ".repeat(level).as_bytes());
                body.extend_from_slice(if level == depth { b"a: 1\n" } else { b"a:\n" });
            }
            (Some("application/yaml".into()), body)
        }
    }
}

/// A ConfigMap-like body of about 3 MiB: just below or just above the request limit.
fn huge_body(rng: &mut StdRng, object: Value) -> (Option<String>, Vec<u8>) {
    let target = if rng.random_bool(0.5) {
        BODY_LIMIT - 4096
    } else {
        BODY_LIMIT + 4096
    };
    let mut object = object;
    object["data"] = json!({"big": "x".repeat(target)});
    if rng.random_bool(0.5) {
        (Some("application/yaml".into()), to_yaml(&object))
    } else {
        (Some("application/json".into()), to_json(&object))
    }
}

/// A YAML alias expansion ("billion laughs") with `levels` levels of 9 references.
fn yaml_alias_bomb(levels: usize) -> Vec<u8> {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\nl0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..=levels {
        let prev = format!("*l{}", level - 1);
        let refs = [prev.as_str(); 9].join(",");
        yaml.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
    }
    yaml.into_bytes()
}

fn bogus_content_type(rng: &mut StdRng) -> String {
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=utf-16",
        "application/xml",
        "application/vnd.kubernetes.protobuf;stream=watch",
        "application/cbor",
        "application/apply-patch+cbor",
        "*/*",
        ";;;",
        "application/",
        "APPLICATION/JSON",
    ]
    .choose(rng)
    .unwrap_or(&"text/plain")
    .to_string()
}

// ---- query parameters ----

struct Query(Vec<(String, String)>);

impl Query {
    fn new() -> Query {
        Query(Vec::new())
    }
    fn add(&mut self, key: &str, value: impl Into<String>) {
        self.0.push((key.to_string(), value.into()));
    }
    fn maybe(&mut self, rng: &mut StdRng, p: f64, key: &str, values: &[&str]) {
        if rng.random_bool(p) {
            self.add(key, *values.choose(rng).unwrap_or(&""));
        }
    }
    fn encode(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{}={}", encode_segment(k), encode_segment(v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

const RESOURCE_VERSIONS: &[&str] = &[
    "0",
    "",
    "1",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999",
    "-1",
    "abc",
    "1.5",
];
const TIMEOUTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "9223372036854775807",
    "18446744073709551615",
    "99999999999",
    "abc",
    "",
];
const LABEL_SELECTORS: &[&str] = &[
    "fuzz=x",
    "fuzz in (x,y)",
    "fuzz notin (z)",
    "!fuzz",
    "app,fuzz!=y",
    "fuzz in (",
    "a==b==c",
    "=",
    "!!",
    "a=(b)",
    "x notin",
    "UPPER/bad=1",
    "a=b,,c=d",
];
const FIELD_SELECTORS: &[&str] = &[
    "metadata.name=a",
    "metadata.namespace=fuzz-a",
    "metadata.name!=b",
    "status.phase=Running",
    "spec.nodeName=",
    "bogus",
    "metadata.name==",
    "unknown.field=1",
    "metadata.name=a,metadata.name=b",
];

fn read_query(rng: &mut StdRng, query: &mut Query) {
    query.maybe(rng, 0.2, "labelSelector", LABEL_SELECTORS);
    query.maybe(rng, 0.1, "fieldSelector", FIELD_SELECTORS);
    query.maybe(rng, 0.1, "resourceVersion", RESOURCE_VERSIONS);
    query.maybe(
        rng,
        0.03,
        "resourceVersionMatch",
        &["NotOlderThan", "Exact", "bogus", ""],
    );
    query.maybe(rng, 0.03, "pretty", &["true", "1", "nope"]);
}

fn write_query(rng: &mut StdRng, query: &mut Query) {
    query.maybe(rng, 0.05, "dryRun", &["All", "bogus", ""]);
    query.maybe(rng, 0.08, "fieldManager", &["fuzz", "", "a-very-long-manager-name-that-goes-on-and-on-beyond-one-hundred-and-twenty-eight-characters-which-kube-rejects-as-invalid-input-xxxxxxxxx", "bad\u{7}"]);
    query.maybe(
        rng,
        0.04,
        "fieldValidation",
        &["Strict", "Warn", "Ignore", "bogus"],
    );
}

// ---- operations ----

fn create(rng: &mut StdRng) -> FuzzRequest {
    let (kind, namespace, name) = target(rng);
    let mut request = FuzzRequest::new(Method::POST, collection_path(kind, namespace.as_deref()));
    let (content_type, body) = object_body(rng, kind, namespace.as_deref(), &name);
    let mut query = Query::new();
    write_query(rng, &mut query);
    request.query = query.encode();
    request.with_body(content_type.as_deref(), body)
}

fn update(rng: &mut StdRng) -> FuzzRequest {
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

fn patch(rng: &mut StdRng) -> FuzzRequest {
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

fn get(rng: &mut StdRng) -> FuzzRequest {
    let (kind, namespace, name) = target(rng);
    let mut request = FuzzRequest::new(Method::GET, object_path(kind, namespace.as_deref(), &name));
    let mut query = Query::new();
    query.maybe(rng, 0.1, "resourceVersion", RESOURCE_VERSIONS);
    request.query = query.encode();
    request
}

fn list(rng: &mut StdRng) -> FuzzRequest {
    let kind = pick_kind(rng);
    // Cluster-wide lists of namespaced kinds too.
    let namespace = (kind.namespaced && rng.random_bool(0.7)).then(|| pick_namespace(rng));
    let mut request = FuzzRequest::new(Method::GET, collection_path(kind, namespace.as_deref()));
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

fn watch(rng: &mut StdRng) -> FuzzRequest {
    let kind = pick_kind(rng);
    let namespace = (kind.namespaced && rng.random_bool(0.7)).then(|| pick_namespace(rng));
    let mut request = FuzzRequest::new(Method::GET, collection_path(kind, namespace.as_deref()));
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

fn delete(rng: &mut StdRng) -> FuzzRequest {
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

fn delete_collection(rng: &mut StdRng) -> FuzzRequest {
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

fn subresource(rng: &mut StdRng) -> FuzzRequest {
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

fn discovery(rng: &mut StdRng) -> FuzzRequest {
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

fn unknown_path(rng: &mut StdRng) -> FuzzRequest {
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

fn odd_method(rng: &mut StdRng) -> FuzzRequest {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_a_function_of_seed_and_index() {
        for index in 0..200 {
            let a = request(7, index);
            let b = request(7, index);
            assert_eq!(
                (a.uri(), a.method, a.content_type, a.body),
                (b.uri(), b.method, b.content_type, b.body)
            );
        }
        let differ = (0..50)
            .filter(|i| request(7, *i).uri() != request(8, *i).uri())
            .count();
        assert!(differ > 25, "seeds 7 and 8 give mostly the same requests");
    }

    #[test]
    fn the_surface_is_covered() {
        let requests: Vec<FuzzRequest> = (0..20_000).map(|i| request(1, i)).collect();
        let has = |f: &dyn Fn(&FuzzRequest) -> bool| requests.iter().any(f);
        for method in [
            "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "FUZZ",
        ] {
            assert!(has(&|r| r.method.as_str() == method), "no {method}");
        }
        for content_type in [
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/json-patch+json",
            "application/apply-patch+yaml",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
        ] {
            assert!(
                has(&|r| r.content_type.as_deref() == Some(content_type)),
                "no {content_type}"
            );
        }
        assert!(has(&|r| r.watch), "no watch");
        assert!(
            has(&|r| r.body.len() > BODY_LIMIT),
            "no body above the limit"
        );
        assert!(
            has(&|r| r.body.len() > BODY_LIMIT - 8192 && r.body.len() < BODY_LIMIT),
            "no body just below the limit"
        );
        assert!(has(&|r| r.path.contains("/widgets")), "no custom resource");
        assert!(has(&|r| r.path.ends_with("/scale")), "no scale");
        assert!(has(&|r| r.path.ends_with("/finalize")), "no finalize");
        assert!(has(&|r| r.path.ends_with("/log")), "no log");
        assert!(
            has(&|r| r.query.contains("timeoutSeconds=9223372036854775807")),
            "no huge timeout"
        );
        assert!(
            has(&|r| r.body.windows(129).any(|w| w.iter().all(|b| *b == b'['))),
            "no deep body"
        );
        let valid_creates = requests
            .iter()
            .filter(|r| {
                r.method == Method::POST && r.content_type.as_deref() == Some("application/json")
            })
            .count();
        assert!(
            valid_creates > requests.len() / 10,
            "too few creates: {valid_creates}"
        );
    }
}
