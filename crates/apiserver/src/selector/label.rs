//! Label selectors: the grammar of `k8s.io/apimachinery/pkg/labels`, parsed from a query
//! string or from a `metav1.LabelSelector`, matched against stored label sets.

use std::borrow::Cow;
use std::fmt;

use serde_json::{Map, Value};

use super::{SelectorError, quote};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LabelOp {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: LabelOp,
    /// Sorted, de-duplicated values. Empty for `Exists` / `DoesNotExist`.
    values: Vec<String>,
}

impl Requirement {
    fn new(key: String, op: LabelOp, values: Vec<String>) -> Result<Self, SelectorError> {
        validate_label_key(&key)?;
        let mut values = values;
        match op {
            LabelOp::In | LabelOp::NotIn => {
                if values.is_empty() {
                    return Err(SelectorError::new(
                        "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            LabelOp::Equals | LabelOp::NotEquals => {
                if values.len() != 1 {
                    return Err(SelectorError::new(format!(
                        "values: Invalid value: {}: exact-match compatibility requires one single value",
                        values.len()
                    )));
                }
            }
            LabelOp::Exists | LabelOp::DoesNotExist => {
                if !values.is_empty() {
                    return Err(SelectorError::new(
                        "values: Invalid value: values set must be empty for exists and does not exist",
                    ));
                }
            }
            LabelOp::GreaterThan | LabelOp::LessThan => {
                if values.len() != 1 {
                    return Err(SelectorError::new(
                        "values: Invalid value: for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        return Err(SelectorError::new(format!(
                            "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                            quote(v)
                        )));
                    }
                }
            }
        }
        if !matches!(op, LabelOp::GreaterThan | LabelOp::LessThan) {
            for (i, v) in values.iter().enumerate() {
                validate_label_value(&key, i, v)?;
            }
        }
        values.sort();
        values.dedup();
        Ok(Requirement { key, op, values })
    }

    fn has_value(&self, value: &str) -> bool {
        self.values
            .binary_search_by(|v| v.as_str().cmp(value))
            .is_ok()
    }

    fn matches(&self, labels: &impl LabelSource) -> bool {
        let actual = labels.label(&self.key);
        match self.op {
            LabelOp::Equals | LabelOp::In => actual.is_some_and(|a| self.has_value(&a)),
            LabelOp::NotEquals | LabelOp::NotIn => actual.is_none_or(|a| !self.has_value(&a)),
            LabelOp::Exists => actual.is_some(),
            LabelOp::DoesNotExist => actual.is_none(),
            LabelOp::GreaterThan | LabelOp::LessThan => {
                let Some(a) = actual.and_then(|a| a.parse::<i64>().ok()) else {
                    return false;
                };
                let Some(want) = self.values.first().and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                if self.op == LabelOp::GreaterThan {
                    a > want
                } else {
                    a < want
                }
            }
        }
    }
}

/// Where a selector reads labels from: a decoded object's `metadata.labels`, or the label
/// set the store decoded when the object was written.
pub trait LabelSource {
    fn label(&self, key: &str) -> Option<Cow<'_, str>>;
}

impl LabelSource for Option<&Map<String, Value>> {
    fn label(&self, key: &str) -> Option<Cow<'_, str>> {
        self.and_then(|l| l.get(key)).map(|v| match v {
            Value::String(s) => Cow::Borrowed(s.as_str()),
            Value::Null => Cow::Borrowed(""),
            other => Cow::Owned(other.to_string()),
        })
    }
}

impl<T: LabelSource + ?Sized> LabelSource for &T {
    fn label(&self, key: &str) -> Option<Cow<'_, str>> {
        (**self).label(key)
    }
}

impl LabelSource for steady_store::Labels {
    fn label(&self, key: &str) -> Option<Cow<'_, str>> {
        self.get(key).map(Cow::Borrowed)
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = self.values.first().map(String::as_str).unwrap_or("");
        match self.op {
            LabelOp::Equals => write!(f, "{}={}", self.key, first),
            LabelOp::NotEquals => write!(f, "{}!={}", self.key, first),
            LabelOp::In => write!(f, "{} in ({})", self.key, self.values.join(",")),
            LabelOp::NotIn => write!(f, "{} notin ({})", self.key, self.values.join(",")),
            LabelOp::Exists => write!(f, "{}", self.key),
            LabelOp::DoesNotExist => write!(f, "!{}", self.key),
            LabelOp::GreaterThan => write!(f, "{}>{}", self.key, first),
            LabelOp::LessThan => write!(f, "{}<{}", self.key, first),
        }
    }
}

fn validate_label_key(key: &str) -> Result<(), SelectorError> {
    valid_unless("key", key, crate::validation::qualified_name_problems(key))
}

fn validate_label_value(key: &str, idx: usize, v: &str) -> Result<(), SelectorError> {
    let field = format!("values[{idx}][{key}]");
    valid_unless(&field, v, crate::validation::label_value_problems(v))
}

/// `Ok` unless there are `problems` with `value`, which kube-apiserver reports as an
/// invalid value at `field`.
fn valid_unless(field: &str, value: &str, problems: Vec<String>) -> Result<(), SelectorError> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(SelectorError::new(format!(
        "{field}: Invalid value: {}: {}",
        quote(value),
        problems.join(", ")
    )))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Bang,
    Gt,
    Lt,
    OpenParen,
    CloseParen,
    Comma,
    End,
}

impl Tok {
    fn literal(&self) -> &str {
        match self {
            Tok::Ident(s) => s,
            Tok::In => "in",
            Tok::NotIn => "notin",
            Tok::Equals => "=",
            Tok::DoubleEquals => "==",
            Tok::NotEquals => "!=",
            Tok::Bang => "!",
            Tok::Gt => ">",
            Tok::Lt => "<",
            Tok::OpenParen => "(",
            Tok::CloseParen => ")",
            Tok::Comma => ",",
            Tok::End => "",
        }
    }

    /// In a value context the keywords are plain identifiers.
    fn as_value_ident(&self) -> Option<&str> {
        match self {
            Tok::Ident(s) => Some(s),
            Tok::In => Some("in"),
            Tok::NotIn => Some("notin"),
            _ => None,
        }
    }
}

fn is_special(c: char) -> bool {
    c.is_whitespace() || matches!(c, '!' | '=' | ',' | '(' | ')' | '<' | '>')
}

fn lex(s: &str) -> Vec<Tok> {
    let mut toks = Vec::new();
    let mut chars = s.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let tok = match c {
            '(' => {
                chars.next();
                Tok::OpenParen
            }
            ')' => {
                chars.next();
                Tok::CloseParen
            }
            ',' => {
                chars.next();
                Tok::Comma
            }
            '<' => {
                chars.next();
                Tok::Lt
            }
            '>' => {
                chars.next();
                Tok::Gt
            }
            '=' | '!' => {
                chars.next();
                let followed_by_eq = matches!(chars.peek(), Some(&(_, '=')));
                if followed_by_eq {
                    chars.next();
                    if c == '=' {
                        Tok::DoubleEquals
                    } else {
                        Tok::NotEquals
                    }
                } else if c == '=' {
                    Tok::Equals
                } else {
                    Tok::Bang
                }
            }
            _ => {
                let mut end = s.len();
                while let Some(&(j, d)) = chars.peek() {
                    if is_special(d) {
                        end = j;
                        break;
                    }
                    chars.next();
                }
                let word = &s[i..end];
                match word {
                    "in" => Tok::In,
                    "notin" => Tok::NotIn,
                    _ => Tok::Ident(word.to_string()),
                }
            }
        };
        toks.push(tok);
    }
    toks.push(Tok::End);
    toks
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.toks.get(self.pos).unwrap_or(&Tok::End)
    }

    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            match self.peek() {
                Tok::Ident(_) | Tok::Bang => {
                    let r = self.parse_requirement().map_err(|e| {
                        SelectorError(format!("unable to parse requirement: {}", e.0))
                    })?;
                    reqs.push(r);
                    match self.next() {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => match self.peek() {
                            Tok::Ident(_) | Tok::Bang => {}
                            t => {
                                return Err(SelectorError::new(format!(
                                    "found '{}', expected: identifier after ','",
                                    t.literal()
                                )));
                            }
                        },
                        t => {
                            return Err(SelectorError::new(format!(
                                "found '{}', expected: ',' or 'end of string'",
                                t.literal()
                            )));
                        }
                    }
                }
                Tok::End => return Ok(reqs),
                t => {
                    return Err(SelectorError::new(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        t.literal()
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, SelectorError> {
        let negated = if *self.peek() == Tok::Bang {
            self.next();
            true
        } else {
            false
        };
        let key = match self.next() {
            Tok::Ident(k) => k,
            t => {
                return Err(SelectorError::new(format!(
                    "found '{}', expected: identifier",
                    t.literal()
                )));
            }
        };
        validate_label_key(&key)?;
        match self.peek() {
            Tok::End | Tok::Comma => {
                let op = if negated {
                    LabelOp::DoesNotExist
                } else {
                    LabelOp::Exists
                };
                return Requirement::new(key, op, Vec::new());
            }
            t if negated => {
                return Err(SelectorError::new(format!(
                    "found '{}', expected: ',' or 'end of string'",
                    t.literal()
                )));
            }
            _ => {}
        }
        let op = match self.next() {
            Tok::Equals | Tok::DoubleEquals => LabelOp::Equals,
            Tok::NotEquals => LabelOp::NotEquals,
            Tok::In => LabelOp::In,
            Tok::NotIn => LabelOp::NotIn,
            Tok::Gt => LabelOp::GreaterThan,
            Tok::Lt => LabelOp::LessThan,
            t => {
                return Err(SelectorError::new(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    t.literal()
                )));
            }
        };
        let values = match op {
            LabelOp::In | LabelOp::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(key, op, values)
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        match self.peek() {
            Tok::End | Tok::Comma => return Ok(vec![String::new()]),
            _ => {}
        }
        let t = self.next();
        match t.as_value_ident() {
            Some(v) => Ok(vec![v.to_string()]),
            None => Err(SelectorError::new(format!(
                "found '{}', expected: identifier",
                t.literal()
            ))),
        }
    }

    fn parse_values(&mut self) -> Result<Vec<String>, SelectorError> {
        let t = self.next();
        if t != Tok::OpenParen {
            return Err(SelectorError::new(format!(
                "found '{}' expected: '('",
                t.literal()
            )));
        }
        match self.peek() {
            Tok::CloseParen => {
                self.next();
                Ok(vec![String::new()])
            }
            t if t.as_value_ident().is_some() || *t == Tok::Comma => {
                let values = self.parse_identifiers_list()?;
                let t = self.next();
                if t != Tok::CloseParen {
                    return Err(SelectorError::new(format!(
                        "found '{}', expected: ')'",
                        t.literal()
                    )));
                }
                Ok(values)
            }
            t => Err(SelectorError::new(format!(
                "found '{}', expected: ',', ')' or identifier",
                t.literal()
            ))),
        }
    }

    /// Parses `a, b, c` up to (not including) the closing parenthesis.
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, SelectorError> {
        let mut values: Vec<String> = Vec::new();
        loop {
            let t = self.next();
            if let Some(v) = t.as_value_ident() {
                values.push(v.to_string());
                match self.peek() {
                    Tok::Comma => continue,
                    Tok::CloseParen => return Ok(values),
                    t => {
                        return Err(SelectorError::new(format!(
                            "found '{}', expected: ',' or ')'",
                            t.literal()
                        )));
                    }
                }
            } else if t == Tok::Comma {
                if values.is_empty() {
                    values.push(String::new());
                }
                match self.peek() {
                    Tok::CloseParen => {
                        values.push(String::new());
                        return Ok(values);
                    }
                    Tok::Comma => {
                        self.next();
                        values.push(String::new());
                    }
                    _ => {}
                }
            } else {
                return Err(SelectorError::new(format!(
                    "found '{}', expected: ',', or identifier",
                    t.literal()
                )));
            }
        }
    }
}

/// A parsed label selector: a conjunction of requirements.
#[derive(Debug, Clone, Default)]
pub struct LabelSelector {
    /// Sorted by key (stable), as Kubernetes does.
    reqs: Vec<Requirement>,
}

impl LabelSelector {
    /// Parse the string form (`?labelSelector=`). The empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let toks = lex(s);
        let mut p = Parser { toks, pos: 0 };
        let reqs = p.parse()?;
        Ok(Self::from_requirements(reqs))
    }

    fn from_requirements(mut reqs: Vec<Requirement>) -> Self {
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector { reqs }
    }

    /// Whether an object with the given `metadata.labels` is selected.
    /// `k!=v` and `k notin (...)` match objects without the label.
    pub fn matches(&self, labels: impl LabelSource) -> bool {
        self.reqs.iter().all(|r| r.matches(&labels))
    }

    /// True when the selector has no requirements (selects everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Build from a `metav1.LabelSelector` JSON object
    /// (`{matchLabels: {..}, matchExpressions: [{key, operator, values}]}`).
    ///
    /// `null` and `{}` both yield the empty selector (which selects everything).
    pub fn from_label_selector_json(v: &Value) -> Result<Self, SelectorError> {
        let obj = match v {
            Value::Null => return Ok(Self::default()),
            Value::Object(o) => o,
            _ => {
                return Err(SelectorError::new(
                    "invalid label selector: expected an object",
                ));
            }
        };
        let mut reqs = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, val) in m {
                    let Value::String(val) = val else {
                        return Err(SelectorError::new(format!(
                            "invalid label selector: matchLabels[{k}] must be a string"
                        )));
                    };
                    reqs.push(Requirement::new(
                        k.clone(),
                        LabelOp::Equals,
                        vec![val.clone()],
                    )?);
                }
            }
            Some(_) => {
                return Err(SelectorError::new(
                    "invalid label selector: matchLabels must be an object",
                ));
            }
        }
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for (i, e) in exprs.iter().enumerate() {
                    reqs.push(requirement_from_expression(i, e)?);
                }
            }
            Some(_) => {
                return Err(SelectorError::new(
                    "invalid label selector: matchExpressions must be an array",
                ));
            }
        }
        Ok(Self::from_requirements(reqs))
    }
}

fn requirement_from_expression(i: usize, e: &Value) -> Result<Requirement, SelectorError> {
    let key = e
        .get("key")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            SelectorError::new(format!(
                "invalid label selector: matchExpressions[{i}].key must be a string"
            ))
        })?
        .to_string();
    let operator = e.get("operator").and_then(Value::as_str).unwrap_or("");
    let values: Vec<String> = match e.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(vs)) => {
            let mut out = Vec::with_capacity(vs.len());
            for v in vs {
                let Value::String(s) = v else {
                    return Err(SelectorError::new(format!(
                        "invalid label selector: matchExpressions[{i}].values must be strings"
                    )));
                };
                out.push(s.clone());
            }
            out
        }
        Some(_) => {
            return Err(SelectorError::new(format!(
                "invalid label selector: matchExpressions[{i}].values must be an array"
            )));
        }
    };
    let op = match operator {
        "In" => LabelOp::In,
        "NotIn" => LabelOp::NotIn,
        "Exists" => LabelOp::Exists,
        "DoesNotExist" => LabelOp::DoesNotExist,
        other => {
            return Err(SelectorError::new(format!(
                "{} is not a valid label selector operator",
                quote(other)
            )));
        }
    };
    Requirement::new(key, op, values)
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels_of(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn sel(s: &str) -> LabelSelector {
        match LabelSelector::parse(s) {
            Ok(sel) => sel,
            Err(e) => panic!("parse {s:?}: {e}"),
        }
    }

    /// Checks whether each selector matches `labels` (`None`: an object without labels).
    fn check_matches(labels: Option<Value>, cases: &[(&str, bool)]) {
        let labels = labels.map(labels_of);
        for (selector, expected) in cases {
            assert_eq!(
                sel(selector).matches(labels.as_ref()),
                *expected,
                "{selector:?} on {labels:?}"
            );
        }
    }

    fn err(s: &str) -> String {
        match LabelSelector::parse(s) {
            Ok(sel) => panic!("expected error for {s:?}, got {sel:?}"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn empty_selects_everything() {
        let s = sel("");
        assert!(s.is_empty());
        assert!(s.matches(None));
        assert!(s.matches(Some(&labels_of(json!({"a": "b"})))));
        assert_eq!(s.to_string(), "");
        assert!(sel("   ").is_empty());
    }

    #[test]
    fn equality_operators() {
        check_matches(
            Some(json!({"app": "web", "tier": "fe"})),
            &[
                ("app=web", true),
                ("app==web", true),
                ("app=db", false),
                ("app!=db", true),
                ("app!=web", false),
            ],
        );
        check_matches(None, &[("app=web", false), ("gone=", false)]);
        // Empty value.
        check_matches(Some(json!({"e": ""})), &[("e=", true)]);
        assert_eq!(sel("app==web").to_string(), "app=web");
    }

    #[test]
    fn set_operators() {
        check_matches(
            Some(json!({"env": "prod"})),
            &[
                ("env in (prod, staging)", true),
                ("env in (dev)", false),
                ("env notin (dev,qa)", true),
                ("env notin (prod)", false),
            ],
        );
        // keywords are plain values inside the list
        check_matches(Some(json!({"x": "in"})), &[("x in (in,notin)", true)]);
        assert_eq!(sel("env in (b,a,b)").to_string(), "env in (a,b)");
        assert_eq!(sel("env in ()").to_string(), "env in ()");
    }

    #[test]
    fn exists_operators() {
        check_matches(
            Some(json!({"app": "web"})),
            &[("app", true), ("db", false), ("!db", true), ("!app", false)],
        );
        check_matches(None, &[("!app", true), ("app", false)]);
        assert_eq!(sel(" ! db ").to_string(), "!db");
    }

    #[test]
    fn absent_label_semantics() {
        check_matches(
            None,
            &[
                ("app!=web", true),
                ("app notin (web)", true),
                ("app in (web)", false),
            ],
        );
        check_matches(Some(json!({"other": "x"})), &[("app!=web", true)]);
    }

    #[test]
    fn numeric_operators() {
        check_matches(
            Some(json!({"n": "5"})),
            &[("n>3", true), ("n<3", false), ("m>3", false)],
        );
        assert!(err("n>x").contains("must be an integer"));
    }

    #[test]
    fn and_and_whitespace() {
        let l = labels_of(json!({"app": "web", "tier": "fe", "example.com/team": "a"}));
        let s = sel("  app = web ,tier  in ( fe , be ) , !gone,example.com/team ");
        assert!(s.matches(Some(&l)));
        assert_eq!(
            s.to_string(),
            "app=web,example.com/team,!gone,tier in (be,fe)"
        );
        assert!(!sel("app=web,tier=be").matches(Some(&l)));
    }

    #[test]
    fn invalid_inputs() {
        assert_eq!(err("a=b=c"), "found '=', expected: ',' or 'end of string'");
        assert!(err("a in (b").starts_with("unable to parse requirement: found ''"));
        assert!(err("a in b").starts_with("unable to parse requirement: found 'b'"));
        let e = err("-a=b");
        assert!(
            e.starts_with(
                "unable to parse requirement: key: Invalid value: \"-a\": name part must consist"
            ),
            "{e}"
        );
        let long = "x".repeat(64);
        let e = err(&format!("a={long}"));
        assert!(e.contains("must be no more than 63 characters"), "{e}");
        assert!(err(&format!("{long}=a")).contains("name part must be no more than 63"));
        for (selector, fragment) in [
            ("=b", "expected: !, identifier"),
            ("a,", "identifier after ','"),
            (",a", "found ','"),
            ("a=(b)", "expected: identifier"),
            ("Example.com/a=b", "prefix part"),
            ("/a", "prefix part must be non-empty"),
            ("a/", "name part must be non-empty"),
            ("a/b/c", "qualified name"),
            ("a=b c", "found 'c'"),
            ("!a=b", "found '='"),
            ("a=-b", "a valid label"),
            ("a in (b c)", "expected: ',' or ')'"),
        ] {
            let e = err(selector);
            assert!(e.contains(fragment), "{selector:?}: {e}");
        }
    }

    #[test]
    fn from_json_roundtrip() {
        let v = json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["fe", "be"]},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "team", "operator": "Exists"}
            ]
        });
        let s = match LabelSelector::from_label_selector_json(&v) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let text = s.to_string();
        assert_eq!(text, "app=web,!canary,env notin (dev),team,tier in (be,fe)");
        let reparsed = sel(&text);
        assert_eq!(reparsed.to_string(), text);
        assert_eq!(reparsed.reqs, s.reqs);
        let l = labels_of(json!({"app": "web", "tier": "fe", "team": "x"}));
        assert!(s.matches(Some(&l)));
        assert!(reparsed.matches(Some(&l)));
        assert!(!s.matches(Some(&labels_of(json!({"app": "web", "tier": "fe"})))));

        assert!(LabelSelector::from_label_selector_json(&json!({})).is_ok_and(|s| s.is_empty()));
        assert!(LabelSelector::from_label_selector_json(&Value::Null).is_ok_and(|s| s.is_empty()));
        for bad in [
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Foo"}]}),
            json!({"matchLabels": {"-a": "b"}}),
            json!({"matchLabels": {"a": 1}}),
            json!("app=web"),
        ] {
            assert!(
                LabelSelector::from_label_selector_json(&bad).is_err(),
                "{bad}"
            );
        }
    }
}
