//! ResourceQuotas, enforced and accounted inside the server: kube's `ResourceQuota`
//! admission plugin (a create, or an update of a Service or claim, is refused when it would
//! take a quota of its namespace over `hard`, with kube's 403 messages) and the part of
//! kube-controller-manager's quota controller that keeps `status` (`hard` from the spec,
//! `used` counted from the namespace's objects when a quota is created, its spec changes
//! or its status lags; then moved by each charge, and by what an object gives back when
//! it is deleted or stops being charged: a pod finishing, a Service changing type).
//!
//! Why here and not in crates/cluster: kube charges at admission and recounts in the
//! controller from its informers, which lets a recount that has not seen a just-admitted
//! object undo its charge (kube only recounts on deletes and resyncs to keep that rare).
//! Here a charged write holds the quota turn from its check until its charge is written,
//! and every other status write takes the same turn, so none undoes a charge. The cost:
//! status is current at once (kube's follows within the controller's sync), and writes
//! into a namespace with quotas are serialised. What each kind charges is
//! `steady_quota`'s.
//! Must not know: HTTP.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceQuota, Service};
use serde::Deserialize as _;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use steady_quota::{Charged, Evaluator, QuotaState, ResourceList, list};
use tokio::sync::OwnedMutexGuard;

use crate::ApiServer;
use crate::admission_objects::QUOTAS_PREFIX;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::objects::Target;
use crate::registry::ResourceType;
use crate::request::WriteOptions;

/// The field manager of the status writes, as kube's quota controller's.
const QUOTA_MANAGER: &str = "kube-controller-manager";

/// A checked write's charges, to write once the object is stored; holds the quota turn
/// of its namespace.
pub(crate) struct QuotaCharges {
    _turn: OwnedMutexGuard<()>,
    namespace: String,
    charges: Vec<(Stored, ResourceList)>,
}

/// One turn per namespace: charged writes and quota status writes of a namespace take
/// it in order, and a slow one (a webhook, a large count) holds up no other namespace.
/// A namespace's entry lives while someone holds or waits for its turn.
#[derive(Debug, Default)]
pub(crate) struct QuotaTurns(std::sync::Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>);

impl QuotaTurns {
    async fn take(&self, namespace: &str) -> OwnedMutexGuard<()> {
        let turn = {
            let mut turns = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match turns.get(namespace).and_then(Weak::upgrade) {
                Some(turn) => turn,
                None => {
                    turns.retain(|_, turn| turn.strong_count() > 0);
                    let turn = Arc::new(tokio::sync::Mutex::new(()));
                    turns.insert(namespace.to_string(), Arc::downgrade(&turn));
                    turn
                }
            }
        };
        turn.lock_owned().await
    }
}

/// A quota as stored: decoded, its JSON, its revision.
struct Stored {
    quota: ResourceQuota,
    value: Value,
    revision: u64,
}

/// An object decoded as far as its evaluator reads it.
enum Decoded {
    Pod(Box<Pod>),
    Service(Box<Service>),
    Claim(Box<PersistentVolumeClaim>),
    Counted,
}

impl Decoded {
    fn of(evaluator: &Evaluator, rt: &ResourceType, obj: &Value) -> ApiResult<Decoded> {
        fn typed<T: DeserializeOwned>(rt: &ResourceType, obj: &Value) -> ApiResult<Box<T>> {
            T::deserialize(obj).map(Box::new).map_err(|e| {
                ApiError::bad_request(format!(
                    "{kind} in version \"{}\" cannot be handled as a {kind}: {e}",
                    rt.version,
                    kind = rt.kind
                ))
            })
        }
        Ok(match evaluator {
            Evaluator::Pods => Decoded::Pod(typed(rt, obj)?),
            Evaluator::Services => Decoded::Service(typed(rt, obj)?),
            Evaluator::Claims => Decoded::Claim(typed(rt, obj)?),
            Evaluator::Objects { .. } => Decoded::Counted,
        })
    }

    fn charged(&self) -> Charged<'_> {
        match self {
            Decoded::Pod(pod) => Charged::Pod(pod),
            Decoded::Service(service) => Charged::Service(service),
            Decoded::Claim(claim) => Charged::Claim(claim),
            Decoded::Counted => Charged::Counted,
        }
    }
}

fn quotas_prefix(namespace: &str) -> String {
    format!("{QUOTAS_PREFIX}{namespace}/")
}

impl ApiServer {
    fn now_seconds(&self) -> i64 {
        self.now().timestamp()
    }

    /// Whether `namespace` holds any quota: one key lookup, what every namespaced write
    /// pays.
    fn has_quotas(&self, namespace: &str) -> bool {
        if !self.admission_objects().may_hold_quotas() {
            return false;
        }
        let first = steady_store::ListOptions {
            limit: Some(1),
            ..Default::default()
        };
        self.store()
            .list(&quotas_prefix(namespace), &first, &|_| true)
            .is_ok_and(|page| !page.items.is_empty())
    }

    fn quotas_in(&self, namespace: &str) -> ApiResult<Vec<Stored>> {
        let page = self
            .store()
            .list(&quotas_prefix(namespace), &Default::default(), &|_| true)
            .map_err(|e| ApiError::from_store(e, "resourcequotas", ""))?;
        Ok(page
            .items
            .iter()
            .filter_map(|stored| {
                let value: Value = serde_json::from_slice(&stored.value).ok()?;
                let quota = ResourceQuota::deserialize(&value).ok()?;
                Some(Stored {
                    quota,
                    value,
                    revision: stored.revision,
                })
            })
            .collect())
    }

    /// kube's `ResourceQuota` admission of a create (`old` None) or an update of the main
    /// resource: refused when a covering quota would go over; otherwise the charges to
    /// write once the object is stored (none for a dry run or an uncharged write).
    pub(crate) async fn check_quotas(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        obj: &Value,
        old: Option<&Value>,
        dry_run: bool,
    ) -> ApiResult<Option<QuotaCharges>> {
        let Some(namespace) = namespace.filter(|_| rt.namespaced) else {
            return Ok(None);
        };
        if !self.admission_objects().may_hold_quotas() {
            return Ok(None);
        }
        let evaluator = Evaluator::for_resource(&rt.group, &rt.plural);
        if (old.is_some() && !evaluator.charges_updates()) || !self.has_quotas(namespace) {
            return Ok(None);
        }
        let turn = self.inner.quota_turns.take(namespace).await;
        let mut quotas = self.quotas_in(namespace)?;
        // a quota whose status is not its spec's (kept by an older steady, or edited) is
        // recounted first, as kube's controller syncs a quota whose limits are dirty
        if quotas.iter().any(|s| status_behind_spec(&s.quota)) {
            self.recount_in_turn(namespace, status_behind_spec).await;
            quotas = self.quotas_in(namespace)?;
        }
        let states: Vec<QuotaState> = quotas.iter().map(|s| QuotaState::of(&s.quota)).collect();
        let object = Decoded::of(&evaluator, rt, obj)?;
        let old = old
            .map(|old| Decoded::of(&evaluator, rt, old))
            .transpose()?;
        let write = steady_quota::Write {
            evaluator: &evaluator,
            object: object.charged(),
            old: old.as_ref().map(Decoded::charged),
            now_seconds: self.now_seconds(),
        };
        let charges = steady_quota::charge(&states, write).map_err(|why| {
            ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: {why}",
                rt.qualified_name()
            ))
            .with_details(json!({"name": name, "group": rt.group, "kind": rt.plural}))
        })?;
        if charges.is_empty() || dry_run {
            return Ok(None);
        }
        let mut quotas: Vec<Option<Stored>> = quotas.into_iter().map(Some).collect();
        let charges = charges
            .into_iter()
            .filter_map(|charge| Some((quotas.get_mut(charge.quota)?.take()?, charge.used)))
            .collect();
        Ok(Some(QuotaCharges {
            _turn: turn,
            namespace: namespace.to_string(),
            charges,
        }))
    }

    /// Write the charges of a stored object's admission.
    pub(crate) async fn settle_quotas(&self, charges: QuotaCharges) {
        for (stored, used) in charges.charges {
            let hard = list::parse(stored.quota.status.as_ref().and_then(|s| s.hard.as_ref()));
            self.write_quota_status(&charges.namespace, stored, &hard, &used)
                .await;
        }
    }

    /// After a committed write: give back to the quotas what it no longer uses (kube's
    /// replenishment: an object deleted, a pod finished, a Service no longer a load
    /// balancer), and keep a created or respecified quota's status.
    pub(crate) async fn after_quota_relevant_write(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        subresource: Option<&str>,
        old: Option<&Value>,
        new: Option<&Value>,
    ) {
        let Some(namespace) = namespace.filter(|_| rt.namespaced) else {
            return;
        };
        if !self.has_quotas(namespace) {
            return;
        }
        let respecified = rt.group.is_empty()
            && rt.plural == "resourcequotas"
            && subresource.is_none()
            && new.is_some_and(|new| {
                old.is_none_or(|old| old.pointer("/spec") != new.pointer("/spec"))
            });
        if respecified && let Some(name) = new.and_then(meta::name) {
            self.recount_quotas(namespace, |quota| {
                quota.metadata.name.as_deref() == Some(name)
            })
            .await;
        }
        if let Some(old) = old {
            self.give_back(rt, namespace, old, new).await;
        }
    }

    /// Subtract from each quota that charged `old` what it uses beyond `new` (all of it
    /// when `new` is gone): one write per quota, whatever the namespace holds.
    async fn give_back(
        &self,
        rt: &ResourceType,
        namespace: &str,
        old: &Value,
        new: Option<&Value>,
    ) {
        let evaluator = Evaluator::for_resource(&rt.group, &rt.plural);
        if let Some(new) = new
            && !usage_may_differ(&evaluator, old, new)
        {
            return;
        }
        let Ok(charged) = Decoded::of(&evaluator, rt, old) else {
            return;
        };
        let remaining = new.and_then(|new| Decoded::of(&evaluator, rt, new).ok());
        // as charged at admission: time does not uncharge a pod here (ARCHITECTURE)
        let before = evaluator.usage(charged.charged(), AS_ADMITTED);
        let after = remaining
            .map(|r| evaluator.usage(r.charged(), AS_ADMITTED))
            .unwrap_or_default();
        let mut returned = list::subtract_non_negative(&before, &after);
        returned.retain(|_, q| !q.is_zero());
        if returned.is_empty() {
            return;
        }
        let _turn = self.inner.quota_turns.take(namespace).await;
        let Ok(quotas) = self.quotas_in(namespace) else {
            return;
        };
        for stored in quotas {
            let scopes = steady_quota::ScopeRequirement::of(&stored.quota);
            if !evaluator.in_scope(&scopes, charged.charged()) {
                continue;
            }
            let status = stored.quota.status.as_ref();
            let hard = list::parse(status.and_then(|s| s.hard.as_ref()));
            let back = list::mask(&returned, hard.keys());
            if back.is_empty() {
                continue;
            }
            let used = list::parse(status.and_then(|s| s.used.as_ref()));
            let used = list::subtract_non_negative(&used, &back);
            self.write_quota_status(namespace, stored, &hard, &used)
                .await;
        }
    }

    /// The quota controller's sync of the chosen quotas of `namespace`: `status.hard` is
    /// the spec's, `status.used` what the namespace's objects charge now.
    async fn recount_quotas(&self, namespace: &str, chosen: impl Fn(&ResourceQuota) -> bool) {
        let _turn = self.inner.quota_turns.take(namespace).await;
        self.recount_in_turn(namespace, chosen).await;
    }

    /// [`Self::recount_quotas`] by a caller holding the quota turn.
    async fn recount_in_turn(&self, namespace: &str, chosen: impl Fn(&ResourceQuota) -> bool) {
        let Ok(quotas) = self.quotas_in(namespace) else {
            return;
        };
        for stored in quotas.into_iter().filter(|s| chosen(&s.quota)) {
            let hard = list::parse(stored.quota.spec.as_ref().and_then(|s| s.hard.as_ref()));
            let used = self.usage(namespace, &stored.quota, &hard);
            self.write_quota_status(namespace, stored, &hard, &used)
                .await;
        }
    }

    /// What the objects of `namespace` that `quota`'s scopes select charge, for each of
    /// `hard`'s resources (zero for those nothing charges).
    fn usage(&self, namespace: &str, quota: &ResourceQuota, hard: &ResourceList) -> ResourceList {
        let scopes = steady_quota::ScopeRequirement::of(quota);
        let now = self.now_seconds();
        let mut used: ResourceList = hard
            .iter()
            .map(|(name, q)| (name.clone(), steady_quota::Quantity::zero(q.format())))
            .collect();
        for (evaluator, names) in evaluators_of(hard) {
            let Some((group, plural)) = evaluated_resource(&evaluator) else {
                continue;
            };
            let Some(rt) = self.registry().builtin(&group, &plural).or_else(|| {
                let any = self.registry().all();
                any.into_iter()
                    .find(|t| t.group == group && t.plural == plural)
            }) else {
                continue;
            };
            let Ok(page) = self.store().list(
                &rt.list_prefix(Some(namespace)),
                &Default::default(),
                &|_| true,
            ) else {
                continue;
            };
            let mut total = ResourceList::new();
            for stored in &page.items {
                let charged = match &evaluator {
                    Evaluator::Objects { .. } => Decoded::Counted,
                    _ => {
                        let Ok(value) = serde_json::from_slice::<Value>(&stored.value) else {
                            continue;
                        };
                        let Ok(decoded) = Decoded::of(&evaluator, &rt, &value) else {
                            continue;
                        };
                        decoded
                    }
                };
                if evaluator.in_scope(&scopes, charged.charged()) {
                    total = list::add(&total, &evaluator.usage(charged.charged(), now));
                }
            }
            for name in names {
                if let Some(q) = total.get(&name) {
                    used.insert(name, *q);
                }
            }
        }
        used
    }

    /// Replace the quota's status when it differs (a conflict means another write moved
    /// it; under the quota turn that is a user's, whose status stands until the next
    /// recount).
    async fn write_quota_status(
        &self,
        namespace: &str,
        stored: Stored,
        hard: &ResourceList,
        used: &ResourceList,
    ) {
        let status = stored.quota.status.as_ref();
        let same = |now: Option<&std::collections::BTreeMap<String, _>>, next: &ResourceList| {
            now.is_some_and(|now| list::equal(&list::parse(Some(now)), next))
        };
        if same(status.and_then(|s| s.hard.as_ref()), hard)
            && same(status.and_then(|s| s.used.as_ref()), used)
        {
            return;
        }
        let Some(quotas) = self.registry().builtin("", "resourcequotas") else {
            return;
        };
        let mut value = stored.value;
        let name = meta::name(&value).unwrap_or("").to_string();
        value["status"] = json!({"hard": list::to_wire(hard), "used": list::to_wire(used)});
        meta::metadata_mut(&mut value)
            .insert("resourceVersion".into(), json!(stored.revision.to_string()));
        let target = Target::object(&quotas, Some(namespace), &name).subresource(Some("status"));
        let options = WriteOptions {
            field_manager: Some(QUOTA_MANAGER.into()),
            ..Default::default()
        };
        // boxed: the status write is itself a write, whose hooks lead back here
        if let Err(e) = Box::pin(self.update(target, value, &options)).await {
            tracing::debug!(quota = %name, namespace, error = %e.message, "quota status not written");
        }
    }
}

/// The time a usage is measured at to get what admission charged: before any deletion.
const AS_ADMITTED: i64 = i64::MIN;

/// Whether an update can have changed what the object uses: a pod's phase, a Service's
/// type or ports, a claim's size or class. Other kinds are charged a count alone.
fn usage_may_differ(evaluator: &Evaluator, old: &Value, new: &Value) -> bool {
    let paths: &[&str] = match evaluator {
        Evaluator::Pods => &["/status/phase"],
        Evaluator::Services => &["/spec/type", "/spec/ports"],
        Evaluator::Claims => &[
            "/spec/resources",
            "/spec/storageClassName",
            "/status/allocatedResources",
        ],
        Evaluator::Objects { .. } => &[],
    };
    paths
        .iter()
        .any(|path| old.pointer(path) != new.pointer(path))
}

/// Whether the quota's `status.hard` is not (yet) its `spec.hard`.
fn status_behind_spec(quota: &ResourceQuota) -> bool {
    let spec = list::parse(quota.spec.as_ref().and_then(|s| s.hard.as_ref()));
    let status = quota.status.as_ref().and_then(|s| s.hard.as_ref());
    status.is_none_or(|status| !list::equal(&list::parse(Some(status)), &spec))
        || quota
            .status
            .as_ref()
            .and_then(|s| s.used.as_ref())
            .is_none()
}

/// The evaluators `hard`'s resources need, each with the names it computes.
fn evaluators_of(hard: &ResourceList) -> Vec<(Evaluator, Vec<String>)> {
    let mut needed: Vec<(Evaluator, Vec<String>)> = Vec::new();
    for name in hard.keys() {
        let Some(evaluator) = evaluator_for_name(name) else {
            continue;
        };
        match needed.iter_mut().find(|(e, _)| *e == evaluator) {
            Some((_, names)) => names.push(name.clone()),
            None => needed.push((evaluator, vec![name.clone()])),
        }
    }
    needed
}

/// Which evaluator computes a quota resource name.
fn evaluator_for_name(name: &str) -> Option<Evaluator> {
    [Evaluator::Pods, Evaluator::Services, Evaluator::Claims]
        .into_iter()
        .find(|e| e.computes(name))
        .or_else(|| {
            let legacy = [
                "configmaps",
                "secrets",
                "replicationcontrollers",
                "resourcequotas",
            ];
            if legacy.contains(&name) {
                return Some(Evaluator::for_resource("", name));
            }
            let resource = name.strip_prefix("count/")?;
            let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
            Some(Evaluator::for_resource(group, plural))
        })
}

/// The (group, plural) an evaluator reads.
fn evaluated_resource(evaluator: &Evaluator) -> Option<(String, String)> {
    match evaluator {
        Evaluator::Pods => Some((String::new(), "pods".into())),
        Evaluator::Services => Some((String::new(), "services".into())),
        Evaluator::Claims => Some((String::new(), "persistentvolumeclaims".into())),
        Evaluator::Objects { count_name, .. } => {
            let resource = count_name.strip_prefix("count/")?;
            let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
            Some((group.to_string(), plural.to_string()))
        }
    }
}
