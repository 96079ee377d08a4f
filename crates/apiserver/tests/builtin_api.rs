//! The built-in API of Kubernetes 1.32 through kube-rs: discovery of every group, CRUD on
//! every listable kind, workload defaults and selector validation, bootstrap objects, the
//! review APIs and TokenRequest, eviction, and the small fidelity items (409
//! `details.group`, unset boolean field selectors, exec refused with a Status, which kinds
//! carry `metadata.generation`).

mod common;

use std::collections::BTreeSet;

use common::{
    api_code, create_json, discover, eventually, eventually_gone, get, get_existing, merge_patch,
    merge_patch_subresource, post_empty, post_json, raw, server,
};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenReview};
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, Node, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{Scope, verbs};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The groups a default kube-apiserver 1.32 serves ("" is the core group).
const GROUPS_1_32: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
];

fn pod_template(labels: Value, restart: &str) -> Value {
    json!({
        "metadata": {"labels": labels},
        "spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "busybox:1"}]},
    })
}

/// The least a kind needs beyond its name to be valid.
fn minimal_body(kind: &str) -> Value {
    let labels = json!({"app": "x"});
    let selector = json!({"matchLabels": {"app": "x"}});
    match kind {
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" => {
            json!({"spec": {"selector": selector, "template": pod_template(labels, "Always")}})
        }
        "Job" => json!({"spec": {"template": pod_template(labels, "Never")}}),
        "CronJob" => {
            json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": pod_template(labels, "Never")}}}})
        }
        "ReplicationController" => {
            json!({"spec": {"selector": labels, "template": pod_template(labels, "Always")}})
        }
        "PodTemplate" => json!({"template": pod_template(labels, "Always")}),
        "Pod" => json!({"spec": pod_template(labels, "Always")["spec"]}),
        "Service" => json!({"spec": {"ports": [{"port": 80}]}}),
        "PersistentVolumeClaim" => json!({"spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
        "RoleBinding" | "ClusterRoleBinding" => {
            json!({"roleRef": {"kind": "ClusterRole", "name": "view"}})
        }
        // Matching a kind nothing in the test writes, so it refuses nothing else.
        "ValidatingAdmissionPolicy" => json!({"spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["example.com"],
                "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["gadgets"]}]},
            "validations": [{"expression": "false"}],
        }}),
        "ValidatingAdmissionPolicyBinding" => json!({"spec": {
            "policyName": "min-validatingadmissionpolicies", "validationActions": ["Deny"],
        }}),
        _ => json!({}),
    }
}

#[tokio::test]
async fn discovery_finds_every_group_with_its_verbs_and_subresources() {
    let server = server().await;
    let discovery = discover(server.client(), false).await;
    let found: BTreeSet<&str> = discovery.groups().map(|g| g.name()).collect();
    let expected: BTreeSet<&str> = GROUPS_1_32.iter().copied().collect();
    assert_eq!(found, expected);

    let apps = discovery.get("apps").expect("apps");
    let (deployments, caps) = apps
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.plural == "deployments")
        .expect("deployments");
    assert_eq!(deployments.kind, "Deployment");
    assert_eq!(caps.scope, Scope::Namespaced);
    let subresources: BTreeSet<String> = caps
        .subresources
        .iter()
        .map(|(r, _)| r.plural.clone())
        .collect();
    assert!(
        subresources.contains("scale") && subresources.contains("status"),
        "{subresources:?}"
    );
    let authorization = discovery.get("authorization.k8s.io").expect("authz");
    for (resource, caps) in authorization.recommended_resources() {
        assert_eq!(caps.operations, vec!["create"], "{}", resource.plural);
    }
    assert_eq!(
        discovery
            .get("autoscaling")
            .expect("autoscaling")
            .preferred_version_or_latest(),
        "v2"
    );
}

/// Create, get, list and delete one minimal object of every kind that can be listed.
#[tokio::test]
async fn every_listable_builtin_kind_round_trips() {
    let server = server().await;
    let client = server.client();
    let discovery = discover(client.clone(), false).await;
    let mut exercised = 0;
    for group in discovery.groups() {
        for (resource, caps) in group.recommended_resources() {
            let skip = resource.group == "apiextensions.k8s.io"
                || !caps.supports_operation(verbs::CREATE)
                || !caps.supports_operation(verbs::LIST);
            if skip {
                continue;
            }
            let api: Api<DynamicObject> = match caps.scope {
                Scope::Namespaced => Api::namespaced_with(client.clone(), "default", &resource),
                Scope::Cluster => Api::all_with(client.clone(), &resource),
            };
            let name = format!("min-{}", resource.plural);
            let mut body = minimal_body(&resource.kind);
            body["apiVersion"] = json!(resource.api_version);
            body["kind"] = json!(resource.kind);
            body["metadata"] = json!({"name": name});
            let object: DynamicObject = serde_json::from_value(body).expect("object");
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("create {}: {e}", resource.plural));
            let got = api.get(&name).await.expect("get");
            assert_eq!(
                got.types.as_ref().map(|t| t.kind.as_str()),
                Some(resource.kind.as_str())
            );
            let listed = api.list(&ListParams::default()).await.expect("list");
            assert!(
                listed
                    .items
                    .iter()
                    .any(|o| o.metadata.name.as_deref() == Some(&name))
            );
            api.delete(&name, &DeleteParams::default())
                .await
                .unwrap_or_else(|e| panic!("delete {}: {e}", resource.plural));
            exercised += 1;
        }
    }
    assert!(exercised >= 45, "only {exercised} kinds exercised");
}

async fn round_trip<K>(api: Api<K>, object: Value) -> K
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let typed: K = serde_json::from_value(object).expect("typed object");
    let created = api
        .create(&PostParams::default(), &typed)
        .await
        .expect("create");
    let name = created.meta().name.clone().expect("name");
    api.get(&name).await.expect("get");
    assert_eq!(
        api.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    created
}

#[tokio::test]
async fn typed_clients_round_trip_the_workload_and_network_kinds() {
    let server = server().await;
    let c = server.client();
    let meta = json!({"name": "one", "namespace": "default"});
    let labels = json!({"app": "one"});
    let sts: StatefulSet = round_trip(
        Api::default_namespaced(c.clone()),
        json!({"metadata": meta, "spec": {"serviceName": "one", "selector": {"matchLabels": labels}, "template": pod_template(labels.clone(), "Always")}}),
    )
    .await;
    let spec = sts.spec.expect("spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("OrderedReady"));
    let job: Job = round_trip(
        Api::default_namespaced(c.clone()),
        json!({"metadata": meta, "spec": {"template": pod_template(json!({}), "Never")}}),
    )
    .await;
    let spec = job.spec.expect("spec");
    assert_eq!(
        (spec.completions, spec.parallelism, spec.backoff_limit),
        (Some(1), Some(1), Some(6))
    );
    let cron: CronJob = round_trip(
        Api::default_namespaced(c.clone()),
        json!({"metadata": meta, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": pod_template(json!({}), "OnFailure")}}}}),
    )
    .await;
    assert_eq!(
        cron.spec.expect("spec").concurrency_policy.as_deref(),
        Some("Allow")
    );
    round_trip::<PersistentVolumeClaim>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": meta, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    round_trip::<Ingress>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": meta, "spec": {"defaultBackend": {"service": {"name": "one", "port": {"number": 80}}}}}),
    )
    .await;
    round_trip::<NetworkPolicy>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": meta, "spec": {"podSelector": {}}}),
    )
    .await;
    round_trip::<PodDisruptionBudget>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": meta, "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}}),
    )
    .await;
}

#[tokio::test]
async fn a_deployment_gets_defaults_and_a_selector_must_match_its_template() {
    let server = server().await;
    let api: Api<Deployment> = Api::default_namespaced(server.client());
    let deployment = |selector: Value| -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": selector}, "template": pod_template(json!({"app": "web"}), "Always")},
        }))
        .expect("deployment")
    };
    match api
        .create(&PostParams::default(), &deployment(json!({"app": "other"})))
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
            assert_eq!(
                status.message,
                "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
            );
        }
        other => panic!("expected 422, got {other:?}"),
    }
    let created = api
        .create(&PostParams::default(), &deployment(json!({"app": "web"})))
        .await
        .expect("a matching selector is valid");
    let spec = created.spec.expect("spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(
        spec.strategy.and_then(|s| s.type_).as_deref(),
        Some("RollingUpdate")
    );
    let scale = api.get_scale("web").await.expect("scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(1));
    assert_eq!(
        scale.status.and_then(|s| s.selector).as_deref(),
        Some("app=web")
    );
}

#[tokio::test]
async fn bootstrap_objects_exist_and_every_namespace_gets_a_default_service_account() {
    let server = server().await;
    let c = server.client();
    let namespaces: Api<Namespace> = Api::all(c.clone());
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        get_existing(&namespaces, name).await;
    }
    let kubernetes: Service = get_existing(&Api::default_namespaced(c.clone()), "kubernetes").await;
    let port = &kubernetes.spec.expect("spec").ports.expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("https"), 443));
    let roles: Api<ClusterRole> = Api::all(c.clone());
    for name in ["cluster-admin", "admin", "edit", "view"] {
        get_existing(&roles, name).await;
    }
    let binding: ClusterRoleBinding = get_existing(&Api::all(c.clone()), "cluster-admin").await;
    assert_eq!(
        binding.subjects.expect("subjects")[0].name,
        "system:masters"
    );

    create_json(&namespaces, json!({"metadata": {"name": "fresh"}})).await;
    for ns in ["default", "kube-system", "fresh"] {
        let accounts: Api<ServiceAccount> = Api::namespaced(c.clone(), ns);
        eventually(&format!("the default ServiceAccount of {ns}"), || {
            let accounts = accounts.clone();
            async move { accounts.get_opt("default").await.expect("get").map(|_| ()) }
        })
        .await;
    }
}

#[tokio::test]
async fn the_administrator_may_do_anything() {
    let server = server().await;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(server.client());
    let answered = create_json(&reviews, json!({
        "spec": {"resourceAttributes": {"verb": "create", "group": "apps", "resource": "deployments", "namespace": "default"}},
    })).await;
    assert!(answered.status.expect("status").allowed);
    let listed = get(
        &server,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    )
    .await;
    listed.assert_status(405, "MethodNotAllowed");
}

#[tokio::test]
async fn a_requested_token_passes_a_token_review_and_a_forged_one_does_not() {
    let server = server().await;
    let c = server.client();
    let accounts: Api<ServiceAccount> = Api::default_namespaced(c.clone());
    create_json(&accounts, json!({"metadata": {"name": "robot"}})).await;
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": ["steady"]}})).unwrap();
    let issued: TokenRequest = accounts
        .create_subresource("token", "robot", &PostParams::default(), &request)
        .await
        .expect("token");
    let token = issued.status.expect("status").token;
    let reviews: Api<TokenReview> = Api::all(c.clone());
    let review = |token: &str| -> TokenReview {
        serde_json::from_value(json!({"spec": {"token": token}})).unwrap()
    };
    let status = reviews
        .create(&PostParams::default(), &review(&token))
        .await
        .expect("review")
        .status
        .expect("status");
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(
        status.user.and_then(|u| u.username).as_deref(),
        Some("system:serviceaccount:default:robot")
    );
    let forged = format!("{}x", token);
    let status = reviews
        .create(&PostParams::default(), &review(&forged))
        .await
        .expect("review")
        .status
        .expect("status");
    assert_eq!(status.authenticated, Some(false));

    let missing = accounts
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            "nobody",
            &PostParams::default(),
            &request,
        )
        .await;
    assert_eq!(api_code(missing).0, 404);
}

#[tokio::test]
async fn a_conflict_names_the_group() {
    let server = server().await;
    let uri = "/apis/apps/v1/namespaces/default/deployments";
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "twice"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": pod_template(json!({"a": "b"}), "Always")},
    });
    let first = post_json(&server, uri, &body).await;
    assert_eq!(first.status.as_u16(), 201);
    let second = post_json(&server, uri, &body).await;
    let status = second.assert_status(409, "AlreadyExists");
    assert_eq!(
        status["details"],
        json!({"name": "twice", "group": "apps", "kind": "deployments"})
    );
}

#[tokio::test]
async fn an_unset_boolean_field_selects_as_false() {
    let server = server().await;
    let nodes: Api<Node> = Api::all(server.client());
    create_json(&nodes, json!({"metadata": {"name": "plain"}})).await;
    let names = |selector: &'static str| {
        let nodes = nodes.clone();
        async move {
            nodes
                .list(&ListParams::default().fields(selector))
                .await
                .expect("list")
                .items
                .into_iter()
                .filter_map(|n| n.metadata.name)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("spec.unschedulable=false").await, ["plain"]);
    assert!(names("spec.unschedulable=true").await.is_empty());
}

#[tokio::test]
async fn exec_is_refused_with_a_status_and_eviction_deletes_the_pod() {
    let server = server().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    create_json(
        &pods,
        json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
        }),
    )
    .await;
    for what in ["exec", "attach", "portforward"] {
        let answer = post_empty(
            &server,
            &format!("/api/v1/namespaces/default/pods/p/{what}"),
        )
        .await;
        let status = answer.assert_status(400, "BadRequest");
        assert_eq!(
            status["message"],
            format!(
                "steady's simulated node runs no containers; {what} is not supported (use a real cluster)"
            )
        );
    }
    let absent = post_empty(&server, "/api/v1/namespaces/default/pods/nope/exec").await;
    absent.assert_status(404, "NotFound");

    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}, "deleteOptions": {"gracePeriodSeconds": 0}});
    let answer = post_json(
        &server,
        "/api/v1/namespaces/default/pods/p/eviction",
        &eviction,
    )
    .await;
    assert_eq!(answer.status.as_u16(), 201, "{}", answer.json());
    eventually_gone(&pods, "p").await;
}

#[tokio::test]
async fn ephemeral_containers_and_binding_change_only_their_part_of_a_pod() {
    let server = server().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    create_json(
        &pods,
        json!({
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
        }),
    )
    .await;
    let patch = json!({
        "metadata": {"labels": {"a": "ignored"}},
        "spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox:1"}]},
    });
    let patched = pods
        .patch_subresource(
            "ephemeralcontainers",
            "p",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("ephemeral containers");
    let spec = patched.spec.expect("spec");
    assert_eq!(spec.ephemeral_containers.expect("added")[0].name, "debug");
    assert_eq!(patched.metadata.labels.expect("labels")["a"], "b");

    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p", "annotations": {"scheduler.example/why": "fits"}},
        "target": {"kind": "Node", "name": "node-1"}});
    let bound = post_json(
        &server,
        "/api/v1/namespaces/default/pods/p/binding",
        &binding,
    )
    .await;
    assert_eq!(bound.status.as_u16(), 201, "{}", bound.json());
    let pod = pods.get("p").await.expect("pod");
    assert_eq!(pod.spec.expect("spec").node_name.as_deref(), Some("node-1"));
    assert_eq!(
        pod.metadata.annotations.expect("annotations")["scheduler.example/why"],
        "fits"
    );
    let scheduled = pod
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("binding sets PodScheduled");
    assert_eq!(scheduled.status, "True");
    assert!(scheduled.last_transition_time.is_some());
    // As kube-apiserver's binding writes storage directly, no field manager is recorded.
    let managers: Vec<_> = pod
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|entry| entry.subresource.unwrap_or_default())
        .collect();
    assert!(!managers.iter().any(|s| s == "binding"), "{managers:?}");
    let again = post_json(
        &server,
        "/api/v1/namespaces/default/pods/p/binding",
        &binding,
    )
    .await;
    let refused = again.assert_status(409, "Conflict");
    assert_eq!(
        refused["message"],
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"node-1\""
    );
}

#[tokio::test]
async fn a_binding_is_refused_for_a_terminating_or_gated_pod_and_checks_its_preconditions() {
    let server = server().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let bind = |pod: &str, metadata: Value| {
        let server = server.clone();
        let uri = format!("/api/v1/namespaces/default/pods/{pod}/binding");
        let mut metadata = metadata;
        metadata["name"] = json!(pod);
        let body = json!({"metadata": metadata, "target": {"kind": "Node", "name": "node-1"}});
        async move { post_json(&server, &uri, &body).await }
    };
    let container = json!([{"name": "c", "image": "busybox:1"}]);
    create_json(
        &pods,
        json!({"metadata": {"name": "gated"},
        "spec": {"containers": container, "schedulingGates": [{"name": "wait"}]}}),
    )
    .await;
    let gated = bind("gated", json!({}))
        .await
        .assert_status(409, "Conflict");
    assert_eq!(
        gated["message"],
        "Operation cannot be fulfilled on pods/binding \"gated\": pod gated has non-empty .spec.schedulingGates"
    );

    create_json(
        &pods,
        json!({"metadata": {"name": "leaving", "finalizers": ["example.com/hold"]},
        "spec": {"containers": container}}),
    )
    .await;
    pods.delete("leaving", &DeleteParams::default())
        .await
        .expect("delete");
    let leaving = bind("leaving", json!({}))
        .await
        .assert_status(409, "Conflict");
    assert_eq!(
        leaving["message"],
        "Operation cannot be fulfilled on pods/binding \"leaving\": pod leaving is being deleted, cannot be assigned to a host"
    );

    let free = create_json(
        &pods,
        json!({"metadata": {"name": "free"}, "spec": {"containers": container}}),
    )
    .await;
    let stale = bind("free", json!({"uid": "not-the-pods-uid"}))
        .await
        .assert_status(409, "Conflict");
    assert!(
        stale["message"].as_str().is_some_and(
            |m| m.contains("Precondition failed: UID in precondition: not-the-pods-uid")
        ),
        "{stale}"
    );
    let uid = free.metadata.uid.expect("uid");
    let bound = bind("free", json!({"uid": uid})).await;
    assert_eq!(bound.status.as_u16(), 201, "{}", bound.json());
}

#[tokio::test]
async fn a_subject_access_review_follows_the_stored_rbac_objects() {
    let server = server().await;
    let c = server.client();
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "pod-reader", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]});
    assert_eq!(
        post_json(
            &server,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            &role
        )
        .await
        .status
        .as_u16(),
        201
    );
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "robot-reads", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot"}]});
    assert_eq!(
        post_json(
            &server,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            &binding
        )
        .await
        .status
        .as_u16(),
        201
    );
    let reviews: Api<k8s_openapi::api::authorization::v1::SubjectAccessReview> = Api::all(c);
    let ask = |verb: &str, resource: &str, subresource: &str, namespace: &str| {
        serde_json::from_value(json!({"spec": {
            "user": "system:serviceaccount:default:robot",
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "resourceAttributes": {"verb": verb, "resource": resource, "subresource": subresource, "namespace": namespace},
        }}))
        .unwrap()
    };
    let allowed = |review| {
        let reviews = reviews.clone();
        async move {
            reviews
                .create(&PostParams::default(), &review)
                .await
                .expect("review")
                .status
                .expect("status")
                .allowed
        }
    };
    assert!(allowed(ask("list", "pods", "", "default")).await);
    assert!(allowed(ask("get", "pods", "log", "default")).await);
    assert!(!allowed(ask("delete", "pods", "", "default")).await);
    assert!(!allowed(ask("list", "pods", "", "kube-system")).await);
    assert!(!allowed(ask("list", "secrets", "", "default")).await);
}

/// The simulated node reports each container as a kubelet does: Pulled, Created, Started,
/// naming the container in `involvedObject.fieldPath`.
#[tokio::test(start_paused = true)]
async fn the_simulated_node_reports_container_events_in_kubelet_order() {
    let server = common::server_with_node().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    create_json(
        &pods,
        json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
    )
    .await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(server.client());
    let container_events = eventually("the container's events", || async {
        let listed = events.list(&ListParams::default()).await.expect("events");
        let mut found: Vec<_> = listed
            .items
            .into_iter()
            .filter(|e| e.involved_object.field_path.as_deref() == Some("spec.containers{c}"))
            .collect();
        // Written in order: the resourceVersion orders them (their timestamps are equal).
        found.sort_by_key(|e| {
            let version = e.metadata.resource_version.as_deref().unwrap_or("0");
            version.parse::<u64>().expect("numeric resourceVersion")
        });
        (found.len() >= 3).then_some(found)
    })
    .await;
    let seen: Vec<(&str, &str)> = container_events
        .iter()
        .map(|e| {
            (
                e.reason.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "Pulled",
                "Container image \"busybox:1\" already present on machine"
            ),
            ("Created", "Created container: c"),
            ("Started", "Started container c"),
        ]
    );
}

/// `metadata.generation` of each write, in order.
async fn generations_after_writes<K>(
    api: &Api<K>,
    created: &K,
    patches: &[Value],
) -> Vec<Option<i64>>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let name = created.meta().name.clone().expect("name");
    let mut seen = vec![created.meta().generation];
    for patch in patches {
        let patched = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("merge patch");
        seen.push(patched.meta().generation);
    }
    seen
}

#[tokio::test]
async fn only_kinds_whose_strategy_keeps_it_carry_a_generation() {
    let server = server().await;
    let c = server.client();
    let pp = PostParams::default();
    let labelled = json!({"metadata": {"labels": {"touched": "yes"}}});

    let configmaps: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "cm"}, "data": {"k": "v"}}))
            .expect("configmap");
    let created = configmaps.create(&pp, &cm).await.expect("create configmap");
    let mut replaced = created.clone();
    replaced.data = Some([("k".to_string(), "changed".to_string())].into());
    let replaced = configmaps
        .replace("cm", &pp, &replaced)
        .await
        .expect("replace");
    let applied = configmaps
        .patch(
            "cm",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "applied"}})),
        )
        .await
        .expect("apply");
    assert_eq!(
        (
            created.metadata.generation,
            replaced.metadata.generation,
            applied.metadata.generation
        ),
        (None, None, None)
    );
    let patches = [json!({"data": {"k": "patched"}}), labelled.clone()];
    assert_eq!(
        generations_after_writes(&configmaps, &applied, &patches).await,
        [None; 3]
    );

    let secrets: Api<Secret> = Api::default_namespaced(c.clone());
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}))
            .expect("secret");
    let created = secrets.create(&pp, &secret).await.expect("create secret");
    let patches = [json!({"stringData": {"k": "w"}}), labelled.clone()];
    assert_eq!(
        generations_after_writes(&secrets, &created, &patches).await,
        [None; 3]
    );

    let services: Api<Service> = Api::default_namespaced(c.clone());
    let service: Service = serde_json::from_value(
        json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .expect("service");
    let created = services
        .create(&pp, &service)
        .await
        .expect("create service");
    let patches = [json!({"spec": {"ports": [{"port": 81}]}}), labelled.clone()];
    assert_eq!(
        generations_after_writes(&services, &created, &patches).await,
        [None; 3]
    );

    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": pod_template(json!({}), "Always")["spec"]}),
    )
    .expect("pod");
    let created = pods.create(&pp, &pod).await.expect("create pod");
    let patches = [
        json!({"spec": {"activeDeadlineSeconds": 60}}),
        labelled.clone(),
    ];
    assert_eq!(
        generations_after_writes(&pods, &created, &patches).await,
        [None; 3]
    );

    let deployments: Api<Deployment> = Api::default_namespaced(c.clone());
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": pod_template(json!({"app": "web"}), "Always")},
    }))
    .expect("deployment");
    let created = deployments
        .create(&pp, &deployment)
        .await
        .expect("create deployment");
    let with_status: Deployment = merge_patch_subresource(
        &deployments,
        "status",
        "web",
        json!({"status": {"replicas": 1}}),
    )
    .await
    .expect("patch status");
    assert_eq!(
        (created.metadata.generation, with_status.metadata.generation),
        (Some(1), Some(1))
    );
    let patches = [
        labelled.clone(),
        json!({"spec": {"replicas": 3}}),
        labelled.clone(),
    ];
    assert_eq!(
        generations_after_writes(&deployments, &with_status, &patches).await,
        [Some(1), Some(1), Some(2), Some(2)]
    );

    // PriorityClass's strategy sets 1 on create and never bumps it.
    let classes: Api<PriorityClass> = Api::all(c);
    let class: PriorityClass =
        serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 1000}))
            .expect("priority class");
    let created = classes
        .create(&pp, &class)
        .await
        .expect("create priority class");
    let patches = [json!({"description": "changed"})];
    assert_eq!(
        generations_after_writes(&classes, &created, &patches).await,
        [Some(1), Some(1)]
    );
}

/// A write through `pods/status` keeps the spec and everything else outside the metadata
/// as stored, whatever the patch adds, changes or removes there, and takes labels from
/// the request as kube's pod status strategy does; a write to the pod itself keeps the
/// stored status.
#[tokio::test]
async fn the_status_subresource_changes_the_status_and_the_metadata_the_kind_allows() {
    let s = server().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}});
    let uri = "/api/v1/namespaces/default/pods/p";
    let created = raw(
        &s,
        "POST",
        "/api/v1/namespaces/default/pods",
        Some("application/json"),
        pod.to_string(),
    )
    .await
    .json();
    let patch = json!({"status": {"phase": "Running"}, "spec": {"nodeName": "n"},
        "metadata": {"labels": {"a": null, "b": "2"}}, "extra": {"x": 1}, "kind": null});
    let patched = raw(
        &s,
        "PATCH",
        &format!("{uri}/status"),
        Some("application/merge-patch+json"),
        patch.to_string(),
    )
    .await
    .json();
    assert_eq!(patched["status"]["phase"], "Running", "{patched}");
    for field in ["apiVersion", "kind", "spec", "extra"] {
        assert_eq!(patched.get(field), created.get(field), "{field}: {patched}");
    }
    assert_eq!(patched["metadata"]["labels"], json!({"b": "2"}));
    let main = json!({"status": {"phase": "Failed"}, "metadata": {"labels": {"c": "3"}}});
    let updated = raw(
        &s,
        "PATCH",
        uri,
        Some("application/merge-patch+json"),
        main.to_string(),
    )
    .await
    .json();
    assert_eq!(updated["status"], patched["status"], "{updated}");
    assert_eq!(updated["metadata"]["labels"], json!({"b": "2", "c": "3"}));
}

/// kube's status strategies differ in the metadata a status write may change: a PUT of
/// `pods/status` without labels, annotations or finalizers clears them but keeps the owner
/// references and the QoS class; `deployments/status` keeps the labels and takes the
/// annotations; a custom resource's status keeps all of its metadata.
#[tokio::test]
async fn status_writes_take_the_metadata_their_kinds_strategy_allows() {
    let s = server().await;
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o"}});
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let config_map = raw(
        &s,
        "POST",
        configmaps,
        Some("application/json"),
        config_map.to_string(),
    )
    .await
    .json();
    let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o",
        "uid": config_map["metadata"]["uid"]}]);
    let metadata = json!({"name": "p", "labels": {"a": "1"}, "annotations": {"n": "1"},
        "finalizers": ["example.com/f"], "ownerReferences": owner});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}});
    let pods = "/api/v1/namespaces/default/pods";
    let created = raw(&s, "POST", pods, Some("application/json"), pod.to_string())
        .await
        .json();
    assert_eq!(created["status"]["qosClass"], "BestEffort", "{created}");
    let put = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "status": {"phase": "Running"}});
    let replaced = raw(
        &s,
        "PUT",
        &format!("{pods}/p/status"),
        Some("application/json"),
        put.to_string(),
    )
    .await
    .json();
    let meta = &replaced["metadata"];
    for cleared in ["labels", "annotations", "finalizers"] {
        assert!(meta.get(cleared).is_none(), "{cleared}: {replaced}");
    }
    assert_eq!(meta["ownerReferences"], owner, "{replaced}");
    assert_eq!(replaced["status"]["phase"], "Running", "{replaced}");
    assert_eq!(replaced["status"]["qosClass"], "BestEffort", "{replaced}");
    assert_eq!(replaced["spec"], created["spec"]);

    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"app": "d"}, "annotations": {"n": "1"}},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}});
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    raw(
        &s,
        "POST",
        deployments,
        Some("application/json"),
        deployment.to_string(),
    )
    .await;
    let patch = json!({"metadata": {"labels": {"app": null, "x": "y"}, "annotations": {"n": "2"}},
        "status": {"replicas": 0}});
    let patched = raw(
        &s,
        "PATCH",
        &format!("{deployments}/d/status"),
        Some("application/merge-patch+json"),
        patch.to_string(),
    )
    .await
    .json();
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"app": "d"}),
        "{patched}"
    );
    assert_eq!(
        patched["metadata"]["annotations"],
        json!({"n": "2"}),
        "{patched}"
    );
}

/// `kubectl autoscale` writes autoscaling/v1, `kubectl get hpa` and operators read v2:
/// one object in both shapes, as kube-apiserver converts it (stored as v2).
#[tokio::test]
async fn an_autoscaler_written_as_v1_reads_as_v2_and_back() {
    use k8s_openapi::api::autoscaling::{v1, v2};
    let server = server().await;
    let old: Api<v1::HorizontalPodAutoscaler> = Api::default_namespaced(server.client());
    let new: Api<v2::HorizontalPodAutoscaler> = Api::default_namespaced(server.client());
    create_json(
        &old,
        json!({
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "maxReplicas": 5, "targetCPUUtilizationPercentage": 70},
        }),
    )
    .await;
    let read = get_existing(&new, "web").await;
    let spec = read.spec.expect("spec");
    assert_eq!(spec.min_replicas, Some(1), "v2's default");
    let metrics = spec.metrics.expect("metrics");
    let cpu = metrics[0].resource.as_ref().expect("a resource metric");
    assert_eq!(
        (cpu.name.as_str(), cpu.target.average_utilization),
        ("cpu", Some(70))
    );

    // A v2 client adds a memory metric; a v1 client still sees its CPU target, the rest in
    // kube's annotation, and keeps both through its own update.
    let patch = json!({"spec": {"metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
    ]}});
    new.patch("web", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("v2 patch");
    let as_v1 = get_existing(&old, "web").await;
    assert_eq!(
        as_v1
            .spec
            .as_ref()
            .and_then(|s| s.target_cpu_utilization_percentage),
        Some(70)
    );
    let annotations = as_v1.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations["autoscaling.alpha.kubernetes.io/metrics"].contains("memory"),
        "{annotations:?}"
    );
    let mut edited = as_v1;
    if let Some(spec) = edited.spec.as_mut() {
        spec.max_replicas = 8;
    }
    old.replace("web", &PostParams::default(), &edited)
        .await
        .expect("v1 update");
    let after = get_existing(&new, "web").await;
    let spec = after.spec.expect("spec");
    assert_eq!(spec.max_replicas, 8);
    assert_eq!(
        spec.metrics.map(|m| m.len()),
        Some(2),
        "nothing lost through v1"
    );
    assert!(
        after.metadata.annotations.unwrap_or_default().is_empty(),
        "the round-trip annotations are not stored"
    );
}

/// kube-rs's event recorder writes events.k8s.io/v1 Events; `kubectl describe` and
/// `kubectl get events` read core/v1 ones: one object, as kube-apiserver stores both.
#[tokio::test]
async fn events_recorded_through_events_k8s_io_are_core_events_too() {
    use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
    use k8s_openapi::api::events::v1::Event as NewEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let server = server().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod = create_json(
        &pods,
        json!({"metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
    )
    .await;
    let reporter = Reporter {
        controller: "my-operator".into(),
        instance: Some("my-operator-0".into()),
    };
    let recorder = Recorder::new(server.client(), reporter);
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some("p".into()),
        namespace: Some("default".into()),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("all good".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    for _ in 0..2 {
        recorder
            .publish(&event, &reference)
            .await
            .expect("published");
    }

    let core: Api<CoreEvent> = Api::default_namespaced(server.client());
    let about_p = ListParams::default().fields("involvedObject.name=p");
    let listed = core.list(&about_p).await.expect("core events").items;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let seen = &listed[0];
    assert_eq!(seen.message.as_deref(), Some("all good"));
    assert_eq!(seen.involved_object.uid, pod.metadata.uid);
    assert_eq!(seen.reporting_component.as_deref(), Some("my-operator"));
    assert_eq!(seen.series.as_ref().map(|s| s.count), Some(Some(2)));

    let new: Api<NewEvent> = Api::default_namespaced(server.client());
    let by_regarding =
        ListParams::default().fields("regarding.name=p,reportingController=my-operator");
    let listed = new
        .list(&by_regarding)
        .await
        .expect("events.k8s.io events")
        .items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].note.as_deref(), Some("all good"));
    assert_eq!(
        listed[0].regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("p")
    );
    // A core Event is an events.k8s.io one as well.
    create_json(
        &core,
        json!({"metadata": {"name": "legacy"}, "involvedObject": {"kind": "Pod", "name": "p"},
               "reason": "Old", "message": "from a core writer", "type": "Normal"}),
    )
    .await;
    let legacy = get_existing(&new, "legacy").await;
    assert_eq!(legacy.note.as_deref(), Some("from a core writer"));
}

/// A data directory from a steady that kept events.k8s.io Events apart: they are moved
/// to the core Events at start, and both APIs read them.
#[tokio::test]
async fn events_stored_apart_by_an_older_steady_are_moved_at_start() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as NewEvent;
    let store = steady_store::Store::in_memory(steady_store::StoreOptions::default())
        .await
        .expect("store");
    let old = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e1", "namespace": "default", "uid": "u-e1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "regarding": {"kind": "Pod", "name": "p"}, "note": "from before", "reason": "Old",
        "type": "Normal", "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "op", "reportingInstance": "op-0", "action": "A",
    });
    store
        .create("/events.k8s.io/events/default/e1", old)
        .await
        .expect("old event");
    let config = steady_apiserver::Config {
        seed: Some(1),
        ..Default::default()
    };
    let server = steady_apiserver::ApiServer::start(store, config)
        .await
        .expect("server");
    let core: Api<CoreEvent> = Api::default_namespaced(server.client());
    let moved = get_existing(&core, "e1").await;
    assert_eq!(moved.message.as_deref(), Some("from before"));
    assert_eq!(moved.metadata.uid.as_deref(), Some("u-e1"));
    let new: Api<NewEvent> = Api::default_namespaced(server.client());
    assert_eq!(
        new.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
}

/// What kube-apiserver's default admission plugins write into every new pod: priority
/// and preemption policy from its PriorityClass, five minutes of tolerance for the
/// not-ready and unreachable taints, and v1's `serviceAccount` alias.
#[tokio::test]
async fn new_pods_get_priority_default_tolerations_and_the_service_account_alias() {
    let server = server().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod = |name: &str, extra: Value| {
        let mut spec = json!({"containers": [{"name": "c", "image": "busybox:1"}]});
        if let (Value::Object(spec), Value::Object(extra)) = (&mut spec, extra) {
            spec.extend(extra);
        }
        json!({"metadata": {"name": name}, "spec": spec})
    };
    let plain = create_json(&pods, pod("plain", json!({}))).await;
    let spec = plain.spec.expect("spec");
    assert_eq!(
        (spec.priority, spec.preemption_policy.as_deref()),
        (Some(0), Some("PreemptLowerPriority"))
    );
    assert_eq!(spec.service_account.as_deref(), Some("default"));
    let tolerations = spec.tolerations.expect("default tolerations");
    let keys: Vec<_> = tolerations
        .iter()
        .map(|t| (t.key.as_deref(), t.effect.as_deref(), t.toleration_seconds))
        .collect();
    assert_eq!(
        keys,
        [
            (
                Some("node.kubernetes.io/not-ready"),
                Some("NoExecute"),
                Some(300)
            ),
            (
                Some("node.kubernetes.io/unreachable"),
                Some("NoExecute"),
                Some(300)
            ),
        ]
    );

    let critical = create_json(
        &pods,
        pod(
            "critical",
            json!({"priorityClassName": "system-node-critical"}),
        ),
    )
    .await;
    assert_eq!(critical.spec.and_then(|s| s.priority), Some(2_000_001_000));

    let refused = |name: &str, extra: Value| {
        let pods = pods.clone();
        let body: Pod = serde_json::from_value(pod(name, extra)).expect("a pod");
        async move { pods.create(&PostParams::default(), &body).await }
    };
    match refused("unknown", json!({"priorityClassName": "gold"})).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403);
            assert_eq!(
                status.message,
                "pods \"unknown\" is forbidden: no PriorityClass with name gold was found"
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }
    assert_eq!(
        api_code(refused("forced", json!({"priority": 7})).await).0,
        403
    );

    // A global default class is every class-less pod's.
    let classes: Api<PriorityClass> = Api::all(server.client());
    create_json(
        &classes,
        json!({"metadata": {"name": "standard"}, "value": 1000, "globalDefault": true}),
    )
    .await;
    let defaulted = create_json(&pods, pod("defaulted", json!({}))).await;
    let spec = defaulted.spec.expect("spec");
    assert_eq!(
        (spec.priority_class_name.as_deref(), spec.priority),
        (Some("standard"), Some(1000))
    );
}

/// kube's `ServiceAccount` admission: the token volume and mounts, the opt-out, and a
/// pod naming an account that does not exist.
#[tokio::test]
async fn new_pods_mount_their_service_account_token_and_need_the_account() {
    let server = server().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let accounts: Api<ServiceAccount> = Api::default_namespaced(server.client());
    eventually("the default ServiceAccount", || async {
        accounts.get_opt("default").await.ok().flatten()
    })
    .await;
    let two_containers = |name: &str, extra: Value| {
        let mut pod = json!({"metadata": {"name": name}, "spec": {"containers": [
            {"name": "a", "image": "busybox:1"},
            {"name": "b", "image": "busybox:1", "volumeMounts": [
                {"name": "own", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]},
        ], "volumes": [{"name": "own", "emptyDir": {}}]}});
        if let (Value::Object(spec), Value::Object(extra)) = (&mut pod["spec"], extra) {
            spec.extend(extra);
        }
        pod
    };
    let pod = create_json(&pods, two_containers("mounted", json!({}))).await;
    let spec = pod.spec.expect("spec");
    let volumes = spec.volumes.unwrap_or_default();
    let token = volumes
        .iter()
        .find(|v| v.name.starts_with("kube-api-access-"))
        .expect("the token volume");
    assert_eq!(token.name.len(), "kube-api-access-".len() + 5);
    let sources = token.projected.as_ref().and_then(|p| p.sources.clone());
    assert_eq!(sources.map(|s| s.len()), Some(3));
    let mounts = |i: usize| {
        spec.containers[i]
            .volume_mounts
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|m| m.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(mounts(0), std::slice::from_ref(&token.name));
    assert_eq!(mounts(1), ["own"], "a mount at the token's path is kept");

    let opted_out = create_json(
        &pods,
        two_containers("plain", json!({"automountServiceAccountToken": false})),
    )
    .await;
    let volumes = opted_out.spec.and_then(|s| s.volumes).unwrap_or_default();
    assert_eq!(volumes.len(), 1, "no token volume");

    let missing: Pod = serde_json::from_value(two_containers(
        "orphan",
        json!({"serviceAccountName": "robot"}),
    ))
    .expect("a pod");
    match pods.create(&PostParams::default(), &missing).await {
        Err(kube::Error::Api(status)) => assert_eq!(
            (status.code, status.message.as_str()),
            (
                403,
                "pods \"orphan\" is forbidden: error looking up service account default/robot: serviceaccount \"robot\" not found"
            )
        ),
        other => panic!("expected 403, got {other:?}"),
    }
}

/// kube's pod `PrepareForCreate` (`MatchLabelKeysInPodAffinity`, on in 1.32): a new pod's
/// affinity terms get one expression per `matchLabelKeys` (In) and `mismatchLabelKeys`
/// (NotIn) key it has a label for, before it is validated; a key it lacks adds nothing, a
/// term without a selector is left alone, an update and a Deployment's template are not
/// rewritten.
#[tokio::test]
async fn a_new_pods_affinity_terms_get_its_values_of_their_label_keys() {
    let server = server().await;
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let affinity = json!({
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["version", "missing"]}]},
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "topology.kubernetes.io/zone", "namespaces": ["default"]}],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {
                "topologyKey": "topology.kubernetes.io/zone",
                "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                "mismatchLabelKeys": ["team"]}}]}
    });
    let pod = |name: &str, affinity: &Value| {
        json!({"metadata": {"name": name, "labels": {"app": "web", "version": "v2", "team": "red"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}], "affinity": affinity}})
    };
    let read_affinity = |pod: Pod| serde_json::to_value(pod.spec.and_then(|s| s.affinity));
    let created = read_affinity(create_json(&pods, pod("web", &affinity)).await).expect("json");
    let anti = &created["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        anti["labelSelector"],
        json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "version", "operator": "In", "values": ["v2"]}]})
    );
    assert_eq!(anti["matchLabelKeys"], json!(["version", "missing"]));
    let preferred = &created["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        preferred["podAffinityTerm"]["labelSelector"]["matchExpressions"],
        json!([{"key": "app", "operator": "Exists"},
            {"key": "team", "operator": "NotIn", "values": ["red"]}])
    );
    assert_eq!(
        created["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
        affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    );

    let relabelled = merge_patch(
        &pods,
        "web",
        json!({"metadata": {"labels": {"version": "v3"}}}),
    )
    .await
    .expect("relabel");
    assert_eq!(
        read_affinity(relabelled).expect("json"),
        created,
        "an update merges nothing"
    );

    // kube validates the merged selector: a key matched by both is refused.
    let mut both = affinity.clone();
    both["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"] =
        json!({"matchLabels": {"version": "v1"}});
    let body: Pod = serde_json::from_value(pod("both", &both)).expect("a pod");
    match pods.create(&PostParams::default(), &body).await {
        Err(kube::Error::Api(status)) => assert_eq!(
            (status.code, status.message.as_str()),
            (
                422,
                "Pod \"both\" is invalid: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0][0]: Invalid value: \"version\": exists in both matchLabelKeys and labelSelector"
            )
        ),
        other => panic!("expected 422, got {other:?}"),
    }

    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let template = pod("", &affinity);
    let deployment = create_json(
        &deployments,
        json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": template["metadata"]["labels"]}, "spec": template["spec"]}}}),
    )
    .await;
    let template_affinity = deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.affinity);
    assert_eq!(
        serde_json::to_value(template_affinity).expect("json"),
        affinity
    );
}

/// A bound claim grows only when its StorageClass allows expansion (kube's
/// `PersistentVolumeClaimResize` admission, 403), shrinks no lower than its capacity, and
/// keeps the rest of its spec (the update rules, 422).
#[tokio::test]
async fn a_bound_claim_grows_only_as_its_class_allows() {
    let s = server().await;
    for (class, expands) in [("expandable", true), ("fixed", false)] {
        let body = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": class}, "provisioner": "example.com/disk",
            "allowVolumeExpansion": expands});
        let created = raw(
            &s,
            "POST",
            "/apis/storage.k8s.io/v1/storageclasses",
            Some("application/json"),
            body.to_string(),
        )
        .await;
        assert_eq!(created.status, 201, "{}", created.json());
    }
    let claims = "/api/v1/namespaces/default/persistentvolumeclaims";
    let patch = |name: &str, sub: &str, patch: Value| {
        let uri = format!("{claims}/{name}{sub}");
        let s = &s;
        async move {
            raw(
                s,
                "PATCH",
                &uri,
                Some("application/merge-patch+json"),
                patch.to_string(),
            )
            .await
        }
    };
    for (name, class) in [("grows", "expandable"), ("stays", "fixed")] {
        let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}});
        let created = raw(
            &s,
            "POST",
            claims,
            Some("application/json"),
            claim.to_string(),
        )
        .await;
        assert_eq!(created.status, 201, "{}", created.json());
        let bound = json!({"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}});
        assert_eq!(patch(name, "/status", bound).await.status, 200);
    }
    let storage = |size: &str| json!({"spec": {"resources": {"requests": {"storage": size}}}});

    let grown = patch("grows", "", storage("2Gi")).await;
    assert_eq!(grown.status, 200, "{}", grown.json());
    assert_eq!(
        grown.json()["spec"]["resources"]["requests"]["storage"],
        "2Gi"
    );
    let refused = patch("stays", "", storage("2Gi")).await;
    let status = refused.assert_status(403, "Forbidden");
    assert_eq!(
        status["message"],
        "persistentvolumeclaims \"stays\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
    );

    let shrunk = patch("grows", "", storage("1Gi")).await;
    let status = shrunk.assert_status(422, "Invalid");
    assert!(
        status["message"].as_str().is_some_and(|m| m.ends_with(
            "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
        )),
        "{status}"
    );
    let shared = patch(
        "grows",
        "",
        json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
    )
    .await;
    let status = shared.assert_status(422, "Invalid");
    assert!(
        status["message"].as_str().is_some_and(|m| m.starts_with(
            "PersistentVolumeClaim \"grows\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
        )),
        "{status}"
    );
}

/// kube's Service registry: node ports allocated per port number and unique across
/// Services, kept by an update that leaves them out and dropped with the type that had
/// them; a health-check node port for a local load balancer; no cluster IP for an
/// `ExternalName` Service, and kube's messages for what a type may not carry.
#[tokio::test]
async fn services_get_and_lose_what_their_type_allocates() {
    let s = server().await;
    let services = "/api/v1/namespaces/default/services";
    let create = |body: Value| {
        let s = &s;
        async move { post_json(s, services, &body).await }
    };
    let patch = |name: &str, body: Value| {
        let (s, uri) = (&s, format!("{services}/{name}"));
        async move {
            raw(
                s,
                "PATCH",
                &uri,
                Some("application/merge-patch+json"),
                body.to_string(),
            )
            .await
        }
    };
    let service = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
    let node_port = |svc: &Value, i: usize| svc["spec"]["ports"][i]["nodePort"].as_i64();

    let web = create(service(
        "web",
        json!({"type": "NodePort", "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 80, "protocol": "UDP"},
                  {"name": "https", "port": 443}]}),
    ))
    .await;
    assert_eq!(web.status, 201, "{}", web.json());
    let web = web.json();
    let http = node_port(&web, 0).expect("a node port");
    assert!((30000..=32767).contains(&http), "{web}");
    assert_eq!(
        node_port(&web, 1),
        Some(http),
        "one node port per port number"
    );
    assert_ne!(node_port(&web, 2), Some(http));
    assert_eq!(web["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(web["spec"]["internalTrafficPolicy"], "Cluster");

    let taken = create(service(
        "copy",
        json!({"type": "NodePort",
        "ports": [{"port": 8080, "nodePort": http}]}),
    ))
    .await;
    let status = taken.assert_status(422, "Invalid");
    assert_eq!(
        status["message"],
        format!(
            "Service \"copy\" is invalid: spec.ports[0].nodePort: Invalid value: {http}: provided port is already allocated"
        )
    );
    let low = create(service(
        "low",
        json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}),
    ))
    .await
    .assert_status(422, "Invalid");
    assert!(
        low["message"].as_str().is_some_and(|m| m.ends_with(
            "provided port is not in the valid range. The range of valid ports is 30000-32767"
        )),
        "{low}"
    );

    let mut replaced = web.clone();
    for port in replaced["spec"]["ports"].as_array_mut().unwrap() {
        port.as_object_mut().unwrap().remove("nodePort");
    }
    let kept = raw(
        &s,
        "PUT",
        &format!("{services}/web"),
        Some("application/json"),
        replaced.to_string(),
    )
    .await
    .json();
    assert_eq!(
        kept["spec"]["ports"], web["spec"]["ports"],
        "an update that leaves them out keeps them"
    );

    let cluster_ip = patch("web", json!({"spec": {"type": "ClusterIP"}}))
        .await
        .json();
    assert!(node_port(&cluster_ip, 0).is_none(), "{cluster_ip}");
    assert!(
        cluster_ip["spec"].get("externalTrafficPolicy").is_none(),
        "{cluster_ip}"
    );
    assert_eq!(cluster_ip["spec"]["clusterIP"], web["spec"]["clusterIP"]);
    let forbidden = patch(
        "web",
        json!({"spec": {"ports": [{"name": "http", "port": 80, "nodePort": 30007}]}}),
    )
    .await
    .assert_status(422, "Invalid");
    assert!(
        forbidden["message"].as_str().is_some_and(|m| m.ends_with(
            "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"
        )),
        "{forbidden}"
    );

    let external = patch(
        "web",
        json!({"spec": {"type": "ExternalName", "externalName": "web.example.com"}}),
    )
    .await
    .json();
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        assert!(external["spec"].get(field).is_none(), "{field}: {external}");
    }
    let unnamed = create(service("away", json!({"type": "ExternalName"})))
        .await
        .assert_status(422, "Invalid");
    assert_eq!(
        unnamed["message"],
        "Service \"away\" is invalid: spec.externalName: Required value"
    );

    // A port that is not an object is refused before anything is allocated.
    let odd = create(service("odd", json!({"type": "NodePort", "ports": ["80"]}))).await;
    assert!(odd.status.is_client_error(), "{}", odd.json());

    // A cluster IP asked for must be free and in the service range (web's was released
    // when it became an ExternalName Service).
    let released = web["spec"]["clusterIP"].as_str().unwrap().to_owned();
    let reused = create(service(
        "reused",
        json!({"clusterIP": released, "ports": [{"port": 80}]}),
    ))
    .await;
    assert_eq!(reused.status, 201, "{}", reused.json());
    let same_ip = create(service(
        "same-ip",
        json!({"clusterIP": released, "ports": [{"port": 80}]}),
    ))
    .await
    .assert_status(422, "Invalid");
    assert_eq!(
        same_ip["message"],
        format!(
            "Service \"same-ip\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{released}\"}}: failed to allocate IP {released}: provided IP is already allocated"
        )
    );
    let outside = create(service(
        "outside",
        json!({"clusterIP": "1.1.1.1", "ports": [{"port": 80}]}),
    ))
    .await
    .assert_status(422, "Invalid");
    assert_eq!(
        outside["message"],
        "Service \"outside\" is invalid: spec.clusterIPs: Invalid value: []string{\"1.1.1.1\"}: failed to allocate IP 1.1.1.1: the provided IP (1.1.1.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
    );

    let balancer = create(service(
        "lb",
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
        "selector": {"app": "lb"}, "ports": [{"port": 80}]}),
    ))
    .await
    .json();
    assert_eq!(
        balancer["spec"]["allocateLoadBalancerNodePorts"], true,
        "{balancer}"
    );
    let health = balancer["spec"]["healthCheckNodePort"]
        .as_i64()
        .expect("a health check port");
    assert!((30000..=32767).contains(&health) && Some(health) != node_port(&balancer, 0));
}

/// A built-in object's finalizers are qualified names, and one without a `/` must be one
/// of kube's own, as core's `ValidateObjectMeta` checks them on every write.
#[tokio::test]
async fn a_built_in_objects_finalizers_are_fully_qualified_or_kubes_own() {
    let s = server().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let create = |name: &str, finalizers: Value| {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "finalizers": finalizers}});
        let s = &s;
        async move { post_json(s, configmaps, &body).await }
    };
    let refused = create("short", json!(["cleanup"]))
        .await
        .assert_status(422, "Invalid");
    assert_eq!(
        refused["message"],
        "ConfigMap \"short\" is invalid: metadata.finalizers[0]: Invalid value: \"cleanup\": name is neither a standard finalizer name nor is it fully qualified"
    );
    let both = create("both", json!(["orphan", "foregroundDeletion"]))
        .await
        .assert_status(422, "Invalid");
    assert_eq!(
        both["message"],
        "ConfigMap \"both\" is invalid: metadata.finalizers: Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set"
    );
    let spaced = create("spaced", json!(["example.com/clean up"]))
        .await
        .assert_status(422, "Invalid");
    assert!(
        spaced["message"].as_str().is_some_and(|m| m.contains("metadata.finalizers: Invalid value: \"example.com/clean up\": name part must consist of")),
        "{spaced}"
    );
    for (name, finalizer) in [("qualified", "example.com/cleanup"), ("standard", "orphan")] {
        let created = create(name, json!([finalizer])).await;
        assert_eq!(created.status, 201, "{}", created.json());
    }

    // Once it is being deleted, none may be added; kube names them all, as Go prints them.
    let uri = format!("{configmaps}/qualified");
    assert_eq!(raw(&s, "DELETE", &uri, None, "").await.status, 200);
    let more = json!({"metadata": {"finalizers":
        ["example.com/cleanup", "example.com/more", "example.com/also"]}});
    let refused = raw(
        &s,
        "PATCH",
        &uri,
        Some("application/merge-patch+json"),
        more.to_string(),
    )
    .await
    .assert_status(422, "Invalid");
    assert_eq!(
        refused["message"],
        "ConfigMap \"qualified\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/also\", \"example.com/more\"}"
    );
}

/// Every owner reference names its owner whole (version, kind, name, uid), and only one
/// is the controller: an operator that sets a reference before its owner has a uid is
/// refused as on a cluster, not left for the collector to treat as an orphan.
#[tokio::test]
async fn owner_references_name_their_owner_whole_and_one_controller() {
    let s = server().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let create = |name: &str, references: Value| {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "ownerReferences": references}});
        let s = &s;
        async move { post_json(s, configmaps, &body).await }
    };
    let owner = |name: &str, uid: &str, controller: bool| {
        json!({"apiVersion": "example.com/v1", "kind": "Cache", "name": name, "uid": uid,
            "controller": controller})
    };
    let no_uid = create("no-uid", json!([owner("a", "", true)]))
        .await
        .assert_status(422, "Invalid");
    assert_eq!(
        no_uid["message"],
        "ConfigMap \"no-uid\" is invalid: metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty"
    );
    let two = create(
        "two",
        json!([owner("a", "u-1", true), owner("b", "u-2", true)]),
    )
    .await
    .assert_status(422, "Invalid");
    assert!(
        two["message"].as_str().is_some_and(|m| m.ends_with(
            "Only one reference can have Controller set to true. Found \"true\" in references for Cache/a and Cache/b"
        )),
        "{two}"
    );
    let owned = create(
        "owned",
        json!([owner("a", "u-1", true), owner("b", "u-2", false)]),
    )
    .await;
    assert_eq!(owned.status, 201, "{}", owned.json());
}

/// kube 1.32 defaults a pod spec wherever it sits: probes and hooks, volumes and their
/// sources, downward-API field selectors, ephemeral containers, a host-network pod's host
/// ports, and a StatefulSet's claim templates as whole claims. An operator that compares
/// the template it wrote with the one it reads meets them here as on a cluster, and one
/// that writes back what it read changes nothing.
#[tokio::test]
async fn pod_specs_read_back_with_kubes_defaults_and_a_write_back_is_a_no_op() {
    let server = server().await;
    let sets: Api<StatefulSet> = Api::default_namespaced(server.client());
    let labels = json!({"app": "db"});
    let created = create_json(
        &sets,
        json!({"metadata": {"name": "db"}, "spec": {
            "selector": {"matchLabels": labels}, "serviceName": "db",
            "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": "db", "image": "postgres:17",
                    "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "livenessProbe": {"httpGet": {"port": 8080}},
                    "readinessProbe": {"grpc": {"port": 9000}, "failureThreshold": 6},
                    "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"},
                        {"name": "conf", "mountPath": "/etc/db"}]}],
                "volumes": [{"name": "scratch"}, {"name": "conf", "configMap": {"name": "db"}}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}),
    )
    .await;
    let stored = get(&server, "/apis/apps/v1/namespaces/default/statefulsets/db")
        .await
        .json();
    let spec = &stored["spec"]["template"]["spec"];
    let container = &spec["containers"][0];
    assert_eq!(
        container["livenessProbe"],
        json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
            "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(
        container["readinessProbe"]["grpc"],
        json!({"port": 9000, "service": ""})
    );
    assert_eq!(container["readinessProbe"]["failureThreshold"], 6);
    assert_eq!(
        container["env"][0]["valueFrom"]["fieldRef"]["apiVersion"],
        "v1"
    );
    assert_eq!(
        spec["volumes"],
        json!([{"name": "scratch", "emptyDir": {}},
            {"name": "conf", "configMap": {"name": "db", "defaultMode": 420}}])
    );
    assert_eq!(
        stored["spec"]["volumeClaimTemplates"][0],
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}})
    );
    let written_back = sets
        .replace("db", &PostParams::default(), &created)
        .await
        .expect("writing back what was read");
    assert_eq!(
        written_back.metadata.resource_version, created.metadata.resource_version,
        "a write of what was read changes nothing"
    );

    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod = create_json(
        &pods,
        json!({"metadata": {"name": "agent"}, "spec": {"hostNetwork": true,
            "containers": [{"name": "agent", "image": "agent:1", "ports": [{"containerPort": 9100}]}]}}),
    )
    .await;
    let ports = pod.spec.expect("spec").containers[0].ports.clone();
    assert_eq!(ports.expect("ports")[0].host_port, Some(9100));
}

/// A pod and a Deployment stored by a steady that did not yet default probes and volumes
/// stay writable as on a cluster (kube defaults what it decodes from etcd): relabelling
/// the pod is not a change of its spec, and relabelling the Deployment keeps its
/// generation.
#[tokio::test]
async fn objects_stored_before_a_default_existed_stay_writable() {
    let store = steady_store::Store::in_memory(steady_store::StoreOptions::default())
        .await
        .expect("store");
    let spec = json!({"containers": [{"name": "c", "image": "app:1", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "resources": {}, "livenessProbe": {"httpGet": {"port": 80}}}],
        "volumes": [{"name": "conf", "configMap": {"name": "app"}}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler", "securityContext": {},
        "serviceAccountName": "default", "serviceAccount": "default", "enableServiceLinks": true});
    let meta = |name: &str| {
        json!({"name": name, "namespace": "default", "uid": format!("u-{name}"),
            "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1, "labels": {"app": "x"}})
    };
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta("old"), "spec": spec,
        "status": {"phase": "Pending"}});
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("old"),
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": spec}}});
    store
        .create("/core/pods/default/old", pod)
        .await
        .expect("old pod");
    store
        .create("/apps/deployments/default/old", deployment)
        .await
        .expect("old deployment");
    let config = steady_apiserver::Config {
        seed: Some(1),
        ..Default::default()
    };
    let server = steady_apiserver::ApiServer::start(store, config)
        .await
        .expect("server");
    let relabel = Patch::Merge(json!({"metadata": {"labels": {"tier": "web"}}}));
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod = pods
        .patch("old", &PatchParams::default(), &relabel)
        .await
        .expect("relabelling a stored pod is not a change of its spec");
    let probe = pod.spec.expect("spec").containers[0]
        .liveness_probe
        .clone()
        .expect("probe");
    assert_eq!(probe.period_seconds, Some(10));
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let relabelled = deployments
        .patch("old", &PatchParams::default(), &relabel)
        .await
        .expect("relabel the deployment");
    assert_eq!(relabelled.metadata.generation, Some(1));
}

/// A template with a probe that names no handler, an env var read from two sources and a
/// volume from two sources is refused whole, with kube's causes, as on a cluster.
#[tokio::test]
async fn a_template_kube_refuses_for_its_probes_env_and_volumes_is_refused_here() {
    let server = server().await;
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let labels = json!({"app": "web"});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "imagePullPolicy": "always",
                "livenessProbe": {"initialDelaySeconds": 5},
                "env": [{"name": "TOKEN", "valueFrom": {
                    "secretKeyRef": {"name": "api", "key": "token"},
                    "configMapKeyRef": {"name": "api", "key": "token"}}}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}, "persistentVolumeClaim": {"claimName": "data"}}]}}}
    }))
    .expect("deployment");
    let Err(kube::Error::Api(status)) = deployments
        .create(&PostParams::default(), &deployment)
        .await
    else {
        panic!("a template kube refuses was accepted");
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let at = "spec.template.spec";
    let causes: Vec<String> = status
        .details
        .expect("details")
        .causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    assert_eq!(
        causes,
        [
            format!(
                "{at}.volumes[0].persistentVolumeClaim: Forbidden: may not specify more than 1 volume type"
            ),
            format!(
                "{at}.containers[0].env[0].valueFrom: Invalid value: \"\": may not have more than one field specified at a time"
            ),
            format!(
                "{at}.containers[0].imagePullPolicy: Unsupported value: \"always\": supported values: \"Always\", \"IfNotPresent\", \"Never\""
            ),
            format!(
                "{at}.containers[0].livenessProbe: Required value: must specify a handler type"
            ),
        ]
    );
}

/// Workload specs as kube checks them: a Deployment that may neither surge nor leave a
/// pod unavailable is refused; a StatefulSet's pod template is not checked at all (kube
/// leaves it to the pods' creation, where its controller reports `FailedCreate`), but
/// its rolling update is.
#[tokio::test]
async fn workload_specs_are_checked_as_kube_checks_them_and_a_sets_template_is_not() {
    let server = server().await;
    let labels = json!({"app": "db"});
    let template =
        json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "db"}]}});
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let frozen: Deployment = serde_json::from_value(json!({"metadata": {"name": "frozen"},
        "spec": {"selector": {"matchLabels": labels}, "template": pod_template(labels.clone(), "Always"),
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}}}))
    .expect("deployment");
    let Err(kube::Error::Api(status)) = deployments.create(&PostParams::default(), &frozen).await
    else {
        panic!("a rolling update that can never progress was accepted");
    };
    assert_eq!(
        status.message,
        "Deployment.apps \"frozen\" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"0%\"}: may not be 0 when `maxSurge` is 0"
    );
    let sets: Api<StatefulSet> = Api::default_namespaced(server.client());
    let set = |name: &str, strategy: Value| -> StatefulSet {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"serviceName": "db",
            "selector": {"matchLabels": labels}, "template": template, "updateStrategy": strategy}}))
        .expect("statefulset")
    };
    sets.create(
        &PostParams::default(),
        &set("imageless", json!({"type": "RollingUpdate"})),
    )
    .await
    .expect("kube does not check a StatefulSet's pod template");
    let strict = set(
        "strict",
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0}}),
    );
    let Err(kube::Error::Api(status)) = sets.create(&PostParams::default(), &strict).await else {
        panic!("a set that may never have a pod unavailable was accepted");
    };
    assert_eq!(
        status.message,
        "StatefulSet.apps \"strict\" is invalid: spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: cannot be 0"
    );
}

/// A claim is checked as kube checks it, and one that names its data source one way reads
/// back with the other too, as kube's claim strategy writes it.
#[tokio::test]
async fn claims_are_checked_and_their_data_sources_normalised_as_in_kube() {
    let server = server().await;
    let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(server.client());
    let modeless: PersistentVolumeClaim = serde_json::from_value(
        json!({"metadata": {"name": "modeless"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .expect("claim");
    let Err(kube::Error::Api(status)) = claims.create(&PostParams::default(), &modeless).await
    else {
        panic!("a claim without access modes was accepted");
    };
    assert_eq!(
        status.message,
        "PersistentVolumeClaim \"modeless\" is invalid: spec.accessModes: Required value: at least 1 access mode is required"
    );
    let clone = create_json(
        &claims,
        json!({"metadata": {"name": "clone"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "dataSource": {"kind": "PersistentVolumeClaim", "name": "seed"}}}),
    )
    .await;
    let reference = clone
        .spec
        .expect("spec")
        .data_source_ref
        .expect("dataSourceRef");
    assert_eq!(
        (reference.kind.as_str(), reference.name.as_str()),
        ("PersistentVolumeClaim", "seed")
    );
}

/// A Job's pod failure and success policies are checked as kube checks them: a rule on an
/// exit code of a container the template lacks, or on exit code 0 under `In`, is refused,
/// and so is a success policy on a NonIndexed Job; an Indexed Job that uses both, with
/// pods that are never restarted in place, is stored (replacing only failed pods).
#[tokio::test]
async fn a_jobs_failure_and_success_policies_are_checked_as_kube_checks_them() {
    let server = server().await;
    let jobs: Api<Job> = Api::default_namespaced(server.client());
    let job = |name: &str, spec: Value| -> Job {
        let mut spec = spec;
        spec["template"] = pod_template(json!({"app": "batch"}), "Never");
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("job")
    };
    let refusal = |job: Job| {
        let jobs = jobs.clone();
        async move {
            match jobs.create(&PostParams::default(), &job).await {
                Err(kube::Error::Api(status)) => {
                    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
                    status.message
                }
                other => panic!("a Job kube refuses was not refused: {other:?}"),
            }
        }
    };
    let picky = job(
        "picky",
        json!({"podFailurePolicy": {"rules": [{"action": "FailJob",
            "onExitCodes": {"containerName": "sidecar", "operator": "In", "values": [0]}}]}}),
    );
    assert_eq!(
        refusal(picky).await,
        "Job.batch \"picky\" is invalid: [spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: \"sidecar\": must be one of the container or initContainer names in the pod template, spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator]"
    );
    let early = job(
        "early",
        json!({"successPolicy": {"rules": [{"succeededCount": 1}]}}),
    );
    assert_eq!(
        refusal(early).await,
        "Job.batch \"early\" is invalid: spec.successPolicy: Invalid value: batch.SuccessPolicy{Rules:[]batch.SuccessPolicyRule{batch.SuccessPolicyRule{SucceededIndexes:(*string)(nil), SucceededCount:(*int32)(0xc000000000)}}}: requires indexed completion mode"
    );
    let sweep = job(
        "sweep",
        json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3,
            "backoffLimitPerIndex": 1,
            "podFailurePolicy": {"rules": [
                {"action": "FailIndex", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
            "successPolicy": {"rules": [{"succeededIndexes": "0-1", "succeededCount": 1}]}}),
    );
    let stored = jobs
        .create(&PostParams::default(), &sweep)
        .await
        .expect("a valid Indexed Job with both policies is stored");
    let spec = stored.spec.expect("spec");
    assert_eq!(spec.pod_replacement_policy.as_deref(), Some("Failed"));
    assert_eq!(
        spec.success_policy.expect("successPolicy").rules[0]
            .succeeded_indexes
            .as_deref(),
        Some("0-1")
    );
}
