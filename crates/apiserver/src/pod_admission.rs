//! The admission plugins kube-apiserver 1.32 runs, enabled by default, on every pod it
//! creates, which a client sees in the stored pod: `ServiceAccount` (the account must
//! exist, but for `default`, which kube waits for its controller to create; its token is
//! mounted in every container as the `kube-api-access-<suffix>` projected volume unless
//! the pod or the account opts out; the account's image pull secrets), `Priority` (the
//! pod's `priority` and `preemptionPolicy` from its PriorityClass, or from the global
//! default class, else 0 and `PreemptLowerPriority`; an unknown class is refused) and
//! `DefaultTolerationSeconds` (five minutes of tolerance for the `not-ready` and
//! `unreachable` NoExecute taints, unless the pod tolerates them already). An operator
//! that compares the pods it created with what it asked for meets these fields on a
//! cluster, so it meets them here.
//! Must not know: HTTP; pods' other defaults (`defaults.rs`).

use serde_json::{Value, json};

use crate::ApiServer;
use crate::error::{ApiError, ApiResult};
use crate::meta;

/// kube's `DefaultNotReadyTolerationSeconds` and `DefaultUnreachableTolerationSeconds`.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";
const DEFAULT_PREEMPTION_POLICY: &str = "PreemptLowerPriority";
/// kube's `ServiceAccountVolumeName` prefix and `DefaultAPITokenMountPath`.
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

impl ApiServer {
    /// Run the pod-creation admission plugins on `pod`.
    pub(crate) fn admit_new_pod(&self, pod: &mut Value) -> ApiResult<()> {
        let name = meta::name(pod).unwrap_or("").to_string();
        let forbidden = |why: String| {
            ApiError::forbidden(format!("pods \"{name}\" is forbidden: {why}"))
                .with_details(json!({"name": name, "kind": "pods"}))
        };
        self.default_from_limit_ranges(pod);
        self.admit_service_account(pod).map_err(forbidden)?;
        let (class, priority, policy) = self.pod_priority(pod).map_err(forbidden)?;
        let spec = meta::object_mut(pod, "spec");
        if let Some(given) = spec.get("priority").and_then(Value::as_i64)
            && given != priority
        {
            return Err(forbidden(format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
            )));
        }
        if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str)
            && given != policy
        {
            return Err(forbidden(format!(
                "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
            )));
        }
        if let Some(class) = class {
            spec.insert("priorityClassName".into(), json!(class));
        }
        spec.insert("priority".into(), json!(priority));
        spec.insert("preemptionPolicy".into(), json!(policy));
        add_default_tolerations(spec);
        Ok(())
    }

    /// kube's `ServiceAccount` plugin: the account exists (or is `default`, which its
    /// controller creates in every namespace), its token is mounted, its image pull
    /// secrets are the pod's when the pod names none.
    fn admit_service_account(&self, pod: &mut Value) -> Result<(), String> {
        let namespace = meta::namespace(pod).unwrap_or("default").to_string();
        let name = meta::str_at(pod, "/spec/serviceAccountName")
            .unwrap_or("default")
            .to_string();
        let accounts = self.registry().builtin("", "serviceaccounts");
        let account = match accounts.map(|rt| self.get_value(&rt, Some(&namespace), &name)) {
            Some(Ok((account, _))) => Some(account),
            Some(Err(e)) if e.code == 404 && name != "default" => {
                return Err(format!(
                    "error looking up service account {namespace}/{name}: serviceaccount \"{name}\" not found"
                ));
            }
            _ => None,
        };
        let account = account.unwrap_or(Value::Null);
        let automount = pod
            .pointer("/spec/automountServiceAccountToken")
            .or_else(|| account.get("automountServiceAccountToken"))
            .and_then(Value::as_bool)
            .unwrap_or(true);
        if automount {
            self.mount_token(meta::object_mut(pod, "spec"));
        }
        let spec = meta::object_mut(pod, "spec");
        let pod_has_secrets = spec
            .get("imagePullSecrets")
            .and_then(Value::as_array)
            .is_some_and(|s| !s.is_empty());
        match account.get("imagePullSecrets") {
            Some(Value::Array(secrets)) if !pod_has_secrets && !secrets.is_empty() => {
                spec.insert("imagePullSecrets".into(), Value::Array(secrets.clone()));
            }
            _ => {}
        }
        Ok(())
    }

    /// Mount the account's token at kube's path in every container that has nothing
    /// there yet, from the pod's `kube-api-access-*` volume (added if missing).
    fn mount_token(&self, spec: &mut serde_json::Map<String, Value>) {
        let existing = spec
            .get("volumes")
            .and_then(Value::as_array)
            .and_then(|volumes| {
                volumes.iter().find_map(|v| {
                    v.get("name")
                        .and_then(Value::as_str)
                        .filter(|n| n.starts_with(TOKEN_VOLUME_PREFIX))
                        .map(str::to_string)
                })
            });
        let volume = existing
            .clone()
            .unwrap_or_else(|| format!("{TOKEN_VOLUME_PREFIX}{}", self.name_suffix()));
        let mount = json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
        let mut mounted = false;
        for list in ["initContainers", "containers"] {
            let Some(Value::Array(containers)) = spec.get_mut(list) else {
                continue;
            };
            for container in containers.iter_mut().filter(|c| c.is_object()) {
                let list = container
                    .as_object_mut()
                    .map(|c| c.entry("volumeMounts").or_insert_with(|| json!([])));
                let Some(Value::Array(mounts)) = list else {
                    continue;
                };
                let taken = mounts
                    .iter()
                    .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH));
                if !taken {
                    mounts.push(mount.clone());
                    mounted = true;
                }
            }
        }
        if mounted && existing.is_none() {
            let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
            if let Value::Array(volumes) = volumes {
                volumes.push(token_volume(&volume));
            }
        }
    }

    /// The pod's PriorityClass (when the global default names one), priority and
    /// preemption policy, or why there is none.
    fn pod_priority(&self, pod: &Value) -> Result<(Option<String>, i64, String), String> {
        let Some(classes) = self
            .registry()
            .builtin("scheduling.k8s.io", "priorityclasses")
        else {
            return Ok((None, 0, DEFAULT_PREEMPTION_POLICY.into()));
        };
        let named = meta::str_at(pod, "/spec/priorityClassName").filter(|n| !n.is_empty());
        let class = match named {
            Some(name) => match self.get_value(&classes, None, name) {
                Ok((class, _)) => Some(class),
                Err(e) if e.code == 404 => {
                    return Err(format!("no PriorityClass with name {name} was found"));
                }
                Err(e) => return Err(e.message),
            },
            None => self.global_default_priority_class(&classes),
        };
        let Some(class) = class else {
            return Ok((None, 0, DEFAULT_PREEMPTION_POLICY.into()));
        };
        let value = class.get("value").and_then(Value::as_i64).unwrap_or(0);
        let policy = meta::str_at(&class, "/preemptionPolicy")
            .unwrap_or(DEFAULT_PREEMPTION_POLICY)
            .to_string();
        let name = meta::name(&class).map(str::to_string);
        Ok((name.filter(|_| named.is_none()), value, policy))
    }

    /// The PriorityClass marked `globalDefault` (the one of lowest value, if several are).
    /// Every pod create without a class asks: only a class whose stored (compact) JSON
    /// says so is parsed.
    fn global_default_priority_class(
        &self,
        classes: &crate::registry::ResourceType,
    ) -> Option<Value> {
        const MARK: &[u8] = br#""globalDefault":true"#;
        let marked = |o: &steady_store::Object| memchr::memmem::find(&o.value, MARK).is_some();
        let listed = self
            .store()
            .list(
                &classes.list_prefix(None),
                &steady_store::ListOptions::default(),
                &marked,
            )
            .ok()?;
        listed
            .items
            .iter()
            .filter_map(|o| serde_json::from_slice::<Value>(&o.value).ok())
            .filter(|class| class.get("globalDefault") == Some(&json!(true)))
            .min_by_key(|class| class.get("value").and_then(Value::as_i64).unwrap_or(0))
    }
}

/// kube's bound service-account token volume: the token (valid an hour and seven
/// seconds, rotated by the kubelet), the cluster's CA, the pod's namespace.
fn token_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    })
}

/// `DefaultTolerationSeconds`: tolerate the not-ready and unreachable NoExecute taints
/// for five minutes, unless a toleration already covers them (an empty key or effect
/// covers every one).
fn add_default_tolerations(spec: &mut serde_json::Map<String, Value>) {
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if !tolerations.is_array() {
        *tolerations = json!([]);
    }
    let Value::Array(tolerations) = tolerations else {
        return;
    };
    for taint in [NOT_READY_TAINT, UNREACHABLE_TAINT] {
        let covered = tolerations.iter().any(|t| {
            let key = t.get("key").and_then(Value::as_str).unwrap_or("");
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        });
        if !covered {
            tolerations.push(json!({
                "key": taint,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tolerated(tolerations: Value) -> Value {
        let mut spec = json!({"tolerations": tolerations});
        if let Value::Object(spec) = &mut spec {
            add_default_tolerations(spec);
        }
        spec["tolerations"].clone()
    }

    #[test]
    fn both_taints_are_tolerated_five_minutes_unless_covered() {
        let added = tolerated(json!([]));
        assert_eq!(added.as_array().map(Vec::len), Some(2));
        assert_eq!(added[0]["key"], NOT_READY_TAINT);
        assert_eq!(added[1]["tolerationSeconds"], 300);
        let own = json!([{"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute"}]);
        assert_eq!(
            tolerated(own).as_array().map(Vec::len),
            Some(2),
            "one added"
        );
        let everything = json!([{"operator": "Exists"}]);
        assert_eq!(tolerated(everything).as_array().map(Vec::len), Some(1));
    }
}
