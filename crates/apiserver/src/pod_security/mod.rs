//! kube's PodSecurity admission: the Pod Security Standards a namespace's
//! `pod-security.kubernetes.io/<mode>[-version]` labels ask for. `enforce` refuses a pod
//! that violates its level (403 `violates PodSecurity "restricted:latest": …`); `warn`
//! answers with kube's warning (`would violate PodSecurity …`), for pods and for the pod
//! templates of workload kinds, which kubectl prints; a namespace's labels are validated
//! (422), and tightening its `enforce` level warns about the pods already there that
//! violate it. `audit` is parsed and validated but has no log to write to.
//! Every version label is evaluated with the rules of "latest" (recorded in
//! ARCHITECTURE); the checks and their messages are `checks`'.
//! Must not know: HTTP; quotas or other admission plugins.

pub(crate) mod checks;

use std::fmt;

use serde_json::{Map, Value, json};

use crate::ApiServer;
use crate::defaults::pod_template_of;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::ResourceType;
use crate::schema::{FieldError, FieldErrorReason};
use checks::Level;

/// The labels a namespace asks for a policy with.
pub(crate) const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";
/// kube's `namespaceMaxPodsToCheck`: a namespace's new enforce level is checked against
/// at most this many of its pods.
const MAX_PODS_TO_CHECK: usize = 3000;

/// A mode's level and version, printed as kube prints it: `restricted:latest`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LevelVersion {
    level: Level,
    version: String,
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

/// A namespace's policy: kube's `PolicyToEvaluate` over its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Policy {
    enforce: LevelVersion,
    warn: LevelVersion,
}

/// The policy `labels` ask for, and the problems of the labels that name none: an invalid
/// enforce level is evaluated as restricted, an invalid warn level as privileged (kube
/// fails closed for enforce and open for the others), an invalid version as latest.
fn policy_of(labels: Option<&Map<String, Value>>) -> (Policy, Vec<FieldError>) {
    let mut errors = Vec::new();
    let mut label = |mode: &str, suffix: &str| -> Option<String> {
        let key = format!("{LABEL_PREFIX}{mode}{suffix}");
        let value = labels?.get(&key)?.as_str().unwrap_or_default().to_string();
        let problem = match suffix {
            "" => Level::parse(&value)
                .is_none()
                .then_some("must be one of privileged, baseline, restricted"),
            _ => (!valid_version(&value)).then_some(r#"must be "latest" or "v1.x""#),
        };
        if let Some(problem) = problem {
            errors.push(FieldError {
                field: format!("metadata.labels[{key}]"),
                reason: FieldErrorReason::Invalid,
                message: format!("Invalid value: {}: {problem}", json!(value)),
            });
        }
        Some(value)
    };
    let mut mode = |mode: &str, invalid_level: Level| {
        let level = label(mode, "").map_or(Level::Privileged, |l| {
            Level::parse(&l).unwrap_or(invalid_level)
        });
        let version = label(mode, "-version")
            .filter(|v| valid_version(v))
            .unwrap_or_else(|| "latest".into());
        LevelVersion { level, version }
    };
    let enforce = mode("enforce", Level::Restricted);
    let _audit = mode("audit", Level::Privileged);
    let warn = mode("warn", Level::Privileged);
    (Policy { enforce, warn }, errors)
}

/// kube's `ParseVersion`: `latest` or `v1.<minor>`.
fn valid_version(version: &str) -> bool {
    version == "latest"
        || version.strip_prefix("v1.").is_some_and(|minor| {
            !minor.is_empty()
                && minor.bytes().all(|b| b.is_ascii_digit())
                && (minor == "0" || !minor.starts_with('0'))
        })
}

fn labels_of(obj: &Value) -> Option<&Map<String, Value>> {
    obj.pointer("/metadata/labels").and_then(Value::as_object)
}

fn has_pod_security_labels(obj: &Value) -> bool {
    labels_of(obj).is_some_and(|labels| labels.keys().any(|k| k.starts_with(LABEL_PREFIX)))
}

/// The failures of a pod(-template)'s metadata and spec at `policy`'s level.
fn violations(policy: &LevelVersion, metadata: &Value, spec: &Value) -> Option<String> {
    let failures = checks::evaluate(policy.level, metadata, spec);
    (!failures.is_empty()).then(|| checks::describe(&failures))
}

impl ApiServer {
    /// kube's PodSecurity admission of a write of `rt` (after the mutating plugins): a
    /// namespace's labels, a pod's create or significant update, a workload's template.
    pub(crate) fn check_pod_security(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        obj: &Value,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        if !rt.builtin {
            return Ok(());
        }
        if rt.group.is_empty() && rt.plural == "namespaces" {
            if has_pod_security_labels(obj) {
                self.admission_objects().pod_security_labelled();
            }
            return self.check_namespace_labels(name, obj, old, warnings);
        }
        if !self.admission_objects().may_hold_pod_security() {
            return Ok(());
        }
        let is_pod = rt.group.is_empty() && rt.plural == "pods";
        let template = pod_template_of(&rt.group, &rt.plural);
        if !is_pod && template.is_none() {
            return Ok(());
        }
        let Some(policy) = namespace.and_then(|ns| self.namespace_policy(ns)) else {
            return Ok(());
        };
        if is_pod {
            if old.is_some_and(|old| !significant_pod_update(old, obj)) {
                return Ok(());
            }
            let (metadata, spec) = (&obj["metadata"], &obj["spec"]);
            if policy.enforce.level != Level::Privileged
                && let Some(detail) = violations(&policy.enforce, metadata, spec)
            {
                return Err(ApiError::forbidden(format!(
                    "pods \"{name}\" is forbidden: violates PodSecurity \"{}\": {detail}",
                    policy.enforce
                ))
                .with_details(json!({"name": name, "kind": "pods"})));
            }
            self.warn_pod_security(&policy.warn, metadata, spec, warnings);
        } else if let Some(template) = template.and_then(|t| obj.pointer(t)) {
            self.warn_pod_security(
                &policy.warn,
                &template["metadata"],
                &template["spec"],
                warnings,
            );
        }
        Ok(())
    }

    fn warn_pod_security(
        &self,
        warn: &LevelVersion,
        metadata: &Value,
        spec: &Value,
        warnings: &mut Vec<String>,
    ) {
        if warn.level == Level::Privileged {
            return;
        }
        if let Some(detail) = violations(warn, metadata, spec) {
            warnings.push(format!("would violate PodSecurity \"{warn}\": {detail}"));
        }
    }

    /// The policy of `namespace`'s labels, when it has any pod security label.
    fn namespace_policy(&self, namespace: &str) -> Option<Policy> {
        let stored = self
            .store()
            .get(&self.namespace_key(namespace), None)
            .ok()??;
        // most namespaces carry no pod security label: nothing to decode
        memchr::memmem::find(&stored.value, LABEL_PREFIX.as_bytes())?;
        let value: Value = serde_json::from_slice(&stored.value).ok()?;
        Some(policy_of(labels_of(&value)).0)
    }

    /// kube's `ValidateNamespace`: labels valid on create, and on update when they
    /// changed; a tightened enforce level warns about the pods already in violation.
    fn check_namespace_labels(
        &self,
        name: &str,
        obj: &Value,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        let (policy, errors) = policy_of(labels_of(obj));
        let old_policy = old.map(|old| policy_of(labels_of(old)));
        let changed_errors = match &old_policy {
            None => !errors.is_empty(),
            Some((_, old_errors)) => !errors.is_empty() && old_errors != &errors,
        };
        if changed_errors {
            return Err(ApiError::invalid("Namespace", name, &errors));
        }
        let Some((old_policy, _)) = old_policy else {
            return Ok(());
        };
        let enforce = &policy.enforce;
        let relaxed_or_same = enforce == &old_policy.enforce
            || enforce.level == Level::Privileged
            || (enforce.version == old_policy.enforce.version
                && enforce.level <= old_policy.enforce.level);
        if !relaxed_or_same {
            warnings.extend(self.pods_violating(name, enforce));
        }
        Ok(())
    }

    /// kube's `EvaluatePodsInNamespace`: the existing pods that violate `enforce`, one
    /// warning per distinct set of reasons, named by its first pod.
    fn pods_violating(&self, namespace: &str, enforce: &LevelVersion) -> Vec<String> {
        let prefix = format!("/core/pods/{namespace}/");
        let Ok(page) = self.store().list(&prefix, &Default::default(), &|_| true) else {
            return vec!["failed to list pods while checking new PodSecurity enforce level".into()];
        };
        let total = page.items.len();
        let mut by_reasons: Vec<(String, String, usize)> = Vec::new();
        for stored in page.items.iter().take(MAX_PODS_TO_CHECK) {
            let Ok(pod) = serde_json::from_slice::<Value>(&stored.value) else {
                continue;
            };
            let failures = checks::evaluate(enforce.level, &pod["metadata"], &pod["spec"]);
            if failures.is_empty() {
                continue;
            }
            let reasons: Vec<&str> = failures.iter().map(|f| f.reason.as_str()).collect();
            let reasons = reasons.join(", ");
            let pod_name = meta::name(&pod).unwrap_or_default().to_string();
            match by_reasons.iter_mut().find(|(r, ..)| *r == reasons) {
                Some((_, first, count)) => {
                    *count += 1;
                    if pod_name < *first {
                        *first = pod_name;
                    }
                }
                None => by_reasons.push((reasons, pod_name, 1)),
            }
        }
        let mut warnings = Vec::new();
        if total > MAX_PODS_TO_CHECK {
            warnings.push(format!(
                "new PodSecurity enforce level only checked against the first {MAX_PODS_TO_CHECK} of {total} existing pods"
            ));
        }
        if !by_reasons.is_empty() {
            warnings.push(format!(
                "existing pods in namespace \"{namespace}\" violate the new PodSecurity enforce level \"{enforce}\""
            ));
        }
        let mut per_pod: Vec<String> = by_reasons
            .into_iter()
            .map(|(reasons, first, count)| match count {
                1 => format!("{first}: {reasons}"),
                2 => format!("{first} (and 1 other pod): {reasons}"),
                n => format!("{first} (and {} other pods): {reasons}", n - 1),
            })
            .collect();
        per_pod.sort();
        warnings.extend(per_pod);
        warnings
    }
}

/// kube's `isSignificantPodUpdate`: only a changed image, seccomp annotation or container
/// count can change a running pod's verdict.
fn significant_pod_update(old: &Value, new: &Value) -> bool {
    const SECCOMP: &str = "seccomp.security.alpha.kubernetes.io/pod";
    const CONTAINER_SECCOMP: &str = "container.seccomp.security.alpha.kubernetes.io/";
    let annotation = |pod: &Value, key: &str| {
        pod.pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .cloned()
    };
    if annotation(old, SECCOMP) != annotation(new, SECCOMP) {
        return true;
    }
    let containers = |pod: &Value, field: &str| -> Vec<Value> {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let changed = |field: &str| {
        let (before, after) = (containers(old, field), containers(new, field));
        if field != "ephemeralContainers" && before.len() != after.len() {
            return true;
        }
        after.iter().enumerate().any(|(i, container)| {
            let name = container
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let previous = match field {
                "ephemeralContainers" => before
                    .iter()
                    .find(|c| c.get("name") == container.get("name")),
                _ => before.get(i),
            };
            let Some(previous) = previous else {
                return true;
            };
            let key = format!("{CONTAINER_SECCOMP}{name}");
            previous.get("image") != container.get("image")
                || annotation(old, &key) != annotation(new, &key)
        })
    };
    changed("containers") || changed("initContainers") || changed("ephemeralContainers")
}
