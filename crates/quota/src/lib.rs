//! Resource quantities and ResourceQuota accounting, shared by the API server's quota
//! admission and the quota controller, as kube shares `pkg/quota/v1` between its
//! admission plugin and kube-controller-manager.
//!
//! Owns: `resource.Quantity` (parsing, kube's canonical form, arithmetic), resource
//! lists, what each kind charges to a quota (pods' compute resources, Services' ports
//! and load balancers, claims' storage, any kind's object count), quota scopes, QoS
//! classes, the admission check, and LimitRanges' defaults and bounds.
//! Must not know: the API server, the store, HTTP or how objects are fetched: callers
//! pass decoded objects and quotas in.

pub mod charge;
pub mod evaluate;
pub mod limits;
pub mod list;
pub mod quantity;

pub use charge::{Charge, QuotaState, Write, charge};
pub use evaluate::{
    Charged, ComputeResources, Evaluator, QOS_RESOURCES, QosClass, ScopeRequirement,
    object_count_name,
};
pub use list::ResourceList;
pub use quantity::{Format, Quantity, QuantityError};
