//! `steady server` stopped with SIGTERM and started again on the same data directory: every
//! object is back exactly as it was (deleted ones stay deleted), revisions keep growing,
//! and the same CA and token are reused, so the old kubeconfig still works.

mod common;

use std::collections::BTreeMap;

use common::{Options, Server, assert_rv_above, object_rv, rv_number};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

fn configmap(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "restart-test"}},
        "data": data,
    }))
    .unwrap()
}

/// The stored state as a map from "kind/namespace/name" to the object.
async fn snapshot(client: &kube::Client) -> BTreeMap<String, Value> {
    let mut all = BTreeMap::new();
    let lp = ListParams::default();
    for ns in Api::<Namespace>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        let key = format!("Namespace//{}", ns.metadata.name.clone().unwrap());
        all.insert(key, serde_json::to_value(ns).unwrap());
    }
    for cm in Api::<ConfigMap>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
    {
        let key = format!(
            "ConfigMap/{}/{}",
            cm.metadata.namespace.clone().unwrap(),
            cm.metadata.name.clone().unwrap()
        );
        all.insert(key, serde_json::to_value(cm).unwrap());
    }
    for s in Api::<Secret>::all(client.clone()).list(&lp).await.unwrap() {
        let key = format!(
            "Secret/{}/{}",
            s.metadata.namespace.clone().unwrap(),
            s.metadata.name.clone().unwrap()
        );
        all.insert(key, serde_json::to_value(s).unwrap());
    }
    all
}

fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

#[tokio::test]
async fn objects_credentials_and_revisions_survive_a_restart() {
    let (dir, data_dir, kubeconfig) = common::workdir();
    let mut server = Server::start(&data_dir, &kubeconfig).await;
    let client = server.client().await;
    let mut max_rv = 0u64;
    let mut seen = |rv: u64| max_rv = max_rv.max(rv);

    // Objects of several kinds, some updated, one deleted, one in a new namespace.
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..20 {
        let cm = configmap(&format!("cm-{i}"), json!({"index": i.to_string()}));
        seen(object_rv(&cms.create(&pp, &cm).await.unwrap()));
    }
    for i in 0..5 {
        let mut cm = cms.get(&format!("cm-{i}")).await.unwrap();
        cm.data
            .get_or_insert_default()
            .insert("updated".into(), "yes".into());
        seen(object_rv(
            &cms.replace(&format!("cm-{i}"), &pp, &cm).await.unwrap(),
        ));
    }
    cms.delete("cm-19", &DeleteParams::default()).await.unwrap();
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    seen(object_rv(
        &Api::<Namespace>::all(client.clone())
            .create(&pp, &namespace)
            .await
            .unwrap(),
    ));
    let team_cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    // The new namespace's root CA is published after its create returns (kube's
    // root-ca-cert-publisher): the snapshot below must not race it.
    let published = steady_test_support::eventually(
        "team-a's kube-root-ca.crt",
        std::time::Duration::from_secs(30),
        || async { team_cms.get_opt("kube-root-ca.crt").await.ok().flatten() },
    )
    .await;
    seen(object_rv(&published));
    seen(object_rv(
        &team_cms
            .create(&pp, &configmap("elsewhere", json!({"where": "team-a"})))
            .await
            .unwrap(),
    ));
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s"},
        "stringData": {"password": "hunter2"},
    }))
    .unwrap();
    seen(object_rv(
        &Api::<Secret>::default_namespaced(client.clone())
            .create(&pp, &secret)
            .await
            .unwrap(),
    ));
    let listed = cms.list(&ListParams::default()).await.unwrap();
    let list_rv = rv_number(listed.metadata.resource_version.as_ref());
    assert!(list_rv >= max_rv, "list RV {list_rv} < last write {max_rv}");
    max_rv = max_rv.max(list_rv);

    let before = snapshot(&client).await;
    assert!(before.contains_key("ConfigMap/default/cm-0"));
    assert!(before.contains_key("ConfigMap/team-a/elsewhere"));
    assert!(!before.contains_key("ConfigMap/default/cm-19"));
    let old_kubeconfig = std::fs::read_to_string(&kubeconfig).unwrap();
    let old_kubeconfig_copy = dir.path().join("old.kubeconfig");
    std::fs::write(&old_kubeconfig_copy, &old_kubeconfig).unwrap();
    let pki = |file: &str| std::fs::read(data_dir.join("pki").join(file)).unwrap();
    let pki_files = ["ca.crt", "ca.key", "server.crt", "server.key", "token"];
    let old_pki: Vec<Vec<u8>> = pki_files.iter().map(|f| pki(f)).collect();
    let address = server.address();
    drop(client);

    // SIGTERM: a clean exit.
    let exit = server.terminate().await;
    assert!(exit.success(), "{exit:?}\n{}", server.output());
    drop(server);

    // Start again on the same directory and the same port.
    let mut server = Server::start_with(
        &data_dir,
        &kubeconfig,
        Options {
            listen: address.clone(),
            ..Options::default()
        },
    )
    .await;
    assert_eq!(server.address(), address);

    // Same CA, server certificate and token; the kubeconfig written is identical.
    for (file, old) in pki_files.iter().zip(&old_pki) {
        assert_eq!(&pki(file), old, "pki/{file} changed across the restart");
    }
    assert_eq!(
        std::fs::read_to_string(&kubeconfig).unwrap(),
        old_kubeconfig
    );

    // The old kubeconfig, as it was, still works.
    let client = common::client_from(&old_kubeconfig_copy).await;
    let after = snapshot(&client).await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the same objects exist after the restart"
    );
    for (key, old) in &before {
        assert_eq!(old, &after[key], "{key} changed across the restart");
    }
    let secret = Api::<Secret>::default_namespaced(client.clone())
        .get("s")
        .await
        .unwrap();
    assert_eq!(
        secret.data.unwrap()["password"].0,
        b"hunter2".to_vec(),
        "secret data survives"
    );
    // Label selectors still find the labelled objects.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let labelled = cms
        .list(&ListParams::default().labels("app=restart-test"))
        .await
        .unwrap();
    assert_eq!(labelled.items.len(), 19);
    // Reads at the current revision are not behind the last write before the restart.
    let list_rv = rv_number(labelled.metadata.resource_version.as_ref());
    assert!(
        list_rv >= max_rv,
        "list RV {list_rv} < last write {max_rv} before the restart"
    );

    // New writes get larger revisions than anything before the restart.
    let created = cms
        .create(&pp, &configmap("after-restart", json!({})))
        .await
        .unwrap();
    let created_rv = assert_rv_above(&created, max_rv, "the create after the restart");
    let mut cm0 = cms.get("cm-0").await.unwrap();
    cm0.data
        .get_or_insert_default()
        .insert("after".into(), "restart".into());
    let updated = cms.replace("cm-0", &pp, &cm0).await.unwrap();
    let updated_rv = assert_rv_above(&updated, created_rv, "the update after the create");
    // A stale resourceVersion from before the restart is still a conflict.
    let stale: ConfigMap =
        serde_json::from_value(before["ConfigMap/default/cm-0"].clone()).unwrap();
    match cms.replace("cm-0", &pp, &stale).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "{status:?}"),
        other => panic!("stale update must conflict: {other:?}"),
    }
    // A deleted name can be created again, with a fresh uid.
    let recreated = cms
        .create(&pp, &configmap("cm-19", json!({})))
        .await
        .unwrap();
    assert!(object_rv(&recreated) > updated_rv);

    // And the revision of the new write is above anything stored before.
    for (key, old) in &before {
        assert!(created_rv > rv_of(old), "{key}");
    }

    let exit = server.terminate().await;
    assert!(exit.success(), "{exit:?}\n{}", server.output());
}
