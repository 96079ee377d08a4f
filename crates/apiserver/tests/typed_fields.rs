//! Built-in objects read as kube-apiserver's decoder reads them: a field the kind does not
//! have is dropped (with a Warning, or refused under `fieldValidation=Strict`), and a value
//! of the wrong type is refused with Go's message, so nothing a typed client cannot read is
//! ever stored.

mod common;

use common::{JSON, raw, rejected, server, write};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams, ValidationDirective};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use steady_test_support::{api_code, get_existing, merge_patch};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replica": 3,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx", "imagePullPolic": "Always"}]}
            }
        }
    })
}

/// The object as a dynamic client sends it: every field, known or not, reaches the server.
fn dynamic(object: Value) -> DynamicObject {
    serde_json::from_value(object).expect("an object")
}

fn warnings(response: &common::Raw) -> Vec<String> {
    response
        .headers
        .get_all("warning")
        .iter()
        .map(|w| w.to_str().expect("ASCII").to_string())
        .collect()
}

#[tokio::test]
async fn unknown_fields_are_dropped_with_a_warning_by_default() {
    let s = server().await;
    let created = raw(&s, "POST", DEPLOYMENTS, JSON, deployment("d").to_string()).await;
    assert_eq!(created.status, 201);
    assert_eq!(
        warnings(&created),
        [
            "299 - \"unknown field \\\"spec.replica\\\"\"",
            "299 - \"unknown field \\\"spec.template.spec.containers[0].imagePullPolic\\\"\"",
        ]
    );
    let stored = created.json();
    assert!(stored["spec"].get("replica").is_none(), "{stored}");
    let container = &stored["spec"]["template"]["spec"]["containers"][0];
    assert!(container.get("imagePullPolic").is_none(), "{container}");
    assert_eq!(stored["spec"]["replicas"], 1, "defaulted, the typo ignored");

    // A dynamic client's merge patch: the same, and nothing but the known field is kept.
    let ar = ApiResource::erase::<Deployment>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(s.client(), "default", &ar);
    let patched = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true, "pasued": true}})),
        )
        .await
        .expect("patched");
    assert_eq!(patched.data["spec"]["paused"], true);
    assert!(patched.data["spec"].get("pasued").is_none());

    // Ignore: dropped without a word.
    let quiet = raw(
        &s,
        "POST",
        &format!("{DEPLOYMENTS}?fieldValidation=Ignore"),
        JSON,
        deployment("quiet").to_string(),
    )
    .await;
    assert_eq!(quiet.status, 201);
    assert!(warnings(&quiet).is_empty());
}

#[tokio::test]
async fn strict_validation_refuses_unknown_fields_and_stores_nothing() {
    let s = server().await;
    let status = rejected(
        &s,
        write(
            "POST",
            format!("{DEPLOYMENTS}?fieldValidation=Strict"),
            JSON,
            deployment("d").to_string(),
        ),
        400,
        "BadRequest",
    )
    .await;
    assert_eq!(
        status["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: \
         unknown field \"spec.replica\", unknown field \"spec.template.spec.containers[0].imagePullPolic\""
    );
    // A strict merge patch through kube-rs: refused, the stored object unchanged.
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let valid = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(valid).unwrap(),
        )
        .await
        .expect("created");
    let strict = PatchParams::default().validation(ValidationDirective::Strict);
    let patch = Patch::Merge(json!({"metadata": {"label": {"a": "b"}}}));
    let refused = configmaps.patch("c", &strict, &patch).await;
    let Err(kube::Error::Api(status)) = refused else {
        panic!("refused: {refused:?}");
    };
    assert_eq!(
        status.message,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: \
         unknown field \"metadata.label\""
    );
    let before = get_existing(&configmaps, "c")
        .await
        .metadata
        .resource_version;
    let lenient = configmaps.patch("c", &PatchParams::default(), &patch).await;
    assert_eq!(
        lenient.expect("patched").metadata.resource_version,
        before,
        "nothing to write"
    );
}

/// Before, a number in a ConfigMap's `data` was stored as sent, and every kube-rs client
/// listing ConfigMaps in that namespace then failed to decode the list.
#[tokio::test]
async fn values_of_the_wrong_type_are_refused_so_typed_clients_can_read_every_object() {
    let s = server().await;
    let ar = ApiResource::erase::<ConfigMap>(&());
    let dynamic_api: Api<DynamicObject> = Api::namespaced_with(s.client(), "default", &ar);
    let numbers = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ports"},
        "data": {"port": 8080}});
    let refused = dynamic_api
        .create(&PostParams::default(), &dynamic(numbers))
        .await
        .expect_err("refused");
    let kube::Error::Api(status) = refused else {
        panic!("an API error: {refused:?}");
    };
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        status.message,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal \
         number into Go struct field ConfigMap.data of type string"
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "ok"}})).unwrap(),
        )
        .await
        .expect("created");
    let wrong = merge_patch(&configmaps, "ok", json!({"data": {"enabled": true}})).await;
    assert_eq!(api_code(wrong).0, 400);
    let listed = configmaps
        .list(&Default::default())
        .await
        .expect("every ConfigMap decodes");
    assert!(listed.items.iter().all(|c| c.data.is_none()));

    // A Deployment's replicas as a string, sent by a dynamic client's patch.
    let deployments: Api<Deployment> = Api::namespaced(s.client(), "default");
    let mut valid = deployment("d");
    valid["spec"].as_object_mut().unwrap().remove("replica");
    assert_eq!(
        raw(&s, "POST", DEPLOYMENTS, JSON, valid.to_string())
            .await
            .status,
        201
    );
    let replicas = merge_patch(&deployments, "d", json!({"spec": {"replicas": "3"}})).await;
    let Err(kube::Error::Api(status)) = replicas else {
        panic!("refused: {replicas:?}");
    };
    assert_eq!(
        status.message,
        "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal \
         string into Go struct field DeploymentSpec.spec.replicas of type int32"
    );
    let stored = get_existing(&deployments, "d").await;
    assert_eq!(stored.spec.and_then(|s| s.replicas), Some(1));
}

#[tokio::test]
async fn secret_data_must_be_base64() {
    let s = server().await;
    let secrets: Api<Secret> = Api::namespaced(s.client(), "default");
    let ar = ApiResource::erase::<Secret>(&());
    let dynamic_api: Api<DynamicObject> = Api::namespaced_with(s.client(), "default", &ar);
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"password": "hunter2"}});
    let refused = dynamic_api
        .create(&PostParams::default(), &dynamic(bad))
        .await;
    let Err(kube::Error::Api(status)) = refused else {
        panic!("refused: {refused:?}");
    };
    assert_eq!(
        status.message,
        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 4"
    );
    let good = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"}});
    dynamic_api
        .create(&PostParams::default(), &dynamic(good))
        .await
        .expect("created");
    let stored = get_existing(&secrets, "s").await;
    let data = stored.data.expect("data");
    assert_eq!(data["password"].0, b"hunter2");
    assert_eq!(data["user"].0, b"admin");
}

/// What a kube-rs operator meets on a cluster: the empty lists and maps it sets read back
/// absent, because kube-apiserver stores what Go encodes, and `omitempty` fields that are
/// empty are not encoded. A reconciler comparing its desired object with what it reads
/// must expect that here too.
#[tokio::test]
async fn empty_optional_lists_and_maps_read_back_absent() {
    let s = server().await;
    let deployments: Api<Deployment> = Api::namespaced(s.client(), "default");
    let desired: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {}, "annotations": {"keep": "me"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "web", "image": "nginx", "ports": [], "env": [],
                        "securityContext": {"privileged": false}}],
                    "volumes": [], "nodeSelector": {}
                }
            }
        }
    }))
    .expect("a Deployment");
    let stored = deployments
        .create(&PostParams::default(), &desired)
        .await
        .expect("created");
    assert_eq!(stored.metadata.labels, None);
    assert_eq!(stored.metadata.annotations.map(|a| a.len()), Some(1));
    let template = stored.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(template.volumes, None);
    assert_eq!(template.node_selector, None);
    let container = &template.containers[0];
    assert_eq!((&container.ports, &container.env), (&None, &None));
    // A pointer field keeps its zero value.
    let privileged = container
        .security_context
        .as_ref()
        .and_then(|c| c.privileged);
    assert_eq!(privileged, Some(false));
}
