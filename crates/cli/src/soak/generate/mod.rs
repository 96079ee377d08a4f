//! Request generation for `steady soak fuzz`: request number `i` of seed `s` is a pure
//! function of `(s, i)`, so a run is reproducible whatever the concurrency, and one
//! request can be replayed alone (`--only i`).
//!
//! Most requests are valid (creates, updates and patches of a small pool of names in a few
//! namespaces, so state builds up and later requests hit existing objects); the rest are
//! hostile: odd paths and names, methods, content types, mutated, deep, huge or broken
//! bodies, garbage query parameters.
//!
//! Split by what is generated: [`targets`] (kinds, namespaces, names, paths), [`bodies`],
//! [`query`] parameters and the [`operations`] that combine them; here the request type
//! and the choice of operation.

mod bodies;
mod operations;
mod query;
mod targets;

use http::Method;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use bodies::bogus_content_type;
use operations::{
    create, delete, delete_collection, discovery, get, list, odd_method, patch, subresource,
    unknown_path, update, watch,
};
pub use targets::{encode_segment, widget_crd};

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
