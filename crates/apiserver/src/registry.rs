//! The resource registry: which kinds the server serves, under which group, version and
//! plural, with which subresources. Built-in kinds are fixed; CRDs add and remove kinds live.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::builtin::{self, Generation, Subresource};
use crate::schema::ValueSchema;

/// `autoscaling/v1 Scale` mapping of a custom resource (the CRD's `subresources.scale`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleSubresource {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// One served resource: a (group, version, plural) with everything the API needs to know about it.
#[derive(Debug, Clone)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    pub scale: Option<ScaleSubresource>,
    /// Field selector paths beyond `metadata.name` and `metadata.namespace` (a built-in
    /// kind's, or a CRD version's `selectableFields`).
    pub extra_field_selectors: Vec<Cow<'static, str>>,
    /// Built-in kinds take strategic-merge patches; custom resources do not.
    pub builtin: bool,
    /// The Go struct kube-apiserver decodes a built-in kind into (None for custom
    /// resources, which their schema prunes instead).
    pub typed: Option<crate::typed::Root>,
    /// The CRD's `openAPIV3Schema` for this version, if any.
    pub schema: Option<Value>,
    /// The same schema, read for validation once, not at every write.
    pub validation: Option<Arc<ValueSchema>>,
    /// The CRD's `additionalPrinterColumns` for this version.
    pub printer_columns: Vec<Value>,
    /// Name of the CRD that defines this kind (None for built-ins).
    pub crd_name: Option<String>,
    pub generation: Generation,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `caches.steady.dev`, as kube-apiserver names resources in messages.
    /// The kind as validation messages name it: `Deployment.apps`, `Pod`.
    pub fn qualified_kind(&self) -> String {
        qualified_kind(&self.kind, &self.group)
    }

    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Store key prefix of every object of this resource (all versions share storage, and
    /// events.k8s.io Events are stored as core Events).
    pub fn prefix(&self) -> String {
        self.key_with(None, "")
    }

    /// Store key prefix of the objects in one namespace, or of all of them.
    pub fn list_prefix(&self, namespace: Option<&str>) -> String {
        self.key_with(namespace, "")
    }

    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        self.key_with(namespace, name)
    }

    /// `/<group>/<plural>/[<namespace>/]<name>`, built in one allocation: every request
    /// makes a key or a prefix.
    fn key_with(&self, namespace: Option<&str>, name: &str) -> String {
        let group = if self.builtin {
            crate::versions::storage_group(&self.group, &self.plural)
        } else {
            &self.group
        };
        let namespace = namespace.filter(|_| self.namespaced);
        let mut key = String::with_capacity(
            group.len()
                + self.plural.len()
                + namespace.map_or(0, |ns| ns.len() + 1)
                + name.len()
                + 3,
        );
        for segment in [group, &self.plural].into_iter().chain(namespace) {
            key.push('/');
            key.push_str(segment);
        }
        key.push('/');
        key.push_str(name);
        key
    }

    /// `fieldSelector` parsed against this resource's selectable fields, each named as the
    /// stored object has it (an events.k8s.io `regarding.name` is a core Event's
    /// `involvedObject.name`).
    pub fn field_selector(
        &self,
        text: &str,
    ) -> Result<crate::selector::FieldSelector, crate::selector::SelectorError> {
        crate::selector::FieldSelector::parse(text, &self.field_selectors())
            .map(|selector| selector.map_fields(|f| crate::versions::stored_field(&self.group, f)))
    }

    pub fn field_selectors(&self) -> Vec<&str> {
        let mut fields = vec!["metadata.name", "metadata.namespace"];
        fields.extend(self.extra_field_selectors.iter().map(AsRef::as_ref));
        fields
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The built-in table's entry for this kind (None for custom resources).
    fn builtin_kind(&self) -> Option<&'static builtin::BuiltinKind> {
        self.builtin
            .then(|| builtin::find(&self.group, &self.version, &self.plural))
            .flatten()
    }

    /// The verbs discovery lists and the server accepts on the resource itself.
    pub fn verbs(&self) -> &'static [&'static str] {
        self.builtin_kind().map_or(builtin::ALL_VERBS, |b| b.verbs)
    }

    /// Reviews, bindings and the like: answered on create, never stored.
    pub fn is_create_only(&self) -> bool {
        self.builtin_kind().is_some_and(|b| b.is_create_only())
    }

    /// The subresources served under this resource, as discovery lists them.
    pub fn subresources(&self) -> Vec<Subresource> {
        if let Some(b) = self.builtin_kind() {
            return b.subresources.to_vec();
        }
        let custom = [
            (self.scale.is_some(), builtin::SCALE),
            (self.status_subresource, builtin::STATUS),
        ];
        custom
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, s)| s)
            .collect()
    }

    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources().iter().any(|s| s.name == name)
    }
}

/// The `autoscaling/v1 Scale` of the built-in kinds that have one (Deployment, ...).
fn builtin_scale() -> ScaleSubresource {
    ScaleSubresource {
        spec_replicas_path: ".spec.replicas".to_string(),
        status_replicas_path: ".status.replicas".to_string(),
        label_selector_path: Some(".spec.selector".to_string()),
    }
}

fn builtin_types() -> impl Iterator<Item = ResourceType> {
    builtin::BUILTIN_KINDS.iter().map(|b| ResourceType {
        group: b.group.to_string(),
        version: b.version.to_string(),
        kind: b.kind.to_string(),
        plural: b.plural.to_string(),
        singular: b.kind.to_lowercase(),
        namespaced: b.namespaced,
        short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
        categories: b.categories.iter().map(|s| s.to_string()).collect(),
        status_subresource: b.has_subresource("status"),
        scale: b.has_subresource("scale").then(builtin_scale),
        extra_field_selectors: b.fields.iter().map(|f| Cow::Borrowed(*f)).collect(),
        builtin: true,
        typed: crate::typed::root(&b.api_version(), b.kind),
        schema: None,
        validation: None,
        printer_columns: Vec::new(),
        crd_name: None,
        generation: b.generation,
    })
}

type GroupVersionResource = (String, String, String);

/// All served resources, keyed by (group, version, plural). Cheap to read concurrently.
#[derive(Debug)]
pub struct Registry {
    types: RwLock<BTreeMap<GroupVersionResource, Arc<ResourceType>>>,
}

impl Default for Registry {
    fn default() -> Self {
        let registry = Registry {
            types: RwLock::new(BTreeMap::new()),
        };
        for t in builtin_types() {
            registry.insert(t);
        }
        registry
    }
}

impl Registry {
    fn read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, BTreeMap<GroupVersionResource, Arc<ResourceType>>> {
        self.types.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, BTreeMap<GroupVersionResource, Arc<ResourceType>>> {
        self.types.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn insert(&self, t: ResourceType) {
        let key = (t.group.clone(), t.version.clone(), t.plural.clone());
        self.write().insert(key, Arc::new(t));
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.read()
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    pub fn builtin(&self, group: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.read()
            .values()
            .find(|t| t.builtin && t.group == group && t.plural == plural)
            .cloned()
    }

    /// Replace every kind defined by the CRD `crd_name` with `types` (empty = unregister).
    pub fn replace_crd(&self, crd_name: &str, types: Vec<ResourceType>) {
        let mut map = self.write();
        map.retain(|_, t| t.crd_name.as_deref() != Some(crd_name));
        for t in types {
            map.insert(
                (t.group.clone(), t.version.clone(), t.plural.clone()),
                Arc::new(t),
            );
        }
    }

    pub fn all(&self) -> Vec<Arc<ResourceType>> {
        self.read().values().cloned().collect()
    }

    /// Every distinct storage prefix of namespaced kinds (one per group and plural).
    pub fn namespaced_prefixes(&self) -> Vec<String> {
        let mut prefixes: Vec<String> = self
            .read()
            .values()
            .filter(|t| t.namespaced)
            .map(|t| t.prefix())
            .collect();
        prefixes.sort();
        prefixes.dedup();
        prefixes
    }

    /// Served versions of `group`, most preferred first (Kubernetes version priority).
    pub fn group_versions(&self, group: &str) -> Vec<String> {
        let mut versions: Vec<String> = self
            .read()
            .keys()
            .filter(|(g, _, _)| g == group)
            .map(|(_, v, _)| v.clone())
            .collect();
        versions.sort_by(|a, b| version_priority(b).cmp(&version_priority(a)).then(a.cmp(b)));
        versions.dedup();
        versions
    }

    /// Groups other than the legacy core group, in a stable order.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self
            .read()
            .keys()
            .map(|(g, _, _)| g.clone())
            .filter(|g| !g.is_empty())
            .collect();
        groups.dedup();
        groups
    }

    pub fn resources_in(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.read()
            .iter()
            .filter(|((g, v, _), _)| g == group && v == version)
            .map(|(_, t)| t.clone())
            .collect()
    }
}

/// Kubernetes version priority: GA > beta > alpha, higher numbers first; others last.
pub fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let suffix = &rest[digits.len()..];
    if suffix.is_empty() {
        return (3, major, 0);
    }
    let (level, minor) = if let Some(m) = suffix.strip_prefix("beta") {
        (2, m)
    } else if let Some(m) = suffix.strip_prefix("alpha") {
        (1, m)
    } else {
        return (0, 0, 0);
    };
    match minor.parse::<u32>() {
        Ok(minor) => (level, major, minor),
        Err(_) => (0, 0, 0),
    }
}

/// kube names a kind with its group in validation messages: `Deployment.apps`.
pub fn qualified_kind(kind: &str, group: &str) -> String {
    match group {
        "" => kind.to_owned(),
        group => format!("{kind}.{group}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_priority_orders_like_kubernetes() {
        let mut versions = vec!["v1alpha1", "v2", "v1beta2", "v1", "v1beta1", "foo"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(
            versions,
            ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn builtins_are_registered_with_namespaced_keys() {
        let registry = Registry::default();
        let pods = registry.get("", "v1", "pods").expect("pods");
        assert_eq!(pods.key(Some("default"), "p"), "/core/pods/default/p");
        let ns = registry.get("", "v1", "namespaces").expect("namespaces");
        assert_eq!(ns.key(None, "default"), "/core/namespaces/default");
        assert!(registry.get("", "v1", "widgets").is_none());
    }
}
