//! Kubernetes label and field selectors.
//!
//! Label selectors follow the grammar of `k8s.io/apimachinery/pkg/labels`
//! (`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, plus the
//! numeric `k>n` / `k<n` forms), and field selectors follow
//! `k8s.io/apimachinery/pkg/fields` (`f=v`, `f==v`, `f!=v`, with `\,`, `\=` and
//! `\\` escapes in values). Error messages mimic kube-apiserver's wording.

/// A selector parse error; the message reads like kube-apiserver's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

impl SelectorError {
    pub(super) fn new(msg: impl Into<String>) -> Self {
        SelectorError(msg.into())
    }
}

/// Quote a string the way Go's `%q` would (close enough for messages).
pub(super) fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

mod field;
mod label;

pub use field::FieldSelector;
pub use label::LabelSelector;
