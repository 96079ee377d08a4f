//! Admission webhooks (`admissionregistration.k8s.io/v1` Mutating- and
//! ValidatingWebhookConfiguration): which webhooks a write concerns (rules, scope,
//! `namespaceSelector`, `objectSelector`, `matchPolicy`), the `admission.k8s.io/v1`
//! AdmissionReview sent to each, and what its answer does to the write (a JSON patch, a
//! denial, warnings), with `failurePolicy`, `timeoutSeconds`, `sideEffects` on dry runs and
//! `reinvocationPolicy`. Knows nothing of HTTP (see [`super::client`]) nor of the store
//! write that follows.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::{Map, Value, json};
use steady_store::ListOptions;

use super::client::{self, CallError};
use crate::ApiServer;
use crate::auth::{ADMIN, Identity};
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::objects::scale::{scale_of, with_replicas_of};
use crate::registry::ResourceType;
use crate::request::{DeleteOptions, FieldValidation, WriteOptions};
use crate::schema::{FieldError, FieldErrorReason};
use crate::selector::LabelSelector;

pub const GROUP: &str = "admissionregistration.k8s.io";
pub const MUTATING: &str = "mutatingwebhookconfigurations";
pub const VALIDATING: &str = "validatingwebhookconfigurations";

/// One kind of webhook configuration and the store prefix of its objects, spelled out
/// because every write reads both kinds (a test checks them against [`GROUP`]).
struct Configurations {
    plural: &'static str,
    keys: &'static str,
}

const MUTATING_CONFIGS: Configurations = Configurations {
    plural: MUTATING,
    keys: "/admissionregistration.k8s.io/mutatingwebhookconfigurations/",
};
const VALIDATING_CONFIGS: Configurations = Configurations {
    plural: VALIDATING,
    keys: "/admissionregistration.k8s.io/validatingwebhookconfigurations/",
};

/// kube-apiserver's default and largest `timeoutSeconds`.
const DEFAULT_TIMEOUT_SECONDS: u64 = 10;
const MAX_TIMEOUT_SECONDS: u64 = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        }
    }
}

/// What a write is, as admission sees it.
pub struct Attributes<'a> {
    pub rt: &'a ResourceType,
    pub sub: Option<&'a str>,
    pub operation: Operation,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub dry_run: bool,
    pub field_manager: Option<&'a str>,
    /// Who asks (the `userInfo` webhooks see).
    pub user: &'a Identity,
}

impl<'a> Attributes<'a> {
    pub fn new(
        rt: &'a ResourceType,
        operation: Operation,
        namespace: Option<&'a str>,
        name: &'a str,
        opts: &'a WriteOptions,
    ) -> Self {
        Attributes {
            rt,
            sub: None,
            operation,
            namespace,
            name,
            dry_run: opts.dry_run,
            field_manager: opts.field_manager.as_deref(),
            user: opts.requester.as_ref().unwrap_or(&ADMIN),
        }
    }

    pub fn delete(
        rt: &'a ResourceType,
        namespace: Option<&'a str>,
        name: &'a str,
        opts: &'a DeleteOptions,
    ) -> Self {
        Attributes {
            rt,
            sub: None,
            operation: Operation::Delete,
            namespace,
            name,
            dry_run: opts.dry_run,
            field_manager: None,
            user: opts.requester.as_ref().unwrap_or(&ADMIN),
        }
    }

    pub fn on_subresource(mut self, sub: Option<&'a str>) -> Self {
        self.sub = sub;
        self
    }

    /// kube-apiserver never sends webhook configurations to webhooks, so a broken webhook
    /// cannot lock out the configuration that would fix it.
    fn exempt(&self) -> bool {
        self.rt.builtin
            && self.rt.group == GROUP
            && (self.rt.plural == MUTATING || self.rt.plural == VALIDATING)
    }
}

/// One webhook of a configuration.
struct Webhook {
    spec: Value,
}

impl Webhook {
    fn name(&self) -> &str {
        self.spec["name"].as_str().unwrap_or("")
    }

    fn ignores_failures(&self) -> bool {
        self.spec["failurePolicy"] == "Ignore"
    }

    fn exact_match_only(&self) -> bool {
        self.spec["matchPolicy"] == "Exact"
    }

    fn reinvoked_if_needed(&self) -> bool {
        self.spec["reinvocationPolicy"] == "IfNeeded"
    }

    fn timeout(&self) -> Duration {
        let seconds = self.spec["timeoutSeconds"]
            .as_u64()
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            .clamp(1, MAX_TIMEOUT_SECONDS);
        Duration::from_secs(seconds)
    }

    /// steady speaks only `admission.k8s.io/v1`, which the webhook must list.
    fn accepts_v1(&self) -> Result<(), CallError> {
        if strings(&self.spec["admissionReviewVersions"]).any(|v| v == "v1") {
            return Ok(());
        }
        Err(CallError::Config(
            "webhook does not accept v1 AdmissionReview".into(),
        ))
    }

    fn safe_on_dry_run(&self) -> bool {
        matches!(
            self.spec["sideEffects"].as_str(),
            Some("None" | "NoneOnDryRun")
        )
    }
}

/// The label selector at `spec[field]` of an admission configuration (`owner` names it in
/// the error of one that cannot be read).
fn selector(spec: &Value, field: &str, owner: &str) -> ApiResult<LabelSelector> {
    LabelSelector::from_label_selector_json(&spec[field])
        .map_err(|e| ApiError::internal(format!("{owner} has an invalid {field}: {}", e.0)))
}

/// Which version of the resource a webhook is sent (or a policy sees): the request's own,
/// or (matchPolicy Equivalent) another served version of the same resource its rules name.
pub(crate) enum Matched {
    Exact,
    Equivalent(Arc<ResourceType>),
}

impl Matched {
    /// The resource matched, the write being to `requested`.
    pub(crate) fn resource<'a>(&'a self, requested: &'a ResourceType) -> &'a ResourceType {
        match self {
            Matched::Exact => requested,
            Matched::Equivalent(rt) => rt,
        }
    }
}

pub(crate) fn strings(value: &Value) -> impl Iterator<Item = &str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn lists(value: &Value, wanted: &str) -> bool {
    strings(value).any(|v| v == "*" || v == wanted)
}

/// A rule's `resources` entry `res/sub` against the request's resource and subresource:
/// `*` names every resource but no subresource, `*/*` everything, `pods/*` every
/// subresource of pods.
fn names_resource(entry: &str, plural: &str, sub: &str) -> bool {
    let (res, entry_sub) = entry.split_once('/').unwrap_or((entry, ""));
    (res == "*" || res == plural) && (entry_sub == "*" || entry_sub == sub)
}

pub(crate) fn rule_matches(
    rule: &Value,
    operation: Operation,
    rt: &ResourceType,
    sub: &str,
) -> bool {
    let scope_matches = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !rt.namespaced,
        "Namespaced" => rt.namespaced,
        _ => true,
    };
    scope_matches
        && lists(&rule["operations"], operation.as_str())
        && lists(&rule["apiGroups"], &rt.group)
        && lists(&rule["apiVersions"], &rt.version)
        && strings(&rule["resources"]).any(|entry| names_resource(entry, &rt.plural, sub))
}

fn rules_match(hook: &Webhook, attrs: &Attributes<'_>, rt: &ResourceType) -> bool {
    let sub = attrs.sub.unwrap_or("");
    strings_or_objects(&hook.spec["rules"]).any(|rule| rule_matches(rule, attrs.operation, rt, sub))
}

fn strings_or_objects(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

fn labels_of(object: Option<&Value>) -> Option<&Map<String, Value>> {
    object.and_then(meta::labels)
}

/// Everything a webhook's answer is allowed to do.
struct Answer {
    allowed: bool,
    status: Option<Value>,
    patch: Option<Vec<u8>>,
    warnings: Vec<String>,
}

fn parse_answer(review: Value, uid: &str) -> Result<Answer, CallError> {
    let invalid = |m: String| CallError::InvalidResponse(m);
    if review["apiVersion"] != "admission.k8s.io/v1" || review["kind"] != "AdmissionReview" {
        return Err(invalid(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            review["apiVersion"].as_str().unwrap_or(""),
            review["kind"].as_str().unwrap_or("")
        )));
    }
    let response = client::review_response(&review, uid, "webhook response was absent")?;
    let patch = match (
        response.get("patch").and_then(Value::as_str),
        response["patchType"].as_str(),
    ) {
        (None, _) => None,
        (Some(patch), Some("JSONPatch")) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(patch)
                .map_err(|e| invalid(format!("the patch is not base64: {e}")))?,
        ),
        (Some(_), other) => {
            return Err(invalid(format!(
                "unsupported patch type {:?}",
                other.unwrap_or("")
            )));
        }
    };
    Ok(Answer {
        allowed: response["allowed"] == true,
        status: response.get("status").filter(|s| s.is_object()).cloned(),
        patch,
        warnings: strings(&response["warnings"]).map(str::to_string).collect(),
    })
}

/// The Status reasons Kubernetes defines, so a webhook's reason can be carried through.
const KNOWN_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// kube-apiserver's rejection: the webhook's own Status, its message prefixed with
/// `admission webhook "<name>" denied the request`, its code at least 400.
fn denial(webhook: &str, status: Option<&Value>) -> ApiError {
    let empty = json!({});
    let status = status.unwrap_or(&empty);
    let denied_by = format!("admission webhook {webhook:?} denied the request");
    let text = |field: &str| status[field].as_str().filter(|s| !s.is_empty());
    let message = match (text("message"), text("reason")) {
        (Some(message), _) => format!("{denied_by}: {message}"),
        (None, Some(reason)) => format!("{denied_by}: {reason}"),
        (None, None) => format!("{denied_by} without explanation"),
    };
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400 && *c < 600)
        .unwrap_or(400);
    let reason = text("reason")
        .and_then(|r| KNOWN_REASONS.iter().find(|known| **known == r))
        .copied()
        .unwrap_or("");
    let error = ApiError {
        code,
        reason,
        message,
        details: None,
    };
    match status.get("details").filter(|d| d.is_object()) {
        Some(details) => error.with_details(details.clone()),
        None => error,
    }
}

/// `failurePolicy: Fail`: kube-apiserver's `NewInternalError` of the call's failure.
fn call_failed(webhook: &str, error: &CallError) -> ApiError {
    let cause = match error {
        CallError::InvalidResponse(_) => format!("failed calling webhook {webhook:?}: {error}"),
        _ => format!("failed calling webhook {webhook:?}: failed to call webhook: {error}"),
    };
    ApiError::internal(format!("Internal error occurred: {cause}"))
        .with_details(json!({"causes": [{"message": cause}]}))
}

impl ApiServer {
    /// Admission of a create or an update by webhooks: the mutating ones in order (their
    /// patches applied to `object`, which is then defaulted and validated again), then the
    /// validating ones. kube-apiserver calls validating webhooks in parallel; steady calls
    /// them one after another, which only changes how long a request with several takes.
    pub(crate) async fn admit_by_webhooks(
        &self,
        attrs: &Attributes<'_>,
        object: &mut Value,
        old: Option<&Value>,
        opts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        if attrs.exempt() {
            return self
                .admit_by_policies(attrs, Some(object), old, warnings)
                .await;
        }
        if self.run_mutating(attrs, object, old, warnings).await? {
            // Fields a webhook adds are pruned and defaulted as kube-apiserver does after
            // mutating admission; they are not subject to the client's fieldValidation.
            let again = WriteOptions {
                field_validation: FieldValidation::Ignore,
                ..opts.clone()
            };
            self.admit(attrs.rt, old, object, &again, warnings)?;
        }
        self.admit_by_policies(attrs, Some(object), old, warnings)
            .await?;
        self.run_validating(attrs, Some(object), old, warnings)
            .await
    }

    /// Admission of a delete: validating and mutating webhooks see the object being
    /// deleted as `oldObject`; nothing can be patched.
    pub(crate) async fn admit_delete_by_webhooks(
        &self,
        attrs: &Attributes<'_>,
        old: &Value,
    ) -> ApiResult<()> {
        let mut warnings = Vec::new();
        if attrs.exempt() {
            return self
                .admit_by_policies(attrs, None, Some(old), &mut warnings)
                .await;
        }
        for hook in self.webhooks(&MUTATING_CONFIGS)? {
            self.call(&hook, attrs, None, Some(old), &mut warnings)
                .await?;
        }
        self.admit_by_policies(attrs, None, Some(old), &mut warnings)
            .await?;
        self.run_validating(attrs, None, Some(old), &mut warnings)
            .await
    }

    /// Returns whether any webhook changed `object`.
    async fn run_mutating(
        &self,
        attrs: &Attributes<'_>,
        object: &mut Value,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<bool> {
        let hooks = self.webhooks(&MUTATING_CONFIGS)?;
        let mut reinvocable = Vec::new();
        let mut last_change = None;
        for (index, hook) in hooks.iter().enumerate() {
            if self.mutate(hook, attrs, object, old, warnings).await? {
                last_change = Some(index);
            }
            if hook.reinvoked_if_needed() {
                reinvocable.push(index);
            }
        }
        // IfNeeded: called once more when a later webhook changed the object after it ran.
        for index in reinvocable {
            if last_change.is_some_and(|last| index < last) {
                self.mutate(&hooks[index], attrs, object, old, warnings)
                    .await?;
            }
        }
        Ok(last_change.is_some())
    }

    async fn run_validating(
        &self,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        for hook in self.webhooks(&VALIDATING_CONFIGS)? {
            self.call(&hook, attrs, object, old, warnings).await?;
        }
        Ok(())
    }

    /// Call one mutating webhook and apply its patch; whether the object changed.
    async fn mutate(
        &self,
        hook: &Webhook,
        attrs: &Attributes<'_>,
        object: &mut Value,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<bool> {
        let Some((answer, seen)) = self.call(hook, attrs, Some(object), old, warnings).await?
        else {
            return Ok(false);
        };
        let (Some(patch), Some(mut patched)) = (answer.patch, seen) else {
            return Ok(false);
        };
        let operations: json_patch::Patch = serde_json::from_slice(&patch)
            .map_err(|e| ApiError::internal(format!("Internal error occurred: {e}")))?;
        json_patch::patch(&mut patched, &operations)
            .map_err(|e| ApiError::internal(format!("Internal error occurred: {e}")))?;
        // A Scale patched: only its replicas reach the object.
        let patched = match attrs
            .rt
            .scale
            .as_ref()
            .filter(|_| attrs.sub == Some("scale"))
        {
            Some(scale) => with_replicas_of(object, &patched, scale),
            None => self.convert_object(attrs.rt, patched).await?,
        };
        let changed = patched != *object;
        *object = patched;
        Ok(changed)
    }

    /// Call `hook` if it concerns this write. `None` when it does not, or failed and
    /// ignores failures; otherwise its (allowing) answer and the object as it was sent.
    async fn call(
        &self,
        hook: &Webhook,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<Option<(Answer, Option<Value>)>> {
        let Some(matched) = self.matches(hook, attrs, object, old)? else {
            return Ok(None);
        };
        if attrs.dry_run && !hook.safe_on_dry_run() {
            return Err(ApiError::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                hook.name()
            )));
        }
        let target = matched.resource(attrs.rt);
        let (object, old) = self.admission_view(attrs, target, object, old).await?;
        let uid = self.new_uid();
        let review = review(&uid, attrs, target, object.as_ref(), old.as_ref());
        let called = match hook.accepts_v1() {
            Ok(()) => client::post_json(&hook.spec["clientConfig"], &review, hook.timeout()).await,
            Err(e) => Err(e),
        };
        let answer = match called.and_then(|answer| parse_answer(answer, &uid)) {
            Ok(answer) => answer,
            Err(e) if hook.ignores_failures() => {
                tracing::warn!(webhook = hook.name(), error = %e, "failed calling webhook, failing open");
                return Ok(None);
            }
            Err(e) => return Err(call_failed(hook.name(), &e)),
        };
        warnings.extend(answer.warnings.iter().cloned());
        if !answer.allowed {
            return Err(denial(hook.name(), answer.status.as_ref()));
        }
        Ok(Some((answer, object)))
    }

    /// Whether `hook` concerns this write, and through which version of the resource.
    fn matches(
        &self,
        hook: &Webhook,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<Option<Matched>> {
        let version = self.matched_version(attrs, hook.exact_match_only(), |rt| {
            rules_match(hook, attrs, rt)
        });
        let Some(matched) = version else {
            return Ok(None);
        };
        let owner = format!("webhook {:?}", hook.name());
        match self.selectors_select(&hook.spec, &owner, attrs, object, old)? {
            true => Ok(Some(matched)),
            false => Ok(None),
        }
    }

    /// A write's new and old objects as admission shows them: as version `target` of
    /// their kind, or, written through the scale subresource, as the `autoscaling/v1`
    /// Scale of each.
    pub(crate) async fn admission_view(
        &self,
        attrs: &Attributes<'_>,
        target: &ResourceType,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<(Option<Value>, Option<Value>)> {
        let scale = target.scale.as_ref().filter(|_| attrs.sub == Some("scale"));
        let mut converted = [None, None];
        for (slot, value) in converted.iter_mut().zip([object, old]) {
            if let Some(value) = value {
                *slot = Some(match scale {
                    Some(scale) => scale_of(value, scale),
                    None => self.convert_object(target, value.clone()).await?,
                });
            }
        }
        let [object, old] = converted;
        Ok((object, old))
    }

    /// The version of the written resource that `rules_match` accepts: the request's own,
    /// else (unless `exact_only`) another served version of the same group and resource.
    pub(crate) fn matched_version(
        &self,
        attrs: &Attributes<'_>,
        exact_only: bool,
        rules_match: impl Fn(&ResourceType) -> bool,
    ) -> Option<Matched> {
        if rules_match(attrs.rt) {
            return Some(Matched::Exact);
        }
        if exact_only {
            return None;
        }
        self.registry()
            .all()
            .into_iter()
            .find(|rt| {
                rt.group == attrs.rt.group
                    && rt.plural == attrs.rt.plural
                    && rt.version != attrs.rt.version
                    && rules_match(rt)
            })
            .map(Matched::Equivalent)
    }

    /// Whether the `objectSelector` (the new or the old object) and the
    /// `namespaceSelector` of an admission configuration's `spec` select this write.
    pub(crate) fn selectors_select(
        &self,
        spec: &Value,
        owner: &str,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<bool> {
        let objects = selector(spec, "objectSelector", owner)?;
        let selected = |o: Option<&Value>| o.is_some() && objects.matches(labels_of(o));
        if !(objects.is_empty() || selected(object) || selected(old)) {
            return Ok(false);
        }
        let namespaces = selector(spec, "namespaceSelector", owner)?;
        Ok(namespaces.is_empty() || self.namespace_selected(&namespaces, attrs, object, old)?)
    }

    /// A Namespace is matched on its own labels, a namespaced object on its namespace's,
    /// any other cluster-scoped object always.
    fn namespace_selected(
        &self,
        selector: &LabelSelector,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<bool> {
        if attrs.rt.builtin && attrs.rt.group.is_empty() && attrs.rt.plural == "namespaces" {
            return Ok(selector.matches(labels_of(object.or(old))));
        }
        let Some(namespace) = attrs.namespace.filter(|_| attrs.rt.namespaced) else {
            return Ok(true);
        };
        let value = self.stored_namespace(namespace)?;
        Ok(selector.matches(labels_of(value.as_ref())))
    }

    /// The Namespace `name` as stored, if it is.
    pub(crate) fn stored_namespace(&self, name: &str) -> ApiResult<Option<Value>> {
        let stored = self
            .store()
            .get(&format!("/core/namespaces/{name}"), None)
            .map_err(|e| ApiError::from_store(e, "namespaces", name))?;
        stored
            .map(|stored| serde_json::from_slice::<Value>(&stored.value))
            .transpose()
            .map_err(|e| ApiError::internal(e.to_string()))
    }

    /// Every webhook of every configuration of `plural`, configurations in name order and
    /// webhooks in the order each lists them (kube-apiserver's order). Read from the store
    /// on each write: an in-memory range read, empty when none are configured.
    fn webhooks(&self, configs: &Configurations) -> ApiResult<Vec<Webhook>> {
        let options = ListOptions::default();
        let plural = configs.plural;
        let page = self
            .store()
            .list(configs.keys, &options, &|_| true)
            .map_err(|e| ApiError::from_store(e, plural, ""))?;
        let mut hooks = Vec::new();
        for item in page.items {
            let config: Value = serde_json::from_slice(&item.value)
                .map_err(|e| ApiError::internal(format!("stored {plural} is corrupt: {e}")))?;
            if let Some(Value::Array(webhooks)) = config.get("webhooks") {
                hooks.extend(webhooks.iter().cloned().map(|spec| Webhook { spec }));
            }
        }
        Ok(hooks)
    }
}

/// The `admission.k8s.io/v1` AdmissionReview for one call.
fn review(
    uid: &str,
    attrs: &Attributes<'_>,
    target: &ResourceType,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let mut request = admission_request(attrs, target);
    request["uid"] = json!(uid);
    request["object"] = object.cloned().unwrap_or(Value::Null);
    request["oldObject"] = old.cloned().unwrap_or(Value::Null);
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// What an AdmissionReview's `request` says of a write, but its objects: what webhooks
/// are sent and what admission policies read as `request`.
pub(crate) fn admission_request(attrs: &Attributes<'_>, target: &ResourceType) -> Value {
    let kind =
        |rt: &ResourceType| json!({"group": rt.group, "version": rt.version, "kind": rt.kind});
    let resource = |rt: &ResourceType| json!({"group": rt.group, "version": rt.version, "resource": rt.plural});
    let mut options =
        json!({"kind": attrs.operation.options_kind(), "apiVersion": "meta.k8s.io/v1"});
    if attrs.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    if let Some(manager) = attrs
        .field_manager
        .filter(|_| attrs.operation != Operation::Delete)
    {
        options["fieldManager"] = json!(manager);
    }
    // The scale subresource is written as an `autoscaling/v1` Scale, whatever its parent.
    let kind = |rt: &ResourceType| match attrs.sub {
        Some("scale") => json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        _ => kind(rt),
    };
    let mut request = json!({
        "kind": kind(target),
        "resource": resource(target),
        "requestKind": kind(attrs.rt),
        "requestResource": resource(attrs.rt),
        "name": attrs.name,
        "operation": attrs.operation.as_str(),
        "userInfo": attrs.user.user_info(),
        "dryRun": attrs.dry_run,
        "options": options,
    });
    if let Some(sub) = attrs.sub {
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
    if let Some(namespace) = attrs.namespace.filter(|_| attrs.rt.namespaced) {
        request["namespace"] = json!(namespace);
    }
    request
}

/// Default and validate a webhook configuration being written, as kube-apiserver does.
pub fn prepare_configuration(config: &mut Value, mutating: bool) -> ApiResult<()> {
    default_configuration(config, mutating);
    let errors = configuration_errors(config, mutating);
    if errors.is_empty() {
        return Ok(());
    }
    let kind = match mutating {
        true => "MutatingWebhookConfiguration",
        false => "ValidatingWebhookConfiguration",
    };
    Err(ApiError::invalid(
        kind,
        meta::name(config).unwrap_or(""),
        &errors,
    ))
}

/// The defaults kube-apiserver writes into a webhook configuration.
fn default_configuration(config: &mut Value, mutating: bool) {
    let Some(webhooks) = config.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for hook in webhooks.iter_mut().filter_map(Value::as_object_mut) {
        hook.entry("failurePolicy").or_insert(json!("Fail"));
        hook.entry("matchPolicy").or_insert(json!("Equivalent"));
        hook.entry("namespaceSelector").or_insert(json!({}));
        hook.entry("objectSelector").or_insert(json!({}));
        hook.entry("timeoutSeconds")
            .or_insert(json!(DEFAULT_TIMEOUT_SECONDS));
        if mutating {
            hook.entry("reinvocationPolicy").or_insert(json!("Never"));
        }
        if let Some(rules) = hook.get_mut("rules").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                rule.entry("scope").or_insert(json!("*"));
            }
        }
    }
}

fn field_error(field: String, reason: FieldErrorReason, message: String) -> FieldError {
    FieldError {
        field,
        reason,
        message,
    }
}

/// What kube-apiserver's validation of `admissionregistration.k8s.io/v1` rejects in each
/// webhook (the rules' contents are not checked).
fn configuration_errors(config: &Value, mutating: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let webhooks = config["webhooks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut names = std::collections::BTreeSet::new();
    for (i, hook) in webhooks.iter().enumerate() {
        let at = |field: &str| format!("webhooks[{i}].{field}");
        match hook["name"].as_str().filter(|n| !n.is_empty()) {
            None => errors.push(field_error(at("name"), FieldErrorReason::Required, "Required value".into())),
            Some(name) if name.split('.').filter(|s| !s.is_empty()).count() < 3 => {
                errors.push(field_error(
                    at("name"),
                    FieldErrorReason::Invalid,
                    format!("Invalid value: {name:?}: should be a domain with at least three segments separated by dots"),
                ))
            }
            Some(name) if !names.insert(name) => errors.push(field_error(
                at("name"),
                FieldErrorReason::Invalid,
                format!("Duplicate value: {name:?}"),
            )),
            Some(_) => {}
        }
        if !strings(&hook["admissionReviewVersions"]).any(|v| v == "v1" || v == "v1beta1") {
            errors.push(field_error(
                at("admissionReviewVersions"),
                FieldErrorReason::Required,
                "Required value: must specify one of v1, v1beta1".into(),
            ));
        }
        let mut enums = vec![
            ("sideEffects", &["None", "NoneOnDryRun"][..], true),
            ("failurePolicy", &["Fail", "Ignore"][..], false),
            ("matchPolicy", &["Equivalent", "Exact"][..], false),
        ];
        if mutating {
            enums.push(("reinvocationPolicy", &["IfNeeded", "Never"][..], false));
        }
        for (field, supported, required) in enums {
            let quoted: Vec<String> = supported.iter().map(|v| format!("{v:?}")).collect();
            match hook.get(field).and_then(Value::as_str) {
                None if required => errors.push(field_error(
                    at(field),
                    FieldErrorReason::Required,
                    format!(
                        "Required value: must specify one of {}",
                        supported.join(", ")
                    ),
                )),
                Some(value) if !supported.contains(&value) => errors.push(field_error(
                    at(field),
                    FieldErrorReason::NotSupported,
                    format!(
                        "Unsupported value: {value:?}: supported values: {}",
                        quoted.join(", ")
                    ),
                )),
                _ => {}
            }
        }
        if let Some(timeout) = hook["timeoutSeconds"].as_i64()
            && !(1..=MAX_TIMEOUT_SECONDS as i64).contains(&timeout)
        {
            errors.push(field_error(
                at("timeoutSeconds"),
                FieldErrorReason::Invalid,
                format!(
                    "Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds"
                ),
            ));
        }
        errors.extend(client_config_errors(
            &hook["clientConfig"],
            &at("clientConfig"),
        ));
    }
    errors
}

fn client_config_errors(client_config: &Value, at: &str) -> Option<FieldError> {
    match (client_config.get("url"), client_config.get("service")) {
        (Some(Value::String(url)), None) if !url.starts_with("https://") => Some(field_error(
            format!("{at}.url"),
            FieldErrorReason::Invalid,
            format!("Invalid value: {url:?}: 'https' is the only allowed URL scheme"),
        )),
        (Some(Value::String(_)), None) | (None, Some(Value::Object(_))) => None,
        _ => Some(field_error(
            at.to_string(),
            FieldErrorReason::Required,
            "Required value: exactly one of url or service is required".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_prefixes_are_the_store_keys_of_their_kinds() {
        for configs in [&MUTATING_CONFIGS, &VALIDATING_CONFIGS] {
            let plural = configs.plural;
            assert_eq!(configs.keys, format!("/{GROUP}/{plural}/"));
        }
    }

    #[test]
    fn resource_entries_follow_kubernetes_wildcards() {
        assert!(names_resource("pods", "pods", ""));
        assert!(!names_resource("pods", "pods", "status"));
        assert!(names_resource("pods/status", "pods", "status"));
        assert!(names_resource("*", "configmaps", ""));
        assert!(!names_resource("*", "pods", "status"));
        assert!(names_resource("*/*", "pods", "status"));
        assert!(names_resource("pods/*", "pods", "exec"));
        assert!(names_resource("*/status", "deployments", "status"));
        assert!(!names_resource("*/status", "deployments", "scale"));
    }

    #[test]
    fn a_denial_carries_the_webhooks_status() {
        let error = denial(
            "deny.example.com",
            Some(&json!({"code": 403, "reason": "Forbidden", "message": "no thanks"})),
        );
        assert_eq!(error.code, 403);
        assert_eq!(error.reason, "Forbidden");
        assert_eq!(
            error.message,
            "admission webhook \"deny.example.com\" denied the request: no thanks"
        );
        let bare = denial("d", Some(&json!({"code": 200})));
        assert_eq!(bare.code, 400);
        assert_eq!(bare.reason, "");
        assert_eq!(
            bare.message,
            "admission webhook \"d\" denied the request without explanation"
        );
    }

    #[test]
    fn an_answer_for_another_request_is_invalid() {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "other", "allowed": true}});
        let error = parse_answer(review, "mine").err().expect("rejected");
        assert_eq!(
            error.to_string(),
            "received invalid webhook response: expected response.uid=\"mine\", got \"other\""
        );
    }
}
