//! Discovery documents (`/version`, `/api`, `/apis`, `/api/v1`, `/apis/<g>/<v>`), the
//! aggregated discovery documents (`apidiscovery.k8s.io` v2 and v2beta1) `/api` and `/apis`
//! answer when asked, and the OpenAPI v3 index and per-group-version documents kubectl needs
//! to validate server-side. Everything is read from the registry's `ResourceType`s; which
//! document a request gets is decided in `negotiate`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use kube::core::discovery::v2;
use serde_json::{Value, json};

use crate::registry::{Registry, ResourceType};

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-steady",
        "gitCommit": "steady",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

fn group_document(registry: &Registry, group: &str) -> Option<Value> {
    let versions = registry.group_versions(group);
    let preferred = versions.first()?;
    let entries: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    Some(json!({
        "name": group,
        "versions": entries,
        "preferredVersion": {"groupVersion": format!("{group}/{preferred}"), "version": preferred},
    }))
}

pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .filter_map(|g| group_document(registry, g))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(registry: &Registry, group: &str) -> Option<Value> {
    let mut doc = group_document(registry, group)?;
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn resource_entries(t: &ResourceType) -> Vec<Value> {
    let mut entries = vec![json!({
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": t.verbs(),
        "shortNames": t.short_names,
        "categories": t.categories,
        "storageVersionHash": "",
    })];
    for sub in t.subresources() {
        let mut entry = json!({"name": format!("{}/{}", t.plural, sub.name), "singularName": "", "namespaced": t.namespaced, "kind": t.kind, "verbs": sub.verbs});
        if let Some((group, version, kind)) = sub.body {
            entry["group"] = json!(group);
            entry["version"] = json!(version);
            entry["kind"] = json!(kind);
        }
        entries.push(entry);
    }
    entries
}

fn strings(values: &[impl ToString]) -> Vec<String> {
    values.iter().map(ToString::to_string).collect()
}

fn own_kind(t: &ResourceType) -> v2::GroupVersionKind {
    v2::GroupVersionKind {
        group: Some(t.group.clone()),
        version: Some(t.version.clone()),
        kind: Some(t.kind.clone()),
    }
}

fn aggregated_resource(t: &ResourceType) -> v2::APIResourceDiscovery {
    let subresources = t
        .subresources()
        .into_iter()
        .map(|sub| v2::APISubresourceDiscovery {
            subresource: Some(sub.name.to_string()),
            response_kind: Some(match sub.body {
                Some((group, version, kind)) => v2::GroupVersionKind {
                    group: Some(group.to_string()),
                    version: Some(version.to_string()),
                    kind: Some(kind.to_string()),
                },
                None => own_kind(t),
            }),
            accepted_types: Vec::new(),
            verbs: strings(sub.verbs),
        })
        .collect();
    v2::APIResourceDiscovery {
        resource: Some(t.plural.clone()),
        response_kind: Some(own_kind(t)),
        scope: Some(
            if t.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            }
            .to_string(),
        ),
        singular_resource: Some(t.singular.clone()),
        verbs: strings(t.verbs()),
        short_names: t.short_names.clone(),
        categories: t.categories.clone(),
        subresources,
    }
}

/// One group (`""` for the legacy core group) with every served version, most preferred
/// first, and every resource of each; `None` when nothing of it is served.
fn aggregated_group(registry: &Registry, group: &str) -> Option<v2::APIGroupDiscovery> {
    let versions: Vec<v2::APIVersionDiscovery> = registry
        .group_versions(group)
        .into_iter()
        .map(|version| v2::APIVersionDiscovery {
            resources: registry
                .resources_in(group, &version)
                .iter()
                .map(|t| aggregated_resource(t))
                .collect(),
            version: Some(version),
            // Every kind is served by this process: the document is never stale.
            freshness: Some("Current".to_string()),
        })
        .collect();
    if versions.is_empty() {
        return None;
    }
    let name = (!group.is_empty()).then(|| group.to_string());
    Some(v2::APIGroupDiscovery {
        metadata: Some(ObjectMeta {
            name,
            ..ObjectMeta::default()
        }),
        versions,
    })
}

/// Go's `omitempty` lists of the discovery types, which kube's Rust types always write.
const OMITTED_WHEN_EMPTY: &[&str] = &["shortNames", "categories", "subresources", "acceptedTypes"];

fn drop_empty_lists(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, v| {
                !(OMITTED_WHEN_EMPTY.contains(&key.as_str())
                    && v.as_array().is_some_and(Vec::is_empty))
            });
            map.values_mut().for_each(drop_empty_lists);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_empty_lists),
        _ => {}
    }
}

/// Which groups an aggregated discovery document covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryRoot {
    /// `/api`: the legacy core group.
    Core,
    /// `/apis`: every named group.
    Named,
}

/// The `APIGroupDiscoveryList` of `apidiscovery.k8s.io/<version>` (v2 or v2beta1, which
/// share one shape) that `/api` or `/apis` answers to aggregated-discovery clients.
pub fn aggregated(registry: &Registry, root: DiscoveryRoot, version: &str) -> Value {
    let groups = match root {
        DiscoveryRoot::Core => vec![String::new()],
        DiscoveryRoot::Named => registry.groups(),
    };
    let list = v2::APIGroupDiscoveryList {
        metadata: Some(ListMeta::default()),
        items: groups
            .iter()
            .filter_map(|g| aggregated_group(registry, g))
            .collect(),
    };
    let mut document = serde_json::to_value(list).unwrap_or_else(|_| json!({"items": []}));
    drop_empty_lists(&mut document);
    document["kind"] = json!("APIGroupDiscoveryList");
    document["apiVersion"] = json!(format!("apidiscovery.k8s.io/{version}"));
    document
}

pub fn resources(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let types = registry.resources_in(group, version);
    if types.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<Value> = types.iter().flat_map(|t| resource_entries(t)).collect();
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}

fn openapi_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per served group-version.
pub fn openapi_index(registry: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    let mut seen = std::collections::BTreeSet::new();
    for t in registry.all() {
        let path = openapi_path(&t.group, &t.version);
        if seen.insert(path.clone()) {
            paths.insert(path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", hash_of(registry, &t.group, &t.version))}));
        }
    }
    json!({"paths": paths})
}

/// Changes whenever the set of kinds of a group-version changes (kubectl caches by it).
fn hash_of(registry: &Registry, group: &str, version: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for t in registry.resources_in(group, version) {
        t.plural.hash(&mut hasher);
        t.kind.hash(&mut hasher);
        t.schema.as_ref().map(|s| s.to_string()).hash(&mut hasher);
    }
    format!("{:016X}", hasher.finish())
}

/// A group-version's OpenAPI document: per kind, the object path with a `patch` operation
/// carrying `x-kubernetes-group-version-kind` and `fieldValidation` (what kubectl looks for
/// to validate server-side), plus the CRD schemas as components.
pub fn openapi_document(registry: &Registry, path: &str) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => return None,
    };
    let types = registry.resources_in(&group, &version);
    if types.is_empty() {
        return None;
    }
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for t in &types {
        let gvk = json!([{"group": t.group, "version": t.version, "kind": t.kind}]);
        let base = if t.group.is_empty() {
            format!("/api/{}", t.version)
        } else {
            format!("/apis/{}/{}", t.group, t.version)
        };
        let object_path = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
        } else {
            format!("{base}/{}/{{name}}", t.plural)
        };
        let field_validation = json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let schema_name = format!(
            "{}.{}.{}",
            if t.group.is_empty() {
                "io.k8s.api.core"
            } else {
                &t.group
            },
            t.version,
            t.kind
        );
        let reference = json!({"$ref": format!("#/components/schemas/{schema_name}")});
        let operation = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", t.kind),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk[0],
                "parameters": [field_validation],
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}},
            })
        };
        let mut patch = operation("patch");
        patch["requestBody"] = json!({"content": {
            "application/json-patch+json": {"schema": {"type": "object"}},
            "application/merge-patch+json": {"schema": {"type": "object"}},
            "application/apply-patch+yaml": {"schema": {"type": "object"}},
        }});
        let mut put = operation("put");
        put["requestBody"] = json!({"content": {"application/json": {"schema": reference}}});
        paths.insert(
            object_path,
            json!({"get": operation("get"), "put": put, "patch": patch}),
        );
        let mut schema = t.schema.clone().unwrap_or_else(
            || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        );
        schema["x-kubernetes-group-version-kind"] = gvk;
        schemas.insert(schema_name, schema);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}
