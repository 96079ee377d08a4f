//! The Endpoints and EndpointSlice controllers in one: for each Service with a selector,
//! the Endpoints object named like it and its EndpointSlices list the pods the selector
//! matches, as kube-controller-manager 1.32's two controllers write them.
//!
//! Level-triggered: a reconcile computes both from the Service and the cached pods and
//! writes only what differs from the cached Endpoints and slices, so a reconcile at the
//! fixed point writes nothing. Pods are mapped to the Services that select them now and
//! to those whose slices list them (a pod whose labels stopped matching leaves them).
//! Services without a selector, and ExternalName ones, are left alone.
//! Must not know how pods get their IPs or readiness: the node does that.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{
    Container, EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod,
    PodSpec, PodStatus, Service, ServicePort,
};
use k8s_openapi::api::discovery::v1::{self as discovery, EndpointConditions, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use steady_runtime::{Action, Context, ObjectCache, ObjectKey};

use crate::pod_template::{self, Identity};
use crate::{Error, Running, Setup, Shutdown};

/// The label naming an EndpointSlice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming who manages an EndpointSlice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// On Endpoints the endpoints controller writes: the mirroring controller skips them.
const SKIP_MIRROR_LABEL: &str = "endpointslice.kubernetes.io/skip-mirror";
/// On the Endpoints and slices of a headless Service.
const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// kube's `--max-endpoints-per-slice` default.
const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// Start the controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, _) = setup.into_parts();
    let mut controller = crate::controller_for::<Service>(&client, config);
    let services = controller.primary_cache();
    let managed = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let slices = controller.owns_with(Api::all(client.clone()), managed);
    let endpoints = controller.owns(Api::all(client.clone()));
    let listing = slices.clone();
    let pods = controller.watches(Api::all(client), move |pod: &Pod| {
        services_of(pod, &services, &listing)
    });
    controller.trim(keep_what_endpoints_list);
    let data = EndpointsData {
        pods,
        slices,
        endpoints,
    };
    controller.run(reconcile, Arc::new(data), shutdown).boxed()
}

/// Cache only what the Endpoints and slices are made of (every pod in the cluster is
/// watched): labels, identity, node, hostname, container ports, phase, readiness, IPs.
fn keep_what_endpoints_list(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    pod.metadata.annotations = None;
    if let Some(spec) = pod.spec.as_mut() {
        let containers = std::mem::take(&mut spec.containers);
        *spec = PodSpec {
            node_name: spec.node_name.take(),
            hostname: spec.hostname.take(),
            subdomain: spec.subdomain.take(),
            containers: containers
                .into_iter()
                .map(|c| Container {
                    name: c.name,
                    ports: c.ports,
                    ..Container::default()
                })
                .collect(),
            ..PodSpec::default()
        };
    }
    if let Some(status) = pod.status.as_mut() {
        *status = PodStatus {
            phase: status.phase.take(),
            conditions: status.conditions.take(),
            pod_ip: status.pod_ip.take(),
            pod_ips: status.pod_ips.take(),
            ..PodStatus::default()
        };
    }
}

struct EndpointsData {
    pods: ObjectCache<Pod>,
    slices: ObjectCache<EndpointSlice>,
    endpoints: ObjectCache<Endpoints>,
}

/// The Services `pod` concerns: those selecting it, and those whose slices list it.
fn services_of(
    pod: &Pod,
    services: &ObjectCache<Service>,
    slices: &ObjectCache<EndpointSlice>,
) -> Vec<ObjectKey> {
    let namespace = pod.metadata.namespace.as_deref();
    let selecting = services
        .list()
        .into_iter()
        .filter(|service| service.metadata.namespace.as_deref() == namespace)
        .filter(|service| selector(service).is_some_and(|s| selects(s, pod)))
        .filter_map(|service| service.metadata.name.clone());
    let listing = slices
        .list()
        .into_iter()
        .filter(|slice| slice.metadata.namespace.as_deref() == namespace)
        .filter(|slice| lists(slice, pod))
        .filter_map(|slice| slice.labels().get(SERVICE_NAME_LABEL).cloned());
    let names: BTreeSet<String> = selecting.chain(listing).collect();
    names
        .iter()
        .map(|name| ObjectKey::new(namespace, name))
        .collect()
}

/// Whether `slice` lists `pod` (by uid).
fn lists(slice: &EndpointSlice, pod: &Pod) -> bool {
    let Some(uid) = pod.metadata.uid.as_deref() else {
        return false;
    };
    slice.endpoints.iter().any(|endpoint| {
        let target = endpoint.target_ref.as_ref();
        target.and_then(|r| r.uid.as_deref()) == Some(uid)
    })
}

/// The Service's selector, if it has one this controller acts on.
fn selector(service: &Service) -> Option<&BTreeMap<String, String>> {
    let spec = service.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return None;
    }
    spec.selector.as_ref().filter(|s| !s.is_empty())
}

fn selects(selector: &BTreeMap<String, String>, pod: &Pod) -> bool {
    let labels = pod.labels();
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn is_headless(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

/// A pod the Service lists, as both controllers see it.
struct Member {
    pod: Arc<Pod>,
    ip: String,
    ready: bool,
    terminating: bool,
    /// The Service's ports this pod serves, resolved to its container ports.
    ports: Vec<EndpointPort>,
}

/// The pods `service` lists: selected, not finished, with an IPv4 address and (if the
/// Service has ports) serving at least one of them; by name.
fn members(
    service: &Service,
    selector: &BTreeMap<String, String>,
    pods: &[Arc<Pod>],
) -> Vec<Member> {
    let spec = service.spec.clone().unwrap_or_default();
    let service_ports = spec.ports.unwrap_or_default();
    let publish_not_ready = spec.publish_not_ready_addresses == Some(true);
    let namespace = service.metadata.namespace.as_deref();
    let mut members: Vec<Member> = pods
        .iter()
        .filter(|pod| pod.metadata.namespace.as_deref() == namespace && selects(selector, pod))
        .filter(|pod| !pod_template::is_finished(pod))
        .filter_map(|pod| {
            let ip = ipv4_of(pod)?;
            let ports: Vec<EndpointPort> = service_ports
                .iter()
                .filter_map(|port| endpoint_port(port, pod))
                .collect();
            if ports.is_empty() && !service_ports.is_empty() {
                return None;
            }
            Some(Member {
                pod: pod.clone(),
                ip,
                ready: publish_not_ready || pod_template::is_ready(pod),
                terminating: pod_template::is_terminating(pod),
                ports,
            })
        })
        .collect();
    members.sort_by(|a, b| a.pod.metadata.name.cmp(&b.pod.metadata.name));
    members
}

fn ipv4_of(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let listed = status.pod_ips.iter().flatten().map(|ip| ip.ip.as_str());
    status
        .pod_ip
        .as_deref()
        .into_iter()
        .chain(listed)
        .find(|ip| !ip.is_empty() && !ip.contains(':'))
        .map(str::to_string)
}

/// `port` of the Service as `pod` serves it: its `targetPort` by number, or by name
/// looked up in the pod's containers; None when the pod has no such port.
fn endpoint_port(port: &ServicePort, pod: &Pod) -> Option<EndpointPort> {
    let protocol = port.protocol.clone().unwrap_or_else(|| "TCP".into());
    let number = match &port.target_port {
        None => port.port,
        Some(IntOrString::Int(number)) => *number,
        Some(IntOrString::String(name)) => {
            let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
            let mut ports = containers.flat_map(|c| c.ports.iter().flatten());
            ports
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })?
                .container_port
        }
    };
    Some(EndpointPort {
        name: port.name.clone().filter(|n| !n.is_empty()),
        port: number,
        protocol: Some(protocol),
        app_protocol: port.app_protocol.clone(),
    })
}

fn target_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// The pod's DNS hostname under the Service: kube gives it only when the pod's
/// `subdomain` names the Service.
fn hostname(pod: &Pod, service: &str) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    spec.hostname
        .clone()
        .filter(|_| spec.subdomain.as_deref() == Some(service))
}

/// The Service's labels plus `extra`, and the headless label when it is headless.
fn labels_for(service: &Service, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut labels = service.labels().clone();
    labels.remove(HEADLESS_LABEL);
    for (key, value) in extra {
        labels.insert((*key).into(), (*value).into());
    }
    if is_headless(service) {
        labels.insert(HEADLESS_LABEL.into(), String::new());
    }
    labels
}

/// What a reconcile writes for: the Service and the pods it lists.
#[derive(Clone, Copy)]
struct Target<'a> {
    ctx: &'a Context<EndpointsData>,
    service: &'a Service,
    identity: &'a Identity,
    members: &'a [Member],
}

async fn reconcile(
    service: Arc<Service>,
    ctx: Arc<Context<EndpointsData>>,
) -> Result<Action, Error> {
    let Some(selector) = selector(&service) else {
        return Ok(Action::done());
    };
    if service.metadata.deletion_timestamp.is_some() {
        return Ok(Action::done());
    }
    let identity = Identity::of(service.as_ref())?;
    let members = members(&service, selector, &ctx.data().pods.list());
    let target = Target {
        ctx: &ctx,
        service: &service,
        identity: &identity,
        members: &members,
    };
    sync_endpoints(target).await?;
    sync_slices(target).await?;
    Ok(Action::done())
}

/// The Endpoints subsets kube's endpoints controller writes: pods being deleted left out,
/// those not ready in `notReadyAddresses`, one subset per distinct set of ports.
fn subsets(service: &Service, members: &[Member]) -> Vec<EndpointSubset> {
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let addresses = members.iter().filter(|m| !m.terminating).map(|member| {
        let mut ports = member.ports.clone();
        ports.sort_by(|a, b| (&a.name, a.port).cmp(&(&b.name, b.port)));
        let address = EndpointAddress {
            ip: member.ip.clone(),
            hostname: hostname(&member.pod, name),
            node_name: member.pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            target_ref: Some(target_ref(&member.pod)),
        };
        (ports, (member.ready, address))
    });
    let listed = |mut list: Vec<EndpointAddress>| {
        list.sort_by(|a, b| a.ip.cmp(&b.ip));
        (!list.is_empty()).then_some(list)
    };
    group_by_ports(addresses)
        .into_iter()
        .map(|(ports, addresses)| {
            let (ready, not_ready): (Vec<_>, Vec<_>) = addresses.into_iter().partition(|a| a.0);
            EndpointSubset {
                addresses: listed(ready.into_iter().map(|a| a.1).collect()),
                not_ready_addresses: listed(not_ready.into_iter().map(|a| a.1).collect()),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect()
}

/// `items` grouped by the ports they come with (pods serving the same ports share an
/// Endpoints subset or an EndpointSlice), in a stable order.
fn group_by_ports<P: serde::Serialize, T>(
    items: impl IntoIterator<Item = (Vec<P>, T)>,
) -> Vec<(Vec<P>, Vec<T>)> {
    let mut groups: BTreeMap<String, (Vec<P>, Vec<T>)> = BTreeMap::new();
    for (ports, item) in items {
        let key = serde_json::to_string(&ports).unwrap_or_default();
        groups
            .entry(key)
            .or_insert_with(|| (ports, Vec::new()))
            .1
            .push(item);
    }
    groups.into_values().collect()
}

async fn sync_endpoints(target: Target<'_>) -> Result<(), Error> {
    let subsets = subsets(target.service, target.members);
    let wanted = Endpoints {
        metadata: ObjectMeta {
            name: Some(target.identity.name.clone()),
            namespace: Some(target.identity.namespace.clone()),
            labels: Some(labels_for(target.service, &[(SKIP_MIRROR_LABEL, "true")])),
            owner_references: Some(vec![pod_template::controller_ref(target.service)]),
            ..ObjectMeta::default()
        },
        subsets: (!subsets.is_empty()).then_some(subsets),
    };
    let key = ObjectKey::new(Some(&target.identity.namespace), &target.identity.name);
    let api = target.ctx.api::<Endpoints>(&target.identity.namespace);
    match target.ctx.data().endpoints.get(&key) {
        // One that appeared meanwhile is the next reconcile's to compare.
        None => match api.create(&PostParams::default(), &wanted).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(e.into()),
        },
        Some(current) => {
            let same = current.subsets == wanted.subsets
                && current.metadata.labels == wanted.metadata.labels
                && current.metadata.owner_references == wanted.metadata.owner_references;
            if !same {
                let mut replacement = current.as_ref().clone();
                replacement.subsets = wanted.subsets;
                replacement.metadata.labels = wanted.metadata.labels;
                replacement.metadata.owner_references = wanted.metadata.owner_references;
                api.replace(&target.identity.name, &PostParams::default(), &replacement)
                    .await?;
            }
        }
    }
    Ok(())
}

/// What one EndpointSlice holds: its ports and endpoints.
#[derive(Debug, PartialEq)]
struct SliceContent {
    ports: Vec<discovery::EndpointPort>,
    endpoints: Vec<discovery::Endpoint>,
}

/// The slices kube's EndpointSlice controller writes: pods grouped by the ports they
/// serve, at most [`MAX_ENDPOINTS_PER_SLICE`] a slice; one empty slice when no pod is
/// listed.
fn slice_contents(service: &Service, members: &[Member]) -> Vec<SliceContent> {
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let endpoints = members.iter().map(|member| {
        let ports: Vec<discovery::EndpointPort> = member
            .ports
            .iter()
            .map(|p| discovery::EndpointPort {
                name: Some(p.name.clone().unwrap_or_default()),
                port: Some(p.port),
                protocol: p.protocol.clone(),
                app_protocol: p.app_protocol.clone(),
            })
            .collect();
        let endpoint = discovery::Endpoint {
            addresses: vec![member.ip.clone()],
            conditions: Some(EndpointConditions {
                ready: Some(member.ready && !member.terminating),
                serving: Some(member.ready),
                terminating: Some(member.terminating),
            }),
            hostname: hostname(&member.pod, name),
            node_name: member.pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            target_ref: Some(target_ref(&member.pod)),
            ..discovery::Endpoint::default()
        };
        (ports, endpoint)
    });
    let mut contents: Vec<SliceContent> = group_by_ports(endpoints)
        .into_iter()
        .flat_map(|(ports, endpoints)| {
            endpoints
                .chunks(MAX_ENDPOINTS_PER_SLICE)
                .map(|chunk| SliceContent {
                    ports: ports.clone(),
                    endpoints: chunk.to_vec(),
                })
                .collect::<Vec<_>>()
        })
        .collect();
    if contents.is_empty() {
        contents.push(SliceContent {
            ports: Vec::new(),
            endpoints: Vec::new(),
        });
    }
    contents
}

fn content_of(slice: &EndpointSlice) -> SliceContent {
    SliceContent {
        ports: slice.ports.clone().unwrap_or_default(),
        endpoints: slice.endpoints.clone(),
    }
}

async fn sync_slices(target: Target<'_>) -> Result<(), Error> {
    let labels = labels_for(
        target.service,
        &[
            (SERVICE_NAME_LABEL, target.identity.name.as_str()),
            (MANAGED_BY_LABEL, MANAGED_BY),
        ],
    );
    let mut current: Vec<Arc<EndpointSlice>> = target
        .ctx
        .data()
        .slices
        .owned_by(&target.identity.uid)
        .into_iter()
        .filter(|slice| pod_template::is_controlled_by(&slice.metadata, &target.identity.uid))
        .filter(|slice| slice.metadata.deletion_timestamp.is_none())
        .collect();
    let mut wanted = slice_contents(target.service, target.members);
    // Slices already as wanted stay untouched.
    wanted.retain(|content| {
        let unchanged = current.iter().position(|slice| {
            slice.metadata.labels.as_ref() == Some(&labels) && content_of(slice) == *content
        });
        unchanged.map(|index| current.remove(index)).is_none()
    });
    let api = target.ctx.api::<EndpointSlice>(&target.identity.namespace);
    let mut reusable = current.into_iter();
    for content in wanted {
        match reusable.next() {
            Some(slice) => {
                let mut replacement = slice.as_ref().clone();
                replacement.metadata.labels = Some(labels.clone());
                replacement.ports = Some(content.ports);
                replacement.endpoints = content.endpoints;
                let name = replacement.name_any();
                api.replace(&name, &PostParams::default(), &replacement)
                    .await?;
            }
            None => {
                let slice = EndpointSlice {
                    metadata: ObjectMeta {
                        generate_name: Some(format!("{}-", target.identity.name)),
                        namespace: Some(target.identity.namespace.clone()),
                        labels: Some(labels.clone()),
                        owner_references: Some(vec![pod_template::controller_ref(target.service)]),
                        ..ObjectMeta::default()
                    },
                    address_type: "IPv4".into(),
                    ports: Some(content.ports),
                    endpoints: content.endpoints,
                };
                api.create(&PostParams::default(), &slice).await?;
            }
        }
    }
    for stale in reusable {
        pod_template::delete_exact(&api, &stale).await?;
    }
    Ok(())
}
