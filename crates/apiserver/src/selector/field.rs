//! Field selectors: the grammar of `k8s.io/apimachinery/pkg/fields`, restricted to the
//! fields a kind supports, matched against an object's JSON.

use std::fmt;

use serde_json::Value;

use super::SelectorError;

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    field: String,
    negated: bool,
    value: String,
}

/// A parsed field selector: a conjunction of `field=value` / `field!=value` terms.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    reqs: Vec<FieldRequirement>,
}

/// Fields every kind supports (kube-apiserver's default conversion).
const ALWAYS_ALLOWED_FIELDS: [&str; 2] = ["metadata.name", "metadata.namespace"];

fn split_terms(s: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], negated, rhs));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, SelectorError> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => {
                    return Err(SelectorError::new(format!(
                        "invalid field selector: invalid escape sequence: \\{e}"
                    )));
                }
                None => {
                    return Err(SelectorError::new(
                        "invalid field selector: invalid escape sequence: \\",
                    ));
                }
            },
            ',' | '=' => {
                return Err(SelectorError::new(format!(
                    "invalid field selector: unescaped character in value: {c}"
                )));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl FieldSelector {
    /// Parse a field selector. `allowed` lists the field paths the kind supports;
    /// `metadata.name` and `metadata.namespace` are always accepted.
    /// Whitespace around field names is ignored; values are taken verbatim.
    pub fn parse(s: &str, allowed: &[&str]) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        if s.is_empty() {
            return Ok(Self::default());
        }
        for term in split_terms(s) {
            if term.trim().is_empty() {
                continue;
            }
            let Some((lhs, negated, rhs)) = split_term(term) else {
                return Err(SelectorError::new(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            let field = lhs.trim();
            let value = unescape_value(rhs)?;
            if !allowed.contains(&field) && !ALWAYS_ALLOWED_FIELDS.contains(&field) {
                return Err(SelectorError::new(format!(
                    "field label not supported: {field}"
                )));
            }
            reqs.push(FieldRequirement {
                field: field.to_string(),
                negated,
                value,
            });
        }
        reqs.sort_by(|a, b| a.field.cmp(&b.field));
        Ok(FieldSelector { reqs })
    }

    /// Whether the object matches. Missing or null fields compare as `""`;
    /// numbers and booleans compare by their JSON string form.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|r| {
            let actual = resolve_field(obj, &r.field);
            (actual == r.value) != r.negated
        })
    }

    /// True when the selector has no terms (selects everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The same selector with each field renamed by `rename` (to the path it has in the
    /// stored object).
    pub fn map_fields(mut self, rename: impl Fn(&str) -> String) -> Self {
        for req in &mut self.reqs {
            req.field = rename(&req.field);
        }
        self.reqs.sort_by(|a, b| a.field.cmp(&b.field));
        self
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if r.negated { "!=" } else { "=" };
            write!(f, "{}{}{}", r.field, op, escape_value(&r.value))?;
        }
        Ok(())
    }
}

/// Fields kube-apiserver selects on by their Go value, which an unset field still has:
/// `spec.unschedulable=false` matches a Node without the field.
const ZERO_VALUES: &[(&str, &str)] = &[
    ("spec.unschedulable", "false"),
    ("spec.hostNetwork", "false"),
    ("status.replicas", "0"),
];

fn zero_value(path: &str) -> String {
    ZERO_VALUES
        .iter()
        .find(|(field, _)| *field == path)
        .map(|(_, zero)| zero.to_string())
        .unwrap_or_default()
}

fn resolve_field(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        let next = match cur {
            Value::Object(m) => m.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        match next {
            Some(v) => cur = v,
            None => return zero_value(path),
        }
    }
    match cur {
        Value::Null => zero_value(path),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fsel(s: &str) -> FieldSelector {
        match FieldSelector::parse(s, &["spec.nodeName", "status.phase", "spec.replicas"]) {
            Ok(f) => f,
            Err(e) => panic!("{s:?}: {e}"),
        }
    }

    #[test]
    fn field_selector_basic() {
        let pod = json!({
            "metadata": {"name": "p1", "namespace": "default"},
            "spec": {"nodeName": "n1", "replicas": 3},
            "status": {"phase": "Running"}
        });
        assert!(fsel("").is_empty());
        assert!(fsel("").matches(&pod));
        assert!(fsel("metadata.name=p1").matches(&pod));
        assert!(fsel("metadata.name==p1").matches(&pod));
        assert!(!fsel("metadata.name!=p1").matches(&pod));
        assert!(fsel("status.phase!=Pending,spec.nodeName=n1").matches(&pod));
        assert!(!fsel("status.phase=Running,spec.nodeName=n2").matches(&pod));
        assert!(fsel("spec.replicas=3").matches(&pod));
        // missing field compares as ""
        let bare = json!({"metadata": {"name": "x"}});
        assert!(fsel("spec.nodeName=").matches(&bare));
        assert!(fsel("spec.nodeName!=n1").matches(&bare));
        assert!(fsel("spec.nodeName=").matches(&json!({"spec": {"nodeName": null}})));
        assert!(fsel(" status.phase=Running").matches(&pod));
    }

    #[test]
    fn field_selector_errors() {
        let e = FieldSelector::parse("spec.foo=bar", &["spec.nodeName"]);
        assert_eq!(
            e.err(),
            Some(SelectorError("field label not supported: spec.foo".into()))
        );
        assert!(FieldSelector::parse("metadata.namespace=x", &[]).is_ok());
        assert!(FieldSelector::parse("spec.nodeName", &["spec.nodeName"]).is_err());
        assert!(FieldSelector::parse("spec.nodeName=a=b", &["spec.nodeName"]).is_err());
        assert!(FieldSelector::parse("spec.nodeName=a\\x", &["spec.nodeName"]).is_err());
        assert!(FieldSelector::parse("spec.nodeName=a\\", &["spec.nodeName"]).is_err());
    }

    #[test]
    fn field_selector_escapes() {
        let obj = json!({"metadata": {"name": "a,b=c\\d"}});
        let f = fsel("metadata.name=a\\,b\\=c\\\\d");
        assert!(f.matches(&obj));
        assert_eq!(f.reqs[0].value, "a,b=c\\d");
        assert_eq!(f.to_string(), "metadata.name=a\\,b\\=c\\\\d");
        let f2 = fsel("metadata.name=x\\,y,status.phase=Running");
        assert_eq!(f2.reqs[0].value, "x,y");
        assert_eq!(f2.reqs.len(), 2);
    }
}
