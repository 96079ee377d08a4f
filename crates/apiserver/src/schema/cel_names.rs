//! How a rule names an object's properties: kube's escaping of property names that are
//! no CEL identifiers (`apiserver/pkg/cel/escaping.go`). A property named like a CEL
//! reserved word is `__namespace__` in a rule (Gateway API's `parentRefs` rules read
//! `p.__namespace__`); `__`, `.`, `-` and `/` in a name become `__underscores__`,
//! `__dot__`, `__dash__` and `__slash__`; a name starting with a digit or holding any
//! other character cannot be named at all. Map keys are not escaped.

/// CEL's reserved words (its lexer's RESERVED symbols), which a property may be named.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The replacements, the sequence `__` first (it is matched before single characters).
const REPLACEMENTS: [(&str, &str); 4] = [
    ("__", "__underscores__"),
    (".", "__dot__"),
    ("-", "__dash__"),
    ("/", "__slash__"),
];

fn reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// The name a rule uses for property `name`, or `None` when a rule cannot name it.
pub(super) fn escape(name: &str) -> Option<String> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if reserved(name) {
        return Some(format!("__{name}__"));
    }
    let mut escaped = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        match REPLACEMENTS.iter().find(|(from, _)| rest.starts_with(from)) {
            Some((from, to)) => {
                escaped.push_str(to);
                rest = &rest[from.len()..];
            }
            None if c.is_ascii_alphanumeric() || c == '_' => {
                escaped.push(c);
                rest = &rest[1..];
            }
            None => return None,
        }
    }
    Some(escaped)
}

/// The property a rule's name `field` stands for (the inverse of [`escape`]).
pub(super) fn unescape(field: &str) -> String {
    if let Some(inner) = field.strip_prefix("__").and_then(|f| f.strip_suffix("__"))
        && reserved(inner)
    {
        return inner.to_string();
    }
    let mut name = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(c) = rest.chars().next() {
        match REPLACEMENTS.iter().find(|(_, to)| rest.starts_with(to)) {
            Some((from, to)) => {
                name.push_str(from);
                rest = &rest[to.len()..];
            }
            None => {
                name.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube's escaping cases.
    #[test]
    fn names_are_escaped_as_kube_escapes_them() {
        for (name, escaped) in [
            ("namespace", Some("__namespace__")),
            ("if", Some("__if__")),
            ("a.b", Some("a__dot__b")),
            ("a-b", Some("a__dash__b")),
            ("a/b", Some("a__slash__b")),
            ("a__b", Some("a__underscores__b")),
            ("_a", Some("_a")),
            ("a___b", Some("a__underscores___b")),
            (
                "x-kubernetes.io/name",
                Some("x__dash__kubernetes__dot__io__slash__name"),
            ),
            ("1a", None),
            ("a@b", None),
            ("", None),
        ] {
            assert_eq!(escape(name).as_deref(), escaped, "{name}");
            if let Some(escaped) = escaped {
                assert_eq!(unescape(escaped), name, "{escaped}");
            }
        }
    }
}
