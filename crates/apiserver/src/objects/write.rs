//! The write rules: create, update and patch (on the object or its status, finalize and
//! ephemeralcontainers subresources), and what every write goes through — type and name
//! checks, the namespace's lifecycle, defaulting, pruning, validation, admission webhooks,
//! server-owned metadata, generation, no-op detection and the storability check.

use bytes::Bytes;
use serde_json::{Value, json};
use steady_store::Revision;

use super::delete::deletion_complete;
use super::ownership::{Ownership, apply_error, shape, writer};
use super::{Target, attempts_until_applied, parse_revision, to_bytes};
use crate::ApiServer;
use crate::admission_policy;
use crate::apply;
use crate::controllers::derived_for_collector;
use crate::crd;
use crate::defaults;
use crate::error::{ApiError, ApiResult};
use crate::escalation;
use crate::meta;
use crate::patch::{DecodedPatch, PatchError, PatchType};
use crate::quantities;
use crate::registry::ResourceType;
use crate::request::{FieldValidation, MAX_NESTING_DEPTH, WriteOptions, deeper_than, too_deep};
use crate::schema;
use crate::spec_rules;
use crate::status_rules::{self, StoredMetadata};
use crate::storage_protection;
use crate::update_rules;
use crate::validation::{self, NameRule};
use crate::webhook::admission::{self, Attributes, Operation};

/// An update about to be stored: the object as stored (`old`, at revision `rev`, whose
/// bytes are `old_bytes`), what the request makes of it (`new`), and how the changed
/// fields are owned.
pub(super) struct Update<'a> {
    pub(super) old: &'a Value,
    pub(super) old_bytes: Bytes,
    pub(super) rev: Revision,
    pub(super) new: Value,
    pub(super) ownership: Ownership<'a>,
}

/// The result of a write: the object as stored (or as it would be, on a dry run).
#[derive(Debug)]
pub struct Written {
    pub object: Bytes,
    pub created: bool,
    pub warnings: Vec<String>,
}

impl Written {
    /// A write that created the object.
    fn created(object: Bytes, warnings: Vec<String>) -> Self {
        Written {
            object,
            created: true,
            warnings,
        }
    }

    /// A write to an object that already existed (an update, or a no-op).
    pub(crate) fn updated(object: Bytes, warnings: Vec<String>) -> Self {
        Written {
            object,
            created: false,
            warnings,
        }
    }
}

/// A dry run's stand-in for the store's depth limit ([`steady_store::MAX_DEPTH`], see
/// [`ApiServer::put_fitting`]), which a write that is not stored never meets: the object
/// within it, without its managedFields if need be, or refused as the store would.
fn fit_for_storage(rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
    if !deeper_than(obj, MAX_NESTING_DEPTH) {
        return Ok(());
    }
    meta::metadata_mut(obj).remove("managedFields");
    if deeper_than(obj, MAX_NESTING_DEPTH) {
        return Err(too_deep_to_store(rt, obj));
    }
    Ok(())
}

/// The 422 for an object nested too deeply to store, even without its managedFields.
fn too_deep_to_store(rt: &ResourceType, obj: &Value) -> ApiError {
    let name = meta::name(obj).unwrap_or("");
    ApiError::unprocessable(format!(
        "{} \"{name}\" is invalid: {}",
        rt.kind,
        too_deep("the object")
    ))
}

/// A write the store is asked for: a create, or an update of the revision read.
#[derive(Clone, Copy)]
enum Put {
    Create,
    Update(Revision),
}

/// Whether a stored namespace is being deleted: only `metadata.deletionTimestamp` is
/// decoded, as every create in the namespace asks, and only when its bytes name that
/// key at all (the store writes keys unescaped, so a namespace without the key cannot
/// hold it, and nearly every namespace is not being deleted).
fn terminating(namespace: &steady_store::Object) -> ApiResult<bool> {
    if memchr::memmem::find(&namespace.value, b"\"deletionTimestamp\"").is_none() {
        return Ok(false);
    }
    #[derive(serde::Deserialize)]
    struct Namespace {
        #[serde(default)]
        metadata: Metadata,
    }
    #[derive(serde::Deserialize, Default)]
    struct Metadata {
        #[serde(rename = "deletionTimestamp")]
        deletion_timestamp: Option<Value>,
    }
    let decoded: Namespace = serde_json::from_slice(&namespace.value).map_err(|e| {
        ApiError::internal(format!("stored object {} is corrupt: {e}", namespace.key))
    })?;
    Ok(decoded
        .metadata
        .deletion_timestamp
        .is_some_and(|t| t.is_string()))
}

/// As kube's `PrepareForUpdate`: a kind that counts spec changes in `generation` counts
/// one when the spec, defaulted (and mutated by admission), differs from the stored one,
/// so a write that sends less than it reads (no defaults) is not a change. It is set
/// either way, so a mutating webhook that undoes a change undoes the count too.
fn bump_generation(rt: &ResourceType, old: &Value, new: &mut Value) {
    if !rt.generation.bumped_by_spec_change() {
        return;
    }
    let generation = if meta::same_spec(old, new) {
        match meta::metadata(old).and_then(|m| m.get("generation")) {
            Some(stored) => stored.clone(),
            None => return,
        }
    } else {
        json!(meta::generation(old) + 1)
    };
    meta::metadata_mut(new).insert("generation".into(), generation);
}

/// What kube-apiserver checks of a built-in object written through its main resource: its
/// spec (`spec_rules`), and on an update what may not change (`update_rules`). A spec an
/// update leaves as stored is not checked again, so objects stored before a rule existed
/// stay writable (their metadata, their finalizers).
fn check_builtin_rules(rt: &ResourceType, old: Option<&Value>, new: &Value) -> ApiResult<()> {
    if !rt.builtin {
        return Ok(());
    }
    let mut errors = Vec::new();
    if old.is_none_or(|old| spec_rules::checked_fields_changed(&rt.group, &rt.plural, old, new)) {
        errors = spec_rules::validate(&rt.group, &rt.plural, new);
        if (rt.group.as_str(), rt.plural.as_str()) == ("batch", "cronjobs") {
            errors.extend(spec_rules::cron_jobs::validate(old, new));
        }
    }
    if let Some(old) = old {
        errors.extend(update_rules::validate(&rt.group, &rt.plural, old, new));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        let name = meta::name(new).unwrap_or("");
        Err(ApiError::invalid(&rt.qualified_kind(), name, &errors))
    }
}

impl ApiServer {
    /// Stores `obj` at `key`. The store refuses an object nested deeper than it can read
    /// back ([`steady_store::MAX_DEPTH`]), and finds that while encoding it, so no write
    /// walks its object for it. `managedFields` nest about as deep as the fields they
    /// describe, so such an object is stored again without them rather than refused
    /// (kube-apiserver, too, drops them when its field manager fails), and refused (422)
    /// only when it is still too deep. `None`: without them, the object is what it was
    /// (`unchanged`), and nothing is written, as for any write that changes nothing.
    async fn put_fitting(
        &self,
        rt: &ResourceType,
        key: &str,
        obj: &mut Value,
        put: Put,
        unchanged: &(dyn Fn(&Value) -> bool + Sync),
    ) -> ApiResult<Option<steady_store::Object>> {
        let derived = derived_for_collector(key, obj);
        let stored = match self.put(key, obj, put, derived.clone()).await {
            Err(steady_store::StoreError::TooDeep) => {
                meta::metadata_mut(obj).remove("managedFields");
                if unchanged(obj) {
                    return Ok(None);
                }
                self.put(key, obj, put, derived).await
            }
            stored => stored,
        };
        stored.map(Some).map_err(|e| match e {
            steady_store::StoreError::TooDeep => too_deep_to_store(rt, obj),
            e => ApiError::from_store(e, &rt.qualified_name(), meta::name(obj).unwrap_or("")),
        })
    }

    async fn put(
        &self,
        key: &str,
        obj: &mut Value,
        put: Put,
        derived: Option<steady_store::Derived>,
    ) -> Result<steady_store::Object, steady_store::StoreError> {
        match put {
            Put::Create => self.store().create_derived(key, obj, derived).await,
            Put::Update(rev) => {
                self.store()
                    .update_derived(key, obj, Some(rev), derived)
                    .await
            }
        }
    }

    pub(crate) fn namespace_key(&self, name: &str) -> String {
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
        if terminating(&stored)? {
            return Err(ApiError::namespace_terminating(
                &rt.qualified_name(),
                name,
                ns,
            ));
        }
        Ok(())
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
        self.admission_objects().creating(rt);
        let now = self.timestamp();
        {
            let m = meta::metadata_mut(&mut obj);
            m.insert("uid".into(), Value::String(self.new_uid()));
            m.insert("creationTimestamp".into(), Value::String(now.clone()));
            if rt.generation.set_on_create() {
                m.insert("generation".into(), json!(1));
            }
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
        // A POST names no object in its URL; an apply that creates does.
        let url_name = match ownership {
            Ownership::Applied => name.as_str(),
            _ => "",
        };
        let requester = opts.requester.as_ref();
        escalation::check_write(self, rt, ns.as_deref(), url_name, &obj, None, requester)?;
        // kube's pod `PrepareForCreate`, which its validation sees the result of. Not in
        // `admit`, which runs again after mutating webhooks.
        if rt.builtin && rt.group.is_empty() && rt.plural == "pods" {
            defaults::set_scheduling_gated(&mut obj, &now);
            defaults::merge_affinity_label_keys(&mut obj);
        }
        check_builtin_rules(rt, None, &obj)?;
        let attrs = Attributes::new(rt, Operation::Create, ns.as_deref(), &name, opts);
        self.admit_by_webhooks(&attrs, &mut obj, None, opts, &mut warnings)
            .await?;
        if rt.group.is_empty() && rt.plural == "pods" {
            defaults::set_qos_class(&mut obj);
        }
        self.check_pod_security(rt, ns.as_deref(), &name, &obj, None, &mut warnings)?;
        self.check_limit_ranges(rt, ns.as_deref(), &name, &obj, true)?;
        let charges = self
            .check_quotas(rt, ns.as_deref(), &name, &obj, None, opts.dry_run)
            .await?;
        self.record_ownership(rt, None, &mut obj, opts, ownership);
        if opts.dry_run {
            fit_for_storage(rt, &mut obj)?;
            return Ok(Written::created(to_bytes(&obj)?, warnings));
        }
        let key = rt.key(ns.as_deref(), &name);
        let mut obj = self.to_storage_version(rt, obj).await?;
        // A create always changes something: `put_fitting` answers `None` for none.
        let stored = self
            .put_fitting(rt, &key, &mut obj, Put::Create, &|_| false)
            .await?
            .ok_or_else(|| ApiError::internal("a create changed nothing"))?;
        self.after_commit(rt, &stored.value);
        if let Some(charges) = charges {
            self.settle_quotas(charges).await;
        }
        if rt.plural == "resourcequotas" {
            self.after_quota_relevant_write(rt, ns.as_deref(), None, None, Some(&obj))
                .await;
        }
        self.keep_written(&stored, obj);
        Ok(Written::created(
            self.present_committed(rt, stored.value).await,
            warnings,
        ))
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
        let mut errors = validation::validate_labels_and_annotations(obj);
        errors.extend(validation::validate_owner_references(obj));
        // kube checks a custom resource's finalizer names when it is created, and only
        // warns about the ones that are not domain-qualified; a built-in object's always.
        if rt.builtin || old.is_none() {
            errors.extend(validation::validate_finalizers(obj, strict_finalizers(rt)));
        }
        if !rt.builtin {
            warnings.extend(validation::finalizer_warnings(obj, old));
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid(
                &rt.qualified_kind(),
                meta::name(obj).unwrap_or(""),
                &errors,
            ));
        }
        if let Some(schema) = &rt.schema {
            let unknown = schema::prune(obj, schema);
            report_unknown_fields(rt, &unknown, opts, warnings)?;
            schema::apply_defaults(obj, schema);
            let errors = rt
                .validation
                .as_deref()
                .map(|validation| schema::validate_with_rules(obj, old, validation))
                .unwrap_or_default();
            if !errors.is_empty() {
                return Err(ApiError::invalid(
                    &rt.qualified_kind(),
                    meta::name(obj).unwrap_or(""),
                    &errors,
                ));
            }
        }
        if rt.builtin {
            quantities::canonicalize(&rt.group, &rt.plural, &rt.kind, &rt.version, obj)?;
            if let Some(typed) = rt.typed {
                let reading = typed.read(obj).map_err(|e| cannot_be_handled(rt, e))?;
                if !reading.is_clean() {
                    report_unknown_fields(rt, &reading.unknown, opts, warnings)?;
                    reading.drop_from(obj);
                }
            }
            defaults::builtin(&rt.group, &rt.plural, &rt.kind, old, obj)?;
            if rt.group.is_empty() && rt.plural == "services" {
                self.allocate_service(rt, old, obj)?;
            }
            if old.is_none() && rt.group.is_empty() && rt.plural == "pods" {
                self.admit_new_pod(obj)?;
            }
            if old.is_none() && rt.group.is_empty() && rt.plural == "persistentvolumeclaims" {
                self.default_storage_class(obj);
            }
            if old.is_none() && rt.group.is_empty() {
                storage_protection::protect_new(&rt.plural, obj);
            }
            if let (admission::GROUP, plural @ (admission::MUTATING | admission::VALIDATING)) =
                (rt.group.as_str(), rt.plural.as_str())
            {
                admission::prepare_configuration(obj, plural == admission::MUTATING)?;
            }
            if let (
                admission::GROUP,
                plural @ (admission_policy::POLICIES | admission_policy::BINDINGS),
            ) = (rt.group.as_str(), rt.plural.as_str())
            {
                admission_policy::config::prepare(obj, plural == admission_policy::BINDINGS)?;
            }
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

    /// PUT, on the object or its `status` subresource.
    pub async fn update(
        &self,
        target: Target<'_>,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let Target { rt, ns, name, sub } = target;
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
        let old = self
            .convert_object(rt, self.decoded_for_write(rt, &stored)?)
            .await?;
        let update = Update {
            old: &old,
            old_bytes: stored.value,
            rev: stored.revision,
            new: obj,
            ownership: match sub {
                Some("binding") => Ownership::Untracked,
                _ => Ownership::Update {
                    subresource: sub.unwrap_or(""),
                },
            },
        };
        self.commit_update(target, update, opts).await
    }

    /// Apply the update rules to the new object against the stored one and store it.
    pub(super) async fn commit_update(
        &self,
        target: Target<'_>,
        update: Update<'_>,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let Target { rt, ns, name, sub } = target;
        let Update {
            old,
            old_bytes,
            rev,
            new,
            ownership,
        } = update;
        let mut new = match sub {
            Some("status") => status_write(rt, new, old),
            Some("ephemeralcontainers") => with_ephemeral_containers_of(old, &new),
            // `pods/binding` writes the node, annotations and the PodScheduled condition.
            Some("binding") => new,
            // The scale subresource wrote the replicas into the object it read.
            Some("scale") => new,
            Some(other) if other != "finalize" => {
                return Err(ApiError::path_not_found());
            }
            _ if rt.status_subresource => with_fields_of(new, old, |field| field == "status"),
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
        if meta::deletion_timestamp(old).is_some() {
            let old_finalizers = meta::finalizers(old);
            let added: std::collections::BTreeSet<String> = meta::finalizers(&new)
                .into_iter()
                .filter(|f| !old_finalizers.contains(f))
                .collect();
            if !added.is_empty() {
                // Go's `%#v` of the sorted set kube builds.
                let shown: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
                let error = schema::FieldError {
                    field: "metadata.finalizers".into(),
                    reason: schema::FieldErrorReason::Forbidden,
                    message: format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        shown.join(", ")
                    ),
                };
                return Err(ApiError::invalid(&rt.qualified_kind(), name, &[error]));
            }
        }
        let mut warnings = Vec::new();
        self.admit(rt, Some(old), &mut new, opts, &mut warnings)?;
        if sub.is_none() {
            let requester = opts.requester.as_ref();
            escalation::check_write(self, rt, ns, name, &new, Some(old), requester)?;
            check_builtin_rules(rt, Some(old), &new)?;
        }
        let attrs = Attributes::new(rt, Operation::Update, ns, name, opts).on_subresource(sub);
        // Validating policies and webhooks see the generation a spec change gives; one a
        // mutating webhook makes counts too.
        bump_generation(rt, old, &mut new);
        self.admit_by_webhooks(&attrs, &mut new, Some(old), opts, &mut warnings)
            .await?;
        bump_generation(rt, old, &mut new);
        self.record_ownership(rt, Some(old), &mut new, opts, ownership);
        if opts.dry_run {
            fit_for_storage(rt, &mut new)?;
        }
        meta::metadata_mut(&mut new)
            .insert("resourceVersion".into(), Value::String(rev.to_string()));
        if meta::same_content(old, &new) {
            return Ok(Written::updated(
                self.present_converted(rt, old_bytes).await?,
                warnings,
            ));
        }
        let charges = match sub {
            None => {
                self.check_pod_security(rt, ns, name, &new, Some(old), &mut warnings)?;
                self.check_limit_ranges(rt, ns, name, &new, false)?;
                self.check_claim_resize(rt, name, old, &new)?;
                self.check_quotas(rt, ns, name, &new, Some(old), opts.dry_run)
                    .await?
            }
            Some(_) => None,
        };
        if opts.dry_run {
            return Ok(Written::updated(to_bytes(&new)?, warnings));
        }
        let key = rt.key(ns, name);
        if deletion_complete(&new) {
            let stored = self
                .store()
                .delete(&key, Some(rev))
                .await
                .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), name))?;
            drop(charges);
            self.after_delete(rt, ns, name, old).await;
            return Ok(Written::updated(
                self.present_committed(rt, stored.value).await,
                warnings,
            ));
        }
        let mut new = self.to_storage_version(rt, new).await?;
        let unchanged = |stripped: &Value| meta::same_content(old, stripped);
        let put = self.put_fitting(rt, &key, &mut new, Put::Update(rev), &unchanged);
        let Some(stored) = put.await? else {
            return Ok(Written::updated(
                self.present_converted(rt, old_bytes).await?,
                warnings,
            ));
        };
        self.after_commit(rt, &stored.value);
        if let Some(charges) = charges {
            self.settle_quotas(charges).await;
        }
        self.after_quota_relevant_write(rt, ns, sub, Some(old), Some(&new))
            .await;
        self.keep_written(&stored, new);
        Ok(Written::updated(
            self.present_committed(rt, stored.value).await,
            warnings,
        ))
    }

    /// PATCH of any type, on the object or a subresource; apply-patch creates when missing.
    pub async fn patch(
        &self,
        target: Target<'_>,
        patch: &DecodedPatch,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let Target { rt, ns, name, sub } = target;
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
            return self.patch_scale(target, patch, opts).await;
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
            let old = self
                .convert_object(rt, self.decoded_for_write(rt, &stored)?)
                .await?;
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
            let update = Update {
                old: &old,
                old_bytes: stored.value,
                rev: stored.revision,
                new,
                ownership: match patch_type {
                    PatchType::Apply => Ownership::Applied,
                    _ => Ownership::Update {
                        subresource: sub.unwrap_or(""),
                    },
                },
            };
            match self.commit_update(target, update, opts).await {
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
        // Too deep with its managedFields, it is stored without them (`put_fitting`).
        apply::apply(current, config, &writer, opts.force, shape(rt)).map_err(apply_error)
    }
}

/// kube's 400 for a body its decoder cannot read as the kind.
fn cannot_be_handled(rt: &ResourceType, why: impl std::fmt::Display) -> ApiError {
    let (kind, version) = (&rt.kind, &rt.version);
    ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}"
    ))
}

/// What the request's `fieldValidation` asks for the fields decoding dropped: a 400
/// (`Strict`), a Warning each (`Warn`, the default) or nothing (`Ignore`).
fn report_unknown_fields(
    rt: &ResourceType,
    unknown: &[impl std::fmt::Display],
    opts: &WriteOptions,
    warnings: &mut Vec<String>,
) -> ApiResult<()> {
    let described = unknown.iter().map(|f| format!("unknown field \"{f}\""));
    match opts.field_validation {
        FieldValidation::Strict if !unknown.is_empty() => {
            let fields: Vec<String> = described.collect();
            Err(cannot_be_handled(
                rt,
                format_args!("strict decoding error: {}", fields.join(", ")),
            ))
        }
        FieldValidation::Warn => {
            warnings.extend(described);
            Ok(())
        }
        _ => Ok(()),
    }
}

pub(crate) fn patch_error(e: PatchError) -> ApiError {
    match e {
        PatchError::Malformed(m) => ApiError::bad_request(m),
        PatchError::Invalid(m) => ApiError::unprocessable(m),
    }
}

fn floor_char_boundary(s: &str, mut index: usize) -> usize {
    while index > 0 && !s.is_char_boundary(index) {
        index -= 1;
    }
    index
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

/// Whether the kind's finalizer names follow core's rule (a name without a `/` must be
/// kube's own): every built-in kind validated by core's `ValidateObjectMeta`, which
/// apiextensions' and the aggregator's objects are not.
fn strict_finalizers(rt: &ResourceType) -> bool {
    rt.builtin
        && !matches!(
            rt.group.as_str(),
            "apiextensions.k8s.io" | "apiregistration.k8s.io"
        )
}

/// What a status write of `new` leaves of the stored `old`: its status, and the
/// metadata the kind's status strategy takes from the request.
fn status_write(rt: &ResourceType, new: Value, old: &Value) -> Value {
    match status_rules::stored_metadata(&rt.group, &rt.plural, rt.builtin) {
        StoredMetadata::All => with_fields_of(new, old, |field| field != "status"),
        StoredMetadata::Fields(stored) => {
            let mut new =
                with_fields_of(new, old, |field| field != "status" && field != "metadata");
            meta::copy_fields(meta::metadata(old), meta::metadata_mut(&mut new), stored);
            status_rules::backfill_status(&rt.group, &rt.plural, old, &mut new);
            new
        }
    }
}

/// `target` with the top-level fields `chosen` as they are in `source`: what the status
/// subresource keeps of the stored object, or the object itself of its stored status. A
/// field is copied only where the two differ: a patch leaves most of them equal, and
/// comparing costs less than copying.
fn with_fields_of(mut target: Value, source: &Value, chosen: impl Fn(&str) -> bool) -> Value {
    let (Some(target_map), Some(source_map)) = (target.as_object_mut(), source.as_object()) else {
        return target;
    };
    let absent_from_source: Vec<String> = target_map
        .keys()
        .filter(|field| chosen(field) && !source_map.contains_key(*field))
        .cloned()
        .collect();
    for field in absent_from_source {
        target_map.remove(&field);
    }
    for (field, value) in source_map.iter().filter(|(field, _)| chosen(field)) {
        if target_map.get(field) != Some(value) {
            target_map.insert(field.clone(), value.clone());
        }
    }
    target
}

/// Fields clients cannot change with an update.
fn keep_server_fields(old: &Value, new: &mut Value) {
    let fields = [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
    ];
    meta::copy_fields(meta::metadata(old), meta::metadata_mut(new), &fields);
}
