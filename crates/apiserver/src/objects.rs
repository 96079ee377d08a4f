//! The object operations: get, list, create, update, patch, delete, with Kubernetes'
//! rules for metadata, generation, the status and scale subresources, finalizers and
//! graceful deletion. HTTP-free, so the controllers inside the server use them too.

use base64::Engine;
use bytes::Bytes;
use serde_json::{Map, Value, json};
use steady_store::{ListOptions, Object, Revision, StoreError};

use crate::ApiServer;
use crate::apply::{self, ApplyError, Shape, Writer};
use crate::crd;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::patch::{DecodedPatch, PatchError, PatchType};
use crate::registry::ResourceType;
use crate::request::{
    DeleteOptions, FieldValidation, MAX_NESTING_DEPTH, Params, Propagation, WriteOptions,
    deeper_than, too_deep,
};
use crate::schema;
use crate::selector::{FieldSelector, LabelSelector};
use crate::validation::{self, NameRule};
use crate::webhook::admission::{self, Attributes, Operation};

/// A page of a list: its metadata (resourceVersion, continue) and the objects' bytes.
#[derive(Debug)]
pub struct Listed {
    pub metadata: Value,
    pub items: Vec<Bytes>,
}

impl Listed {
    /// The `<Kind>List` body.
    pub fn body(&self, rt: &ResourceType) -> Bytes {
        list_body(
            &rt.list_kind(),
            &rt.api_version(),
            &self.metadata,
            &self.items,
        )
    }
}

/// The result of a write: the object as stored (or as it would be, on a dry run).
#[derive(Debug)]
pub struct Written {
    pub object: Bytes,
    pub created: bool,
    pub warnings: Vec<String>,
}

/// How long a write without a resourceVersion precondition (a patch, a delete, a scale)
/// keeps re-reading after losing a race to a concurrent writer. kube-apiserver's
/// `GuaranteedUpdate` retries until the write applies, bounded only by the request timeout
/// (60 s); kubectl, kopf and controllers rely on an unconditioned patch never failing with
/// 409 just because others write the same object.
const CONFLICT_RETRY_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// One first attempt, then another for as long as the retry window lasts.
fn attempts_until_applied() -> impl Iterator<Item = ()> {
    let deadline = tokio::time::Instant::now() + CONFLICT_RETRY_WINDOW;
    std::iter::once(()).chain(std::iter::from_fn(move || {
        (tokio::time::Instant::now() < deadline).then_some(())
    }))
}

pub const FINALIZER_ORPHAN: &str = "orphan";
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";
pub const DEFAULT_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

fn parse_stored(object: &Object) -> ApiResult<Value> {
    serde_json::from_slice(&object.value)
        .map_err(|e| ApiError::internal(format!("stored object {} is corrupt: {e}", object.key)))
}

fn to_bytes(value: &Value) -> ApiResult<Bytes> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| ApiError::internal(format!("encoding failed: {e}")))
}

/// The last check before an object from a client is written: the store must be able to
/// read it back (see [`MAX_NESTING_DEPTH`]).
fn check_storable(rt: &ResourceType, obj: &Value) -> ApiResult<()> {
    if deeper_than(obj, MAX_NESTING_DEPTH) {
        let name = meta::name(obj).unwrap_or("");
        return Err(ApiError::unprocessable(format!(
            "{} \"{name}\" is invalid: {}",
            rt.kind,
            too_deep("the object")
        )));
    }
    Ok(())
}

/// How long a read names a revision the store has not reached yet may wait for it,
/// kube-apiserver's watch cache `blockTimeout`.
const FRESHNESS_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl ApiServer {
    /// [`Self::present_converted`] for an object the store has just committed: the write succeeded, so the
    /// client gets a success whatever happens here. Every object passed [`check_storable`]
    /// before it was written, so this only logs (a conversion webhook may also fail); the
    /// stored bytes are valid JSON either way.
    async fn present_committed(&self, rt: &ResourceType, stored: Bytes) -> Bytes {
        match self.present_converted(rt, stored.clone()).await {
            Ok(presented) => presented,
            Err(e) => {
                tracing::error!(kind = %rt.kind, error = %e, "a committed object could not be presented");
                stored
            }
        }
    }

    fn namespace_key(&self, name: &str) -> String {
        format!("/core/namespaces/{name}")
    }

    /// A namespaced write needs an existing, non-terminating namespace.
    async fn check_namespace_for_create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<()> {
        if !rt.namespaced {
            return Ok(());
        }
        let ns =
            ns.ok_or_else(|| ApiError::bad_request("a namespace is required for this resource"))?;
        let stored = self
            .store()
            .get(&self.namespace_key(ns), None)
            .map_err(|e| ApiError::from_store(e, "namespaces", ns))?
            .ok_or_else(|| ApiError::not_found("namespaces", ns))?;
        let namespace = parse_stored(&stored)?;
        if meta::deletion_timestamp(&namespace).is_some() {
            return Err(ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                rt.qualified_name(),
            )));
        }
        Ok(())
    }

    pub(crate) fn get_stored(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<Object> {
        self.store()
            .get(&rt.key(ns, name), None)
            .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), name))?
            .ok_or_else(|| ApiError::not_found(&rt.qualified_name(), name))
    }

    pub(crate) fn get_value(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<(Value, Revision)> {
        let stored = self.get_stored(rt, ns, name)?;
        Ok((parse_stored(&stored)?, stored.revision))
    }

    /// Wait, at most [`FRESHNESS_WAIT`], for the store to reach the `resourceVersion` a read
    /// names, as kube-apiserver's watch cache does before it answers "Too large resource
    /// version". The read itself then reports a revision still out of reach.
    pub async fn wait_for_revision(&self, params: &Params) {
        let Some(wanted) = params
            .non_empty("resourceVersion")
            .and_then(|rv| rv.parse::<Revision>().ok())
        else {
            return;
        };
        let store = self.store();
        if wanted <= store.revision() {
            return;
        }
        let Ok(mut watcher) = store.watch("", store.revision()) else {
            return;
        };
        let reached = async {
            while store.revision() < wanted {
                if !matches!(watcher.next().await, Some(Ok(_))) {
                    break;
                }
            }
        };
        // Not reaching it is reported by the read, which compares again.
        let _ = tokio::time::timeout(FRESHNESS_WAIT, reached).await;
    }

    /// `Ok` if the store has reached the resourceVersion `rv`; otherwise "Too large resource
    /// version" (504), what kube-apiserver answers once its freshness wait is over.
    pub(crate) fn reached(&self, rt: &ResourceType, name: &str, rv: &str) -> ApiResult<()> {
        let (requested, current) = (parse_revision(rv)?, self.store().revision());
        if requested <= current {
            return Ok(());
        }
        Err(ApiError::from_store(
            StoreError::TooLarge { requested, current },
            &rt.qualified_name(),
            name,
        ))
    }

    /// GET of one object (`resourceVersion` "", "0" or not-older-than N).
    pub async fn get(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        params: &Params,
    ) -> ApiResult<Bytes> {
        if let Some(rv) = params.non_empty("resourceVersion").filter(|rv| *rv != "0") {
            self.reached(rt, name, rv)?;
        }
        let stored = self.get_stored(rt, ns, name)?;
        self.present_converted(rt, stored.value).await
    }

    /// Every current object of a built-in kind (stored in the version it is served in), for
    /// the server's own bookkeeping (bootstrap, RBAC checks): no selectors, no paging.
    pub(crate) fn current_builtin_objects(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
    ) -> ApiResult<Vec<Value>> {
        let page = self
            .store()
            .list(&rt.list_prefix(ns), &ListOptions::default(), &|_| true)
            .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), ""))?;
        Ok(page
            .items
            .iter()
            .filter_map(|object| serde_json::from_slice(&object.value).ok())
            .collect())
    }

    /// LIST with selectors, paging and Kubernetes' resourceVersion semantics.
    pub async fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        params: &Params,
    ) -> ApiResult<Listed> {
        let labels = LabelSelector::parse(params.get("labelSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
        let fields = FieldSelector::parse(
            params.get("fieldSelector").unwrap_or(""),
            &rt.field_selectors(),
        )
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let limit = match params.number("limit")? {
            Some(n) if n > 0 => Some(n as usize),
            _ => None,
        };
        let continue_token = params
            .non_empty("continue")
            .map(ContinueToken::decode)
            .transpose()?;
        let at = list_revision(params, continue_token.as_ref(), self.store().revision())?;
        let prefix = rt.list_prefix(ns);
        let filter = selector_filter(labels, fields);
        let options = ListOptions {
            at,
            start_after: continue_token.as_ref().map(|t| t.start.as_str()),
            limit,
        };
        let page = self.store().list(&prefix, &options, &filter).map_err(|e| match e {
            StoreError::Expired { .. } if continue_token.is_some() => ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue value from the response to get a consistent snapshot.",
            ),
            other => ApiError::from_store(other, &rt.qualified_name(), ""),
        })?;
        let continue_value = page.next_key.as_ref().map(|key| {
            ContinueToken {
                revision: page.revision,
                start: key.to_string(),
            }
            .encode()
        });
        let mut metadata = json!({"resourceVersion": page.revision.to_string()});
        if let Some(token) = continue_value {
            metadata["continue"] = Value::String(token);
        }
        let mut items = Vec::with_capacity(page.items.len());
        for object in page.items {
            items.push(self.present_converted(rt, object.value).await?);
        }
        Ok(Listed { metadata, items })
    }

    /// POST: create an object in `ns` (None for cluster-scoped kinds).
    pub async fn create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        self.create_as(rt, ns, obj, opts, Ownership::Update { subresource: "" })
            .await
    }

    async fn create_as(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        mut obj: Value,
        opts: &WriteOptions,
        ownership: Ownership<'_>,
    ) -> ApiResult<Written> {
        check_type(rt, &mut obj)?;
        let ns = self.resolve_namespace(rt, ns, &obj)?;
        let name = self.resolve_name(rt, &mut obj)?;
        self.check_namespace_for_create(rt, ns.as_deref(), &name)
            .await?;
        if meta::resource_version(&obj).is_some() {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let now = self.timestamp();
        {
            let m = meta::metadata_mut(&mut obj);
            m.insert("uid".into(), Value::String(self.new_uid()));
            m.insert("creationTimestamp".into(), Value::String(now));
            m.insert("generation".into(), json!(1));
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
            if let Some(ns) = &ns {
                m.insert("namespace".into(), Value::String(ns.clone()));
            }
        }
        if rt.status_subresource && !rt.builtin {
            obj.as_object_mut().map(|o| o.remove("status"));
        }
        let mut warnings = Vec::new();
        self.admit(rt, None, &mut obj, opts, &mut warnings)?;
        let attrs = Attributes::new(rt, Operation::Create, ns.as_deref(), &name, opts);
        self.admit_by_webhooks(&attrs, &mut obj, None, opts, &mut warnings)
            .await?;
        self.record_ownership(rt, None, &mut obj, opts, ownership);
        check_storable(rt, &obj)?;
        if opts.dry_run {
            return Ok(Written {
                object: to_bytes(&obj)?,
                created: true,
                warnings,
            });
        }
        let key = rt.key(ns.as_deref(), &name);
        let obj = self.to_storage_version(rt, obj).await?;
        let stored = self
            .store()
            .create(&key, obj)
            .await
            .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), &name))?;
        self.after_commit(rt, &stored.value);
        Ok(Written {
            object: self.present_committed(rt, stored.value).await,
            created: true,
            warnings,
        })
    }

    fn resolve_namespace(
        &self,
        rt: &ResourceType,
        url_ns: Option<&str>,
        obj: &Value,
    ) -> ApiResult<Option<String>> {
        if !rt.namespaced {
            return Ok(None);
        }
        let body_ns = meta::namespace(obj);
        match (url_ns, body_ns) {
            (Some(u), Some(b)) if u != b => Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
            (Some(u), _) => Ok(Some(u.to_string())),
            (None, Some(b)) => Ok(Some(b.to_string())),
            (None, None) => Err(ApiError::bad_request(
                "a namespace is required for this resource",
            )),
        }
    }

    fn resolve_name(&self, rt: &ResourceType, obj: &mut Value) -> ApiResult<String> {
        let rule = NameRule::for_kind(&rt.group, &rt.plural, rt.builtin);
        let name = match meta::name(obj) {
            Some(name) => name.to_string(),
            None => match meta::meta_str(obj, "generateName").filter(|g| !g.is_empty()) {
                Some(prefix) => {
                    if let Some(err) = validation::validate_generate_name(prefix, rule) {
                        return Err(ApiError::invalid(&rt.kind, "", &[err]));
                    }
                    let max_prefix = 58.min(prefix.len());
                    let name = format!(
                        "{}{}",
                        &prefix[..floor_char_boundary(prefix, max_prefix)],
                        self.name_suffix()
                    );
                    meta::metadata_mut(obj).insert("name".into(), Value::String(name.clone()));
                    name
                }
                None => String::new(),
            },
        };
        if let Some(err) = validation::validate_name(&name, rule) {
            return Err(ApiError::invalid(&rt.kind, &name, &[err]));
        }
        Ok(name)
    }

    /// Defaulting, pruning and validation every write goes through.
    pub(crate) fn admit(
        &self,
        rt: &ResourceType,
        old: Option<&Value>,
        obj: &mut Value,
        opts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        let errors = validation::validate_labels_and_annotations(obj);
        if !errors.is_empty() {
            return Err(ApiError::invalid(
                &rt.kind,
                meta::name(obj).unwrap_or(""),
                &errors,
            ));
        }
        if let Some(schema) = &rt.schema {
            let unknown = schema::prune(obj, schema);
            match opts.field_validation {
                FieldValidation::Strict if !unknown.is_empty() => {
                    let fields: Vec<String> = unknown
                        .iter()
                        .map(|f| format!("unknown field \"{f}\""))
                        .collect();
                    return Err(ApiError::bad_request(format!(
                        "{} in body is invalid: strict decoding error: {}",
                        rt.kind,
                        fields.join(", ")
                    )));
                }
                FieldValidation::Warn => {
                    warnings.extend(unknown.iter().map(|f| format!("unknown field \"{f}\"")))
                }
                _ => {}
            }
            schema::apply_defaults(obj, schema);
            let errors = schema::validate(obj, schema);
            if !errors.is_empty() {
                return Err(ApiError::invalid(
                    &rt.kind,
                    meta::name(obj).unwrap_or(""),
                    &errors,
                ));
            }
        }
        if rt.builtin {
            builtin_defaults(self, rt, old, obj)?;
        }
        if rt.crd_name.is_none() && rt.group == "apiextensions.k8s.io" {
            crd::prepare(self, obj, old)?;
        }
        Ok(())
    }

    /// Side effects of a committed write that must be visible before the response:
    /// a CRD's kinds are served as soon as its create or update returns.
    fn after_commit(&self, rt: &ResourceType, stored: &Bytes) {
        if rt.group == "apiextensions.k8s.io"
            && rt.plural == "customresourcedefinitions"
            && let Ok(value) = serde_json::from_slice::<Value>(stored)
        {
            crd::register(self, &value);
        }
    }

    fn after_delete(&self, rt: &ResourceType, name: &str) {
        if rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions" {
            crd::unregister(self, name);
        }
    }

    /// PUT, on the object or its `status` subresource.
    pub async fn update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        check_type(rt, &mut obj)?;
        match meta::name(&obj) {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {}
        }
        if let (Some(body_ns), Some(url_ns)) = (meta::namespace(&obj), ns)
            && rt.namespaced
            && body_ns != url_ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let stored = self.get_stored(rt, ns, name)?;
        if let Some(rv) = meta::resource_version(&obj)
            && parse_revision(rv)? != stored.revision
        {
            return Err(ApiError::modified(&rt.qualified_name(), name));
        }
        let old = self.convert_object(rt, parse_stored(&stored)?).await?;
        let ownership = Ownership::Update {
            subresource: sub.unwrap_or(""),
        };
        self.commit_update(
            rt,
            ns,
            name,
            sub,
            &old,
            stored.revision,
            obj,
            opts,
            ownership,
        )
        .await
    }

    /// Records in `new`'s `managedFields` what a non-apply write changed (an apply has
    /// recorded its own).
    fn record_ownership(
        &self,
        rt: &ResourceType,
        old: Option<&Value>,
        new: &mut Value,
        opts: &WriteOptions,
        ownership: Ownership,
    ) {
        if let Ownership::Update { subresource } = ownership {
            let (now, api_version) = (self.timestamp(), rt.api_version());
            let writer = writer(&api_version, opts, subresource, &now);
            apply::record_update(old, new, &writer, shape(rt));
            drop_managed_fields_if_too_deep(new);
        }
    }

    /// Apply the update rules to `new` against `old` (at revision `rev`) and store it.
    #[allow(clippy::too_many_arguments)]
    async fn commit_update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        old: &Value,
        rev: Revision,
        new: Value,
        opts: &WriteOptions,
        ownership: Ownership<'_>,
    ) -> ApiResult<Written> {
        let mut new = match sub {
            Some("status") => with_status_of(old, &new),
            Some("ephemeralcontainers") => with_ephemeral_containers_of(old, &new),
            Some(other) if other != "finalize" => {
                return Err(ApiError::path_not_found());
            }
            _ if rt.status_subresource => with_status_of(&new, old),
            _ => new,
        };
        if sub == Some("finalize") {
            // Only spec.finalizers of a namespace may change through /finalize.
            let finalizers = new.pointer("/spec/finalizers").cloned();
            new = old.clone();
            match finalizers {
                Some(f) => new["spec"]["finalizers"] = f,
                None => {
                    new.get_mut("spec")
                        .and_then(Value::as_object_mut)
                        .map(|s| s.remove("finalizers"));
                }
            }
        }
        keep_server_fields(old, &mut new);
        if meta::spec_part(old) != meta::spec_part(&new) {
            meta::metadata_mut(&mut new)
                .insert("generation".into(), json!(meta::generation(old) + 1));
        }
        if meta::deletion_timestamp(old).is_some() {
            let old_finalizers = meta::finalizers(old);
            if let Some(added) = meta::finalizers(&new)
                .into_iter()
                .find(|f| !old_finalizers.contains(f))
            {
                return Err(ApiError::unprocessable(format!(
                    "{} \"{name}\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [\"{added}\"]",
                    rt.kind
                )));
            }
        }
        let mut warnings = Vec::new();
        self.admit(rt, Some(old), &mut new, opts, &mut warnings)?;
        let attrs = Attributes::new(rt, Operation::Update, ns, name, opts).on_subresource(sub);
        self.admit_by_webhooks(&attrs, &mut new, Some(old), opts, &mut warnings)
            .await?;
        self.record_ownership(rt, Some(old), &mut new, opts, ownership);
        meta::metadata_mut(&mut new)
            .insert("resourceVersion".into(), Value::String(rev.to_string()));
        if meta::same_content(old, &new) {
            return Ok(Written {
                object: self.present_converted(rt, to_bytes(old)?).await?,
                created: false,
                warnings,
            });
        }
        check_storable(rt, &new)?;
        if opts.dry_run {
            return Ok(Written {
                object: to_bytes(&new)?,
                created: false,
                warnings,
            });
        }
        let key = rt.key(ns, name);
        if deletion_complete(&new) {
            let stored = self
                .store()
                .delete(&key, Some(rev))
                .await
                .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), name))?;
            self.after_delete(rt, name);
            return Ok(Written {
                object: self.present_committed(rt, stored.value).await,
                created: false,
                warnings,
            });
        }
        let new = self.to_storage_version(rt, new).await?;
        let stored = self
            .store()
            .update(&key, new, Some(rev))
            .await
            .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), name))?;
        self.after_commit(rt, &stored.value);
        Ok(Written {
            object: self.present_committed(rt, stored.value).await,
            created: false,
            warnings,
        })
    }

    /// PATCH of any type, on the object or a subresource; apply-patch creates when missing.
    #[allow(clippy::too_many_arguments)]
    pub async fn patch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        patch: &DecodedPatch,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let patch_type = patch.patch_type();
        if patch_type == PatchType::StrategicMerge && !rt.builtin {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json",
            ));
        }
        if patch_type == PatchType::Apply && opts.field_manager.is_none() {
            return Err(ApiError::bad_request(
                "PATCH /apply requires a non-empty fieldManager query parameter",
            ));
        }
        if sub == Some("scale") {
            return self.patch_scale(rt, ns, name, patch, opts).await;
        }
        for () in attempts_until_applied() {
            let stored = match self.get_stored(rt, ns, name) {
                Ok(stored) => stored,
                Err(e) if e.code == 404 && patch_type == PatchType::Apply && sub.is_none() => {
                    let mut applied = self.patched(rt, sub, patch, &Value::Null, opts)?;
                    meta::metadata_mut(&mut applied)
                        .insert("name".into(), Value::String(name.to_string()));
                    return match self
                        .create_as(rt, ns, applied, opts, Ownership::Applied)
                        .await
                    {
                        Err(e) if e.reason == "AlreadyExists" => continue,
                        other => other,
                    };
                }
                Err(e) => return Err(e),
            };
            let old = self.convert_object(rt, parse_stored(&stored)?).await?;
            let new = self.patched(rt, sub, patch, &old, opts)?;
            if !new.is_object() {
                return Err(ApiError::unprocessable(
                    "the patched object is not a JSON object",
                ));
            }
            let requested_rv = meta::resource_version(&new).map(str::to_string);
            if let Some(rv) = &requested_rv
                && parse_revision(rv)? != stored.revision
            {
                return Err(ApiError::modified(&rt.qualified_name(), name));
            }
            let mut new = new;
            check_type(rt, &mut new)?;
            if meta::name(&new) != Some(name) {
                return Err(ApiError::bad_request(
                    "metadata.name cannot be changed by a patch",
                ));
            }
            let ownership = match patch_type {
                PatchType::Apply => Ownership::Applied,
                _ => Ownership::Update {
                    subresource: sub.unwrap_or(""),
                },
            };
            match self
                .commit_update(
                    rt,
                    ns,
                    name,
                    sub,
                    &old,
                    stored.revision,
                    new,
                    opts,
                    ownership,
                )
                .await
            {
                Err(e) if e.reason == "Conflict" && !patch.names_resource_version() => continue,
                other => return other,
            }
        }
        Err(ApiError::modified(&rt.qualified_name(), name))
    }

    /// `current` patched; an apply also records its ownership (server-side apply).
    fn patched(
        &self,
        rt: &ResourceType,
        sub: Option<&str>,
        patch: &DecodedPatch,
        current: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let DecodedPatch::Apply(config) = patch else {
            return patch.apply(&rt.kind, current).map_err(patch_error);
        };
        let (now, api_version) = (self.timestamp(), rt.api_version());
        let writer = writer(&api_version, opts, sub.unwrap_or(""), &now);
        let mut applied =
            apply::apply(current, config, &writer, opts.force, shape(rt)).map_err(apply_error)?;
        drop_managed_fields_if_too_deep(&mut applied);
        Ok(applied)
    }

    /// DELETE of one object, with preconditions, finalizers, propagation and grace periods.
    pub async fn delete(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<(Bytes, bool)> {
        for () in attempts_until_applied() {
            let stored = self.get_stored(rt, ns, name)?;
            let mut obj = parse_stored(&stored)?;
            check_preconditions(rt, name, &obj, stored.revision, opts)?;
            let attrs = Attributes::delete(rt, ns, name, opts.dry_run);
            self.admit_delete_by_webhooks(&attrs, &obj).await?;
            if opts.dry_run {
                return Ok((self.present_converted(rt, stored.value).await?, false));
            }
            let propagation = opts.propagation.unwrap_or(Propagation::Background);
            let mut finalizers = meta::finalizers(&obj);
            let extra = match propagation {
                Propagation::Foreground => Some(FINALIZER_FOREGROUND),
                Propagation::Orphan => Some(FINALIZER_ORPHAN),
                Propagation::Background => None,
            };
            if let Some(f) = extra.filter(|f| !finalizers.iter().any(|x| x == f))
                && (meta::deletion_timestamp(&obj).is_none() || !finalizers.is_empty())
            {
                finalizers.push(f.to_string());
            }
            let grace = grace_period(rt, &obj, opts);
            let namespace_finalizing = rt.group.is_empty()
                && rt.plural == "namespaces"
                && obj
                    .pointer("/spec/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty());
            let key = rt.key(ns, name);
            if finalizers.is_empty() && grace == 0 && !namespace_finalizing {
                let result = self.store().delete(&key, Some(stored.revision)).await;
                match result {
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(ApiError::from_store(e, &rt.qualified_name(), name)),
                    Ok(deleted) => {
                        self.after_delete(rt, name);
                        return Ok((self.present_committed(rt, deleted.value).await, true));
                    }
                }
            }
            let already_deleting = meta::deletion_timestamp(&obj).is_some();
            let now = self.now();
            let deadline = (now + chrono::Duration::seconds(grace))
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let previous_grace = obj
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64);
            {
                let m = meta::metadata_mut(&mut obj);
                if !already_deleting || previous_grace.is_some_and(|p| grace < p) {
                    m.insert("deletionTimestamp".into(), Value::String(deadline));
                    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                }
            }
            meta::set_finalizers(&mut obj, &finalizers);
            if namespace_finalizing {
                obj["status"] = json!({"phase": "Terminating"});
            }
            let old = parse_stored(&stored)?;
            if meta::same_content(&old, &obj) {
                return Ok((self.present_converted(rt, stored.value).await?, false));
            }
            match self.store().update(&key, obj, Some(stored.revision)).await {
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(ApiError::from_store(e, &rt.qualified_name(), name)),
                Ok(updated) => return Ok((self.present_committed(rt, updated.value).await, false)),
            }
        }
        Err(ApiError::modified(&rt.qualified_name(), name))
    }

    /// DELETE on a collection: deletes every selected object; returns the list of them.
    pub async fn delete_collection(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        params: &Params,
        opts: &DeleteOptions,
    ) -> ApiResult<Bytes> {
        let selection = Params::parse(Some(&format!(
            "labelSelector={}&fieldSelector={}",
            encode(params.get("labelSelector").unwrap_or("")),
            encode(params.get("fieldSelector").unwrap_or(""))
        )));
        let listed = self.list(rt, ns, &selection).await?;
        let mut deleted = Vec::new();
        for bytes in &listed.items {
            let item: Value =
                serde_json::from_slice(bytes).map_err(|e| ApiError::internal(e.to_string()))?;
            let (Some(name), item_ns) = (meta::name(&item), meta::namespace(&item)) else {
                continue;
            };
            match self.delete(rt, item_ns, name, opts).await {
                Ok((bytes, _)) => deleted.push(bytes),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let metadata = json!({"resourceVersion": self.store().revision().to_string()});
        Ok(list_body(
            &rt.list_kind(),
            &rt.api_version(),
            &metadata,
            &deleted,
        ))
    }

    /// GET of the scale subresource.
    pub fn get_scale(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        let scale = rt.scale.as_ref().ok_or_else(ApiError::path_not_found)?;
        let (obj, _) = self.get_value(rt, ns, name)?;
        Ok(scale_of(&obj, scale))
    }

    /// PUT of the scale subresource: only `spec.replicas` is taken from the Scale.
    pub async fn update_scale(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let scale = rt.scale.as_ref().ok_or_else(ApiError::path_not_found)?;
        let stored = self.get_stored(rt, ns, name)?;
        if let Some(rv) = body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            && parse_revision(rv)? != stored.revision
        {
            return Err(ApiError::modified(&rt.qualified_name(), name));
        }
        let old = parse_stored(&stored)?;
        let written = self
            .write_replicas(rt, ns, name, scale, &old, stored.revision, &body, opts)
            .await?;
        let obj: Value = serde_json::from_slice(&written.object)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(scale_of(&obj, scale))
    }

    async fn patch_scale(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        patch: &DecodedPatch,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let scale = rt.scale.as_ref().ok_or_else(ApiError::path_not_found)?;
        for () in attempts_until_applied() {
            let stored = self.get_stored(rt, ns, name)?;
            let old = parse_stored(&stored)?;
            let current = scale_of(&old, scale);
            let patched = patch.apply("Scale", &current).map_err(patch_error)?;
            match self
                .write_replicas(rt, ns, name, scale, &old, stored.revision, &patched, opts)
                .await
            {
                Err(e) if e.reason == "Conflict" => continue,
                Err(e) => return Err(e),
                Ok(written) => {
                    let obj: Value = serde_json::from_slice(&written.object)
                        .map_err(|e| ApiError::internal(e.to_string()))?;
                    return Ok(Written {
                        object: to_bytes(&scale_of(&obj, scale))?,
                        created: false,
                        warnings: written.warnings,
                    });
                }
            }
        }
        Err(ApiError::modified(&rt.qualified_name(), name))
    }

    #[allow(clippy::too_many_arguments)]
    async fn write_replicas(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        scale: &crate::registry::ScaleSubresource,
        old: &Value,
        rev: Revision,
        scale_body: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let replicas = scale_body
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .ok_or_else(|| {
                ApiError::unprocessable(
                    "Scale.spec.replicas: Required value: an integer is required",
                )
            })?;
        if replicas < 0 {
            return Err(ApiError::unprocessable(format!(
                "Scale.autoscaling \"{name}\" is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
            )));
        }
        let mut new = old.clone();
        set_path(&mut new, &scale.spec_replicas_path, json!(replicas));
        let ownership = Ownership::Update {
            subresource: "scale",
        };
        self.commit_update(rt, ns, name, None, old, rev, new, opts, ownership)
            .await
    }
}

/// How a write's field ownership is recorded.
#[derive(Clone, Copy)]
enum Ownership<'a> {
    /// A create, update or non-apply patch, through `subresource` ("" for the object).
    Update { subresource: &'a str },
    /// An apply, whose `managedFields` are already in the object.
    Applied,
}

fn shape(rt: &ResourceType) -> Shape<'_> {
    Shape {
        kind: &rt.kind,
        schema: rt.schema.as_ref(),
    }
}

fn writer<'a>(
    api_version: &'a str,
    opts: &'a WriteOptions,
    subresource: &'a str,
    now: &'a str,
) -> Writer<'a> {
    Writer {
        manager: opts.manager(),
        api_version,
        subresource,
        now,
    }
}

/// `managedFields` nest about as deep as the fields they describe: an object near the
/// nesting limit is stored without them rather than refused (kube-apiserver, too, drops
/// them when its field manager fails).
fn drop_managed_fields_if_too_deep(obj: &mut Value) {
    if deeper_than(obj, MAX_NESTING_DEPTH) {
        meta::metadata_mut(obj).remove("managedFields");
    }
}

/// kube-apiserver's answers to a refused apply: a 409 naming each conflicting manager
/// and field (cause `FieldManagerConflict`), or a 400.
fn apply_error(e: ApplyError) -> ApiError {
    match &e {
        ApplyError::Conflicts(conflicts) => {
            let causes: Vec<Value> = conflicts
                .fields
                .iter()
                .map(|(manager, field)| {
                    json!({"reason": "FieldManagerConflict", "message": format!("conflict with {manager}"), "field": field})
                })
                .collect();
            ApiError::conflict("", "", "")
                .with_message(e.to_string())
                .with_details(json!({"causes": causes}))
        }
        ApplyError::ManagedFieldsInConfig => ApiError::bad_request(e.to_string()),
    }
}

/// Create the namespaces every cluster starts with.
pub async fn ensure_default_namespaces(server: &ApiServer) -> ApiResult<()> {
    let Some(rt) = server.registry().builtin("", "namespaces") else {
        return Ok(());
    };
    for name in DEFAULT_NAMESPACES {
        if server.get_stored(&rt, None, name).is_ok() {
            continue;
        }
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        match server.create(&rt, None, ns, &WriteOptions::default()).await {
            Err(e) if e.reason != "AlreadyExists" => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

pub(crate) fn patch_error(e: PatchError) -> ApiError {
    match e {
        PatchError::Malformed(m) => ApiError::bad_request(m),
        PatchError::Invalid(m) => ApiError::unprocessable(m),
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn floor_char_boundary(s: &str, mut index: usize) -> usize {
    while index > 0 && !s.is_char_boundary(index) {
        index -= 1;
    }
    index
}

pub fn parse_revision(rv: &str) -> ApiResult<Revision> {
    rv.parse::<Revision>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))
}

/// `{"kind":…,"apiVersion":…,"metadata":…,"items":[…]}` assembled from stored bytes without re-encoding them.
pub fn list_body(kind: &str, api_version: &str, metadata: &Value, items: &[Bytes]) -> Bytes {
    let head = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata}).to_string();
    let size: usize = items.iter().map(|i| i.len() + 1).sum::<usize>() + head.len() + 16;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// Which revision a list reads, from `resourceVersion`, `resourceVersionMatch` and `continue`.
fn list_revision(
    params: &Params,
    token: Option<&ContinueToken>,
    current: Revision,
) -> ApiResult<Option<Revision>> {
    let rv = params.non_empty("resourceVersion");
    let rv_match = params.non_empty("resourceVersionMatch");
    if let Some(token) = token {
        if rv.is_some_and(|rv| rv != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        return Ok(Some(token.revision));
    }
    match (rv, rv_match) {
        (None, Some(_)) => Err(ApiError::unprocessable(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        (None, None) | (Some("0"), None | Some("NotOlderThan")) => Ok(None),
        (Some("0"), Some("Exact")) => Err(ApiError::unprocessable(
            "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        )),
        (Some(rv), Some("Exact")) => Ok(Some(parse_revision(rv)?)),
        (Some(rv), None | Some("NotOlderThan")) => {
            let wanted = parse_revision(rv)?;
            if wanted > current {
                return Err(ApiError::from_store(
                    StoreError::TooLarge {
                        requested: wanted,
                        current,
                    },
                    "",
                    "",
                ));
            }
            Ok(None)
        }
        (_, Some(other)) => Err(ApiError::unprocessable(format!(
            "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
        ))),
    }
}

/// A `continue` token: the snapshot revision and the last key returned.
struct ContinueToken {
    revision: Revision,
    start: String,
}

impl ContinueToken {
    fn encode(&self) -> String {
        let json = json!({"v": "meta.k8s.io/v1", "rv": self.revision, "start": self.start});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json.to_string())
    }

    fn decode(token: &str) -> ApiResult<ContinueToken> {
        let invalid = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| invalid())?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        Ok(ContinueToken {
            revision: value["rv"].as_u64().ok_or_else(invalid)?,
            start: value["start"].as_str().ok_or_else(invalid)?.to_string(),
        })
    }
}

/// A predicate over stored objects (see [`selects`]).
pub fn selector_filter(labels: LabelSelector, fields: FieldSelector) -> impl Fn(&Object) -> bool {
    move |object: &Object| selects(&labels, &fields, &object.labels, &object.value)
}

/// Whether the selectors select a stored object: its labels come from the store's decoded
/// label set; its bytes are parsed only when a field selector needs them.
pub fn selects(
    labels: &LabelSelector,
    fields: &FieldSelector,
    object_labels: &steady_store::Labels,
    bytes: &[u8],
) -> bool {
    labels.matches(object_labels)
        && (fields.is_empty()
            || serde_json::from_slice::<Value>(bytes).is_ok_and(|v| fields.matches(&v)))
}

/// `apiVersion` and `kind` in a body must name this resource; missing ones are filled in.
fn check_type(rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
    let expected_version = rt.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v != expected_version => {
            let same_group =
                rt.crd_name.is_some() && v.split('/').next() == Some(rt.group.as_str());
            if !same_group {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({expected_version})"
                )));
            }
        }
        _ => {}
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some(k) if k != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        _ => {}
    }
    obj["apiVersion"] = Value::String(expected_version);
    obj["kind"] = Value::String(rt.kind.clone());
    if obj
        .get("metadata")
        .is_some_and(|m| !m.is_object() && !m.is_null())
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

/// `target` with the `status` of `source` (or none, if `source` has none).
/// `pods/ephemeralcontainers` changes only `spec.ephemeralContainers` of the stored pod.
fn with_ephemeral_containers_of(old: &Value, new: &Value) -> Value {
    let mut merged = old.clone();
    match new.pointer("/spec/ephemeralContainers") {
        Some(containers) => merged["spec"]["ephemeralContainers"] = containers.clone(),
        None => {
            if let Some(spec) = merged.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("ephemeralContainers");
            }
        }
    }
    merged
}

fn with_status_of(target: &Value, source: &Value) -> Value {
    let mut out = target.clone();
    if let Some(o) = out.as_object_mut() {
        match source.get("status") {
            Some(status) => {
                o.insert("status".into(), status.clone());
            }
            None => {
                o.remove("status");
            }
        }
    }
    out
}

/// Fields clients cannot change with an update.
fn keep_server_fields(old: &Value, new: &mut Value) {
    let old_meta = meta::metadata(old).cloned().unwrap_or_default();
    let new_meta = meta::metadata_mut(new);
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
    ] {
        match old_meta.get(field) {
            Some(v) => {
                new_meta.insert(field.into(), v.clone());
            }
            None => {
                new_meta.remove(field);
            }
        }
    }
}

/// Deleting and nothing left to wait for: the write that got here removes the object.
fn deletion_complete(obj: &Value) -> bool {
    meta::deletion_timestamp(obj).is_some()
        && meta::finalizers(obj).is_empty()
        && obj
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
        && obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|a| a.is_empty())
}

fn check_preconditions(
    rt: &ResourceType,
    name: &str,
    obj: &Value,
    rev: Revision,
    opts: &DeleteOptions,
) -> ApiResult<()> {
    if let Some(uid) = &opts.precondition_uid {
        let actual = meta::uid(obj).unwrap_or("");
        if uid != actual {
            return Err(ApiError::conflict(
                &rt.qualified_name(),
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = &opts.precondition_resource_version
        && rv != &rev.to_string()
    {
        return Err(ApiError::conflict(
            &rt.qualified_name(),
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {rev}"
            ),
        ));
    }
    Ok(())
}

/// Seconds a deletion waits. Only bound, running pods wait (for the node to stop them).
fn grace_period(rt: &ResourceType, obj: &Value, opts: &DeleteOptions) -> i64 {
    if !(rt.builtin && rt.group.is_empty() && rt.plural == "pods") {
        return 0;
    }
    let bound = obj
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let terminal = matches!(
        obj.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if !bound || terminal {
        return 0;
    }
    opts.grace_period_seconds
        .or_else(|| {
            obj.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .clamp(0, MAX_GRACE_PERIOD_SECONDS)
}

/// The longest grace period honoured (about 68 years): a larger one, from the request or the
/// pod's spec, would overflow the deletion timestamp.
const MAX_GRACE_PERIOD_SECONDS: i64 = i32::MAX as i64;

/// The `autoscaling/v1 Scale` view of a custom resource.
fn scale_of(obj: &Value, scale: &crate::registry::ScaleSubresource) -> Value {
    let spec_replicas = get_path(obj, &scale.spec_replicas_path)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status_replicas = get_path(obj, &scale.status_replicas_path)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut status = json!({"replicas": status_replicas});
    if let Some(selector) = scale
        .label_selector_path
        .as_deref()
        .and_then(|p| get_path(obj, p))
        .and_then(selector_string)
    {
        status["selector"] = Value::String(selector);
    }
    let m = meta::metadata(obj).cloned().unwrap_or_default();
    let metadata: Map<String, Value> = [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ]
    .iter()
    .filter_map(|f| m.get(*f).map(|v| (f.to_string(), v.clone())))
    .collect();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": spec_replicas},
        "status": status,
    })
}

/// A Scale's `status.selector`: a CRD's string as is; a built-in kind's `spec.selector`
/// (a LabelSelector, or a ReplicationController's plain label map) in selector syntax.
fn selector_string(selector: &Value) -> Option<String> {
    let object = match selector {
        Value::String(s) => return Some(s.clone()),
        Value::Object(o) => o,
        _ => return None,
    };
    let label_selector =
        if object.contains_key("matchLabels") || object.contains_key("matchExpressions") {
            selector.clone()
        } else {
            json!({"matchLabels": object})
        };
    LabelSelector::from_label_selector_json(&label_selector)
        .ok()
        .map(|s| s.to_string())
}

/// Read a `.spec.replicas`-style JSON path.
fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(obj, |v, seg| v.get(seg))
}

fn set_path(obj: &mut Value, path: &str, value: Value) {
    let segments: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut cursor = obj;
    for seg in &segments[..segments.len().saturating_sub(1)] {
        if !cursor.get(*seg).is_some_and(Value::is_object) {
            cursor[*seg] = json!({});
        }
        cursor = &mut cursor[*seg];
    }
    if let Some(last) = segments.last() {
        cursor[*last] = value;
    }
}

/// The defaults kube-apiserver fills in for the built-in kinds steady serves.
fn builtin_defaults(
    server: &ApiServer,
    rt: &ResourceType,
    old: Option<&Value>,
    obj: &mut Value,
) -> ApiResult<()> {
    crate::defaults::workload(&rt.group, &rt.plural, &rt.kind, old.is_none(), obj)?;
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => default_pod(obj, old.is_none()),
        ("", "services") => default_service(server, obj, old),
        ("", "namespaces") => {
            let name = meta::name(obj).unwrap_or("").to_string();
            let labels = meta::metadata_mut(obj)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
            }
            if old.is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                obj["status"] = json!({"phase": "Active"});
            }
        }
        ("", "secrets") => default_secret(obj)?,
        (admission::GROUP, plural @ (admission::MUTATING | admission::VALIDATING)) => {
            admission::prepare_configuration(obj, plural == admission::MUTATING)?
        }
        _ => {}
    }
    Ok(())
}

fn default_if_missing(map: &mut Value, field: &str, value: Value) {
    if let Some(m) = map.as_object_mut() {
        m.entry(field).or_insert(value);
    }
}

fn default_pod(pod: &mut Value, creating: bool) {
    if !pod.get("spec").is_some_and(Value::is_object) {
        pod["spec"] = json!({});
    }
    let spec = &mut pod["spec"];
    crate::defaults::pod_spec(spec);
    default_if_missing(spec, "serviceAccountName", json!("default"));
    default_if_missing(spec, "enableServiceLinks", json!(true));
    if creating {
        pod["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }
}

fn default_service(server: &ApiServer, svc: &mut Value, old: Option<&Value>) {
    if !svc.get("spec").is_some_and(Value::is_object) {
        svc["spec"] = json!({});
    }
    let old_ip = old.and_then(|o| o.pointer("/spec/clusterIP")).cloned();
    let spec = &mut svc["spec"];
    default_if_missing(spec, "type", json!("ClusterIP"));
    default_if_missing(spec, "sessionAffinity", json!("None"));
    default_if_missing(spec, "ipFamilies", json!(["IPv4"]));
    default_if_missing(spec, "ipFamilyPolicy", json!("SingleStack"));
    default_if_missing(spec, "internalTrafficPolicy", json!("Cluster"));
    let ip = match old_ip {
        Some(ip) => ip,
        None => match spec.get("clusterIP").and_then(Value::as_str) {
            Some(ip) if !ip.is_empty() => json!(ip),
            _ => {
                let (a, b) = server.with_rng(|rng| {
                    (
                        rand::Rng::random_range(rng, 0..16u8),
                        rand::Rng::random_range(rng, 1..255u8),
                    )
                });
                json!(format!("10.96.{a}.{b}"))
            }
        },
    };
    spec["clusterIP"] = ip.clone();
    if ip != "None" {
        spec["clusterIPs"] = json!([ip]);
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            default_if_missing(p, "protocol", json!("TCP"));
            let port = p.get("port").cloned().unwrap_or(Value::Null);
            default_if_missing(p, "targetPort", port);
        }
    }
    default_if_missing(svc, "status", json!({"loadBalancer": {}}));
}

fn default_secret(secret: &mut Value) -> ApiResult<()> {
    default_if_missing(secret, "type", json!("Opaque"));
    if let Some(Value::Object(string_data)) =
        secret.as_object_mut().and_then(|o| o.remove("stringData"))
    {
        if !secret.get("data").is_some_and(Value::is_object) {
            secret["data"] = json!({});
        }
        for (k, v) in string_data {
            let s = v.as_str().unwrap_or("");
            secret["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
        }
    }
    if let Some(data) = secret.get("data").and_then(Value::as_object) {
        for (k, v) in data {
            let ok = v
                .as_str()
                .is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok());
            if !ok {
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data in data[{k:?}]"
                )));
            }
        }
    }
    Ok(())
}
