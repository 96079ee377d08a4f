//! An object's `metadata.labels`, extracted once when the object is written.
//!
//! Label selectors are evaluated on every list and watch event; decoding each stored
//! object to read its labels made a selector list cost a full JSON parse per object in
//! the namespace, under the store's read lock. kube-apiserver's watch cache keeps a
//! decoded label set beside every object for the same reason.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

/// Label key/value pairs sorted by key. Cheap to clone (shared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labels(Arc<[(Box<str>, Box<str>)]>);

impl Default for Labels {
    fn default() -> Self {
        Labels(Arc::from(Vec::new()))
    }
}

impl Labels {
    /// The labels of a JSON object (`metadata.labels`); none when absent or malformed.
    pub fn of(object: &Value) -> Labels {
        match object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
        {
            Some(map) => Labels::collect(map.iter().map(|(k, v)| (k.as_str(), v))),
            None => Labels::default(),
        }
    }

    /// The labels of a stored object, reading only what it must of the bytes.
    pub fn of_json_bytes(bytes: &[u8]) -> Labels {
        #[derive(Deserialize)]
        struct Meta {
            labels: Option<BTreeMap<String, Value>>,
        }
        match crate::metadata_of::<Meta>(bytes) {
            Ok(Some(Meta {
                labels: Some(labels),
            })) => Labels::collect(labels.iter().map(|(k, v)| (k.as_str(), v))),
            _ => Labels::default(),
        }
    }

    fn collect<'a>(pairs: impl Iterator<Item = (&'a str, &'a Value)>) -> Labels {
        let mut pairs: Vec<(Box<str>, Box<str>)> = pairs
            .map(|(k, v)| (Box::from(k), Box::from(value_text(v).as_ref())))
            .collect();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        Labels(Arc::from(pairs))
    }

    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| self.0[i].1.as_ref())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }
}

/// Label values are strings; anything else (which validation rejects before storage)
/// compares as its JSON text, null as empty.
fn value_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(s) => Cow::Borrowed(s),
        Value::Null => Cow::Borrowed(""),
        other => Cow::Owned(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_labels_from_values_and_bytes_alike() {
        let object = json!({"kind": "Pod", "metadata": {"name": "p", "labels": {"b": "2", "a": "1", "n": 3}}, "spec": {"x": [1, 2]}});
        let from_value = Labels::of(&object);
        let from_bytes = Labels::of_json_bytes(object.to_string().as_bytes());
        assert_eq!(from_value, from_bytes);
        assert_eq!(from_value.get("a"), Some("1"));
        assert_eq!(from_value.get("b"), Some("2"));
        assert_eq!(from_value.get("n"), Some("3"));
        assert_eq!(from_value.get("c"), None);
        assert_eq!(
            from_value.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ["a", "b", "n"]
        );
    }

    #[test]
    fn objects_without_labels_have_none() {
        for object in [
            json!({}),
            json!({"metadata": {}}),
            json!({"metadata": {"labels": null}}),
            json!({"metadata": {"labels": "not a map"}}),
        ] {
            assert!(Labels::of(&object).is_empty(), "{object}");
            assert!(
                Labels::of_json_bytes(object.to_string().as_bytes()).is_empty(),
                "{object}"
            );
        }
    }
}
