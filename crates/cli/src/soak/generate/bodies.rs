//! Request bodies: valid objects, encoded as JSON or YAML, and hostile ones — mutated,
//! deep, huge, broken, YAML alias bombs, bogus content types.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};

use super::targets::Kind;
use super::{BODY_LIMIT, small_text};

pub(super) fn valid_object(
    rng: &mut StdRng,
    kind: &Kind,
    namespace: Option<&str>,
    name: &str,
) -> Value {
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
pub(super) fn object_body(
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
pub(super) fn encode(rng: &mut StdRng, value: &Value) -> (Option<String>, Vec<u8>) {
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

pub(super) fn to_json(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

pub(super) fn to_yaml(value: &Value) -> Vec<u8> {
    serde_yaml::to_string(value)
        .map(String::into_bytes)
        .unwrap_or_else(|_| to_json(value))
}

/// Wrong types and missing fields, in place.
pub(super) fn mutate_value(rng: &mut StdRng, object: &mut Value) {
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
pub(super) fn hostile_body(rng: &mut StdRng, object: Value) -> (Option<String>, Vec<u8>) {
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

/// Append `1` nested `depth` times between `open` and `close`.
fn push_nested_one(body: &mut Vec<u8>, open: &str, close: &str, depth: usize) {
    body.extend_from_slice(open.repeat(depth).as_bytes());
    body.push(b'1');
    body.extend_from_slice(close.repeat(depth).as_bytes());
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
            push_nested_one(&mut body, open, close, depth);
            body.push(b'}');
            (Some("application/json".into()), body)
        }
        1 => {
            let (open, close) = if arrays { ("[", "]") } else { ("{a: ", "}") };
            let mut body = to_yaml(&base);
            body.extend_from_slice(format!("{field}: ").as_bytes());
            push_nested_one(&mut body, open, close, depth);
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

pub(super) fn bogus_content_type(rng: &mut StdRng) -> String {
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
