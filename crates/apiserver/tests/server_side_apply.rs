//! Server-side apply through kube-rs `Patch::Apply`: field removal, conflicts between
//! managers, force, shared ownership, list-map merges of a CRD, and `managedFields` as
//! kube-apiserver shows them.

mod common;

use common::{api_code, default_configmaps, example_crd, server};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn config_map(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": data})
}

async fn apply(api: &Api<ConfigMap>, manager: &str, data: Value) -> Result<ConfigMap, kube::Error> {
    api.patch(
        "cm",
        &PatchParams::apply(manager),
        &Patch::Apply(config_map(data)),
    )
    .await
}

/// [`apply`] that must succeed.
async fn applied(api: &Api<ConfigMap>, manager: &str, data: Value) -> ConfigMap {
    apply(api, manager, data).await.expect("the apply succeeds")
}

fn managers(cm: &ConfigMap) -> Vec<(String, String, Value)> {
    cm.metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|e| {
            let fields = e.fields_v1.as_ref().map_or(Value::Null, |f| f.0.clone());
            (
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default(),
                fields,
            )
        })
        .collect()
}

#[tokio::test]
async fn a_field_dropped_from_the_configuration_is_removed() {
    let (_s, api) = default_configmaps().await;
    applied(&api, "app", json!({"a": "1", "b": "2"})).await;
    let second = applied(&api, "app", json!({"a": "1"})).await;
    let data = second.data.unwrap();
    assert_eq!(data.get("a").map(String::as_str), Some("1"));
    assert!(
        !data.contains_key("b"),
        "b was given up and owned by nobody else"
    );

    let raw = serde_json::to_value(api.get("cm").await.unwrap()).unwrap();
    let entries = &raw["metadata"]["managedFields"];
    assert_eq!(entries.as_array().map(Vec::len), Some(1));
    let entry = &entries[0];
    assert_eq!(entry["manager"], "app");
    assert_eq!(entry["operation"], "Apply");
    assert_eq!(entry["apiVersion"], "v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert_eq!(entry["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    assert!(entry["time"].as_str().is_some_and(|t| t.ends_with('Z')));
}

#[tokio::test]
async fn another_managers_field_conflicts_until_forced() {
    let (_s, api) = default_configmaps().await;
    applied(&api, "one", json!({"a": "1"})).await;
    let err = apply(&api, "two", json!({"a": "2"})).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected a Status, got {err:?}");
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"one\": .data.a"
    );
    let raw: Value = serde_json::to_value(&status).unwrap();
    assert_eq!(
        raw["details"]["causes"],
        // StatusCause's `type` is `reason` on the wire.
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"one\"", "field": ".data.a"}])
    );
    assert_eq!(api.get("cm").await.unwrap().data.unwrap()["a"], "1");

    let forced = api
        .patch(
            "cm",
            &PatchParams::apply("two").force(),
            &Patch::Apply(config_map(json!({"a": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "2");
    assert_eq!(
        managers(&forced),
        vec![("two".into(), "Apply".into(), json!({"f:data": {"f:a": {}}}))]
    );
}

#[tokio::test]
async fn a_field_owned_by_two_appliers_survives_one_leaving() {
    let (_s, api) = default_configmaps().await;
    applied(&api, "one", json!({"shared": "x", "mine": "y"})).await;
    applied(&api, "two", json!({"shared": "x"})).await;
    let after = applied(&api, "one", json!({"mine": "y"})).await;
    assert_eq!(after.data.unwrap()["shared"], "x");
    let after = applied(&api, "two", json!({})).await;
    let data = after.data.unwrap_or_default();
    assert!(!data.contains_key("shared"), "the last owner let it go");
    assert_eq!(data["mine"], "y");
}

#[tokio::test]
async fn updates_are_recorded_and_conflict_with_an_apply() {
    let (_s, api) = default_configmaps().await;
    let created: ConfigMap = serde_json::from_value(config_map(json!({"a": "1"}))).unwrap();
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..PostParams::default()
    };
    let created = api.create(&pp, &created).await.unwrap();
    assert_eq!(
        managers(&created),
        vec![(
            "creator".into(),
            "Update".into(),
            json!({"f:data": {".": {}, "f:a": {}}})
        )]
    );
    let err = apply(&api, "app", json!({"a": "2"})).await;
    let (code, _) = api_code(err);
    assert_eq!(code, 409);

    // An unchanged write keeps the resourceVersion and the entries as they were.
    let rv = created.metadata.resource_version.clone();
    let same = api.replace("cm", &pp, &created).await.unwrap();
    assert_eq!(same.metadata.resource_version, rv);
    assert_eq!(
        same.metadata.managed_fields,
        created.metadata.managed_fields
    );
}

#[tokio::test]
async fn a_dry_run_apply_creates_nothing() {
    let (_s, api) = default_configmaps().await;
    let dry = PatchParams::apply("app").dry_run();
    let preview = api
        .patch("cm", &dry, &Patch::Apply(config_map(json!({"a": "1"}))))
        .await
        .unwrap();
    assert_eq!(managers(&preview)[0].1, "Apply");
    let (code, _) = api_code(api.get("cm").await);
    assert_eq!(code, 404, "a dry run creates nothing");
}

/// The first `metadata.managedFields` entry of `object` that `wanted` picks (as JSON).
fn managed_fields_entry(object: &impl serde::Serialize, wanted: impl Fn(&Value) -> bool) -> Value {
    let object = serde_json::to_value(object).expect("JSON");
    let entries = object["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields");
    let entry = entries.iter().find(|e| wanted(e));
    entry
        .cloned()
        .unwrap_or_else(|| panic!("no such entry in {entries:?}"))
}

fn ports_crd() -> CustomResourceDefinition {
    let names = json!({"plural": "gates", "singular": "gate", "kind": "Gate"});
    let schema = json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "port": {"type": "integer"}
            }}
        }}}}
    });
    serde_json::from_value(example_crd("Namespaced", names, schema)).expect("a CRD")
}

async fn gates(client: Client) -> Api<DynamicObject> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &ports_crd())
        .await
        .unwrap();
    let resource = ApiResource {
        group: "example.steady.dev".into(),
        version: "v1".into(),
        api_version: "example.steady.dev/v1".into(),
        kind: "Gate".into(),
        plural: "gates".into(),
    };
    Api::namespaced_with(client, "default", &resource)
}

fn gate(ports: Value) -> Value {
    json!({"apiVersion": "example.steady.dev/v1", "kind": "Gate", "metadata": {"name": "g"}, "spec": {"ports": ports}})
}

#[tokio::test]
async fn crd_list_maps_merge_by_key_between_managers() {
    let s = server().await;
    let api = gates(s.client()).await;
    let apply = |manager: &'static str, ports: Value| {
        let api = api.clone();
        async move {
            api.patch(
                "g",
                &PatchParams::apply(manager),
                &Patch::Apply(gate(ports)),
            )
            .await
        }
    };
    apply("web", json!([{"name": "http", "port": 80}]))
        .await
        .unwrap();
    let both = apply("admin", json!([{"name": "ssh", "port": 22}]))
        .await
        .unwrap();
    assert_eq!(
        both.data["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "ssh", "port": 22}])
    );
    let web = managed_fields_entry(&both, |e| e["manager"] == "web");
    assert_eq!(
        web["fieldsV1"],
        json!({"f:spec": {"f:ports": {"k:{\"name\":\"http\"}": {".": {}, "f:name": {}, "f:port": {}}}}})
    );
    let (code, _) = api_code(apply("admin", json!([{"name": "http", "port": 8080}])).await);
    assert_eq!(code, 409);
    let left = apply("web", json!([])).await.unwrap();
    assert_eq!(
        left.data["spec"]["ports"],
        json!([{"name": "ssh", "port": 22}])
    );
}

#[tokio::test]
async fn a_status_write_is_recorded_for_the_status_subresource() {
    let s = server().await;
    let api: Api<Pod> = Api::namespaced(s.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"message": "hello"}});
    let patched = api
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let status_entry = managed_fields_entry(&patched, |e| e["subresource"] == "status");
    assert_eq!(status_entry["operation"], "Update");
    assert_eq!(status_entry["fieldsV1"]["f:status"]["f:message"], json!({}));
}

/// Past ten `Update` managers, kube-apiserver merges the oldest into `ancient-changes`:
/// a client that patches under a new manager name each time cannot grow an object's
/// `managedFields` without bound, and every field stays owned.
#[tokio::test]
async fn update_managers_past_ten_merge_into_ancient_changes() {
    let (_s, api) = default_configmaps().await;
    applied(&api, "applier", json!({"applied": "1"})).await;
    let mut last = None;
    for i in 0..14 {
        let params = PatchParams {
            field_manager: Some(format!("writer-{i:02}")),
            ..PatchParams::default()
        };
        let patch = json!({"data": {format!("k{i:02}"): "v"}});
        last = Some(
            api.patch("cm", &params, &Patch::Merge(&patch))
                .await
                .unwrap(),
        );
    }
    let entries = managers(&last.unwrap());
    let updates: Vec<&(String, String, Value)> =
        entries.iter().filter(|(_, op, _)| op == "Update").collect();
    assert_eq!(updates.len(), 10, "{entries:?}");
    assert!(
        updates.iter().any(|(m, _, _)| m == "ancient-changes"),
        "{entries:?}"
    );
    assert!(
        entries
            .iter()
            .any(|(m, op, _)| m == "applier" && op == "Apply")
    );
    let owned: usize = updates
        .iter()
        .map(|(_, _, fields)| fields["f:data"].as_object().map_or(0, |d| d.len()))
        .sum();
    assert_eq!(
        owned, 14,
        "every key stays owned by one updater: {entries:?}"
    );
}
