//! Decoding that never builds the fields nobody reads: a serde `Deserializer` adapter that
//! drops chosen object keys (dotted paths such as `metadata.managedFields` or `spec`)
//! before the target type's `Deserialize` sees them.
//!
//! A projected watch ([`crate::projection`]) decodes each object only to project it and
//! drop it. A pod as the API returns it is ~13 KB once decoded, most of it in fields a
//! projection never looks at (its spec, its managed fields); every such allocation costs
//! time, and the allocator keeps the pages that short-lived objects fragmented, which is
//! resident memory per cached object. Skipped values are parsed past, never allocated.
//!
//! Paths go through objects only (no array elements): a path names a key, the key of an
//! object under it, and so on. A skipped field decodes as absent, so it must be one its
//! type allows to be missing (an `Option`, a collection, a defaulted field).
//!
//! Must not know: any kind, or the wire format (any self-describing serde format works).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// Decode a `T` from `deserializer`, skipping the values at the dotted `paths`.
pub fn deserialize_skipping<'de, T, D>(
    deserializer: D,
    paths: &'static [&'static str],
) -> Result<T, D::Error>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    if paths.is_empty() {
        return T::deserialize(deserializer);
    }
    T::deserialize(Skipping {
        inner: deserializer,
        unread: Unread(Cow::Borrowed(paths)),
    })
}

/// Dotted paths, relative to the object being decoded, whose values are skipped.
#[derive(Debug, Clone)]
struct Unread(Cow<'static, [&'static str]>);

/// What becomes of the value under one key.
enum At {
    /// Parsed past, never decoded.
    Skip,
    /// Decoded as it is.
    Keep,
    /// Decoded, skipping these paths inside it.
    Descend(Unread),
}

impl Unread {
    fn at(&self, key: &str) -> At {
        let mut deeper = Vec::new();
        for path in self.0.iter() {
            match path.strip_prefix(key) {
                Some("") => return At::Skip,
                Some(rest) => deeper.extend(rest.strip_prefix('.')),
                None => {}
            }
        }
        if deeper.is_empty() {
            At::Keep
        } else {
            At::Descend(Unread(Cow::Owned(deeper)))
        }
    }
}

/// The deserializer of a value with paths to skip inside it.
struct Skipping<D> {
    inner: D,
    unread: Unread,
}

impl<D> Skipping<D> {
    fn wrap<V>(self, visitor: V) -> (D, Wrapped<V>) {
        let wrapped = Wrapped {
            inner: visitor,
            unread: self.unread,
        };
        (self.inner, wrapped)
    }
}

/// Methods where no object can appear: the inner deserializer serves them as they are.
macro_rules! pass_through {
    ($($method:ident $(($($arg:ident: $ty:ty),*))?;)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($($arg: $ty,)*)? visitor: V) -> Result<V::Value, D::Error> {
                self.inner.$method($($($arg,)*)? visitor)
            }
        )*
    };
}

/// Methods that may meet an object (directly, or inside an option or a newtype).
macro_rules! wrapping {
    ($($method:ident $(($($arg:ident: $ty:ty),*))?;)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($($arg: $ty,)*)? visitor: V) -> Result<V::Value, D::Error> {
                let (inner, visitor) = self.wrap(visitor);
                inner.$method($($($arg,)*)? visitor)
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Skipping<D> {
    type Error = D::Error;

    wrapping! {
        deserialize_any;
        deserialize_map;
        deserialize_option;
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_newtype_struct(name: &'static str);
    }

    pass_through! {
        deserialize_bool; deserialize_i8; deserialize_i16; deserialize_i32; deserialize_i64;
        deserialize_i128; deserialize_u8; deserialize_u16; deserialize_u32; deserialize_u64;
        deserialize_u128; deserialize_f32; deserialize_f64; deserialize_char; deserialize_str;
        deserialize_string; deserialize_bytes; deserialize_byte_buf; deserialize_unit;
        deserialize_seq; deserialize_identifier; deserialize_ignored_any;
        deserialize_unit_struct(name: &'static str);
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A visitor whose objects skip the paths.
struct Wrapped<V> {
    inner: V,
    unread: Unread,
}

macro_rules! visit_pass_through {
    ($($method:ident($ty:ty);)*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.inner.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrapped<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(formatter)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(SkippingMap {
            inner: map,
            unread: self.unread,
            value: None,
        })
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Skipping {
            inner: deserializer,
            unread: self.unread,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Skipping {
            inner: deserializer,
            unread: self.unread,
        })
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    visit_pass_through! {
        visit_bool(bool); visit_i8(i8); visit_i16(i16); visit_i32(i32); visit_i64(i64);
        visit_i128(i128); visit_u8(u8); visit_u16(u16); visit_u32(u32); visit_u64(u64);
        visit_u128(u128); visit_f32(f32); visit_f64(f64); visit_char(char);
        visit_str(&str); visit_borrowed_str(&'de str); visit_string(String);
        visit_bytes(&[u8]); visit_borrowed_bytes(&'de [u8]); visit_byte_buf(Vec<u8>);
    }
}

/// An object's entries, without those at skipped paths.
struct SkippingMap<A> {
    inner: A,
    unread: Unread,
    /// The paths to skip inside the value whose key was just returned.
    value: Option<Unread>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for SkippingMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.inner.next_key_seed(KeySeed)? {
            self.value = match self.unread.at(&key) {
                At::Skip => {
                    self.inner.next_value::<IgnoredAny>()?;
                    continue;
                }
                At::Keep => None,
                At::Descend(unread) => Some(unread),
            };
            let key = match key {
                Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
                Cow::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
            };
            return key.map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        match self.value.take() {
            Some(unread) => self.inner.next_value_seed(SkippingSeed {
                inner: seed,
                unread,
            }),
            None => self.inner.next_value_seed(seed),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A value decoded with paths skipped inside it.
struct SkippingSeed<S> {
    inner: S,
    unread: Unread,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for SkippingSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Skipping {
            inner: deserializer,
            unread: self.unread,
        })
    }
}

/// An object key, borrowed from the input when the format allows (no allocation).
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_owned()))
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Pod;
    use serde_json::{Value, json};

    use super::*;

    fn pod_json() -> String {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "ns", "resourceVersion": "7",
                "labels": {"app": "a"},
                "managedFields": [{"manager": "m", "operation": "Update",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}]},
        })
        .to_string()
    }

    fn decode<T: serde::de::DeserializeOwned>(json: &str, paths: &'static [&'static str]) -> T {
        let mut de = serde_json::Deserializer::from_str(json);
        deserialize_skipping(&mut de, paths).expect("decodes")
    }

    #[test]
    fn skipped_paths_decode_as_absent_and_the_rest_as_ever() {
        let pod: Pod = decode(
            &pod_json(),
            &["spec", "metadata.managedFields", "status.podIP"],
        );
        assert!(pod.spec.is_none());
        assert!(pod.metadata.managed_fields.is_none());
        let status = pod.status.expect("status kept");
        assert!(status.pod_ip.is_none());
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.conditions.map(|c| c.len()), Some(1));
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(
            pod.metadata.labels,
            Some(BTreeMap::from([("app".into(), "a".into())]))
        );
    }

    #[test]
    fn no_paths_decode_the_whole_object() {
        let whole: Pod = serde_json::from_str(&pod_json()).expect("a pod");
        assert_eq!(decode::<Pod>(&pod_json(), &[]), whole);
        assert_eq!(decode::<Pod>(&pod_json(), &["status.nodeName"]), whole);
    }

    #[test]
    fn a_path_is_a_whole_key_not_a_prefix() {
        let value: Value = decode(
            r#"{"spec": 1, "specs": 2, "a": {"b": 3, "bc": 4}}"#,
            &["spec", "a.b"],
        );
        assert_eq!(value, json!({"specs": 2, "a": {"bc": 4}}));
    }

    #[test]
    fn escaped_keys_and_nulls_decode_through_the_adapter() {
        let value: Value = decode(
            r#"{"k\"ey": {"x": null, "y": [1, {"x": 2}]}, "n": null}"#,
            &["k\"ey.x"],
        );
        assert_eq!(value, json!({"k\"ey": {"y": [1, {"x": 2}]}, "n": null}));
    }

    #[test]
    fn errors_inside_skipped_values_are_still_errors() {
        let mut de = serde_json::Deserializer::from_str(r#"{"spec": {"a": }, "b": 1}"#);
        assert!(deserialize_skipping::<Value, _>(&mut de, &["spec"]).is_err());
    }
}
