//! Reading an object's `metadata` from its bytes without reading the rest.
//!
//! Many readers of stored objects look only at their metadata: the labels the store
//! indexes, the owners and finalizers the garbage collector follows, the
//! resourceVersion a client compares. A serde pass over the whole object still scans
//! every byte of what it skips (spec, status, data), usually most of the object. The
//! store encodes an object's members in key order (`apiVersion`, `kind`, `metadata`,
//! `spec`, `status`), so its metadata ends early; [`metadata_of`] stops there.

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, MapAccess, Visitor};

/// The message of the error that ends a decode once the metadata is read; it never
/// reaches a caller.
const READ_ENOUGH: &str = "steady-store: metadata read";

/// Decodes the top-level `metadata` member of the JSON object `bytes` as `T`, reading no
/// further: members before it are skipped, members after it are not read at all (and
/// so not checked either). `Ok(None)` when the object has no `metadata`; `Err` when the
/// bytes up to the end of the metadata are not a JSON object, or the metadata is not a
/// `T`.
pub fn metadata_of<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<Option<T>> {
    let mut found = None;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let read = deserializer.deserialize_map(UntilMetadata { found: &mut found });
    match (read, found) {
        (_, Some(metadata)) => Ok(Some(metadata)),
        (Ok(()), None) => deserializer.end().map(|()| None),
        (Err(e), None) => Err(e),
    }
}

/// Visits an object's members until `metadata`, decodes it into `found` and stops the
/// decode with an error (serde offers no other way to stop before the map ends).
struct UntilMetadata<'a, T> {
    found: &'a mut Option<T>,
}

impl<'de, T: DeserializeOwned> Visitor<'de> for UntilMetadata<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(MemberName { is_metadata }) = map.next_key()? {
            if !is_metadata {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            *self.found = Some(map.next_value::<T>()?);
            return Err(de::Error::custom(READ_ENOUGH));
        }
        Ok(())
    }
}

/// A member's name, compared with `metadata` without being copied.
struct MemberName {
    is_metadata: bool,
}

impl<'de> serde::Deserialize<'de> for MemberName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = MemberName;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<MemberName, E> {
                Ok(MemberName {
                    is_metadata: name == "metadata",
                })
            }
        }
        deserializer.deserialize_str(Name)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Meta {
        name: Option<String>,
        labels: Option<BTreeMap<String, String>>,
    }

    fn read(json: &str) -> serde_json::Result<Option<Meta>> {
        metadata_of::<Meta>(json.as_bytes())
    }

    #[test]
    fn reads_the_metadata_wherever_it_is() {
        let expected = Some(Meta {
            name: Some("a".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
        });
        for json in [
            r#"{"metadata":{"name":"a","labels":{"app":"web"}}}"#,
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"app":"web"}},"spec":{"x":[1,{"y":"}"}]}}"#,
            r#"{"data":{"metadata":{"name":"b"}},"metadata":{"name":"a","labels":{"app":"web"}}}"#,
            r#" { "metadata" : { "name" : "a" , "labels" : { "app" : "web" } } } "#,
        ] {
            assert_eq!(read(json).expect(json), expected, "{json}");
        }
    }

    #[test]
    fn reads_nothing_after_the_metadata() {
        // What follows the metadata is not read, so not even its syntax is checked.
        let read = read(r#"{"metadata":{"name":"a"},"spec":{"x": not json"#).expect("read");
        assert_eq!(read.and_then(|m| m.name).as_deref(), Some("a"));
    }

    #[test]
    fn an_object_without_metadata_has_none() {
        assert_eq!(read(r#"{"kind":"Pod","spec":{}}"#).expect("read"), None);
        assert_eq!(read("{}").expect("read"), None);
    }

    #[test]
    fn what_is_not_an_object_with_readable_metadata_is_an_error() {
        for json in [
            "[]",
            "\"metadata\"",
            r#"{"kind":"Pod","#,
            r#"{"metadata":{"name":7}}"#,
            r#"{"metadata":[]}"#,
            r#"{"kind":"Pod"} trailing"#,
            "",
        ] {
            let err = read(json).expect_err(json);
            assert!(!err.to_string().contains(READ_ENOUGH), "{json}: {err}");
        }
    }
}
