//! kube-apiserver's `DefaultStorageClass` admission plugin (on by default): a
//! PersistentVolumeClaim created without `storageClassName` gets the cluster's default
//! StorageClass (annotated `storageclass.kubernetes.io/is-default-class: "true"`; of
//! several, the newest), so it is provisioned as on a cluster that has one (`steady up`
//! creates kind's `standard`). An explicit `""` asks for no class and is left alone, as is
//! a claim when no class is default.
//! Must not know: how claims are bound (crates/cluster's volume controller).

use serde_json::{Value, json};

use crate::ApiServer;
use crate::meta;

const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
const DEFAULT_CLASS_BETA: &str = "storageclass.beta.kubernetes.io/is-default-class";

impl ApiServer {
    /// Name the default StorageClass in a new claim that names none.
    pub(crate) fn default_storage_class(&self, claim: &mut Value) {
        let spec = meta::object_mut(claim, "spec");
        if spec.get("storageClassName").is_some_and(|c| !c.is_null()) {
            return;
        }
        if let Some(class) = self.newest_default_class() {
            spec.insert("storageClassName".into(), json!(class));
        }
    }

    fn newest_default_class(&self) -> Option<String> {
        let rt = self
            .registry()
            .builtin("storage.k8s.io", "storageclasses")?;
        let classes: Vec<Value> = self.current_builtin_objects(&rt, None).ok()?;
        let is_default = |class: &Value| {
            [DEFAULT_CLASS, DEFAULT_CLASS_BETA].iter().any(|a| {
                meta::str_at(
                    class,
                    &format!("/metadata/annotations/{}", a.replace('/', "~1")),
                ) == Some("true")
            })
        };
        classes
            .iter()
            .filter(|class| is_default(class))
            // kube picks the newest, and of equally new ones the first by name.
            .max_by(|a, b| {
                created(a)
                    .cmp(created(b))
                    .then_with(|| name(b).cmp(name(a)))
            })
            .and_then(|class| meta::name(class).map(str::to_string))
    }
}

fn created(class: &Value) -> &str {
    meta::meta_str(class, "creationTimestamp").unwrap_or("")
}

fn name(class: &Value) -> &str {
    meta::name(class).unwrap_or("")
}
