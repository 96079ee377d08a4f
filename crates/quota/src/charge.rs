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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::quantity::Quantity;

    fn quota(name: &str, hard: &[(&str, &str)], used: &[(&str, &str)]) -> QuotaState {
        let list = |entries: &[(&str, &str)]| -> ResourceList {
            entries
                .iter()
                .map(|(n, q)| (n.to_string(), Quantity::parse(q).expect("quantity")))
                .collect()
        };
        QuotaState {
            name: name.into(),
            hard: list(hard),
            used: list(used),
            scopes: Vec::new(),
        }
    }

    fn pod(resources: serde_json::Value) -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(
            json!({"spec": {"containers": [{"name": "c", "resources": resources}]}}),
        )
        .expect("pod")
    }

    fn write<'a>(evaluator: &'a Evaluator, object: Charged<'a>) -> Write<'a> {
        Write {
            evaluator,
            object,
            old: None,
            now_seconds: 0,
        }
    }

    #[test]
    fn a_create_is_charged_to_every_covering_quota_or_refused_by_the_first_it_exceeds() {
        let quotas = [
            quota("count", &[("pods", "10")], &[("pods", "3")]),
            quota("cpu", &[("requests.cpu", "1")], &[("requests.cpu", "900m")]),
            quota("maps", &[("configmaps", "5")], &[("configmaps", "0")]),
        ];
        let small = pod(json!({"requests": {"cpu": "100m"}}));
        let charges = charge(&quotas, write(&Evaluator::Pods, Charged::Pod(&small))).expect("fits");
        let used: Vec<(usize, String)> = charges
            .iter()
            .map(|c| (c.quota, list::pretty(&c.used)))
            .collect();
        assert_eq!(
            used,
            [(0, "pods=4".to_string()), (1, "requests.cpu=1".to_string())]
        );

        let large = pod(json!({"requests": {"cpu": "200m"}}));
        assert_eq!(
            charge(&quotas, write(&Evaluator::Pods, Charged::Pod(&large))),
            Err("exceeded quota: cpu, requested: requests.cpu=200m, used: requests.cpu=900m, limited: requests.cpu=1".into())
        );
        let unsized_pod = pod(json!({}));
        assert_eq!(
            charge(&quotas, write(&Evaluator::Pods, Charged::Pod(&unsized_pod))),
            Err("failed quota: cpu: must specify requests.cpu for: c".into())
        );
    }

    #[test]
    fn a_quota_without_usage_refuses_until_counted_and_updates_pay_only_what_they_add() {
        let uncounted = [quota("count", &[("pods", "10")], &[])];
        let p = pod(json!({}));
        assert_eq!(
            charge(&uncounted, write(&Evaluator::Pods, Charged::Pod(&p))),
            Err("status unknown for quota: count, resources: pods".into())
        );
        let ports = [quota(
            "ports",
            &[("services.nodeports", "2")],
            &[("services.nodeports", "1")],
        )];
        let service = |kind: &str, n: usize| -> k8s_openapi::api::core::v1::Service {
            let ports: Vec<_> = (0..n).map(|i| json!({"port": 80 + i})).collect();
            serde_json::from_value(json!({"spec": {"type": kind, "ports": ports}}))
                .expect("service")
        };
        let (before, after) = (service("NodePort", 1), service("NodePort", 2));
        let evaluator = Evaluator::Services;
        let update = Write {
            old: Some(Charged::Service(&before)),
            ..write(&evaluator, Charged::Service(&after))
        };
        let charges = charge(&ports, update).expect("one more port fits");
        assert_eq!(list::pretty(&charges[0].used), "services.nodeports=2");
        // a pod's update is never charged
        let pods = [quota("count", &[("pods", "0")], &[("pods", "0")])];
        let pod_update = Write {
            old: Some(Charged::Pod(&p)),
            ..write(&Evaluator::Pods, Charged::Pod(&p))
        };
        assert_eq!(charge(&pods, pod_update), Ok(Vec::new()));
    }
}
