//! Deletion: preconditions, finalizers (including the orphan and foreground propagation
//! ones), graceful deletion of running pods, namespace finalization, and the rule that the
//! write which clears the last finalizer removes the object.

use bytes::Bytes;
use serde_json::{Value, json};
use steady_store::{Revision, StoreError};

use super::attempts_until_applied;
use super::read::list_body;
use crate::ApiServer;
use crate::crd;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::ResourceType;
use crate::request::{DeleteOptions, Params, Propagation};
use crate::webhook::admission::Attributes;

pub(crate) const FINALIZER_ORPHAN: &str = "orphan";
pub(crate) const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

impl ApiServer {
    pub(super) async fn after_delete(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        old: &Value,
    ) {
        if rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions" {
            crd::unregister(self, name);
        }
        self.after_quota_relevant_write(rt, ns, None, Some(old), None)
            .await;
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
            let mut obj = self.decoded_for_write(rt, &stored)?;
            check_preconditions(rt, name, &obj, stored.revision, opts)?;
            let attrs = Attributes::delete(rt, ns, name, opts);
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
                        self.after_delete(rt, ns, name, &obj).await;
                        return Ok((self.present_committed(rt, deleted.value).await, true));
                    }
                }
            }
            let before = deletion_state(&obj, namespace_finalizing);
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
            if deletion_state(&obj, namespace_finalizing) == before {
                return Ok((self.present_converted(rt, stored.value).await?, false));
            }
            let updated = self
                .store()
                .update_derived(&key, &mut obj, Some(stored.revision), None)
                .await;
            match updated {
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(ApiError::from_store(e, &rt.qualified_name(), name)),
                Ok(updated) => {
                    self.keep_written(&updated, obj);
                    return Ok((self.present_committed(rt, updated.value).await, false));
                }
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

/// Deleting and nothing left to wait for: the write that got here removes the object.
pub(super) fn deletion_complete(obj: &Value) -> bool {
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
    check_uid_and_revision(
        rt,
        name,
        obj,
        rev,
        opts.precondition_uid.as_deref(),
        opts.precondition_resource_version.as_deref(),
    )
}

/// kube's storage preconditions: the stored object `obj` at `rev` must have `uid` and be
/// at `resource_version`, where they are given (a delete's, a binding's).
pub(crate) fn check_uid_and_revision(
    rt: &ResourceType,
    name: &str,
    obj: &Value,
    rev: Revision,
    uid: Option<&str>,
    resource_version: Option<&str>,
) -> ApiResult<()> {
    if let Some(uid) = uid {
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
    if let Some(rv) = resource_version
        && rv != rev.to_string()
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

/// Every part of `obj` a delete may change: the same before and after, the delete changed
/// nothing (compared without a second copy of the whole object).
fn deletion_state(obj: &Value, namespace_finalizing: bool) -> [Option<Value>; 4] {
    let field = |name: &str| meta::metadata(obj).and_then(|m| m.get(name)).cloned();
    [
        field("deletionTimestamp"),
        field("deletionGracePeriodSeconds"),
        field("finalizers"),
        obj.get("status").filter(|_| namespace_finalizing).cloned(),
    ]
}
