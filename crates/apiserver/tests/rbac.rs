//! RBAC enforced as kube-apiserver enforces it, for every identity outside `system:masters`:
//! a service account's token (what an operator runs with in a cluster) and a user
//! impersonated by `Impersonate-*` headers (`kubectl --as`). Each is refused with kube's
//! 403 until a Role or ClusterRole bound to it allows the request; the administrator is
//! never asked. Driven through kube-rs, with the server's authentication in front.

mod common;

use common::{ADMIN_TOKEN, authenticated_client, eventually, post_json, server};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::core::Status;
use serde_json::{Value, json};
use steady_apiserver::ApiServer;

const OPERATOR: &str = "system:serviceaccount:default:operator";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn client_with(server: &ApiServer, headers: &[(&'static str, String)]) -> kube::Client {
    authenticated_client(server, headers)
}

fn bearer(token: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {token}"))
}

fn admin(server: &ApiServer) -> kube::Client {
    client_with(server, &[bearer(ADMIN_TOKEN)])
}

/// The admin impersonating `user` (and `groups`), as `kubectl --as` sends it.
fn impersonating(server: &ApiServer, user: &str, groups: &[&str]) -> kube::Client {
    let mut headers = vec![bearer(ADMIN_TOKEN), ("impersonate-user", user.to_string())];
    headers.extend(groups.iter().map(|g| ("impersonate-group", g.to_string())));
    client_with(server, &headers)
}

/// A token for the service account `name` in `default`, from TokenRequest.
async fn token_for(server: &ApiServer, name: &str, audiences: Option<&[&str]>) -> String {
    let uri = format!("/api/v1/namespaces/default/serviceaccounts/{name}/token");
    let mut spec = json!({});
    if let Some(audiences) = audiences {
        spec["audiences"] = json!(audiences);
    }
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let issued = post_json(server, &uri, &body).await;
    assert_eq!(issued.status, 201, "{:?}", issued.json());
    issued.json()["status"]["token"]
        .as_str()
        .expect("a token")
        .to_string()
}

async fn create(server: &ApiServer, uri: &str, object: Value) {
    let created = post_json(server, uri, &object).await;
    assert_eq!(created.status, 201, "{uri}: {:?}", created.json());
}

/// A Role in `default` with `rules`, bound to the `operator` service account.
async fn grant(server: &ApiServer, name: &str, rules: Value) {
    let rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default";
    create(
        server,
        &format!("{rbac}/roles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name}, "rules": rules}),
    )
    .await;
    create(
        server,
        &format!("{rbac}/rolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "default"}]}),
    )
    .await;
}

/// The Status of a refused request.
fn refused<T: std::fmt::Debug>(result: kube::Result<T>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn forbidden<T: std::fmt::Debug>(result: kube::Result<T>) -> String {
    let status = refused(result);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (403, "Forbidden"),
        "{status:?}"
    );
    status.message
}

async fn operator(server: &ApiServer) -> kube::Client {
    let accounts: Api<ServiceAccount> = Api::default_namespaced(admin(server));
    let account = serde_json::from_value(json!({"metadata": {"name": "operator"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("created");
    let token = token_for(server, "operator", None).await;
    client_with(server, &[bearer(&token)])
}

#[tokio::test]
async fn a_service_account_may_do_only_what_its_roles_allow() {
    let s = server().await;
    let client = operator(&s).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    assert_eq!(
        forbidden(pods.list(&ListParams::default()).await),
        format!(
            "pods is forbidden: User \"{OPERATOR}\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        )
    );
    // Discovery needs no grant: every authenticated client holds `system:discovery`.
    kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");

    grant(
        &s,
        "read-pods",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
    )
    .await;
    assert!(
        pods.list(&ListParams::default())
            .await
            .expect("listed")
            .items
            .is_empty()
    );
    let watched = pods.watch(&WatchParams::default(), "0").await.map(drop);
    assert!(forbidden(watched).contains("cannot watch resource \"pods\""));
    let pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    assert_eq!(
        forbidden(pods.create(&PostParams::default(), &pod).await),
        format!(
            "pods is forbidden: User \"{OPERATOR}\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\""
        )
    );
    // Named requests and subresources are named as kube names them.
    let status_patch = Patch::Merge(json!({"status": {"phase": "Running"}}));
    let message = forbidden(
        pods.patch_status("p", &PatchParams::default(), &status_patch)
            .await,
    );
    assert_eq!(
        message,
        format!(
            "pods \"p\" is forbidden: User \"{OPERATOR}\" cannot patch resource \"pods/status\" in API group \"\" in the namespace \"default\""
        )
    );
    // Other namespaces and cluster-scoped kinds stay closed.
    let elsewhere: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    assert!(
        forbidden(elsewhere.list(&ListParams::default()).await)
            .ends_with("in the namespace \"kube-system\"")
    );
    let nodes: Api<Node> = Api::all(client.clone());
    assert!(forbidden(nodes.list(&ListParams::default()).await).ends_with("at the cluster scope"));

    // A revoked grant stops the very next request.
    let bindings: Api<RoleBinding> = Api::default_namespaced(admin(&s));
    bindings
        .delete("read-pods", &DeleteParams::default())
        .await
        .expect("revoked");
    assert!(forbidden(pods.list(&ListParams::default()).await).contains("cannot list"));
}

#[tokio::test]
async fn wildcards_subresources_and_names_match_as_in_kube() {
    let s = server().await;
    let client = operator(&s).await;
    grant(
        &s,
        "some",
        json!([
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"], "verbs": ["*"]},
            {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]},
        ]),
    )
    .await;
    let admin_maps: Api<ConfigMap> = Api::default_namespaced(admin(&s));
    for name in ["mine", "theirs"] {
        let map = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        admin_maps
            .create(&PostParams::default(), &map)
            .await
            .expect("created");
    }
    let maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    maps.get("mine").await.expect("named in the rule");
    // A list of that one name is about the name; a list of all is not.
    let one = ListParams::default().fields("metadata.name=mine");
    assert_eq!(
        maps.list(&one).await.expect("listed by name").items.len(),
        1
    );
    assert!(forbidden(maps.list(&ListParams::default()).await).contains("cannot list"));
    maps.delete("mine", &DeleteParams::default())
        .await
        .expect("any verb on it");
    assert!(forbidden(maps.get("theirs").await).starts_with("configmaps \"theirs\" is forbidden"));
    let pods: Api<Pod> = Api::default_namespaced(client);
    let missing = refused(pods.get_status("nothing").await);
    assert_eq!(missing.code, 404, "allowed, then not found: {missing:?}");
}

#[tokio::test]
async fn tokens_stop_working_with_their_service_account_and_outside_their_audience() {
    let s = server().await;
    let client = operator(&s).await;
    let vault = token_for(&s, "operator", Some(&["vault"])).await;
    let elsewhere = client_with(&s, &[bearer(&vault)]);
    let maps: Api<ConfigMap> = Api::default_namespaced(elsewhere);
    assert_eq!(refused(maps.list(&ListParams::default()).await).code, 401);

    let accounts: Api<ServiceAccount> = Api::default_namespaced(admin(&s));
    accounts
        .delete("operator", &DeleteParams::default())
        .await
        .expect("deleted");
    let maps: Api<ConfigMap> = Api::default_namespaced(client);
    assert_eq!(refused(maps.list(&ListParams::default()).await).code, 401);
}

#[tokio::test]
async fn impersonation_acts_as_the_user_and_needs_permission() {
    let s = server().await;
    let alice = impersonating(&s, "alice", &[]);
    let pods: Api<Pod> = Api::default_namespaced(alice.clone());
    assert_eq!(
        forbidden(pods.list(&ListParams::default()).await),
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    // Who alice is, as the server sees her.
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let request = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&review).unwrap())
        .unwrap();
    let seen: Value = alice.request(request).await.expect("a review");
    assert_eq!(seen["status"]["userInfo"]["username"], "alice");
    assert_eq!(
        seen["status"]["userInfo"]["groups"],
        json!(["system:authenticated"])
    );
    // A group she is impersonated into brings its grants.
    let admins = impersonating(&s, "alice", &["system:masters"]);
    let pods: Api<Pod> = Api::default_namespaced(admins);
    pods.list(&ListParams::default())
        .await
        .expect("as a master");

    // A service account may impersonate only with the `impersonate` verb.
    let operator = operator(&s).await;
    let token = token_for(&s, "operator", None).await;
    let sneaky = client_with(&s, &[bearer(&token), ("impersonate-user", "alice".into())]);
    assert_eq!(
        forbidden(
            Api::<Pod>::default_namespaced(sneaky)
                .list(&ListParams::default())
                .await
        ),
        format!(
            "users \"alice\" is forbidden: User \"{OPERATOR}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )
    );
    // Impersonating a service account takes on its groups.
    let as_operator = impersonating(&s, OPERATOR, &[]);
    let request = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&review).unwrap())
        .unwrap();
    let seen: Value = as_operator.request(request).await.expect("a review");
    assert_eq!(
        seen["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    drop(operator);
}

/// An impersonation header that is not text is refused, never read as "no one".
#[tokio::test]
async fn an_unreadable_impersonation_header_is_refused() {
    use tower::ServiceExt;
    let s = server().await;
    let app = steady_apiserver::auth::authenticate(s.router(), &s, ADMIN_TOKEN);
    let request = http::Request::get("/api/v1/namespaces/default/pods")
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .header(
            "impersonate-user",
            http::HeaderValue::from_bytes(b"al\xffce").expect("obs-text is a valid header value"),
        )
        .body(axum::body::Body::empty())
        .expect("a request");
    let response = app.oneshot(request).await.expect("a response");
    assert_eq!(response.status(), 400);
}

fn has_rule(role: &ClusterRole, group: &str, resource: &str, verb: &str) -> bool {
    role.rules.iter().flatten().any(|rule| {
        let has = |list: &Option<Vec<String>>, wanted: &str| {
            list.iter().flatten().any(|item| item == wanted)
        };
        has(&rule.api_groups, group)
            && has(&rule.resources, resource)
            && rule.verbs.iter().any(|v| v == verb)
    })
}

/// Wait until the ClusterRole `name` does (or does not) hold `group/resource: verb`.
async fn eventually_rule(
    roles: &Api<ClusterRole>,
    name: &str,
    rule: (&str, &str, &str),
    held: bool,
) -> ClusterRole {
    let (group, resource, verb) = rule;
    eventually(&format!("{name} to hold {rule:?}: {held}"), || async move {
        let role = roles.get(name).await.expect("the role");
        (has_rule(&role, group, resource, verb) == held).then_some(role)
    })
    .await
}

/// `admin`, `edit` and `view` are aggregated as kube-controller-manager aggregates them:
/// kube's `system:aggregate-to-*` rules at start, then any ClusterRole labelled
/// `aggregate-to-<role>` (what an operator ships so namespace users may read its custom
/// resources), kept as the labelled roles come, change and go.
#[tokio::test]
async fn aggregated_cluster_roles_gather_the_labelled_roles() {
    let s = server().await;
    let roles: Api<ClusterRole> = Api::all(admin(&s));
    // At start, before anything else: view reads, edit writes, admin grants.
    let view = roles.get("view").await.expect("view");
    assert!(
        has_rule(&view, "", "pods", "list")
            && has_rule(&view, "discovery.k8s.io", "endpointslices", "watch")
    );
    assert!(
        !has_rule(&view, "", "secrets", "get"),
        "view reads no secrets"
    );
    let edit = roles.get("edit").await.expect("edit");
    assert!(has_rule(&edit, "", "pods", "list") && has_rule(&edit, "", "secrets", "create"));
    let admin_role = roles.get("admin").await.expect("admin");
    assert!(
        has_rule(&admin_role, "apps", "deployments", "update")
            && has_rule(&admin_role, RBAC_GROUP, "rolebindings", "create")
    );
    let managers: Vec<_> = view
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| (m.manager.as_deref(), m.operation.as_deref()))
        .collect();
    assert!(
        managers.contains(&(Some("clusterrole-aggregation-controller"), Some("Apply"))),
        "{managers:?}"
    );

    // An operator's role for its widgets, aggregated into view, and so edit and admin.
    let widgets = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}]});
    create(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        widgets,
    )
    .await;
    for name in ["view", "edit", "admin"] {
        eventually_rule(&roles, name, ("example.com", "widgets", "list"), true).await;
    }
    // A service account bound to view in its namespace may now list widgets there.
    let client = operator(&s).await;
    create(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "operator-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "default"}]}),
    )
    .await;
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"group": "example.com", "resource": "widgets", "verb": "list", "namespace": "default"}}});
    let request = http::Request::post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&review).unwrap())
        .unwrap();
    let answer: Value = client.request(request).await.expect("a review");
    assert_eq!(answer["status"]["allowed"], true, "{answer}");

    // Someone edits view by hand: the controller puts its rules back.
    roles
        .patch(
            "view",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"rules": [{"apiGroups": [""], "resources": ["nothing"], "verbs": ["get"]}]}),
            ),
        )
        .await
        .expect("patched");
    eventually_rule(&roles, "view", ("example.com", "widgets", "list"), true).await;

    // The operator's role goes: so do its rules, in every role that gathered them.
    roles
        .delete("widgets-view", &DeleteParams::default())
        .await
        .expect("deleted");
    for name in ["view", "edit", "admin"] {
        let role = eventually_rule(&roles, name, ("example.com", "widgets", "list"), false).await;
        assert!(
            has_rule(&role, "", "pods", "list"),
            "{name} keeps kube's rules"
        );
    }
}

const OPERATOR_GROUPS: &str =
    r#"["system:serviceaccounts" "system:serviceaccounts:default" "system:authenticated"]"#;

/// A service account may grant only what it holds, as kube-apiserver's escalation check
/// has it: a Role's rules, the rules of the role a binding names, an aggregation rule
/// (cluster-admin only); unless it may `escalate` the role or `bind` the role it names.
#[tokio::test]
async fn a_service_account_grants_only_what_it_holds() {
    let s = server().await;
    let client = operator(&s).await;
    grant(
        &s,
        "rbac-writer",
        json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update", "get"]},
               {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
    )
    .await;
    let roles: Api<Role> = Api::default_namespaced(client.clone());
    let pod_reader = |verbs: Value| -> Role {
        serde_json::from_value(json!({"metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]}))
        .unwrap()
    };
    let message = forbidden(
        roles
            .create(
                &PostParams::default(),
                &pod_reader(json!(["get", "list", "watch"])),
            )
            .await,
    );
    assert_eq!(
        message,
        format!(
            "roles.rbac.authorization.k8s.io \"pod-reader\" is forbidden: user \"{OPERATOR}\" (groups={OPERATOR_GROUPS}) is attempting to grant RBAC permissions not currently held:\n{{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"list\" \"watch\"]}}"
        )
    );
    // What it holds it may hand on; then not widen by an update.
    let created = roles
        .create(&PostParams::default(), &pod_reader(json!(["get"])))
        .await
        .expect("holds get pods");
    let mut wider = pod_reader(json!(["get", "delete"]));
    wider.metadata.resource_version = created.metadata.resource_version;
    assert!(
        forbidden(
            roles
                .replace("pod-reader", &PostParams::default(), &wider)
                .await
        )
        .ends_with("{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}")
    );

    // A binding needs the bound role's rules, or `bind` on that role.
    let bindings: Api<RoleBinding> = Api::default_namespaced(client.clone());
    let binding_to = |kind: &str, role: &str| -> RoleBinding {
        serde_json::from_value(json!({"metadata": {"name": format!("to-{role}")},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role},
            "subjects": [{"kind": "User", "name": "bob", "apiGroup": RBAC_GROUP}]}))
        .unwrap()
    };
    bindings
        .create(&PostParams::default(), &binding_to("Role", "pod-reader"))
        .await
        .expect("holds what pod-reader grants");
    let message = forbidden(
        bindings
            .create(&PostParams::default(), &binding_to("ClusterRole", "view"))
            .await,
    );
    assert!(
        message.starts_with(&format!(
            "rolebindings.rbac.authorization.k8s.io \"to-view\" is forbidden: user \"{OPERATOR}\" (groups={OPERATOR_GROUPS}) is attempting to grant RBAC permissions not currently held:\n{{APIGroups:[\"\"], Resources:[\"bindings\"], Verbs:[\"get\" \"list\" \"watch\"]}}\n"
        )) && message.contains("\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"list\" \"watch\"]}\n"),
        "one line per missing resource, in byte order, only what is not held: {message}"
    );
    let missing = refused(
        bindings
            .create(&PostParams::default(), &binding_to("ClusterRole", "nope"))
            .await,
    );
    assert_eq!(
        (missing.code, missing.message.as_str()),
        (
            404,
            "clusterroles.rbac.authorization.k8s.io \"nope\" not found"
        )
    );
    grant(
        &s,
        "bind-view",
        json!([{"apiGroups": [RBAC_GROUP], "resources": ["clusterroles"], "resourceNames": ["view"], "verbs": ["bind"]}]),
    )
    .await;
    bindings
        .create(&PostParams::default(), &binding_to("ClusterRole", "view"))
        .await
        .expect("may bind view");

    // `escalate` on roles lifts the check for Roles.
    grant(
        &s,
        "escalate",
        json!([{"apiGroups": [RBAC_GROUP], "resources": ["roles"], "verbs": ["escalate"]}]),
    )
    .await;
    roles
        .replace("pod-reader", &PostParams::default(), &{
            let mut wider = wider.clone();
            wider.metadata.resource_version = None;
            wider
        })
        .await
        .expect("may escalate");
}

/// Only cluster-admin may give a ClusterRole an aggregation rule: it gathers anything.
#[tokio::test]
async fn only_cluster_admin_may_aggregate() {
    let s = server().await;
    let client = operator(&s).await;
    create(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "operator-roles"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "operator-roles"},
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "default"}]}),
    )
    .await;
    create(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "operator-roles"},
            "rules": [{"apiGroups": [RBAC_GROUP], "resources": ["clusterroles"], "verbs": ["create"]}]}),
    )
    .await;
    let roles: Api<ClusterRole> = Api::all(client);
    let aggregating: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "gatherer"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"gather": "me"}}]}}))
    .unwrap();
    let status = refused(roles.create(&PostParams::default(), &aggregating).await);
    assert_eq!(
        status.message,
        "clusterroles.rbac.authorization.k8s.io \"gatherer\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );
    let details = status.details.expect("kube's details");
    assert_eq!(
        (
            status.code,
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        (403, "gatherer", RBAC_GROUP, "clusterroles")
    );
}

/// RBAC objects are validated as kube validates them, for the administrator too: rules
/// that name no verbs, bindings to roles of the wrong kind or with malformed subjects, and
/// a binding's roleRef changed in place are refused with kube's 422.
#[tokio::test]
async fn rbac_objects_are_validated_as_in_kube() {
    let s = server().await;
    let roles: Api<Role> = Api::default_namespaced(admin(&s));
    let no_verbs: Role = serde_json::from_value(json!({"metadata": {"name": "r"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []},
                  {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}))
    .unwrap();
    let status = refused(roles.create(&PostParams::default(), &no_verbs).await);
    assert_eq!(
        (status.code, status.message.as_str()),
        (
            422,
            "Role.rbac.authorization.k8s.io \"r\" is invalid: [rules[0].verbs: Required value: verbs must contain at least one value, rules[1].nonResourceURLs: Invalid value: []string{\"/metrics\"}: namespaced rules cannot apply to non-resource URLs]"
        )
    );

    let bindings: Api<ClusterRoleBinding> = Api::all(admin(&s));
    let binding = |role_kind: &str, role: &str| -> ClusterRoleBinding {
        serde_json::from_value(json!({"metadata": {"name": "b"},
            "roleRef": {"kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "operator"}, {"kind": "User", "name": "bob"}]}))
        .unwrap()
    };
    let status = refused(
        bindings
            .create(&PostParams::default(), &binding("Role", "view"))
            .await,
    );
    assert_eq!(
        status.message,
        "ClusterRoleBinding.rbac.authorization.k8s.io \"b\" is invalid: [roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\", subjects[0].namespace: Required value]"
    );
    // Defaulted as kube defaults rbac/v1: the roleRef's group, a User's group.
    let mut valid = binding("ClusterRole", "view");
    valid.subjects.as_mut().expect("subjects")[0].namespace = Some("default".into());
    let created = bindings
        .create(&PostParams::default(), &valid)
        .await
        .expect("valid");
    assert_eq!(created.role_ref.api_group, RBAC_GROUP);
    assert_eq!(
        created.subjects.expect("subjects")[1].api_group.as_deref(),
        Some(RBAC_GROUP)
    );
    let status = refused(
        bindings
            .patch(
                "b",
                &PatchParams::default(),
                &Patch::Merge(json!({"roleRef": {"name": "edit"}})),
            )
            .await,
    );
    assert_eq!(
        (status.code, status.message.as_str()),
        (
            422,
            "ClusterRoleBinding.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
        )
    );
}

/// A Role whose lists multiply into millions of permissions is refused at once, not
/// checked one by one while other requests wait (kube would check them all).
#[tokio::test]
async fn a_role_too_large_to_check_is_refused_at_once() {
    let s = server().await;
    let client = operator(&s).await;
    grant(
        &s,
        "role-writer",
        json!([{"apiGroups": [RBAC_GROUP], "resources": ["roles"], "verbs": ["create"]}]),
    )
    .await;
    let many = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>();
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "huge"},
        "rules": [{"apiGroups": many("g", 200), "resources": many("r", 200), "verbs": many("v", 30)}]}))
    .unwrap();
    let roles: Api<Role> = Api::default_namespaced(client);
    let message = forbidden(roles.create(&PostParams::default(), &role).await);
    assert!(
        message.ends_with("1200000 permissions, more than the 1000000 steady checks in one write"),
        "{message}"
    );
}

/// A `kubernetes.io/service-account-token` Secret for `account`, as a user creates one.
fn token_secret(name: &str, account: &str) -> k8s_openapi::api::core::v1::Secret {
    serde_json::from_value(json!({
        "metadata": {"name": name,
                     "annotations": {"kubernetes.io/service-account.name": account}},
        "type": "kubernetes.io/service-account-token",
    }))
    .expect("a secret")
}

#[tokio::test]
async fn a_secret_based_token_is_its_account_while_both_exist() {
    use k8s_openapi::api::core::v1::Secret;
    let s = server().await;
    let accounts: Api<ServiceAccount> = Api::default_namespaced(admin(&s));
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "builder"}})).unwrap();
    let account = accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("created");
    let secrets: Api<Secret> = Api::default_namespaced(admin(&s));
    secrets
        .create(
            &PostParams::default(),
            &token_secret("builder-token", "builder"),
        )
        .await
        .expect("created");

    // The token controller fills it in.
    let filled = eventually("the token filled in", || async {
        let secret = secrets.get("builder-token").await.ok()?;
        secret
            .data
            .as_ref()?
            .get("token")
            .is_some()
            .then_some(secret)
    })
    .await;
    let data = filled.data.clone().unwrap_or_default();
    assert_eq!(data["namespace"].0, b"default");
    let annotations = filled.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("kubernetes.io/service-account.uid"),
        account.metadata.uid.as_ref()
    );
    let token = String::from_utf8(data["token"].0.clone()).expect("a token");

    // It authenticates as the account, which RBAC then judges.
    let pods: Api<Pod> = Api::default_namespaced(client_with(&s, &[bearer(&token)]));
    assert_eq!(
        forbidden(pods.list(&ListParams::default()).await),
        "pods is forbidden: User \"system:serviceaccount:default:builder\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    let review = post_json(
        &s,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token}}),
    )
    .await
    .json();
    assert_eq!(review["status"]["authenticated"], true, "{review}");
    assert_eq!(
        review["status"]["user"]["username"],
        "system:serviceaccount:default:builder"
    );
    // Its use is tracked by the day, as kube's legacy-token tracking does.
    eventually("the last use marked", || async {
        let secret = secrets.get("builder-token").await.ok()?;
        let labels = secret.metadata.labels.unwrap_or_default();
        let day = labels.get("kubernetes.io/legacy-token-last-used")?;
        (day.len() == "2026-12-06".len()).then_some(())
    })
    .await;

    // A token Secret for an account that does not exist is deleted.
    secrets
        .create(
            &PostParams::default(),
            &token_secret("ghost-token", "ghost"),
        )
        .await
        .expect("created");
    common::eventually_gone(&secrets, "ghost-token").await;

    // The account deleted: its token Secrets go, and the token is refused.
    accounts
        .delete("builder", &DeleteParams::default())
        .await
        .expect("deleted");
    common::eventually_gone(&secrets, "builder-token").await;
    assert_eq!(refused(pods.list(&ListParams::default()).await).code, 401);
}
