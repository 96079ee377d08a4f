//! The built-in API of Kubernetes 1.32 as data: one line per kind.
//!
//! Group, version, kind, plural and scope come from k8s-openapi's `Resource` metadata;
//! what k8s-openapi does not know (short names, categories, verbs, subresources, field
//! selectors, whether the server keeps `metadata.generation`) sits beside it, as kube-apiserver's discovery shows them. The set is what a
//! default 1.32 cluster serves: GA versions only (alpha and beta APIs are disabled by
//! default), without the kinds that became GA in 1.33 (networking.k8s.io/v1 IPAddress and
//! ServiceCIDR). This module knows nothing of storage or HTTP.

use k8s_openapi::api::{
    admissionregistration::v1 as admissionregistration, apps::v1 as apps,
    authentication::v1 as authentication, authorization::v1 as authorization,
    autoscaling::v1 as autoscaling_v1, autoscaling::v2 as autoscaling_v2, batch::v1 as batch,
    certificates::v1 as certificates, coordination::v1 as coordination, core::v1 as core,
    discovery::v1 as discovery, events::v1 as events, flowcontrol::v1 as flowcontrol,
    networking::v1 as networking, node::v1 as node, policy::v1 as policy, rbac::v1 as rbac,
    scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};

/// The verbs of a kind that is stored and served in full.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const NO_COLLECTION_DELETE: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
/// Reviews, bindings, evictions, token requests: answered, never stored.
pub const CREATE_ONLY: &[&str] = &["create"];
const READ_ONLY: &[&str] = &["get", "list"];

/// A subresource as discovery lists it: its name, verbs and, when it is not the parent's
/// kind, the group, version and kind of its body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Subresource {
    pub name: &'static str,
    pub verbs: &'static [&'static str],
    /// (group, version, kind) of the body, when it differs from the parent's.
    pub body: Option<(&'static str, &'static str, &'static str)>,
}

const fn sub(name: &'static str, verbs: &'static [&'static str]) -> Subresource {
    Subresource {
        name,
        verbs,
        body: None,
    }
}

const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];
pub const STATUS: Subresource = sub("status", GET_PATCH_UPDATE);
pub const SCALE: Subresource = Subresource {
    name: "scale",
    verbs: GET_PATCH_UPDATE,
    body: Some(("autoscaling", "v1", "Scale")),
};
const POD_SUBRESOURCES: &[Subresource] = &[
    sub("attach", &["create", "get"]),
    Subresource {
        name: "binding",
        verbs: CREATE_ONLY,
        body: Some(("", "v1", "Binding")),
    },
    Subresource {
        name: "eviction",
        verbs: CREATE_ONLY,
        body: Some(("policy", "v1", "Eviction")),
    },
    sub("ephemeralcontainers", GET_PATCH_UPDATE),
    sub("exec", &["create", "get"]),
    sub("log", &["get"]),
    sub("portforward", &["create", "get"]),
    STATUS,
];
const SERVICE_ACCOUNT_SUBRESOURCES: &[Subresource] = &[Subresource {
    name: "token",
    verbs: CREATE_ONLY,
    body: Some(("authentication.k8s.io", "v1", "TokenRequest")),
}];
const NAMESPACE_SUBRESOURCES: &[Subresource] = &[sub("finalize", &["update"]), STATUS];
const CSR_SUBRESOURCES: &[Subresource] = &[sub("approval", GET_PATCH_UPDATE), STATUS];

/// How the server keeps `metadata.generation` of a kind. kube-apiserver sets it only where
/// the kind's registry strategy does, so most core kinds never carry one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// The server leaves `generation` as the client created it (usually absent).
    Untracked,
    /// 1 on create, one more on each change outside `metadata` and `status`.
    OnSpecChange,
    /// 1 on create and never bumped (PriorityClass's strategy only initialises it).
    OnCreateOnly,
}

impl Generation {
    pub fn set_on_create(self) -> bool {
        self != Generation::Untracked
    }

    pub fn bumped_by_spec_change(self) -> bool {
        self == Generation::OnSpecChange
    }
}

/// One built-in kind at one version.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub verbs: &'static [&'static str],
    pub subresources: &'static [Subresource],
    /// Field selector paths beyond `metadata.name` and `metadata.namespace`.
    pub fields: &'static [&'static str],
    pub generation: Generation,
}

/// Whether a k8s-openapi scope is namespaced; sub-resource scopes are not kinds.
pub trait KindScope {
    const NAMESPACED: bool;
}
impl KindScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}
impl KindScope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// The kind `T` with every verb, no subresources, no short names.
const fn of<T: Resource>() -> BuiltinKind
where
    T::Scope: KindScope,
{
    BuiltinKind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        plural: T::URL_PATH_SEGMENT,
        namespaced: <T::Scope as KindScope>::NAMESPACED,
        short_names: &[],
        categories: &[],
        verbs: ALL_VERBS,
        subresources: &[],
        fields: &[],
        generation: Generation::Untracked,
    }
}

impl BuiltinKind {
    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        match self.group {
            "" => self.version.to_string(),
            group => format!("{group}/{}", self.version),
        }
    }

    const fn short(mut self, names: &'static [&'static str]) -> Self {
        self.short_names = names;
        self
    }
    /// In the `all` category (`kubectl get all`).
    const fn in_all(mut self) -> Self {
        self.categories = &["all"];
        self
    }
    const fn api_extensions(mut self) -> Self {
        self.categories = &["api-extensions"];
        self
    }
    const fn verbs(mut self, verbs: &'static [&'static str]) -> Self {
        self.verbs = verbs;
        self
    }
    const fn subs(mut self, subresources: &'static [Subresource]) -> Self {
        self.subresources = subresources;
        self
    }
    const fn status(self) -> Self {
        self.subs(&[STATUS])
    }
    const fn status_and_scale(self) -> Self {
        self.subs(&[SCALE, STATUS])
    }
    const fn fields(mut self, fields: &'static [&'static str]) -> Self {
        self.fields = fields;
        self
    }
    /// Its strategy sets `generation` to 1 on create and bumps it on each spec change.
    const fn tracks_generation(mut self) -> Self {
        self.generation = Generation::OnSpecChange;
        self
    }
    const fn generation_on_create_only(mut self) -> Self {
        self.generation = Generation::OnCreateOnly;
        self
    }

    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources.iter().any(|s| s.name == name)
    }

    /// Reviews and the like: a create is answered, nothing is stored.
    pub fn is_create_only(&self) -> bool {
        self.verbs == CREATE_ONLY
    }
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const CORE_EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];
const EVENTS_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "reason",
    "reportingController",
    "type",
];

/// Every built-in kind steady serves, as on a default kube-apiserver 1.32.
pub const BUILTIN_KINDS: &[BuiltinKind] = &[
    // core/v1
    of::<core::Binding>().verbs(CREATE_ONLY),
    of::<core::ComponentStatus>()
        .short(&["cs"])
        .verbs(READ_ONLY),
    of::<core::ConfigMap>().short(&["cm"]),
    of::<core::Endpoints>().short(&["ep"]),
    of::<core::Event>().short(&["ev"]).fields(CORE_EVENT_FIELDS),
    of::<core::LimitRange>().short(&["limits"]),
    of::<core::Namespace>()
        .short(&["ns"])
        .verbs(NO_COLLECTION_DELETE)
        .subs(NAMESPACE_SUBRESOURCES)
        .fields(&["status.phase"]),
    of::<core::Node>()
        .short(&["no"])
        .status()
        .fields(&["spec.unschedulable"]),
    of::<core::PersistentVolumeClaim>().short(&["pvc"]).status(),
    of::<core::PersistentVolume>().short(&["pv"]).status(),
    of::<core::Pod>()
        .short(&["po"])
        .in_all()
        .subs(POD_SUBRESOURCES)
        .fields(POD_FIELDS),
    of::<core::PodTemplate>(),
    of::<core::ReplicationController>()
        .short(&["rc"])
        .in_all()
        .status_and_scale()
        .fields(&["status.replicas"])
        .tracks_generation(),
    of::<core::ResourceQuota>().short(&["quota"]).status(),
    of::<core::Secret>().fields(&["type"]),
    of::<core::ServiceAccount>()
        .short(&["sa"])
        .subs(SERVICE_ACCOUNT_SUBRESOURCES),
    of::<core::Service>().short(&["svc"]).in_all().status(),
    // admissionregistration.k8s.io/v1
    of::<admissionregistration::MutatingWebhookConfiguration>()
        .api_extensions()
        .tracks_generation(),
    of::<admissionregistration::ValidatingAdmissionPolicy>()
        .api_extensions()
        .status()
        .tracks_generation(),
    of::<admissionregistration::ValidatingAdmissionPolicyBinding>()
        .api_extensions()
        .tracks_generation(),
    of::<admissionregistration::ValidatingWebhookConfiguration>()
        .api_extensions()
        .tracks_generation(),
    // apiextensions.k8s.io/v1
    of::<apiextensions::CustomResourceDefinition>()
        .short(&["crd", "crds"])
        .api_extensions()
        .status()
        .tracks_generation(),
    // apiregistration.k8s.io/v1
    of::<apiregistration::APIService>()
        .api_extensions()
        .status(),
    // apps/v1
    of::<apps::ControllerRevision>(),
    of::<apps::DaemonSet>()
        .short(&["ds"])
        .in_all()
        .status()
        .tracks_generation(),
    of::<apps::Deployment>()
        .short(&["deploy"])
        .in_all()
        .status_and_scale()
        .tracks_generation(),
    of::<apps::ReplicaSet>()
        .short(&["rs"])
        .in_all()
        .status_and_scale()
        .fields(&["status.replicas"])
        .tracks_generation(),
    of::<apps::StatefulSet>()
        .short(&["sts"])
        .in_all()
        .status_and_scale()
        .tracks_generation(),
    // authentication.k8s.io/v1
    of::<authentication::SelfSubjectReview>().verbs(CREATE_ONLY),
    of::<authentication::TokenReview>().verbs(CREATE_ONLY),
    // authorization.k8s.io/v1
    of::<authorization::LocalSubjectAccessReview>().verbs(CREATE_ONLY),
    of::<authorization::SelfSubjectAccessReview>().verbs(CREATE_ONLY),
    of::<authorization::SelfSubjectRulesReview>().verbs(CREATE_ONLY),
    of::<authorization::SubjectAccessReview>().verbs(CREATE_ONLY),
    // autoscaling/v2 (preferred) and v1
    of::<autoscaling_v2::HorizontalPodAutoscaler>()
        .short(&["hpa"])
        .in_all()
        .status(),
    of::<autoscaling_v1::HorizontalPodAutoscaler>()
        .short(&["hpa"])
        .in_all()
        .status(),
    // batch/v1
    of::<batch::CronJob>()
        .short(&["cj"])
        .in_all()
        .status()
        .tracks_generation(),
    of::<batch::Job>().in_all().status().tracks_generation(),
    // certificates.k8s.io/v1
    of::<certificates::CertificateSigningRequest>()
        .short(&["csr"])
        .subs(CSR_SUBRESOURCES)
        .fields(&["spec.signerName"]),
    // coordination.k8s.io/v1
    of::<coordination::Lease>(),
    // discovery.k8s.io/v1
    of::<discovery::EndpointSlice>().tracks_generation(),
    // events.k8s.io/v1
    of::<events::Event>()
        .short(&["ev"])
        .fields(EVENTS_V1_FIELDS),
    // flowcontrol.apiserver.k8s.io/v1
    of::<flowcontrol::FlowSchema>().status().tracks_generation(),
    of::<flowcontrol::PriorityLevelConfiguration>()
        .status()
        .tracks_generation(),
    // networking.k8s.io/v1
    of::<networking::IngressClass>().tracks_generation(),
    of::<networking::Ingress>()
        .short(&["ing"])
        .status()
        .tracks_generation(),
    of::<networking::NetworkPolicy>()
        .short(&["netpol"])
        .tracks_generation(),
    // node.k8s.io/v1
    of::<node::RuntimeClass>(),
    // policy/v1
    of::<policy::PodDisruptionBudget>()
        .short(&["pdb"])
        .status()
        .tracks_generation(),
    // rbac.authorization.k8s.io/v1
    of::<rbac::ClusterRoleBinding>(),
    of::<rbac::ClusterRole>(),
    of::<rbac::RoleBinding>(),
    of::<rbac::Role>(),
    // scheduling.k8s.io/v1
    of::<scheduling::PriorityClass>()
        .short(&["pc"])
        .generation_on_create_only(),
    // storage.k8s.io/v1
    of::<storage::CSIDriver>().tracks_generation(),
    of::<storage::CSINode>(),
    of::<storage::CSIStorageCapacity>(),
    of::<storage::StorageClass>().short(&["sc"]),
    of::<storage::VolumeAttachment>().status(),
];

/// The built-in kind served at (group, version, plural), if any.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static BuiltinKind> {
    BUILTIN_KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.plural == plural)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for k in BUILTIN_KINDS {
            assert!(
                seen.insert((k.group, k.version, k.plural)),
                "{}/{} {} twice",
                k.group,
                k.version,
                k.plural
            );
        }
    }

    #[test]
    fn metadata_comes_from_k8s_openapi() {
        let sts = find("apps", "v1", "statefulsets").expect("statefulsets");
        assert_eq!(sts.kind, "StatefulSet");
        assert!(sts.namespaced && sts.has_subresource("scale"));
        let pv = find("", "v1", "persistentvolumes").expect("persistentvolumes");
        assert!(!pv.namespaced);
        let ssar = find("authorization.k8s.io", "v1", "selfsubjectaccessreviews").expect("ssar");
        assert!(ssar.is_create_only());
        assert!(find("networking.k8s.io", "v1", "ipaddresses").is_none());
    }
}
