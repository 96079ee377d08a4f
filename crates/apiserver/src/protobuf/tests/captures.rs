//! Request bodies captured from kubectl v1.32.4 (`kubectl ... -v=9`, or a recording HTTP
//! server), byte for byte, and the JSON each decodes to: the end-to-end check of every
//! mapping on what the real client sends. The captures are data, in `captures.json`
//! (bodies in hex).

use serde_json::Value;

use super::decode_ok;

const CAPTURES: &str = include_str!("captures.json");

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn kubectl_captures_decode() {
    let captures: Vec<Value> = serde_json::from_str(CAPTURES).expect("captures.json parses");
    assert_eq!(captures.len(), 25);
    for capture in &captures {
        let body = unhex(capture["body"].as_str().expect("body"));
        assert_eq!(
            decode_ok(&body),
            capture["decodes_to"],
            "{}",
            capture["kubectl"]
        );
    }
}
