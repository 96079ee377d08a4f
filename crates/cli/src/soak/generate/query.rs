//! Query parameters: resourceVersions, timeouts, selectors and the rest, valid and not.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

use super::targets::encode_segment;

pub(super) struct Query(Vec<(String, String)>);

impl Query {
    pub(super) fn new() -> Query {
        Query(Vec::new())
    }
    pub(super) fn add(&mut self, key: &str, value: impl Into<String>) {
        self.0.push((key.to_string(), value.into()));
    }
    pub(super) fn maybe(&mut self, rng: &mut StdRng, p: f64, key: &str, values: &[&str]) {
        if rng.random_bool(p) {
            self.add(key, *values.choose(rng).unwrap_or(&""));
        }
    }
    pub(super) fn encode(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{}={}", encode_segment(k), encode_segment(v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

pub(super) const RESOURCE_VERSIONS: &[&str] = &[
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
pub(super) const TIMEOUTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "9223372036854775807",
    "18446744073709551615",
    "99999999999",
    "abc",
    "",
];
pub(super) const LABEL_SELECTORS: &[&str] = &[
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
pub(super) const FIELD_SELECTORS: &[&str] = &[
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

pub(super) fn read_query(rng: &mut StdRng, query: &mut Query) {
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

pub(super) fn write_query(rng: &mut StdRng, query: &mut Query) {
    query.maybe(rng, 0.05, "dryRun", &["All", "bogus", ""]);
    query.maybe(rng, 0.08, "fieldManager", &["fuzz", "", "a-very-long-manager-name-that-goes-on-and-on-beyond-one-hundred-and-twenty-eight-characters-which-kube-rejects-as-invalid-input-xxxxxxxxx", "bad\u{7}"]);
    query.maybe(
        rng,
        0.04,
        "fieldValidation",
        &["Strict", "Warn", "Ignore", "bogus"],
    );
}
