//! ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`): CEL expressions a
//! cluster's administrator or an operator ships to refuse writes, enforced on every
//! create, update and delete they match as kube-apiserver's `ValidatingAdmissionPolicy`
//! plugin enforces them — after mutating webhooks, before validating ones.
//!
//! A policy says which writes it cares about (`matchConstraints`), what must hold
//! (`validations`, over `object`, `oldObject`, `request`, `params`, `namespaceObject` and
//! its `variables`), and what to do when an expression fails (`failurePolicy`); a binding
//! puts a policy to work, narrowed (`matchResources`), with parameters (`paramRef`) and
//! what a failed validation does (`validationActions`: deny the write, warn the client,
//! or audit). [`config`] defaults and validates the two kinds when they are written;
//! [`compiled`] reads a stored policy into compiled expressions once per revision.
//!
//! Must not know: HTTP, or the store write that follows admission.

mod authorizer;
mod compiled;
pub(crate) mod config;

use std::sync::{Arc, LazyLock};

use serde_json::{Value, json};
use steady_store::ListOptions;

use crate::ApiServer;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::ResourceType;
use crate::schema::{library_root, plain_value, value_nodes};
use crate::selector::LabelSelector;
use crate::webhook::admission::{Attributes, Matched, admission_request, rule_matches, strings};
use compiled::{Evaluation, Policy};

pub(crate) const POLICIES: &str = "validatingadmissionpolicies";
pub(crate) const BINDINGS: &str = "validatingadmissionpolicybindings";
const POLICY_KEYS: &str = "/admissionregistration.k8s.io/validatingadmissionpolicies/";
const BINDING_KEYS: &str = "/admissionregistration.k8s.io/validatingadmissionpolicybindings/";

/// kube's CEL libraries and the authorizer's functions, declared once: every evaluation
/// of a policy runs in a scope of it.
static LIBRARY: LazyLock<cel::Context<'static, 'static>> = LazyLock::new(|| {
    let mut root = library_root();
    authorizer::register(&mut root);
    root
});

/// Policies compiled, and bindings decoded, once per revision.
#[derive(Default)]
pub(crate) struct StoredPolicies {
    policies: crate::per_revision::PerRevision<Policy>,
    bindings: crate::per_revision::PerRevision<Value>,
}

/// What one binding of one policy decided against the write.
struct Decision<'p> {
    policy: &'p str,
    /// `None` for an error of the policy itself (its `paramKind`).
    binding: Option<&'p str>,
    message: String,
    /// The Status reason of a denial: `Invalid` unless the validation names another.
    reason: &'static str,
}

impl Decision<'_> {
    /// kube's refusal: `admission.NewForbidden` of the policy's message, with the
    /// validation's reason and its code.
    fn refusal(&self, attrs: &Attributes<'_>) -> ApiError {
        let message = match self.binding {
            Some(binding) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{binding}' denied request: {}",
                self.policy, self.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                self.policy, self.message
            ),
        };
        let resource = attrs.rt.qualified_name();
        let whole = match attrs.name {
            "" => format!("{resource} is forbidden: {message}"),
            name => format!("{resource} \"{name}\" is forbidden: {message}"),
        };
        let code = match self.reason {
            "Forbidden" => 403,
            "Unauthorized" => 401,
            "RequestEntityTooLarge" => 413,
            _ => 422,
        };
        ApiError::failure(code, whole)
            .with_reason(self.reason)
            .with_details(json!({
                "name": attrs.name,
                "group": attrs.rt.group,
                "kind": attrs.rt.plural,
                "causes": [{"message": message}],
            }))
    }

    fn warning(&self) -> String {
        format!(
            "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
            self.policy,
            self.binding.unwrap_or(""),
            self.message
        )
    }
}

/// A policy put to work by one of its bindings.
#[derive(Clone, Copy)]
struct Bound<'p> {
    policy: &'p Policy,
    /// The resource of the policy's `paramKind`, if it has one.
    param_kind: Option<&'p ResourceType>,
    binding: &'p Value,
}

/// What admission of a write has come to so far: its warnings, and its first denial.
struct Verdict<'w> {
    warnings: &'w mut Vec<String>,
    denial: &'w mut Option<ApiError>,
}

impl Verdict<'_> {
    /// Refuse the write for `decision`, unless an earlier denial already does.
    fn deny(&mut self, decision: Decision<'_>, attrs: &Attributes<'_>) {
        self.denial.get_or_insert_with(|| decision.refusal(attrs));
    }
}

/// A binding's `validationActions`.
struct Actions {
    deny: bool,
    warn: bool,
}

impl Actions {
    fn of(binding: &Value) -> Actions {
        let listed =
            |action: &str| strings(&binding["spec"]["validationActions"]).any(|a| a == action);
        Actions {
            deny: listed("Deny"),
            warn: listed("Warn"),
        }
    }
}

impl ApiServer {
    /// Admission of a write by every ValidatingAdmissionPolicy bound to something it
    /// matches, policies and bindings in name order: every one is evaluated (each
    /// warning is added to `warnings`), and the first denial refuses the write. `object`
    /// is `None` on a delete, `old` on a create.
    pub(crate) async fn admit_by_policies(
        &self,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        if exempt(attrs.rt) {
            return Ok(());
        }
        let policies = self.stored_policies()?;
        if policies.is_empty() {
            return Ok(());
        }
        let bindings = self.stored_bindings()?;
        // What the policies read of the write, made once per version they match it in.
        let mut views: Vec<(String, Arc<Inputs>)> = Vec::new();
        let mut denial = None;
        let mut verdict = Verdict {
            warnings,
            denial: &mut denial,
        };
        for policy in &policies {
            let bound: Vec<&Value> = bindings
                .iter()
                .map(|b| &**b)
                .filter(|b| b["spec"]["policyName"].as_str() == Some(policy.name()))
                .collect();
            if bound.is_empty() {
                continue;
            }
            let constraints = &policy.spec()["matchConstraints"];
            let Some(matched) =
                self.criteria_match(constraints, policy.name(), attrs, object, old)?
            else {
                continue;
            };
            let param_kind = match self.param_type(policy) {
                Ok(param_kind) => param_kind,
                Err(_) if policy.ignores_failures() => continue,
                Err(why) => {
                    let decision = Decision {
                        policy: policy.name(),
                        binding: None,
                        message: format!("failed to configure policy: {why}"),
                        reason: "Invalid",
                    };
                    verdict.deny(decision, attrs);
                    continue;
                }
            };
            let version = matched.resource(attrs.rt).api_version();
            let inputs = match views.iter().find(|(seen, _)| *seen == version) {
                Some((_, inputs)) => inputs.clone(),
                None => {
                    let inputs = Arc::new(self.inputs(attrs, &matched, object, old).await?);
                    views.push((version, inputs.clone()));
                    inputs
                }
            };
            for binding in bound {
                let under = Bound {
                    policy,
                    param_kind: param_kind.as_deref(),
                    binding,
                };
                self.decide(&under, attrs, object, old, &inputs, &mut verdict)
                    .await?;
            }
        }
        denial.map_or(Ok(()), Err)
    }

    /// What one binding of `policy` makes of the write, if its `matchResources` matches:
    /// its parameters' evaluations, each failure warned and/or denied as its actions say
    /// (a configuration error always denied), under the policy's `failurePolicy`.
    async fn decide(
        &self,
        under: &Bound<'_>,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
        inputs: &Inputs,
        verdict: &mut Verdict<'_>,
    ) -> ApiResult<()> {
        let Bound {
            policy,
            param_kind,
            binding,
        } = *under;
        let binding_name = meta::name(binding).unwrap_or("");
        if let Some(resources) = binding["spec"].get("matchResources")
            && self
                .criteria_match(resources, binding_name, attrs, object, old)?
                .is_none()
        {
            return Ok(());
        }
        let decision = |message: String, reason: &'static str| Decision {
            policy: policy.name(),
            binding: Some(binding_name),
            message,
            reason,
        };
        let params = match self.params(param_kind, binding, attrs).await {
            Ok(params) => params,
            Err(_) if policy.ignores_failures() => return Ok(()),
            Err(why) => {
                let message = format!("failed to configure binding: {why}");
                verdict.deny(decision(message, "Invalid"), attrs);
                return Ok(());
            }
        };
        let actions = Actions::of(binding);
        for param in params {
            for (message, reason) in policy_failures(policy, inputs, param.as_ref()) {
                let decision = decision(message, reason);
                if actions.warn {
                    verdict.warnings.push(decision.warning());
                }
                if actions.deny {
                    verdict.deny(decision, attrs);
                }
            }
        }
        Ok(())
    }

    /// Every stored policy, compiled, in name order.
    fn stored_policies(&self) -> ApiResult<Vec<Arc<Policy>>> {
        let items = self.list_admission_config(POLICY_KEYS, POLICIES)?;
        Ok(self.stored_policy_cache().policies.of(&items, |o| {
            Policy::read(&serde_json::from_slice(&o.value).ok()?)
        }))
    }

    fn stored_bindings(&self) -> ApiResult<Vec<Arc<Value>>> {
        let items = self.list_admission_config(BINDING_KEYS, BINDINGS)?;
        Ok(self
            .stored_policy_cache()
            .bindings
            .of(&items, |o| serde_json::from_slice(&o.value).ok()))
    }

    fn list_admission_config(
        &self,
        keys: &str,
        plural: &str,
    ) -> ApiResult<Vec<steady_store::Object>> {
        self.store()
            .list(keys, &ListOptions::default(), &|_| true)
            .map(|page| page.items)
            .map_err(|e| ApiError::from_store(e, plural, ""))
    }

    /// Whether a policy's `matchConstraints` (or a binding's `matchResources`) concern
    /// this write, and through which version: its selectors, then `excludeResourceRules`,
    /// then `resourceRules` (none: whatever the policy matched).
    fn criteria_match(
        &self,
        criteria: &Value,
        owner: &str,
        attrs: &Attributes<'_>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<Option<Matched>> {
        let owner = format!("ValidatingAdmissionPolicy {owner:?}");
        if !self.selectors_select(criteria, &owner, attrs, object, old)? {
            return Ok(None);
        }
        let exact_only = criteria["matchPolicy"] == "Exact";
        let named = |field: &str, rt: &ResourceType| {
            let sub = attrs.sub.unwrap_or("");
            criteria[field]
                .as_array()
                .into_iter()
                .flatten()
                .any(|rule| {
                    rule_matches(rule, attrs.operation, rt, sub) && names_object(rule, attrs.name)
                })
        };
        if self
            .matched_version(attrs, exact_only, |rt| named("excludeResourceRules", rt))
            .is_some()
        {
            return Ok(None);
        }
        let rules_listed = criteria["resourceRules"]
            .as_array()
            .is_some_and(|rules| !rules.is_empty());
        if !rules_listed {
            return Ok(Some(Matched::Exact));
        }
        Ok(self.matched_version(attrs, exact_only, |rt| named("resourceRules", rt)))
    }

    /// The variables every expression of a matched policy reads but `params`.
    async fn inputs(
        &self,
        attrs: &Attributes<'_>,
        matched: &Matched,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> ApiResult<Inputs> {
        let target = matched.resource(attrs.rt);
        let (object, old) = self.admission_view(attrs, target, object, old).await?;
        let namespace = match attrs.namespace.filter(|_| attrs.rt.namespaced) {
            Some(name) => self.stored_namespace(name)?.map(namespace_object),
            None => None,
        };
        let request = admission_request(attrs, target);
        let requested = authorizer::request_check(
            &attrs.rt.group,
            &attrs.rt.plural,
            attrs.sub.unwrap_or(""),
            attrs
                .namespace
                .filter(|_| attrs.rt.namespaced)
                .unwrap_or(""),
            attrs.name,
        );
        let nodes = object.as_ref().map_or(0, value_nodes) + old.as_ref().map_or(0, value_nodes);
        Ok(Inputs {
            object: object.as_ref().map_or(cel::Value::Null, plain_value),
            old: old.as_ref().map_or(cel::Value::Null, plain_value),
            request: plain_value(&request),
            namespace: namespace.as_ref().map_or(cel::Value::Null, plain_value),
            authorizer: authorizer::variable(self, attrs.user, requested),
            nodes,
        })
    }

    /// The resource a policy's `paramKind` names (`None`: the policy takes none).
    /// `Err`: kube's error for a kind this server does not serve.
    fn param_type(&self, policy: &Policy) -> Result<Option<Arc<ResourceType>>, String> {
        let Some(kind) = policy.param_kind() else {
            return Ok(None);
        };
        let (group, version) = kind
            .api_version
            .split_once('/')
            .unwrap_or(("", kind.api_version.as_str()));
        self.registry()
            .all()
            .into_iter()
            .find(|rt| rt.group == group && rt.version == version && rt.kind == kind.kind)
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "failed to find resource referenced by paramKind: '{group}/{version}, Kind={}'",
                    kind.kind
                )
            })
    }

    /// The parameters each evaluation of a policy under `binding` gets: one `None` for a
    /// policy without a param kind or a binding without `paramRef`; else the objects
    /// `paramRef` names (none, and the binding allows it: no evaluation). `Err`: why the
    /// binding cannot be evaluated.
    async fn params(
        &self,
        param_kind: Option<&ResourceType>,
        binding: &Value,
        attrs: &Attributes<'_>,
    ) -> Result<Vec<Option<Value>>, String> {
        let param_ref = binding["spec"].get("paramRef").filter(|r| r.is_object());
        let (Some(rt), Some(param_ref)) = (param_kind, param_ref) else {
            return Ok(vec![None]);
        };
        let named_namespace = param_ref["namespace"].as_str().filter(|ns| !ns.is_empty());
        let namespace = match (rt.namespaced, named_namespace) {
            (false, None) => None,
            (false, Some(_)) => {
                return Err(
                    "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
                        .into(),
                );
            }
            (true, Some(ns)) => Some(ns),
            (true, None) => match attrs.namespace.filter(|ns| !ns.is_empty()) {
                Some(ns) => Some(ns),
                None => {
                    return Err(
                        "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                            .into(),
                    );
                }
            },
        };
        let found = self
            .find_params(rt, namespace, param_ref)
            .await
            .map_err(|e| e.message)?;
        if !found.is_empty() {
            return Ok(found.into_iter().map(Some).collect());
        }
        match param_ref["parameterNotFoundAction"].as_str() {
            Some("Deny") => {
                Err("no params found for policy binding with `Deny` parameterNotFoundAction".into())
            }
            _ => Ok(Vec::new()),
        }
    }

    /// The objects of kind `rt` a `paramRef` names (by `name`, or by `selector`), as
    /// the param kind's version.
    async fn find_params(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        param_ref: &Value,
    ) -> ApiResult<Vec<Value>> {
        let stored = match param_ref["name"].as_str().filter(|n| !n.is_empty()) {
            Some(name) => self
                .store()
                .get(&rt.key(namespace, name), None)
                .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), name))?
                .into_iter()
                .collect(),
            None => {
                let selector = LabelSelector::from_label_selector_json(&param_ref["selector"])
                    .map_err(|e| {
                        ApiError::internal(format!("invalid paramRef selector: {}", e.0))
                    })?;
                self.store()
                    .list(&rt.list_prefix(namespace), &ListOptions::default(), &|_| {
                        true
                    })
                    .map_err(|e| ApiError::from_store(e, &rt.qualified_name(), ""))?
                    .items
                    .into_iter()
                    .filter(|o| selector.matches(&o.labels))
                    .collect::<Vec<_>>()
            }
        };
        let mut params = Vec::with_capacity(stored.len());
        for object in stored {
            let value: Value = serde_json::from_slice(&object.value)
                .map_err(|e| ApiError::internal(format!("stored object is corrupt: {e}")))?;
            params.push(self.convert_object(rt, value).await?);
        }
        Ok(params)
    }

    fn stored_policy_cache(&self) -> &StoredPolicies {
        &self.inner.admission_policies
    }
}

/// What kube never holds to admission policies: the policies and bindings themselves
/// (a broken policy cannot lock out its fix) and the reviews, which store nothing.
fn exempt(rt: &ResourceType) -> bool {
    let exempt: &[&str] = match rt.group.as_str() {
        crate::webhook::admission::GROUP => &[
            POLICIES,
            BINDINGS,
            "mutatingadmissionpolicies",
            "mutatingadmissionpolicybindings",
        ],
        "authentication.k8s.io" => &["tokenreviews", "selfsubjectreviews"],
        "authorization.k8s.io" => &[
            "subjectaccessreviews",
            "localsubjectaccessreviews",
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
        ],
        _ => &[],
    };
    rt.builtin && exempt.contains(&rt.plural.as_str())
}

/// The failed validations (and, under `failurePolicy: Fail`, the failed expressions) of
/// `policy` over one write with `param`: message and Status reason of each.
fn policy_failures(
    policy: &Policy,
    inputs: &Inputs,
    param: Option<&Value>,
) -> Vec<(String, &'static str)> {
    let mut context = LIBRARY.new_inner_scope();
    context.add_variable_from_value("object", inputs.object.clone());
    context.add_variable_from_value("oldObject", inputs.old.clone());
    context.add_variable_from_value("request", inputs.request.clone());
    context.add_variable_from_value("namespaceObject", inputs.namespace.clone());
    context.add_variable_from_value("authorizer", inputs.authorizer.clone());
    context.add_variable_from_value("params", param.map_or(cel::Value::Null, plain_value));
    let nodes = inputs.nodes + param.map_or(0, value_nodes);
    policy
        .evaluate(&mut context, nodes)
        .into_iter()
        .filter_map(|evaluation| match evaluation {
            Evaluation::Failed { message, reason } => Some((message, reason)),
            Evaluation::Error(_) if policy.ignores_failures() => None,
            Evaluation::Error(message) => Some((message, "Invalid")),
        })
        .collect()
}

/// What `namespaceObject` holds of a Namespace: its spec, status and the metadata kube
/// copies (no managed fields or owners).
fn namespace_object(namespace: Value) -> Value {
    const KEPT: [&str; 12] = [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ];
    let metadata: serde_json::Map<String, Value> = meta::metadata(&namespace)
        .into_iter()
        .flatten()
        .filter(|(key, _)| KEPT.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata,
        "spec": namespace.get("spec").cloned().unwrap_or(json!({})),
        "status": namespace.get("status").cloned().unwrap_or(json!({})),
    })
}

/// A `NamedRuleWithOperations`'s `resourceNames`: none lists every object.
fn names_object(rule: &Value, name: &str) -> bool {
    let mut names = strings(&rule["resourceNames"]).peekable();
    names.peek().is_none() || names.any(|n| n == name)
}

/// What every expression of a policy matched by one write reads, as CEL values.
struct Inputs {
    object: cel::Value,
    old: cel::Value,
    request: cel::Value,
    namespace: cel::Value,
    authorizer: cel::Value,
    /// How many values `object` and `old` hold, for the bound on an expression's work.
    nodes: u64,
}
