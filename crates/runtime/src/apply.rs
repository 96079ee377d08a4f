//! Server-side apply of the objects an operator owns and of its status: the idiom of
//! operators that declare each object whole on every reconcile and let the API server
//! compute the difference.
//!
//! At the fixed point such an apply changes nothing (the server keeps the object and its
//! resourceVersion, so no watch event follows): applying on every reconcile is idempotent.
//! Both writes go through [`Context::api`], so the controller's caches see them at once.

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::controller::Context;
use crate::write_through::Writable;

impl<T> Context<T> {
    /// Server-side apply `fields` (the parts of the object this controller manages, e.g.
    /// `{"data": …}` or `{"spec": …}`) as the object `name` of kind `C` in `owner`'s
    /// namespace, controlled by `owner`: its `owns` watch maps the object's events back to
    /// `owner`, and the garbage collector deletes it with `owner`. `apiVersion`, `kind`,
    /// `metadata.name` and the controller reference are filled in; `manager` is the field
    /// manager, and conflicts with other managers are forced (the controller owns these
    /// fields, as a controller should).
    ///
    /// Declare a Secret's `data`, not `stringData`: the server turns `stringData` into
    /// `data`, so an applied `stringData` is never "already there" and every apply writes a
    /// new version (as on a cluster, kubernetes/kubernetes#118519) — and the owned Secret's
    /// event triggers the next reconcile: a hot loop (`steady-sim` reports it).
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # async fn reconcile(site: &ConfigMap, ctx: &steady_runtime::Context<()>) -> Result<(), kube::Error> {
    /// let fields = serde_json::json!({ "data": { "greeting": "hello" } });
    /// ctx.apply_owned::<ConfigMap, _>(site, "greeting", "example-operator", fields).await?;
    /// # Ok(()) }
    /// ```
    pub async fn apply_owned<C, O>(
        &self,
        owner: &O,
        name: &str,
        manager: &str,
        fields: impl Serialize,
    ) -> Result<C, kube::Error>
    where
        C: Writable<Scope = NamespaceResourceScope>,
        O: Resource<DynamicType = ()>,
    {
        let mut object = declared::<C>(name, fields)?;
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.insert(
                "ownerReferences".into(),
                json!([owner.controller_owner_ref(&())]),
            );
        }
        let namespace = owner.meta().namespace.clone().unwrap_or_default();
        self.api::<C>(&namespace)
            .patch(name, &force(manager), &Patch::Apply(Value::Object(object)))
            .await
    }

    /// Server-side apply `status` as the status of `object`, as field manager `manager`.
    pub async fn apply_status<C>(
        &self,
        object: &C,
        manager: &str,
        status: impl Serialize,
    ) -> Result<C, kube::Error>
    where
        C: Writable<Scope = NamespaceResourceScope>,
    {
        let name = object.meta().name.clone().unwrap_or_default();
        let body = declared::<C>(&name, json!({ "status": to_value(status)? }))?;
        let namespace = object.meta().namespace.clone().unwrap_or_default();
        self.api::<C>(&namespace)
            .patch_status(&name, &force(manager), &Patch::Apply(Value::Object(body)))
            .await
    }
}

/// `fields` as an apply body of kind `C` named `name`.
fn declared<C: Resource<DynamicType = ()>>(
    name: &str,
    fields: impl Serialize,
) -> Result<Map<String, Value>, kube::Error> {
    let Value::Object(mut object) = to_value(fields)? else {
        return Err(kube::Error::SerdeError(serde::de::Error::custom(
            "the fields to apply must be a JSON object",
        )));
    };
    object.insert("apiVersion".into(), C::api_version(&()).into());
    object.insert("kind".into(), C::kind(&()).into());
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(metadata) = metadata.as_object_mut() {
        metadata.insert("name".into(), name.into());
    }
    Ok(object)
}

fn to_value(value: impl Serialize) -> Result<Value, kube::Error> {
    serde_json::to_value(value).map_err(kube::Error::SerdeError)
}

fn force(manager: &str) -> PatchParams {
    PatchParams::apply(manager).force()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn a_declaration_is_named_and_typed_and_keeps_its_metadata() {
        let fields = json!({ "metadata": { "labels": { "app": "web" } }, "data": { "a": "1" } });
        let object = declared::<ConfigMap>("web", fields).expect("an object");
        assert_eq!(
            Value::Object(object),
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "data": { "a": "1" },
                "metadata": { "name": "web", "labels": { "app": "web" } } })
        );
    }

    #[test]
    fn only_an_object_can_be_declared() {
        let error = declared::<ConfigMap>("web", json!(["data"])).expect_err("not an object");
        assert!(
            error.to_string().contains("must be a JSON object"),
            "{error}"
        );
    }
}
