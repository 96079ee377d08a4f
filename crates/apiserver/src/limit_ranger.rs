//! kube's `LimitRanger` admission plugin: a new pod's containers get the requests and
//! limits their namespace's LimitRanges default (noted in the `kubernetes.io/limit-ranger`
//! annotation), and a new pod, or a claim created or resized, must keep within their
//! bounds (403 with kube's messages). The rules are `steady_quota::limits`'.
//! Must not know: HTTP.

use k8s_openapi::api::core::v1::{Container, LimitRange, PersistentVolumeClaim, Pod};
use serde::Deserialize as _;
use serde_json::{Value, json};
use steady_quota::limits::{self, LimitItem};
use steady_quota::list;

use crate::ApiServer;
use crate::admission_objects::LIMIT_RANGES_PREFIX;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::ResourceType;

impl ApiServer {
    /// The items of each LimitRange of `namespace`, range by range; nothing to decode in
    /// the usual namespace without one.
    fn limit_ranges_in(&self, namespace: &str) -> Vec<Vec<LimitItem>> {
        if !self.admission_objects().may_hold_limit_ranges() {
            return Vec::new();
        }
        let prefix = format!("{LIMIT_RANGES_PREFIX}{namespace}/");
        let Ok(page) = self.store().list(&prefix, &Default::default(), &|_| true) else {
            return Vec::new();
        };
        page.items
            .iter()
            .filter_map(|stored| serde_json::from_slice::<LimitRange>(&stored.value).ok())
            .map(|range| LimitItem::of(&range))
            .collect()
    }

    /// The mutating half, on a pod being created: each container's missing defaults,
    /// range by range (a resource an earlier range set is not set again).
    pub(crate) fn default_from_limit_ranges(&self, pod: &mut Value) {
        let Some(namespace) = meta::namespace(pod).map(str::to_string) else {
            return;
        };
        let ranges = self.limit_ranges_in(&namespace);
        if ranges.is_empty() {
            return;
        }
        for items in &ranges {
            let mut notes = Vec::new();
            for (field, word) in [
                ("containers", "container"),
                ("initContainers", "init container"),
            ] {
                let containers = pod
                    .pointer_mut(&format!("/spec/{field}"))
                    .and_then(Value::as_array_mut);
                for container in containers.into_iter().flatten() {
                    notes.extend(default_container(items, container, word));
                }
            }
            // each range that sets something rewrites the note, as kube's plugin does
            if let Some(annotation) = limits::annotation(&notes) {
                let metadata = meta::metadata_mut(pod);
                let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
                if !annotations.is_object() {
                    *annotations = json!({});
                }
                annotations[limits::LIMIT_RANGER_ANNOTATION] = json!(annotation);
            }
        }
    }

    /// The validating half: a pod created, or a claim created or updated, within the
    /// bounds of every LimitRange of its namespace (a pod's containers cannot change once
    /// created, so kube does not check pod updates).
    pub(crate) fn check_limit_ranges(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        obj: &Value,
        creating: bool,
    ) -> ApiResult<()> {
        let is = |plural: &str| rt.group.is_empty() && rt.plural == plural;
        let checked = (is("pods") && creating) || is("persistentvolumeclaims");
        let (Some(namespace), true) = (namespace, checked) else {
            return Ok(());
        };
        let ranges = self.limit_ranges_in(namespace);
        if ranges.is_empty() {
            return Ok(());
        }
        let items: Vec<LimitItem> = ranges.into_iter().flatten().collect();
        let errors = if is("pods") {
            Pod::deserialize(obj).map(|pod| limits::check_pod(&items, &pod))
        } else {
            PersistentVolumeClaim::deserialize(obj).map(|claim| limits::check_claim(&items, &claim))
        }
        .map_err(|e| {
            ApiError::bad_request(format!(
                "{kind} in version \"{}\" cannot be handled as a {kind}: {e}",
                rt.version,
                kind = rt.kind
            ))
        })?;
        if errors.is_empty() {
            return Ok(());
        }
        Err(ApiError::forbidden(format!(
            "{} \"{name}\" is forbidden: {}",
            rt.qualified_name(),
            limits::aggregate(&errors)
        ))
        .with_details(json!({"name": name, "kind": rt.plural})))
    }
}

/// One container's defaults from one range, written into its JSON; the annotation's
/// notes for them.
fn default_container(items: &[LimitItem], container: &mut Value, word: &str) -> Vec<String> {
    let Ok(typed) = Container::deserialize(&*container) else {
        return Vec::new();
    };
    let defaults = limits::container_defaults(items, &typed, word);
    let resources = meta::object_mut(container, "resources");
    for (which, set) in [
        ("requests", &defaults.requests),
        ("limits", &defaults.limits),
    ] {
        if set.is_empty() {
            continue;
        }
        let entry = resources.entry(which).or_insert_with(|| json!({}));
        if !entry.is_object() {
            *entry = json!({});
        }
        for (name, quantity) in list::to_wire(set) {
            entry[name] = json!(quantity.0);
        }
    }
    defaults.notes
}
