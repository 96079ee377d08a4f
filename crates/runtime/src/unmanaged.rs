//! Whole objects watched and cached without their `metadata.managedFields`, the default
//! ([`Config::keep_managed_fields`](crate::Config::keep_managed_fields) keeps them).
//!
//! The managed fields are the field sets of every manager that wrote the object: for a pod
//! most of its metadata's bytes, and, since `fieldsV1` decodes into a `serde_json::Value`
//! tree, most of the time a watch spends decoding its metadata. Reconcilers almost never
//! read them (controller-runtime users strip them with `TransformStripManagedFields`,
//! after paying for the decode). Here the watch skips them while decoding, so they are
//! never built, and writes through the context cache the server's reply without them, so
//! a cached object looks the same whichever way it arrived.
//!
//! Must not know: any particular kind.

use std::sync::Arc;

use kube::Resource;
use serde::{Deserialize, Deserializer};

use crate::object_cache::{Cached, ObjectCache};
use crate::source::{CachedAs, decoded_form_of};
use crate::unread::deserialize_skipping;

pub(crate) const MANAGED_FIELDS_PATH: &str = "metadata.managedFields";
pub(crate) const MANAGED_FIELDS: &[&str] = &[MANAGED_FIELDS_PATH];

/// A `K` as a watch decodes it when managed fields are not kept.
#[derive(Debug, Clone)]
pub(crate) struct Unmanaged<K>(K);

impl<K> Unmanaged<K> {
    fn into_inner(self) -> K {
        self.0
    }
}

impl<'de, K: Deserialize<'de>> Deserialize<'de> for Unmanaged<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_skipping(deserializer, MANAGED_FIELDS).map(Unmanaged)
    }
}

// `K`'s URL, kind and scope, and its metadata.
decoded_form_of!(impl<K: Resource<DynamicType = ()>> for Unmanaged<K>, kind K, |this| this.0.meta(), this.0.meta_mut());

fn without_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Objects decoded without their managed fields, cached whole in `cache`, which leaves
/// them out of whatever else it is given too: a write's reply (through the context or a
/// handle's [`CachingApi::with_cache`](crate::CachingApi::with_cache)) and the watch event
/// of the same write compare equal, and neither keeps them.
pub(crate) fn cached_unmanaged<K>(cache: ObjectCache<K>) -> CachedAs<K, Unmanaged<K>, K>
where
    K: Resource + Cached + Clone + Send + Sync + 'static,
{
    cache.set_normalize(without_managed_fields::<K>, MANAGED_FIELDS);
    CachedAs {
        convert: Unmanaged::into_inner,
        writes: Arc::new(cache.clone()),
        cache,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object_cache::ObjectKey;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn served() -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "settings",
                "namespace": "default",
                "resourceVersion": "7",
                "labels": {"app": "web"},
                "managedFields": [{
                    "manager": "kubectl",
                    "operation": "Apply",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:mode": {}}}
                }]
            },
            "data": {"mode": "fast"}
        })
    }

    #[test]
    fn decodes_everything_but_the_managed_fields() {
        let decoded: Unmanaged<ConfigMap> = serde_json::from_value(served()).expect("decodes");
        let cm = decoded.into_inner();
        assert_eq!(cm.metadata.managed_fields, None);
        let mut whole: ConfigMap = serde_json::from_value(served()).expect("decodes");
        assert!(whole.metadata.managed_fields.is_some());
        whole.metadata.managed_fields = None;
        assert_eq!(cm, whole, "only the managed fields are left out");
    }

    #[test]
    fn a_remembered_write_is_cached_as_its_watch_event_would_be() {
        let cached = cached_unmanaged(ObjectCache::<ConfigMap>::default());
        let reply: ConfigMap = serde_json::from_value(served()).expect("decodes");
        // As a handle's `CachingApi::with_cache` remembers a write.
        cached.cache.remember(reply.clone());
        let key = ObjectKey::new(Some("default"), "settings");
        let remembered = cached.cache.get(&key).expect("remembered");
        assert_eq!(remembered.metadata.managed_fields, None);
        let watched: Unmanaged<ConfigMap> = serde_json::from_value(served()).expect("decodes");
        assert_eq!(*remembered, watched.into_inner());
        // As the context's `api` remembers it.
        cached.writes.remember(&reply);
        let remembered = cached.cache.get(&key).expect("remembered");
        assert_eq!(remembered.metadata.managed_fields, None);
    }
}
