//! ValidatingAdmissionPolicies through kube-rs and raw requests, as kube-apiserver 1.32
//! enforces them: a binding's Deny refuses with kube's message, reason and code; Warn
//! admits with a Warning header; parameters, match conditions, variables, failure
//! policies, deletes; the policies' own validation; and no policy can lock itself in.

mod common;

use common::{ADMIN_TOKEN, authenticated_client, post_json, server};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use steady_apiserver::ApiServer;
use steady_test_support::{create_json, merge_patch};

fn deployment(name: &str, replicas: i32) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    })
}

/// Rules matching the creates and updates of Deployments.
fn deployments_rules() -> Value {
    json!({"resourceRules": [{
        "apiGroups": ["apps"], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["deployments"],
    }]})
}

async fn install(server: &ApiServer, policy: Value, binding: Value) {
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(server.client());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(server.client());
    create_json(&policies, policy).await;
    create_json(&bindings, binding).await;
}

/// Install `policy` with a binding of its own name that denies what it refuses.
async fn deny_with(server: &ApiServer, policy: Value) {
    let name = policy["metadata"]["name"]
        .as_str()
        .expect("a named policy")
        .to_string();
    install(server, policy, binding(&name, &name, &["Deny"])).await;
}

fn binding(name: &str, policy: &str, actions: &[&str]) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": actions},
    })
}

fn max_replicas_policy() -> Value {
    json!({
        "metadata": {"name": "max-replicas"},
        "spec": {
            "matchConstraints": deployments_rules(),
            "validations": [{"expression": "object.spec.replicas <= 5"}],
        },
    })
}

/// The Status of a refused request (panics on success or any other error).
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn create_error(api: &Api<Deployment>, object: Value) -> kube::core::Status {
    let object: Deployment = serde_json::from_value(object).expect("a Deployment");
    refusal(api.create(&PostParams::default(), &object).await)
}

#[tokio::test]
async fn a_bound_policy_refuses_with_kubes_message_reason_and_code() {
    let server = server().await;
    install(
        &server,
        max_replicas_policy(),
        binding("max-replicas-binding", "max-replicas", &["Deny"]),
    )
    .await;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(server.client());
    let stored = policies.get("max-replicas").await.expect("stored");
    let spec = stored.spec.expect("spec");
    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"), "defaulted");
    let constraints = spec.match_constraints.expect("constraints");
    assert_eq!(constraints.match_policy.as_deref(), Some("Equivalent"));

    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let refused = create_error(&deployments, deployment("big", 6)).await;
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        refused.message,
        "deployments.apps \"big\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: failed expression: object.spec.replicas <= 5"
    );
    assert!(deployments.get_opt("big").await.expect("read").is_none());

    create_json(&deployments, deployment("small", 5)).await;
    let refused =
        refusal(merge_patch(&deployments, "small", json!({"spec": {"replicas": 9}})).await);
    assert_eq!(refused.code, 422, "{refused:?}");
    assert!(
        refused
            .message
            .contains("denied request: failed expression"),
        "{refused:?}"
    );
    // The status subresource is not named by `deployments`: its writes are not held.
    let status = json!({"status": {"replicas": 9}});
    steady_test_support::merge_patch_subresource::<Value, Deployment>(
        &deployments,
        "status",
        "small",
        status,
    )
    .await
    .expect("status writes are not matched");
}

#[tokio::test]
async fn message_expressions_reasons_and_selectors() {
    let server = server().await;
    let policy = json!({
        "metadata": {"name": "named-images"},
        "spec": {
            "matchConstraints": {
                "resourceRules": deployments_rules()["resourceRules"],
                "namespaceSelector": {"matchLabels": {"policy": "strict"}},
            },
            "validations": [{
                "expression": "object.spec.template.spec.containers.all(c, c.image.contains(':'))",
                "messageExpression": "'image of ' + object.metadata.name + ' has no tag'",
                "reason": "Forbidden",
            }],
        },
    });
    deny_with(&server, policy).await;
    let namespaces: Api<Namespace> = Api::all(server.client());
    create_json(
        &namespaces,
        json!({"metadata": {"name": "strict", "labels": {"policy": "strict"}}}),
    )
    .await;
    let strict: Api<Deployment> = Api::namespaced(server.client(), "strict");
    let mut untagged = deployment("latest", 1);
    untagged["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx");
    let refused = create_error(&strict, untagged.clone()).await;
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        refused.message,
        "deployments.apps \"latest\" is forbidden: ValidatingAdmissionPolicy 'named-images' with binding 'named-images' denied request: image of latest has no tag"
    );
    // A namespace the selector does not pick is not held to the policy.
    let relaxed: Api<Deployment> = Api::default_namespaced(server.client());
    create_json(&relaxed, untagged).await;
}

#[tokio::test]
async fn warn_admits_with_a_warning_header() {
    let server = server().await;
    install(
        &server,
        max_replicas_policy(),
        binding("warn-only", "max-replicas", &["Warn", "Audit"]),
    )
    .await;
    let created = post_json(
        &server,
        "/apis/apps/v1/namespaces/default/deployments",
        &deployment("big", 7),
    )
    .await;
    assert_eq!(created.status, 201);
    let warnings: Vec<&str> = created
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(
        warnings,
        [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'warn-only': failed expression: object.spec.replicas <= 5\""
        ]
    );
}

#[tokio::test]
async fn parameters_come_from_the_object_the_binding_names() {
    let server = server().await;
    let policy = json!({
        "metadata": {"name": "replica-limit"},
        "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": deployments_rules(),
            "validations": [{
                "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'",
            }],
        },
    });
    let mut limit = binding("replica-limit", "replica-limit", &["Deny"]);
    limit["spec"]["paramRef"] = json!({"name": "limits", "parameterNotFoundAction": "Deny"});
    install(&server, policy, limit).await;
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let refused = create_error(&deployments, deployment("web", 2)).await;
    assert_eq!(
        refused.message,
        "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    let config_maps: Api<ConfigMap> = Api::default_namespaced(server.client());
    create_json(
        &config_maps,
        json!({"metadata": {"name": "limits"}, "data": {"maxReplicas": "3"}}),
    )
    .await;
    create_json(&deployments, deployment("web", 2)).await;
    let refused = create_error(&deployments, deployment("large", 4)).await;
    assert!(
        refused
            .message
            .ends_with("denied request: at most 3 replicas"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn match_conditions_variables_and_failure_policies() {
    let server = server().await;
    let policy = |name: &str, failure: &str| {
        json!({
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": failure,
                "matchConstraints": deployments_rules(),
                "matchConditions": [{
                    "name": "not-exempt",
                    "expression": "!('exempt' in object.metadata.labels)",
                }],
                "variables": [
                    {"name": "containers", "expression": "object.spec.template.spec.containers"},
                    {"name": "owner", "expression": "object.metadata.annotations.owner"},
                ],
                "validations": [
                    {"expression": "variables.containers.size() == 1", "message": "one container"},
                    {"expression": "variables.owner != ''"},
                ],
            },
        })
    };
    deny_with(&server, policy("strict", "Fail")).await;
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let mut annotated = deployment("owned", 1);
    annotated["metadata"]["annotations"] = json!({"owner": "team-a"});
    create_json(&deployments, annotated).await;
    // The variable fails (no annotations): under Fail, the validation reading it denies.
    let refused = create_error(&deployments, deployment("orphan", 1)).await;
    assert!(
        refused.message.ends_with(
            "denied request: expression 'variables.owner != ''' resulted in error: composited variable \"owner\" fails to evaluate: no such key: annotations"
        ),
        "{}",
        refused.message
    );
    // A match condition that is false leaves the write alone.
    let mut exempt = deployment("exempt", 1);
    exempt["metadata"]["labels"]["exempt"] = json!("yes");
    create_json(&deployments, exempt).await;

    // Under Ignore, an expression that fails admits the write; a false one still denies.
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(server.client());
    policies
        .delete("strict", &DeleteParams::default())
        .await
        .expect("deleted");
    deny_with(&server, policy("lenient", "Ignore")).await;
    create_json(&deployments, deployment("orphan", 1)).await;
    let mut two = deployment("two", 1);
    two["metadata"]["annotations"] = json!({"owner": "team-b"});
    two["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "sidecar", "image": "busybox:1.36"}));
    let refused = create_error(&deployments, two).await;
    assert!(
        refused.message.ends_with("denied request: one container"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn deletes_see_the_old_object_and_policies_cannot_lock_themselves_in() {
    let server = server().await;
    let policy = json!({
        "metadata": {"name": "keep-protected"},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"],
            }]},
            "validations": [{
                "expression": "request.operation != 'DELETE' || !has(oldObject.metadata.labels) || !('protected' in oldObject.metadata.labels)",
                "message": "protected objects stay",
            }],
        },
    });
    deny_with(&server, policy).await;
    let config_maps: Api<ConfigMap> = Api::default_namespaced(server.client());
    create_json(
        &config_maps,
        json!({"metadata": {"name": "kept", "labels": {"protected": "true"}}}),
    )
    .await;
    let refused = refusal(config_maps.delete("kept", &DeleteParams::default()).await);
    assert_eq!(refused.code, 422, "{refused:?}");
    assert!(
        refused
            .message
            .ends_with("denied request: protected objects stay"),
        "{refused:?}"
    );
    // The policy matches every resource, but never its own kinds: it can be removed.
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(server.client());
    bindings
        .delete("keep-protected", &DeleteParams::default())
        .await
        .expect("bindings are exempt");
    config_maps
        .delete("kept", &DeleteParams::default())
        .await
        .expect("no binding, no policy");
}

#[tokio::test]
async fn policies_kube_would_not_store_are_refused() {
    let server = server().await;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(server.client());
    let create_policy = |policy: Value| {
        let policies = policies.clone();
        async move {
            let policy: ValidatingAdmissionPolicy = serde_json::from_value(policy).expect("policy");
            let refused = refusal(policies.create(&PostParams::default(), &policy).await);
            (refused.code, refused.message)
        }
    };
    let (code, message) = create_policy(json!({
        "metadata": {"name": "broken"},
        "spec": {
            "matchConstraints": deployments_rules(),
            "validations": [
                {"expression": "object.spec.replicas <="},
                {"expression": "object.spec.paused"},
                {"expression": "1 + 1", "reason": "Conflict"},
            ],
        },
    }))
    .await;
    assert_eq!(code, 422, "{message}");
    assert!(
        message.starts_with("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"broken\" is invalid: [spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": compilation failed: ERROR: <input>:1:"),
        "{message}"
    );
    assert!(
        message.contains("spec.validations[1].expression: Invalid value: \"object.spec.paused\": must evaluate to bool but got dyn"),
        "{message}"
    );
    assert!(
        message.contains("spec.validations[2].expression: Invalid value: \"1 + 1\": must evaluate to bool but got int, spec.validations[2].reason: Unsupported value: \"Conflict\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"]"),
        "{message}"
    );
    let (code, message) = create_policy(json!({"metadata": {"name": "empty"}})).await;
    assert_eq!(code, 422);
    assert_eq!(
        message,
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"empty\" is invalid: [spec.matchConstraints: Required value, spec.validations: Required value: validations or auditAnnotations must contain at least one item, spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item]"
    );

    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(server.client());
    let mut both = binding("both", "p", &["Deny", "Warn"]);
    both["spec"]["paramRef"] = json!({"name": "x", "selector": {}});
    let both: ValidatingAdmissionPolicyBinding = serde_json::from_value(both).expect("binding");
    let refused = refusal(bindings.create(&PostParams::default(), &both).await);
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.message,
        "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"both\" is invalid: [spec.validationActions: Invalid value: [\"Deny\",\"Warn\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose), spec.paramRef.name: Forbidden: name and selector are mutually exclusive, spec.paramRef.selector: Forbidden: name and selector are mutually exclusive, spec.paramRef.parameterNotFoundAction: Required value]"
    );
}

/// A client acting as `user` (the administrator impersonating them, as `kubectl --as`).
fn acting_as(server: &ApiServer, user: &str) -> kube::Client {
    authenticated_client(
        server,
        &[
            ("authorization", format!("Bearer {ADMIN_TOKEN}")),
            ("impersonate-user", user.to_string()),
        ],
    )
}

/// A ClusterRole of `verbs` on ConfigMaps, bound to `user`.
async fn may(server: &ApiServer, user: &str, verbs: &[&str]) {
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": user},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]});
    assert_eq!(
        post_json(server, &format!("{rbac}/clusterroles"), &role)
            .await
            .status,
        201
    );
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]});
    assert_eq!(
        post_json(server, &format!("{rbac}/clusterrolebindings"), &binding)
            .await
            .status,
        201
    );
}

#[tokio::test]
async fn the_authorizer_answers_what_the_writer_may_do() {
    let server = server().await;
    let policy = json!({
        "metadata": {"name": "deleters-create"},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"],
            }]},
            "validations": [
                {
                    "expression": "authorizer.group('').resource('configmaps').namespace(request.namespace).check('delete').allowed()",
                    "messageExpression": "request.userInfo.username + ' may not delete ConfigMaps'",
                },
                {
                    "expression": "authorizer.requestResource.check('create').allowed() && !authorizer.serviceAccount('default', 'nobody').group('').resource('configmaps').check('create').allowed()",
                    "message": "the request's own check",
                },
            ],
        },
    });
    deny_with(&server, policy).await;
    may(&server, "alice", &["create"]).await;
    may(&server, "bob", &["create", "delete"]).await;
    let config_map = |name: &str| json!({"metadata": {"name": name}});
    let created = |client: kube::Client, name: &str| {
        let api: Api<ConfigMap> = Api::default_namespaced(client);
        let object: ConfigMap = serde_json::from_value(config_map(name)).expect("ConfigMap");
        async move { api.create(&PostParams::default(), &object).await }
    };
    created(server.client(), "by-admin")
        .await
        .expect("the administrator may do anything");
    created(acting_as(&server, "bob"), "by-bob")
        .await
        .expect("bob may delete ConfigMaps");
    let refused = refusal(created(acting_as(&server, "alice"), "by-alice").await);
    assert_eq!(
        refused.message,
        "configmaps \"by-alice\" is forbidden: ValidatingAdmissionPolicy 'deleters-create' with binding 'deleters-create' denied request: alice may not delete ConfigMaps"
    );
}

/// As on a cluster, a policy on `deployments` does not hold scale writes (the famous gap);
/// one on `deployments/scale` does, and sees them as the `autoscaling/v1` Scale written.
#[tokio::test]
async fn scale_writes_are_the_scale_subresource() {
    let server = server().await;
    deny_with(&server, max_replicas_policy()).await;
    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    create_json(&deployments, deployment("web", 2)).await;
    deployments
        .patch_scale(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"replicas": 9}})),
        )
        .await
        .expect("a policy on deployments does not match deployments/scale");

    let scale_policy = json!({
        "metadata": {"name": "max-scale"},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["UPDATE"], "resources": ["deployments/scale"],
            }]},
            "validations": [{
                "expression": "request.kind.kind == 'Scale' && object.kind == 'Scale' && object.spec.replicas <= 10",
                "messageExpression": "'at most 10, not ' + string(object.spec.replicas)",
            }],
        },
    });
    deny_with(&server, scale_policy).await;
    let refused = refusal(
        deployments
            .patch_scale(
                "web",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {"replicas": 11}})),
            )
            .await,
    );
    assert!(
        refused.message.starts_with("deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'max-scale' with binding 'max-scale' denied request: at most 10, not 11"),
        "{}",
        refused.message
    );
    let stored = deployments.get("web").await.expect("read");
    assert_eq!(stored.spec.and_then(|s| s.replicas), Some(9));
}
