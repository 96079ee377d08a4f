//! A CustomResourceDefinition created through `Api<CustomResourceDefinition>`, then its
//! custom resources through `Api<DynamicObject>`: defaults, pruning, validation, every
//! write verb, the status and scale subresources, generation rules, and removal of the
//! kind when the CRD is deleted.

mod common;

use common::{
    api_code, clear_finalizers, eventually, eventually_gone, example_crd, list_count, merge_patch,
    merge_patch_subresource, server,
};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use serde_json::{Value, json};
use steady_apiserver::ApiServer;

pub fn widget_crd() -> CustomResourceDefinition {
    let names =
        json!({"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]});
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "string", "maxLength": 10},
                    "replicas": {"type": "integer", "minimum": 0, "default": 1},
                    "color": {"type": "string", "enum": ["red", "green", "blue"], "default": "red"},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "phase": {"type": "string"},
                    "selector": {"type": "string"},
                },
            },
        },
    });
    let mut crd = example_crd("Namespaced", names, schema);
    crd["spec"]["versions"][0]["subresources"] = json!({
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    });
    serde_json::from_value(crd).expect("a CRD")
}

pub fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.steady.dev", "v1", "Widget"),
        "widgets",
    )
}

pub async fn install_widgets(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let conditions = crd.status.unwrap().conditions.unwrap_or_default();
    for wanted in ["Established", "NamesAccepted"] {
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == wanted && c.status == "True"),
            "{wanted} condition: {conditions:?}"
        );
    }
}

fn widget(name: &str, body: Value) -> DynamicObject {
    let mut obj = body;
    obj["apiVersion"] = json!("example.steady.dev/v1");
    obj["kind"] = json!("Widget");
    obj["metadata"] = json!({"name": name});
    serde_json::from_value(obj).unwrap()
}

/// Create the Widget `name` with `body` (its spec, status or other fields).
async fn create_widget(
    api: &Api<DynamicObject>,
    name: &str,
    body: Value,
) -> kube::Result<DynamicObject> {
    api.create(&PostParams::default(), &widget(name, body))
        .await
}

fn generation(o: &DynamicObject) -> i64 {
    o.metadata.generation.expect("generation")
}

fn rv(o: &DynamicObject) -> u64 {
    o.metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

async fn setup() -> (ApiServer, Api<DynamicObject>) {
    let s = server().await;
    let client = s.client();
    install_widgets(&client).await;
    let api = Api::namespaced_with(client, "default", &widget_resource());
    (s, api)
}

#[tokio::test]
async fn create_defaults_prunes_and_validates() {
    let (s, api) = setup().await;
    let created = create_widget(
        &api,
        "w1",
        json!({
            "spec": {"size": "s", "bogus": 1, "extra": {"free": {"form": true}}},
            "unknownTop": 2,
            "status": {"phase": "ignored"},
        }),
    )
    .await
    .unwrap();
    assert_eq!(generation(&created), 1);
    assert_eq!(created.data["spec"]["replicas"], 1, "default applied");
    assert_eq!(created.data["spec"]["color"], "red", "default applied");
    assert!(created.data["spec"].get("bogus").is_none(), "pruned");
    assert!(created.data.get("unknownTop").is_none(), "pruned");
    assert_eq!(
        created.data["spec"]["extra"],
        json!({"free": {"form": true}}),
        "kept below x-kubernetes-preserve-unknown-fields"
    );
    assert!(
        created.data.get("status").is_none(),
        "status is not set on create"
    );

    // Invalid objects are 422 Invalid and write nothing.
    let revision = s.store().revision();
    for bad in [
        json!({"spec": {"size": "s", "color": "purple"}}),
        json!({"spec": {"size": "s", "replicas": -1}}),
        json!({"spec": {"size": "much-too-long-for-it"}}),
        json!({"spec": {"replicas": 2}}),
        json!({"spec": {"size": 5}}),
    ] {
        let (code, reason) = api_code(create_widget(&api, "bad", bad.clone()).await);
        assert_eq!((code, reason.as_str()), (422, "Invalid"), "{bad}");
    }
    assert_eq!(s.store().revision(), revision);
    assert_eq!(api_code(api.get("bad").await).0, 404);
    assert_eq!(
        api_code(create_widget(&api, "w1", json!({"spec": {"size": "s"}})).await),
        (409, "AlreadyExists".to_string())
    );
}

#[tokio::test]
async fn get_list_replace_patch_delete() {
    let (s, api) = setup().await;
    for (name, color) in [("a", "red"), ("b", "green"), ("c", "blue")] {
        let mut w = widget(name, json!({"spec": {"size": "m", "color": color}}));
        w.metadata.labels = Some([("color".to_string(), color.to_string())].into());
        api.create(&PostParams::default(), &w).await.unwrap();
    }
    assert_eq!(list_count(&api, &ListParams::default()).await, 3);
    assert_eq!(
        list_count(&api, &ListParams::default().labels("color!=red")).await,
        2
    );
    assert_eq!(
        list_count(&api, &ListParams::default().fields("metadata.name=b")).await,
        1
    );
    let page = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert!(page.metadata.continue_.is_some_and(|c| !c.is_empty()));

    let a = api.get("a").await.unwrap();
    assert_eq!(a.data["spec"]["color"], "red");

    // Replace: spec change bumps generation and resourceVersion.
    let mut changed = a.clone();
    changed.data["spec"]["size"] = json!("l");
    let replaced = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(generation(&replaced), 2);
    assert!(rv(&replaced) > rv(&a));
    // Stale replace: 409.
    assert_eq!(
        api_code(api.replace("a", &PostParams::default(), &a).await),
        (409, "Conflict".to_string())
    );
    // Invalid replace: 422, nothing written.
    let revision = s.store().revision();
    let mut invalid = replaced.clone();
    invalid.data["spec"]["color"] = json!("black");
    assert_eq!(
        api_code(api.replace("a", &PostParams::default(), &invalid).await).0,
        422
    );
    assert_eq!(s.store().revision(), revision);

    // Merge patch.
    let merged = merge_patch(&api, "a", json!({"spec": {"replicas": 4}}))
        .await
        .unwrap();
    assert_eq!(merged.data["spec"]["replicas"], 4);
    assert_eq!(merged.data["spec"]["size"], "l");
    assert_eq!(generation(&merged), 3);
    // Removing a defaulted field brings the default back.
    let defaulted = merge_patch(&api, "a", json!({"spec": {"color": null}}))
        .await
        .unwrap();
    assert_eq!(defaulted.data["spec"]["color"], "red");
    // JSON patch.
    let jp = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/size", "value": "xl"},
    ]))
    .unwrap();
    let patched = api
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["size"], "xl");
    // A patch that makes the object invalid: 422.
    assert_eq!(
        api_code(merge_patch(&api, "a", json!({"spec": {"replicas": -3}})).await).0,
        422
    );
    // Strategic merge on a custom resource: 415.
    assert_eq!(
        api_code(
            api.patch(
                "a",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"replicas": 2}}))
            )
            .await
        )
        .0,
        415
    );
    // Server-side apply on a custom resource.
    let applied = api
        .patch(
            "d",
            &PatchParams::apply("widget-manager"),
            &Patch::Apply(json!({
                "apiVersion": "example.steady.dev/v1", "kind": "Widget",
                "metadata": {"name": "d"},
                "spec": {"size": "s"},
            })),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["spec"]["replicas"], 1);

    // Delete: gone at once (a Status for custom resources).
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_code(api.get("a").await).0, 404);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let (_s, api) = setup().await;
    let created = create_widget(&api, "w", json!({"spec": {"size": "s"}}))
        .await
        .unwrap();
    assert_eq!(generation(&created), 1);

    // patch_status changes only status, and not generation.
    let with_status: DynamicObject = merge_patch_subresource(
        &api,
        "status",
        "w",
        json!({
            "status": {"replicas": 3, "phase": "Ready", "selector": "app=w"},
            "spec": {"size": "ignored"},
            "metadata": {"labels": {"ignored": "yes"}},
        }),
    )
    .await
    .unwrap();
    assert_eq!(with_status.data["status"]["phase"], "Ready");
    assert_eq!(with_status.data["spec"]["size"], "s");
    assert!(
        with_status
            .metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key("ignored"))
    );
    assert_eq!(generation(&with_status), 1);
    assert!(rv(&with_status) > rv(&created));

    // The main endpoint ignores status.
    let main = merge_patch(
        &api,
        "w",
        json!({"status": {"phase": "Hacked"}, "spec": {"size": "m"}}),
    )
    .await
    .unwrap();
    assert_eq!(main.data["status"]["phase"], "Ready");
    assert_eq!(main.data["spec"]["size"], "m");
    assert_eq!(generation(&main), 2);

    // A status-only change through the main endpoint is a no-op.
    let noop = merge_patch(&api, "w", json!({"status": {"phase": "Nope"}}))
        .await
        .unwrap();
    assert_eq!(rv(&noop), rv(&main));

    // Metadata-only change: no generation bump.
    let labelled = merge_patch(&api, "w", json!({"metadata": {"labels": {"l": "1"}}}))
        .await
        .unwrap();
    assert_eq!(generation(&labelled), 2);
    assert!(rv(&labelled) > rv(&main));

    // replace_status with a full object.
    let mut full = labelled.clone();
    full.data["status"]["phase"] = json!("Done");
    full.data["spec"]["size"] = json!("ignored");
    let replaced = api
        .replace_status("w", &PostParams::default(), &full)
        .await
        .unwrap();
    assert_eq!(replaced.data["status"]["phase"], "Done");
    assert_eq!(replaced.data["spec"]["size"], "m");
    assert_eq!(generation(&replaced), 2);

    // Invalid status: 422.
    let invalid = json!({"status": {"replicas": "three"}});
    let answer = merge_patch_subresource::<DynamicObject, _>(&api, "status", "w", invalid).await;
    assert_eq!(api_code(answer).0, 422);
}

#[tokio::test]
async fn scale_subresource() {
    let (_s, api) = setup().await;
    create_widget(&api, "w", json!({"spec": {"size": "s", "replicas": 2}}))
        .await
        .unwrap();
    merge_patch_subresource::<DynamicObject, _>(
        &api,
        "status",
        "w",
        json!({"status": {"replicas": 1, "selector": "app=w"}}),
    )
    .await
    .unwrap();

    let scale = api.get_scale("w").await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(2));
    let status = scale.status.as_ref().unwrap();
    assert_eq!(status.replicas, 1);
    assert_eq!(status.selector.as_deref(), Some("app=w"));
    assert_eq!(scale.metadata.name.as_deref(), Some("w"));

    let scaled: Scale =
        merge_patch_subresource(&api, "scale", "w", json!({"spec": {"replicas": 5}}))
            .await
            .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(5));
    let w = api.get("w").await.unwrap();
    assert_eq!(w.data["spec"]["replicas"], 5);
    assert_eq!(generation(&w), 2);
    assert_eq!(w.data["status"]["replicas"], 1);

    // Negative replicas: 422.
    let negative = json!({"spec": {"replicas": -1}});
    let answer = merge_patch_subresource::<Scale, _>(&api, "scale", "w", negative).await;
    assert_eq!(api_code(answer).0, 422);
    assert_eq!(api_code(api.get_scale("missing").await).0, 404);
}

#[tokio::test(start_paused = true)]
async fn deleting_the_crd_removes_its_objects_and_the_kind() {
    let (s, api) = setup().await;
    for name in ["x", "y"] {
        create_widget(&api, name, json!({"spec": {"size": "s"}}))
            .await
            .unwrap();
    }
    // One with a finalizer of its own: the CRD waits for it.
    let mut held = widget("held", json!({"spec": {"size": "s"}}));
    held.metadata.finalizers = Some(vec!["example.steady.dev/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();

    let crds: Api<CustomResourceDefinition> = Api::all(s.client());
    crds.delete("widgets.example.steady.dev", &DeleteParams::default())
        .await
        .unwrap();
    eventually("custom resources without finalizers deleted", || async {
        let list = api.list(&ListParams::default()).await.ok()?;
        (list.items.len() == 1).then_some(())
    })
    .await;
    let held = api.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let crd = crds.get("widgets.example.steady.dev").await.unwrap();
    assert!(crd.metadata.deletion_timestamp.is_some(), "CRD waits");

    clear_finalizers(&api, "held").await;
    eventually_gone(&crds, "widgets.example.steady.dev").await;
    // The kind is not served any more.
    assert_eq!(api_code(api.list(&ListParams::default()).await).0, 404);
    assert_eq!(api_code(api.get("x").await).0, 404);
    assert_eq!(
        api_code(create_widget(&api, "z", json!({"spec": {"size": "s"}})).await).0,
        404
    );
}

/// The refusal of a write through kube-rs: its code and message.
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The refusal of the CRD `crd` (JSON, as a user writes it).
async fn refused_crd(server: &ApiServer, crd: Value) -> (u16, String) {
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("a CRD");
    refusal(
        Api::<CustomResourceDefinition>::all(server.client())
            .create(&PostParams::default(), &crd)
            .await,
    )
}

/// Rules may call kube's CEL libraries (quantities, URLs, regular expressions, lists, IPs):
/// an object a cluster admits is admitted, one it refuses is refused with the rule's message.
#[tokio::test]
async fn rules_call_kubes_cel_libraries() {
    let server = server().await;
    let schema = json!({"type": "object", "properties": {"spec": {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "quantity(self.memory).isLessThan(quantity('1Gi'))", "message": "memory below 1Gi"},
        {"rule": "isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https'", "message": "an https endpoint"},
        {"rule": "self.ports.isSorted() && self.ports.max() < 10000", "message": "sorted ports below 10000"},
        {"rule": "self.allowed.all(c, isCIDR(c) && cidr(c).prefixLength() >= 8)", "message": "CIDRs of at least /8"},
        {"rule": "self.endpoint.find('[0-9]+$') != ''", "message": "a port in the endpoint"},
    ],
    "properties": {
        "memory": {"type": "string", "maxLength": 16},
        "endpoint": {"type": "string", "maxLength": 256},
        "ports": {"type": "array", "maxItems": 16, "items": {"type": "integer"}},
        "allowed": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 43}},
    }}}});
    common::install_widgets(&server, schema).await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(server.client(), "default", &widget_resource());
    let spec = |memory: &str, endpoint: &str| json!({"spec": {"memory": memory, "endpoint": endpoint, "ports": [80, 443], "allowed": ["10.0.0.0/8"]}});
    create_widget(
        &widgets,
        "fits",
        spec("512Mi", "https://cache.example.com:6379"),
    )
    .await
    .expect("what kube admits");
    let (code, message) =
        refusal(create_widget(&widgets, "large", spec("2Gi", "http://cache.example.com")).await);
    assert_eq!(code, 422);
    assert_eq!(
        message,
        "Widget.example.steady.dev \"large\" is invalid: [spec: Invalid value: \"object\": memory below 1Gi, spec: Invalid value: \"object\": an https endpoint, spec: Invalid value: \"object\": a port in the endpoint]"
    );
}

#[tokio::test]
async fn validation_rules_hold_creates_and_updates_as_kube_does() {
    let server = server().await;
    let schema = json!({"type": "object", "properties": {"spec": {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.minReplicas <= self.maxReplicas",
         "message": "minReplicas must not exceed maxReplicas"},
        {"rule": "self.storageClass == oldSelf.storageClass",
         "message": "storageClass is immutable"},
    ],
    "properties": {
        "minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
        "storageClass": {"type": "string"},
    }}}});
    common::install_widgets(&server, schema).await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(server.client(), "default", &widget_resource());
    let spec = |min: i64, class: &str| json!({"spec": {"minReplicas": min, "maxReplicas": 3, "storageClass": class}});
    assert_eq!(
        refusal(create_widget(&widgets, "w", spec(5, "fast")).await),
        (
            422,
            "Widget.example.steady.dev \"w\" is invalid: spec: Invalid value: \"object\": minReplicas must not exceed maxReplicas".to_string()
        )
    );
    create_widget(&widgets, "w", spec(1, "fast"))
        .await
        .expect("a valid widget is created");
    let change_class = Patch::Merge(json!({"spec": {"storageClass": "slow"}}));
    let (code, message) = refusal(
        widgets
            .patch("w", &PatchParams::default(), &change_class)
            .await,
    );
    assert_eq!(code, 422);
    assert!(
        message.ends_with("spec: Invalid value: \"object\": storageClass is immutable"),
        "{message}"
    );
    let scale = Patch::Merge(json!({"spec": {"minReplicas": 2}}));
    widgets
        .patch("w", &PatchParams::default(), &scale)
        .await
        .expect("a change the rules allow");

    // A rule that does not compile keeps its CRD out.
    let broken = common::example_crd(
        "Namespaced",
        json!({"plural": "gadgets", "kind": "Gadget"}),
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.size >"}]}),
    );
    let (code, message) = refused_crd(&server, broken).await;
    assert_eq!(code, 422);
    assert!(
        message.contains("spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.size >\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed"),
        "{message}"
    );

    // Nor does one that reads a field its schema does not declare: kube's type check
    // (a marker at the root naming the spec's fields, as users first write it).
    let misplaced = common::example_crd(
        "Namespaced",
        json!({"plural": "servers", "kind": "Server"}),
        json!({"type": "object",
            "x-kubernetes-validations": [{"rule": "self.type != 'stdio' || has(self.command)"}],
            "properties": {"spec": {"type": "object", "properties": {
                "type": {"type": "string"}, "command": {"type": "string"}}}}}),
    );
    let (code, message) = refused_crd(&server, misplaced).await;
    assert_eq!(code, 422);
    assert!(
        message.contains("compilation failed: ERROR: <input>:1:5: undefined field 'type'")
            && message.contains("ERROR: <input>:1:28: undefined field 'command'"),
        "{message}"
    );
}

/// kube estimates what a rule can cost when its CRD is written: a duplicate check over a
/// list whose strings have no `maxLength` is refused (openshift/api#1826, "3.1x"), and
/// accepted once they have one. A schema every version shares is named `spec.validation`,
/// as kube names it; a version of its own, by its index.
#[tokio::test]
async fn rules_that_can_cost_too_much_keep_their_crd_out() {
    let server = server().await;
    let spec = |max_length: Option<u64>| {
        let mut item = json!({"type": "string"});
        if let Some(max_length) = max_length {
            item["maxLength"] = json!(max_length);
        }
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "eips": {"type": "array", "maxItems": 10, "items": item,
                "x-kubernetes-validations": [{
                    "rule": "self.all(x, self.exists_one(y, x == y))",
                    "message": "eips cannot contain duplicates"}]}}}}})
    };
    let names = json!({"plural": "balancers", "kind": "Balancer"});
    let (code, message) = refused_crd(
        &server,
        common::example_crd("Namespaced", names.clone(), spec(None)),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        message.ends_with("spec.validation.openAPIV3Schema.properties[spec].properties[eips].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 3.1x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
        "{message}"
    );

    let mut two_versions = common::example_crd("Namespaced", names.clone(), spec(None));
    let mut v2 = two_versions["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    v2["schema"]["openAPIV3Schema"] = spec(Some(63));
    two_versions["spec"]["versions"]
        .as_array_mut()
        .expect("versions")
        .push(v2);
    let (_, message) = refused_crd(&server, two_versions).await;
    assert!(
        message.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec]")
            && !message.contains("spec.versions[1]"),
        "{message}"
    );

    common::install_crd(
        &server,
        common::example_crd("Namespaced", names, spec(Some(63))),
    )
    .await;
}

#[tokio::test]
async fn selectable_fields_serve_field_selectors_as_kube_does() {
    let server = server().await;
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
    "properties": {
        "color": {"type": "string"}, "replicas": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    }}}});
    let mut crd = example_crd(
        "Namespaced",
        json!({"plural": "widgets", "kind": "Widget"}),
        schema,
    );
    crd["spec"]["versions"][0]["selectableFields"] =
        json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.replicas"}]);
    common::install_crd(&server, crd.clone()).await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(server.client(), "default", &widget_resource());
    for (name, color, replicas) in [("a", "red", 1), ("b", "blue", 2), ("c", "red", 2)] {
        let spec = json!({"spec": {"color": color, "replicas": replicas}});
        create_widget(&widgets, name, spec).await.expect("created");
    }
    let names = |selector: &'static str| {
        let widgets = widgets.clone();
        async move {
            let listed = widgets
                .list(&ListParams::default().fields(selector))
                .await
                .expect("listed");
            listed
                .items
                .into_iter()
                .map(|w| w.metadata.name.unwrap_or_default())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("spec.color=red").await, ["a", "c"]);
    assert_eq!(names("spec.color=red,spec.replicas=2").await, ["c"]);
    assert_eq!(names("spec.color!=red").await, ["b"]);
    let (code, message) = refusal(
        widgets
            .list(&ListParams::default().fields("spec.tags=x"))
            .await,
    );
    assert_eq!(
        (code, message.as_str()),
        (400, "field label not supported: spec.tags")
    );

    // What kube refuses of a CRD's selectable fields.
    let mut bad = crd;
    bad["metadata"]["name"] = json!("gadgets.example.steady.dev");
    bad["spec"]["names"] = json!({"plural": "gadgets", "kind": "Gadget"});
    bad["spec"]["versions"][0]["selectableFields"] = json!([
        {"jsonPath": ".spec.tags"}, {"jsonPath": ".spec.nope"},
        {"jsonPath": ".metadata.name"}, {"jsonPath": ".spec.color"}, {"jsonPath": ".spec.color"}]);
    let (code, message) = refused_crd(&server, bad).await;
    assert_eq!(code, 422);
    for problem in [
        "spec.versions[0].selectableFields[0].jsonPath: Invalid value: \".spec.tags\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
        "spec.versions[0].selectableFields[1].jsonPath: Invalid value: \".spec.nope\": is an invalid path: does not refer to a valid field",
        "spec.versions[0].selectableFields[2].jsonPath: Invalid value: \".metadata.name\": must not point to fields in metadata",
        "spec.versions[0].selectableFields[4].jsonPath: Duplicate value: \".spec.color\"",
    ] {
        assert!(message.contains(problem), "{problem} in {message}");
    }
}

/// The schema mistakes kube refuses at a CRD's create that kubebuilder markers make
/// easy: a `+listMapKey` naming an optional field, and an immutability rule
/// (`self == oldSelf`) on a field inside the items of an atomic list.
#[tokio::test]
async fn schemas_kube_refuses_keep_their_crd_out() {
    let server = server().await;
    let names = json!({"plural": "routers", "kind": "Router"});
    let ports = |required: bool, rule: &str| {
        let mut item = json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 15}, "port": {"type": "integer"}}});
        if required {
            item["required"] = json!(["name"]);
        }
        item["properties"]["name"]["x-kubernetes-validations"] =
            json!([{"rule": rule, "message": "name is immutable"}]);
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"], "items": item},
            "hosts": {"type": "array", "items": item}}}}})
    };
    let spec = "spec.validation.openAPIV3Schema.properties[spec].properties";
    let (code, message) = refused_crd(
        &server,
        common::example_crd("Namespaced", names.clone(), ports(false, "size(self) > 0")),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        message.contains(&format!("{spec}[ports].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property")),
        "{message}"
    );
    let (code, message) = refused_crd(
        &server,
        common::example_crd("Namespaced", names.clone(), ports(true, "self == oldSelf")),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        message.ends_with(&format!("{spec}[hosts].items.properties[name].x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {spec}[hosts]")),
        "{message}"
    );
    // Under a map list the old item is found by its key: the rule is kept.
    let mut fine = ports(true, "self == oldSelf");
    fine["properties"]["spec"]["properties"]
        .as_object_mut()
        .expect("spec")
        .remove("hosts");
    common::install_crd(&server, common::example_crd("Namespaced", names, fine)).await;
}

/// A printer column of a type kube does not know, and a scale subresource reading its
/// replicas from the status, are refused at the CRD's create as kube refuses them (what
/// every version shares named at the top of the spec, as kube names it).
#[tokio::test]
async fn printer_columns_and_scale_paths_are_checked_as_kube_checks_them() {
    let server = server().await;
    let mut crd = common::example_crd(
        "Namespaced",
        json!({"plural": "pools", "kind": "Pool"}),
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
        {"name": "Replicas", "type": "int", "jsonPath": ".spec.replicas"},
        {"name": "Age", "type": "date", "jsonPath": "metadata.creationTimestamp"}]);
    crd["spec"]["versions"][0]["subresources"] = json!({"scale": {"specReplicasPath": ".status.replicas", "statusReplicasPath": ".status.replicas"}});
    let (code, message) = refused_crd(&server, crd.clone()).await;
    assert_eq!(code, 422);
    for expected in [
        "spec.subresources.scale.specReplicasPath: Invalid value: \".status.replicas\": should be a json path under .spec",
        "spec.additionalPrinterColumns[0].type: Invalid value: \"int\": must be one of boolean,date,integer,number,string",
        "spec.additionalPrinterColumns[1].JSONPath: Invalid value: \"metadata.creationTimestamp\": must be a simple json path starting with .",
    ] {
        assert!(message.contains(expected), "{expected} in {message}");
    }
    crd["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = json!("integer");
    crd["spec"]["versions"][0]["additionalPrinterColumns"][1]["jsonPath"] =
        json!(".metadata.creationTimestamp");
    crd["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] =
        json!(".spec.replicas");
    common::install_crd(&server, crd).await;
}

/// A CRD's names and versions are held to kube's rules: DNS-1035 labels (kinds may mix
/// case), distinct kind and list kind, unique versions, each with a schema.
#[tokio::test]
async fn names_and_versions_are_checked_as_kube_checks_them() {
    let server = server().await;
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut crd = common::example_crd(
        "Namespaced",
        json!({"plural": "gizmos", "kind": "Giz_mo", "shortNames": ["GZ"], "listKind": "Giz_mo"}),
        schema.clone(),
    );
    let mut second = crd["spec"]["versions"][0].clone();
    second["name"] = json!("V2");
    second["storage"] = json!(false);
    second.as_object_mut().expect("version").remove("schema");
    crd["spec"]["versions"]
        .as_array_mut()
        .expect("versions")
        .push(second);
    let (code, message) = refused_crd(&server, crd).await;
    assert_eq!(code, 422);
    let label = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    for expected in [
        format!(
            "spec.names.kind: Invalid value: \"Giz_mo\": may have mixed case, but should otherwise match: {label}"
        ),
        format!("spec.names.shortNames[0]: Invalid value: \"GZ\": {label}"),
        "spec.names.listKind: Invalid value: \"Giz_mo\": kind and listKind may not be the same"
            .to_string(),
        format!("spec.versions[1].name: Invalid value: \"V2\": {label}"),
        "spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required".to_string(),
    ] {
        assert!(message.contains(&expected), "{expected}\nin {message}");
    }
    let fine = common::example_crd(
        "Namespaced",
        json!({"plural": "gizmos", "kind": "GizMo", "shortNames": ["gz"]}),
        schema,
    );
    common::install_crd(&server, fine).await;
}

/// With the status subresource kube keeps the schema's root to what it can split the
/// status from: an `allOf` there keeps the CRD out; without the subresource it is fine.
#[tokio::test]
async fn a_status_subresource_restricts_the_root_of_the_schema() {
    let server = server().await;
    let schema = json!({"type": "object", "allOf": [{"required": ["spec"]}],
        "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
    let names = json!({"plural": "lamps", "kind": "Lamp"});
    let mut crd = common::example_crd("Namespaced", names.clone(), schema.clone());
    crd["spec"]["versions"][0]["subresources"] = json!({"status": {}});
    let (code, message) = refused_crd(&server, crd).await;
    assert_eq!(code, 422);
    assert!(
        message.ends_with("spec.validation.openAPIV3Schema: Invalid value: only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled"),
        "{message}"
    );
    common::install_crd(&server, common::example_crd("Namespaced", names, schema)).await;
}

/// A property named like a CEL reserved word is `__namespace__` in a rule, as kube
/// escapes it (Gateway API's `parentRefs` rules read `p.__namespace__`): the CRD is
/// accepted and the rule sees the field.
#[tokio::test]
async fn rules_name_reserved_properties_escaped_as_kube_does() {
    let server = server().await;
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"parentRefs": {"type": "array", "maxItems": 32, "items": {
            "type": "object", "required": ["name"], "properties": {
                "name": {"type": "string", "maxLength": 253},
                "namespace": {"type": "string", "maxLength": 63}}},
            "x-kubernetes-validations": [{
                "rule": "self.all(p, !has(p.__namespace__) || p.__namespace__ != 'kube-system')",
                "message": "routes may not attach to kube-system"}]}}}}});
    common::install_widgets(&server, schema).await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(server.client(), "default", &widget_resource());
    let refs =
        |namespace: &str| json!({"spec": {"parentRefs": [{"name": "gw", "namespace": namespace}]}});
    let (code, message) = refusal(create_widget(&widgets, "w", refs("kube-system")).await);
    assert_eq!(code, 422);
    assert!(
        message.ends_with(
            "spec.parentRefs: Invalid value: \"array\": routes may not attach to kube-system"
        ),
        "{message}"
    );
    create_widget(&widgets, "w", refs("apps"))
        .await
        .expect("a reference the rule allows");
}

/// String formats are checked as kube checks them: a `date-time` that is no RFC 3339
/// time is refused with kube's message; a valid one, and any format kube does not know,
/// pass.
#[tokio::test]
async fn string_formats_are_checked_as_kube_checks_them() {
    let server = server().await;
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {
            "at": {"type": "string", "format": "date-time"},
            "address": {"type": "string", "format": "ipv4"},
            "name": {"type": "string", "format": "k8s-short-name"}}}}});
    common::install_widgets(&server, schema).await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(server.client(), "default", &widget_resource());
    let spec = |at: &str, address: &str| json!({"spec": {"at": at, "address": address, "name": "Any Thing"}});
    let (code, message) =
        refusal(create_widget(&widgets, "w", spec("yesterday", "10.0.0.1")).await);
    assert_eq!(code, 422);
    assert!(
        message.ends_with("spec.at: Invalid value: \"yesterday\": spec.at in body must be of type date-time: \"yesterday\""),
        "{message}"
    );
    let (_, message) =
        refusal(create_widget(&widgets, "w", spec("2026-12-06T08:00:00Z", "10.0.0.256")).await);
    assert!(
        message.ends_with("spec.address in body must be of type ipv4: \"10.0.0.256\""),
        "{message}"
    );
    create_widget(
        &widgets,
        "w",
        spec("2026-12-06T08:00:00.5+01:00", "10.0.0.1"),
    )
    .await
    .expect("valid formats");
}

/// kube's validation ratcheting: once a CRD's schema tightens, an object stored before
/// can still be updated where it does not touch the value the schema now refuses (its
/// labels, its finalizers); a change to that value must satisfy the schema.
#[tokio::test]
async fn updates_are_not_refused_for_values_they_leave_alone() {
    let server = server().await;
    let schema = |format: Option<&str>| {
        let mut at = json!({"type": "string"});
        if let Some(format) = format {
            at["format"] = json!(format);
        }
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"at": at}}}})
    };
    common::install_widgets(&server, schema(None)).await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(server.client(), "default", &widget_resource());
    create_widget(&widgets, "w", json!({"spec": {"at": "yesterday"}}))
        .await
        .expect("no format yet");
    let crds = Api::<CustomResourceDefinition>::all(server.client());
    let tighten = Patch::Merge(json!({"spec": {"versions": [{"name": "v1", "served": true,
        "storage": true, "schema": {"openAPIV3Schema": schema(Some("date-time"))}}]}}));
    crds.patch(
        "widgets.example.steady.dev",
        &PatchParams::default(),
        &tighten,
    )
    .await
    .expect("the schema tightens");
    let label = Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}}));
    widgets
        .patch("w", &PatchParams::default(), &label)
        .await
        .expect("an update that leaves spec.at alone");
    let still_bad = Patch::Merge(json!({"spec": {"at": "tomorrow"}}));
    let (code, message) = refusal(
        widgets
            .patch("w", &PatchParams::default(), &still_bad)
            .await,
    );
    assert_eq!(code, 422, "{message}");
    assert!(
        message.ends_with("spec.at in body must be of type date-time: \"tomorrow\""),
        "{message}"
    );
    let fixed = Patch::Merge(json!({"spec": {"at": "2026-12-06T08:00:00Z"}}));
    widgets
        .patch("w", &PatchParams::default(), &fixed)
        .await
        .expect("a valid time");
}

/// A custom resource's finalizer without a domain is kept, with kube's warning, for the
/// write that adds it; one that is not a qualified name is refused when it is created.
#[tokio::test]
async fn a_custom_resources_unqualified_finalizer_is_only_warned_about() {
    let (s, _api) = setup().await;
    let widgets = "/apis/example.steady.dev/v1/namespaces/default/widgets";
    let create = |name: &str, finalizers: Value| {
        let body = json!({"apiVersion": "example.steady.dev/v1", "kind": "Widget",
            "metadata": {"name": name, "finalizers": finalizers}, "spec": {"size": "s"}});
        let s = &s;
        async move {
            common::raw(
                s,
                "POST",
                widgets,
                Some("application/json"),
                body.to_string(),
            )
            .await
        }
    };
    let warned = create(
        "w",
        json!(["cleanup", "cleanup.example.com", "example.com/ok"]),
    )
    .await;
    assert_eq!(warned.status, 201, "{}", warned.json());
    let warnings: Vec<String> = warned
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains(
        r#"metadata.finalizers: \"cleanup\": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"#
    ), "{warnings:?}");
    assert!(warnings[1].contains("including a path (/)"), "{warnings:?}");
    let refused = create("v", json!(["clean up"]))
        .await
        .assert_status(422, "Invalid");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("metadata.finalizers: Invalid value: \"clean up\"")),
        "{refused}"
    );
}
