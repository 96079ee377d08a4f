//! The ResourceQuota admission check (kube's `CheckRequest`): which of a namespace's
//! quotas an object's create or update is charged to, whether it fits, and each charged
//! quota's new usage. The caller (the API server) writes the new usages before it stores
//! the object, as kube's admission plugin does.

use k8s_openapi::api::core::v1::ResourceQuota;

use crate::evaluate::{Charged, Evaluator, ScopeRequirement};
use crate::list::{self, ResourceList};

/// What the check reads of a quota: its status (the controller's `hard` and usage) and
/// its scopes.
#[derive(Debug, Clone)]
pub struct QuotaState {
    pub name: String,
    pub hard: ResourceList,
    pub used: ResourceList,
    pub scopes: Vec<ScopeRequirement>,
}

impl QuotaState {
    pub fn of(quota: &ResourceQuota) -> QuotaState {
        let status = quota.status.as_ref();
        QuotaState {
            name: quota.metadata.name.clone().unwrap_or_default(),
            hard: list::parse(status.and_then(|s| s.hard.as_ref())),
            used: list::parse(status.and_then(|s| s.used.as_ref())),
            scopes: ScopeRequirement::of(quota),
        }
    }
}

/// One write to check: the object as it would be stored and, for an update, as it is.
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    pub evaluator: &'a Evaluator,
    pub object: Charged<'a>,
    pub old: Option<Charged<'a>>,
    pub now_seconds: i64,
}

/// A quota's usage after the write is charged to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Charge {
    /// The quota's index in the slice given to [`charge`].
    pub quota: usize,
    pub used: ResourceList,
}

/// Check `write` against `quotas`: the charges to make, none when no quota covers what it
/// uses, or the reason it is forbidden (kube's wording, without the
/// `<resource> "<name>" is forbidden: ` prefix).
pub fn charge(quotas: &[QuotaState], write: Write<'_>) -> Result<Vec<Charge>, String> {
    let Write {
        evaluator,
        object,
        old,
        now_seconds,
    } = write;
    if old.is_some() && !evaluator.charges_updates() {
        return Ok(Vec::new());
    }
    let mut covering = Vec::new();
    for (index, quota) in quotas.iter().enumerate() {
        let restricted = evaluator.matching(&quota.hard);
        if restricted.is_empty() || !evaluator.in_scope(&quota.scopes, object) {
            continue;
        }
        evaluator
            .constraints(&restricted, object)
            .map_err(|why| format!("failed quota: {}: {why}", quota.name))?;
        if restricted
            .iter()
            .any(|name| !quota.used.contains_key(*name))
        {
            let names: Vec<&str> = restricted.iter().map(|n| n.as_str()).collect();
            return Err(format!(
                "status unknown for quota: {}, resources: {}",
                quota.name,
                names.join(",")
            ));
        }
        covering.push(index);
    }
    if covering.is_empty() {
        return Ok(Vec::new());
    }
    let mut delta = evaluator.usage(object, now_seconds);
    let negative: Vec<&str> = delta
        .iter()
        .filter(|(_, q)| q.is_negative())
        .map(|(name, _)| name.as_str())
        .collect();
    if !negative.is_empty() {
        return Err(format!(
            "quota usage is negative for resource(s): {}",
            negative.join(",")
        ));
    }
    if let Some(old) = old {
        delta = list::subtract_non_negative(&delta, &evaluator.usage(old, now_seconds));
    }
    delta.retain(|_, q| !q.is_zero());
    if delta.is_empty() {
        return Ok(Vec::new());
    }
    covering
        .into_iter()
        .map(|index| {
            let quota = &quotas[index];
            let requested = list::mask(&delta, quota.hard.keys());
            let used = list::add(&quota.used, &requested);
            let exceeded = list::exceeding(&list::mask(&used, requested.keys()), &quota.hard);
            if exceeded.is_empty() {
                return Ok(Charge { quota: index, used });
            }
            Err(format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                quota.name,
                list::pretty(&list::mask(&requested, &exceeded)),
                list::pretty(&list::mask(&quota.used, &exceeded)),
                list::pretty(&list::mask(&quota.hard, &exceeded)),
            ))
        })
        .collect()
}
