//! `Context::apply_owned` / `apply_status`: server-side apply of what a controller owns,
//! against steady's in-process API server. At the fixed point an apply changes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use serde_json::json;
use steady_runtime::{Action, Config, Context, Controller};
use steady_test_support::create_json;

const MANAGER: &str = "apply-test";

/// Declares one Secret per ConfigMap, holding the ConfigMap's data.
async fn declare_secret(cm: Arc<ConfigMap>, ctx: Arc<Context<()>>) -> Result<Action, kube::Error> {
    let name = format!("{}-copy", cm.metadata.name.clone().unwrap_or_default());
    let data: BTreeMap<_, _> = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k, ByteString(v.clone().into_bytes())))
        .collect();
    let fields = json!({ "data": data });
    ctx.apply_owned::<Secret, _>(cm.as_ref(), &name, MANAGER, fields)
        .await?;
    Ok(Action::done())
}

#[tokio::test(start_paused = true)]
async fn an_owned_object_is_applied_with_its_controller_reference_and_reapplied_as_a_no_op() {
    let server = steady_apiserver::ApiServer::in_memory(Default::default())
        .await
        .expect("server");
    let client = server.client();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let cm = create_json(
        &configmaps,
        json!({"metadata": {"name": "web"}, "data": {"k": "v"}}),
    )
    .await;
    let config = Config {
        resync_period: Some(Duration::from_secs(5)),
        seed: Some(1),
        ..Config::named("apply")
    };
    let mut controller = Controller::new(configmaps.clone(), config);
    controller.owns(secrets.clone());
    let running =
        tokio::spawn(controller.run(declare_secret, Arc::new(()), std::future::pending()));
    tokio::time::sleep(Duration::from_secs(1)).await;

    let secret = secrets
        .get("web-copy")
        .await
        .expect("the Secret was applied");
    let owner = secret.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!(owner[0].uid, cm.metadata.uid.clone().unwrap_or_default());
    assert_eq!(owner[0].controller, Some(true));
    let managers: Vec<_> = secret
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, [MANAGER]);

    tokio::time::sleep(Duration::from_secs(12)).await; // two resyncs: two more applies
    let again = secrets.get("web-copy").await.expect("still there");
    assert_eq!(
        again.metadata.resource_version, secret.metadata.resource_version,
        "re-applying the same fields changes nothing"
    );
    running.abort();
}
