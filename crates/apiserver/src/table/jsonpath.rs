//! kube's JSONPath dialect on the `jsonpath-rust` crate (RFC 9535).
//!
//! CRD `additionalPrinterColumns` and the built-in column table write paths the
//! way kubectl and client-go do: `.spec.replicas`, `{.spec.replicas}`,
//! `spec.replicas`, dotted keys escaped as `app\.kubernetes\.io/name`, and
//! keys with `-` or `/` written bare. RFC 9535 wants a `$` root and allows only
//! identifier characters in a `.name` shorthand, so every dotted key is
//! rewritten as a bracketed name (`['key']`); brackets, wildcards, slices,
//! unions and filters are passed through unchanged (kube-client does the same
//! `$` translation for kubeconfig paths).
//!
//! Knows nothing of tables: a path in, the matches out.

use jsonpath_rust::parser::model::JpQuery;
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use serde_json::Value;

/// A parsed path; one that does not parse matches nothing, as kube prints an
/// empty cell for a column whose path it cannot evaluate.
pub(super) struct JsonPath(Option<JpQuery>);

impl JsonPath {
    pub(super) fn parse(kube_path: &str) -> JsonPath {
        JsonPath(parse_json_path(&to_rfc9535(kube_path)).ok())
    }

    /// Every match, in document order.
    pub(super) fn matches<'a>(&self, obj: &'a Value) -> Vec<&'a Value> {
        let Some(query) = &self.0 else {
            return Vec::new();
        };
        js_path_process(query, obj)
            .map(|found| found.into_iter().map(|r| r.val()).collect())
            .unwrap_or_default()
    }

    /// The first match that is not JSON null.
    pub(super) fn first<'a>(&self, obj: &'a Value) -> Option<&'a Value> {
        self.matches(obj).into_iter().find(|v| !v.is_null())
    }
}

/// Rewrites a kube path as an RFC 9535 query rooted at `$`.
fn to_rfc9535(kube_path: &str) -> String {
    let trimmed = kube_path.trim();
    let unwrapped = trimmed
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(trimmed);
    let relative = unwrapped.strip_prefix('$').unwrap_or(unwrapped);
    let chars: Vec<char> = relative.chars().collect();
    let mut out = String::from("$");
    if chars == ['.'] {
        return out;
    }
    let mut i = 0;
    if chars.first().is_some_and(|c| *c != '.' && *c != '[') {
        i = push_name(&chars, 0, &mut out);
    }
    while i < chars.len() {
        match chars[i] {
            '[' => i = push_bracket(&chars, i, &mut out),
            '.' => {
                let descendant = chars.get(i + 1) == Some(&'.');
                i += if descendant { 2 } else { 1 };
                let names_key = chars.get(i).is_some_and(|c| *c != '*' && *c != '[');
                if descendant {
                    out.push_str("..");
                } else if !names_key {
                    out.push('.');
                }
                if names_key {
                    i = push_name(&chars, i, &mut out);
                }
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    out
}

/// Reads a key up to the next unescaped `.` or `[` and writes it as `['key']`.
fn push_name(chars: &[char], start: usize, out: &mut String) -> usize {
    let mut name = String::new();
    let mut i = start;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' if chars.get(i + 1) == Some(&'.') => {
                name.push('.');
                i += 2;
                continue;
            }
            '.' | '[' => break,
            _ => name.push(c),
        }
        i += 1;
    }
    out.push_str("['");
    for c in name.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push_str("']");
    i
}

/// Copies a bracketed selector through its closing `]`, skipping quoted text
/// and nested brackets; an unclosed one is copied whole (and fails to parse).
fn push_bracket(chars: &[char], open: usize, out: &mut String) -> usize {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    let mut i = open;
    while let Some(&c) = chars.get(i) {
        out.push(c);
        i += 1;
        match (quote, c) {
            (Some(_), '\\') => {
                if let Some(&escaped) = chars.get(i) {
                    out.push(escaped);
                    i += 1;
                }
            }
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            (None, _) => {}
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::test_support::{ago, widget};
    use serde_json::json;

    fn jp(obj: &Value, path: &str) -> Vec<Value> {
        JsonPath::parse(path)
            .matches(obj)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn kube_paths_become_rooted_bracketed_queries() {
        assert_eq!(to_rfc9535(".spec.x"), "$['spec']['x']");
        assert_eq!(to_rfc9535("{.spec.x}"), "$['spec']['x']");
        assert_eq!(to_rfc9535("spec.x"), "$['spec']['x']");
        assert_eq!(
            to_rfc9535(".metadata.labels.app\\.kubernetes\\.io/name"),
            "$['metadata']['labels']['app.kubernetes.io/name']"
        );
        assert_eq!(to_rfc9535("..qty"), "$..['qty']");
        assert_eq!(
            to_rfc9535(".a[?(@.type==\"x]\")].b"),
            "$['a'][?(@.type==\"x]\")]['b']"
        );
        assert_eq!(to_rfc9535(".it's"), "$['it\\'s']");
    }

    /// Each path's matches on the widget, as one JSON list.
    fn assert_matches(cases: &[(&str, Value)]) {
        let w = widget();
        for (path, want) in cases {
            assert_eq!(&Value::Array(jp(&w, path)), want, "{path}");
        }
    }

    #[test]
    fn json_path_fields_and_indices() {
        let w = widget();
        assert_matches(&[
            (".spec.replicas", json!([3])),
            ("{.spec.replicas}", json!([3])),
            ("$.spec.replicas", json!([3])),
            ("spec.replicas", json!([3])),
            (".metadata.creationTimestamp", json!([ago(3 * 3600)])),
            (".spec.items[0].name", json!(["a"])),
            (".spec.items[-1].name", json!(["c"])),
            (".spec.items[0,2].name", json!(["a", "c"])),
            (".spec.items[1:].name", json!(["b", "c"])),
            (".spec.items[:2].qty", json!([1, 2])),
            (".spec.items[0:3:2].name", json!(["a", "c"])),
            (".spec.items[*].name", json!(["a", "b", "c"])),
            (".spec.tags[*]", json!(["x", "y"])),
            (".spec.selector.*", json!(["front"])),
            (".spec['size']", json!(["large"])),
            (
                ".metadata.labels['app.kubernetes.io/name']",
                json!(["shop"]),
            ),
            (
                ".metadata.labels.app\\.kubernetes\\.io/name",
                json!(["shop"]),
            ),
            ("..qty", json!([1, 2, 3])),
            (".", json!([w])),
        ]);
    }

    #[test]
    fn json_path_filters() {
        assert_matches(&[
            (
                ".status.conditions[?(@.type==\"Ready\")].status",
                json!(["True"]),
            ),
            (
                ".status.conditions[?(@.type == 'Synced')].status",
                json!(["False"]),
            ),
            (
                ".status.conditions[?(@.type!=\"Ready\")].type",
                json!(["Synced"]),
            ),
            (".spec.items[?(@.qty>1)].name", json!(["b", "c"])),
            (".spec.items[?(@.qty<=2)].name", json!(["a", "b"])),
            (".spec.items[?(@.qty==3)].name", json!(["c"])),
            (".spec.items[?(@.nope)].name", json!([])),
            (
                ".status.conditions[?(@.type==\"Missing\")].status",
                json!([]),
            ),
        ]);
        assert_eq!(jp(&widget(), ".spec.items[?(@.qty)].name").len(), 3);
    }

    #[test]
    fn json_path_unresolved_and_invalid() {
        let w = widget();
        for path in [
            ".spec.nothing",
            ".spec.items[7].name",
            ".spec.items[-9]",
            ".spec.replicas.deeper",
            ".spec.items.name",
            ".spec[",
            ".spec.items[abc]",
            ".spec.items[?(@.qty>)]",
            ".spec..",
            "",
            "]",
        ] {
            if path.is_empty() {
                // Empty path is the root, like "{}".
                assert_eq!(jp(&w, path), std::slice::from_ref(&w));
                continue;
            }
            assert!(jp(&w, path).is_empty(), "{path}");
        }
    }
}
