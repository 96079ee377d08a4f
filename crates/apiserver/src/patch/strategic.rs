//! Strategic merge patch: maps merge recursively, lists by the kind's merge keys
//! ([`super::merge_keys`]), and the `$patch`, `$retainKeys`, `$deleteFromPrimitiveList`
//! and `$setElementOrder` directives.

use serde_json::{Map, Value};

use super::merge_keys::{ListStrategy, list_strategy};
use super::{PatchError, invalid, type_name};

const PATCH_DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

fn is_directive(key: &str) -> bool {
    key == PATCH_DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
        || key.starts_with(SET_ELEMENT_ORDER)
}

pub(super) fn strategic_merge(
    kind: &str,
    current: &Value,
    patch: &Value,
    what: &str,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(invalid(format!(
            "{what} must be a JSON object, got {}",
            type_name(patch)
        )));
    };
    let mut doc = match current {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(invalid(format!(
                "cannot patch {}: the current object is not a JSON object",
                type_name(other)
            )));
        }
    };
    match (Strategic { kind }).merge_map(&mut doc, patch, &mut Vec::new())? {
        Outcome::Keep => Ok(Value::Object(doc)),
        Outcome::Delete => Err(invalid(
            "the $patch: delete directive cannot delete the whole object",
        )),
    }
}

/// What to do with a map after merging a patch into it.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Keep,
    /// The patch carried `$patch: delete`: remove the map from its parent.
    Delete,
}

fn fmt_path(path: &[&str]) -> String {
    if path.is_empty() {
        "<root>".to_owned()
    } else {
        path.join(".")
    }
}

struct Strategic<'k> {
    kind: &'k str,
}

impl Strategic<'_> {
    fn strategy(&self, path: &[&str]) -> ListStrategy {
        list_strategy(self.kind, path)
    }

    /// Merges `patch` into `orig` (the map found at `path`).
    fn merge_map<'p>(
        &self,
        orig: &mut Map<String, Value>,
        patch: &'p Map<String, Value>,
        path: &mut Vec<&'p str>,
    ) -> Result<Outcome, PatchError> {
        if let Some(directive) = patch.get(PATCH_DIRECTIVE) {
            match directive.as_str() {
                Some("replace") => orig.clear(),
                Some("delete") => return Ok(Outcome::Delete),
                Some("merge") => {}
                _ => {
                    return Err(invalid(format!(
                        "unknown $patch directive {directive} in map at {}",
                        fmt_path(path)
                    )));
                }
            }
        }

        if let Some(retain) = patch.get(RETAIN_KEYS) {
            let keys = retain
                .as_array()
                .and_then(|keys| keys.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
                .ok_or_else(|| {
                    invalid(format!(
                        "$retainKeys at {} must be a list of strings",
                        fmt_path(path)
                    ))
                })?;
            if let Some((k, _)) = patch
                .iter()
                .find(|(k, v)| !v.is_null() && !is_directive(k) && !keys.contains(&k.as_str()))
            {
                return Err(invalid(format!(
                    "field {k:?} at {} is not listed in $retainKeys",
                    fmt_path(path)
                )));
            }
            orig.retain(|k, _| keys.contains(&k.as_str()));
        }

        for (k, v) in patch {
            let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else {
                continue;
            };
            let Value::Array(values) = v else {
                return Err(invalid(format!("{k} at {} must be a list", fmt_path(path))));
            };
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                list.retain(|e| !values.contains(e));
            }
        }

        for (k, v) in patch {
            if is_directive(k) {
                continue;
            }
            path.push(k);
            let res = self.merge_field(orig, k, v, path);
            path.pop();
            res?;
        }

        for (k, v) in patch {
            let Some(field) = k.strip_prefix(SET_ELEMENT_ORDER) else {
                continue;
            };
            let Value::Array(order) = v else {
                return Err(invalid(format!("{k} at {} must be a list", fmt_path(path))));
            };
            path.push(field);
            let strategy = self.strategy(path);
            path.pop();
            if let Some(Value::Array(list)) = orig.get_mut(field) {
                reorder(list, order, strategy);
            }
        }

        Ok(Outcome::Keep)
    }

    /// Merges the patch value `pv` of field `key` into `orig`; `path` ends
    /// with `key`.
    fn merge_field<'p>(
        &self,
        orig: &mut Map<String, Value>,
        key: &str,
        pv: &'p Value,
        path: &mut Vec<&'p str>,
    ) -> Result<(), PatchError> {
        match (orig.get_mut(key), pv) {
            (_, Value::Null) => {
                orig.remove(key);
            }
            (Some(Value::Object(om)), Value::Object(pm)) => {
                if self.merge_map(om, pm, path)? == Outcome::Delete {
                    orig.remove(key);
                }
            }
            (Some(Value::Array(ol)), Value::Array(pl)) => self.merge_list(ol, pl, path)?,
            _ => match self.clean(pv, path)? {
                Some(v) => {
                    orig.insert(key.to_owned(), v);
                }
                None => {
                    orig.remove(key);
                }
            },
        }
        Ok(())
    }

    /// The value a patch value produces when there is nothing to merge it
    /// into: directives are processed (and stripped), nulls dropped. `None`
    /// when the value is a map carrying `$patch: delete`.
    fn clean<'p>(
        &self,
        pv: &'p Value,
        path: &mut Vec<&'p str>,
    ) -> Result<Option<Value>, PatchError> {
        match pv {
            Value::Object(pm) => {
                let mut m = Map::new();
                Ok(match self.merge_map(&mut m, pm, path)? {
                    Outcome::Keep => Some(Value::Object(m)),
                    Outcome::Delete => None,
                })
            }
            Value::Array(pl) => {
                let mut l = Vec::new();
                self.merge_list(&mut l, pl, path)?;
                Ok(Some(Value::Array(l)))
            }
            other => Ok(Some(other.clone())),
        }
    }

    /// Merges the patch list `pl` into `ol` (the list at `path`).
    fn merge_list<'p>(
        &self,
        ol: &mut Vec<Value>,
        pl: &'p [Value],
        path: &mut Vec<&'p str>,
    ) -> Result<(), PatchError> {
        match self.strategy(path) {
            ListStrategy::MergeKey(key) => self.merge_keyed_list(ol, pl, key, path),
            ListStrategy::Set => {
                let mut items = Vec::with_capacity(pl.len());
                for e in pl {
                    match directive_of(e) {
                        Some(Some("replace")) => ol.clear(),
                        Some(d) => {
                            return Err(invalid(format!(
                                "unsupported $patch directive {} in list at {}",
                                d.unwrap_or("<non-string>"),
                                fmt_path(path)
                            )));
                        }
                        None => items.extend(self.clean(e, path)?),
                    }
                }
                for v in items {
                    if !ol.contains(&v) {
                        ol.push(v);
                    }
                }
                Ok(())
            }
            ListStrategy::Replace => {
                let mut out = Vec::with_capacity(pl.len());
                for e in pl {
                    if directive_of(e).is_some() && e.as_object().is_some_and(|m| m.len() == 1) {
                        // A bare `{"$patch": ...}` marker has no meaning in an
                        // atomic list (it is replaced anyway).
                        continue;
                    }
                    out.extend(self.clean(e, path)?);
                }
                *ol = out;
                Ok(())
            }
        }
    }

    fn merge_keyed_list<'p>(
        &self,
        ol: &mut Vec<Value>,
        pl: &'p [Value],
        key: &str,
        path: &mut Vec<&'p str>,
    ) -> Result<(), PatchError> {
        let mut replace = false;
        let mut items = Vec::with_capacity(pl.len());
        for e in pl {
            let Value::Object(pm) = e else {
                return Err(invalid(format!(
                    "list at {} merges on key {key:?}: its elements must be objects, got {}",
                    fmt_path(path),
                    type_name(e)
                )));
            };
            match pm.get(PATCH_DIRECTIVE).map(Value::as_str) {
                None | Some(Some("merge")) => items.push(pm),
                Some(Some("delete")) => {
                    let kv = merge_key_value(pm, key, path)?;
                    ol.retain(|o| o.get(key) != Some(kv));
                }
                Some(Some("replace")) => replace = true,
                Some(_) => {
                    return Err(invalid(format!(
                        "unknown $patch directive {} in list at {}",
                        pm.get(PATCH_DIRECTIVE).unwrap_or(&Value::Null),
                        fmt_path(path)
                    )));
                }
            }
        }
        if replace {
            ol.clear();
        }
        for pm in items {
            let kv = merge_key_value(pm, key, path)?;
            match ol.iter().position(|o| o.get(key) == Some(kv)) {
                Some(pos) => {
                    let delete = match ol.get_mut(pos) {
                        Some(Value::Object(om)) => self.merge_map(om, pm, path)? == Outcome::Delete,
                        Some(slot) => match self.clean_map(pm, path)? {
                            Some(v) => {
                                *slot = v;
                                false
                            }
                            None => true,
                        },
                        None => false,
                    };
                    if delete {
                        ol.remove(pos);
                    }
                }
                None => ol.extend(self.clean_map(pm, path)?),
            }
        }
        Ok(())
    }

    fn clean_map<'p>(
        &self,
        pm: &'p Map<String, Value>,
        path: &mut Vec<&'p str>,
    ) -> Result<Option<Value>, PatchError> {
        let mut m = Map::new();
        Ok(match self.merge_map(&mut m, pm, path)? {
            Outcome::Keep => Some(Value::Object(m)),
            Outcome::Delete => None,
        })
    }
}

/// `Some(directive)` when `v` is a map with a `$patch` key (`Some(None)` if
/// the directive is not a string).
fn directive_of(v: &Value) -> Option<Option<&str>> {
    v.as_object()?.get(PATCH_DIRECTIVE).map(Value::as_str)
}

fn merge_key_value<'m>(
    pm: &'m Map<String, Value>,
    key: &str,
    path: &[&str],
) -> Result<&'m Value, PatchError> {
    match pm.get(key) {
        Some(v) if !v.is_null() => Ok(v),
        _ => Err(invalid(format!(
            "list element at {} does not contain the merge key {key:?}",
            fmt_path(path)
        ))),
    }
}

/// Implements `$setElementOrder`: the elements named in `order` are put in
/// that order, in the slots such elements occupy; other elements stay where
/// they are. Atomic lists are left alone (the patch already fixed the order).
fn reorder(list: &mut [Value], order: &[Value], strategy: ListStrategy) {
    let rank = |e: &Value| -> Option<usize> {
        match strategy {
            ListStrategy::MergeKey(key) => {
                let kv = e.get(key)?;
                order.iter().position(|o| o.get(key) == Some(kv))
            }
            ListStrategy::Set => order.iter().position(|o| o == e),
            ListStrategy::Replace => None,
        }
    };
    let mut ranked: Vec<(usize, usize)> = list
        .iter()
        .enumerate()
        .filter_map(|(i, e)| rank(e).map(|r| (i, r)))
        .collect();
    let slots: Vec<usize> = ranked.iter().map(|&(i, _)| i).collect();
    ranked.sort_by_key(|&(_, r)| r);
    let mut values: Vec<Value> = ranked
        .iter()
        .map(|&(i, _)| list.get(i).cloned().unwrap_or(Value::Null))
        .collect();
    for (slot, v) in slots.into_iter().zip(values.drain(..)) {
        if let Some(s) = list.get_mut(slot) {
            *s = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::tests::pod;
    use crate::patch::{PatchType, apply_patch};
    use serde_json::json;

    fn smp(current: &Value, patch: Value) -> Result<Value, PatchError> {
        apply_patch(
            PatchType::StrategicMerge,
            "Pod",
            current,
            patch.to_string().as_bytes(),
        )
    }

    /// The sample pod with `patch` applied; panics if it does not apply.
    fn patched_pod(patch: Value) -> Value {
        smp(&pod(), patch).unwrap_or_else(|e| panic!("the patch applies: {e}"))
    }

    /// Panics unless `patch` decodes but cannot be applied to `current`.
    #[track_caller]
    fn assert_invalid(current: &Value, patch: Value) {
        let err = smp(current, patch).unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)), "{err:?}");
    }

    fn assert_no_directives(v: &Value) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    assert!(!is_directive(k), "directive {k} left in result");
                    assert_no_directives(v);
                }
            }
            Value::Array(l) => l.iter().for_each(assert_no_directives),
            _ => {}
        }
    }

    #[test]
    fn smp_containers_merge_by_name() {
        let out =
            patched_pod(json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.26"}]}}));
        let containers = &out["spec"]["containers"];
        assert_eq!(containers.as_array().unwrap().len(), 2);
        assert_eq!(containers[0]["image"], "nginx:1.26");
        assert_eq!(
            containers[0]["ports"],
            pod()["spec"]["containers"][0]["ports"]
        );
        assert_eq!(containers[1], pod()["spec"]["containers"][1]);

        // New keys are appended in patch order.
        let out = patched_pod(json!({"spec": {"containers": [
            {"name": "z", "image": "z"}, {"name": "y", "image": "y"}
        ]}}));
        let names: Vec<_> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["app", "sidecar", "z", "y"]);
    }

    #[test]
    fn smp_env_and_ports() {
        let out = patched_pod(json!({"spec": {"containers": [{
            "name": "app",
            "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}, {"name": "A", "$patch": "delete"}],
            "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]
        }]}}));
        let app = &out["spec"]["containers"][0];
        assert_eq!(
            app["env"],
            json!([{"name": "B", "value": "20"}, {"name": "C", "value": "3"}])
        );
        assert_eq!(
            app["ports"],
            json!([
                {"containerPort": 80, "protocol": "TCP", "name": "http"},
                {"containerPort": 443}
            ])
        );
    }

    #[test]
    fn smp_delete_container() {
        let out =
            patched_pod(json!({"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}));
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1);
        assert_eq!(containers[0]["name"], "app");
        // Deleting an element that does not exist is a no-op.
        let out =
            patched_pod(json!({"spec": {"containers": [{"name": "ghost", "$patch": "delete"}]}}));
        assert_eq!(out["spec"]["containers"], pod()["spec"]["containers"]);
        // A delete element without the merge key is invalid.
        assert_invalid(
            &pod(),
            json!({"spec": {"containers": [{"$patch": "delete"}]}}),
        );
    }

    #[test]
    fn smp_replace_directives() {
        // On a map.
        let out =
            patched_pod(json!({"spec": {"nodeSelector": {"$patch": "replace", "gpu": "yes"}}}));
        assert_eq!(out["spec"]["nodeSelector"], json!({"gpu": "yes"}));
        // On a list element: the list is replaced by the other elements.
        let out = patched_pod(
            json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "solo", "image": "x"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "solo", "image": "x"}])
        );
        assert_no_directives(&out);
        // `$patch: delete` on a map removes it.
        let out = patched_pod(json!({"spec": {"nodeSelector": {"$patch": "delete"}}}));
        assert!(out["spec"].get("nodeSelector").is_none());
        // Unknown directive values are invalid.
        assert_invalid(
            &pod(),
            json!({"spec": {"nodeSelector": {"$patch": "explode"}}}),
        );
    }

    #[test]
    fn smp_retain_keys() {
        let current = json!({"kind": "Pod", "spec": {"volumes": [
            {"name": "data", "emptyDir": {}}
        ]}});
        let out = smp(
            &current,
            json!({"spec": {"volumes": [{
                "name": "data",
                "$retainKeys": ["name", "hostPath"],
                "hostPath": {"path": "/data"}
            }]}}),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "data", "hostPath": {"path": "/data"}}])
        );
        // A patched field missing from $retainKeys is invalid.
        assert_invalid(
            &current,
            json!({"spec": {"volumes": [{"name": "data", "$retainKeys": ["name"], "nfs": {}}]}}),
        );
    }

    #[test]
    fn smp_finalizers() {
        let out = patched_pod(
            json!({"metadata": {"finalizers": ["b.example.com/f", "a.example.com/f"]}}),
        );
        assert_eq!(
            out["metadata"]["finalizers"],
            json!(["a.example.com/f", "b.example.com/f"])
        );
        let out = smp(
            &out,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/f", "zzz"]}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b.example.com/f"]));
        assert_no_directives(&out);
    }

    #[test]
    fn smp_labels_null_deletion() {
        let out =
            patched_pod(json!({"metadata": {"labels": {"tier": null, "absent": null, "v": "2"}}}));
        assert_eq!(out["metadata"]["labels"], json!({"app": "web", "v": "2"}));
        let out = patched_pod(json!({"metadata": {"labels": null}, "nothing": null}));
        assert!(out["metadata"].get("labels").is_none());
        assert!(out.get("nothing").is_none());
    }

    #[test]
    fn smp_owner_references_by_uid() {
        let out = patched_pod(json!({"metadata": {"ownerReferences": [
            {"uid": "u2", "controller": true},
            {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u3"}
        ]}}));
        let refs = &out["metadata"]["ownerReferences"];
        assert_eq!(refs.as_array().unwrap().len(), 3);
        assert_eq!(refs[0]["name"], "rs1");
        assert_eq!(refs[1]["name"], "rs2");
        assert_eq!(refs[1]["controller"], true);
        assert_eq!(refs[2]["uid"], "u3");
    }

    #[test]
    fn smp_list_without_merge_key_is_replaced() {
        let out = patched_pod(json!({"spec": {
            "tolerations": [{"key": "k2", "operator": "Exists"}],
            "containers": [{"name": "sidecar", "command": ["true"]}]
        }}));
        assert_eq!(
            out["spec"]["tolerations"],
            json!([{"key": "k2", "operator": "Exists"}])
        );
        assert_eq!(out["spec"]["containers"][1]["command"], json!(["true"]));
        // Unknown kinds replace every list.
        let current =
            json!({"kind": "Widget", "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let out = apply_patch(
            PatchType::StrategicMerge,
            "Widget",
            &current,
            br#"{"spec":{"containers":[{"name":"b","x":1}]}}"#,
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"], json!([{"name": "b", "x": 1}]));
    }

    #[test]
    fn smp_set_element_order() {
        let out = patched_pod(json!({"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
            "containers": [{"name": "app", "image": "nginx:1.26"}]
        }}));
        assert_eq!(out["spec"]["containers"][0]["name"], "sidecar");
        assert_eq!(out["spec"]["containers"][1]["image"], "nginx:1.26");
        assert_no_directives(&out);
        // Order lists naming unknown elements, or for fields that don't exist,
        // are not errors.
        patched_pod(json!({"spec": {
            "$setElementOrder/containers": [{"name": "ghost"}],
            "$setElementOrder/volumes": [{"name": "v"}]
        }}));
    }

    #[test]
    fn smp_new_fields_are_cleaned() {
        let current = json!({"kind": "Pod", "metadata": {"name": "p"}});
        let out = smp(
            &current,
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}],
                "containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}, {"name": "Y"}], "gone": null}],
                "nodeSelector": {"$patch": "delete"},
                "affinity": {"$patch": "replace", "nodeAffinity": {}}
            }}),
        )
        .unwrap();
        assert_eq!(
            out["spec"],
            json!({
                "containers": [{"name": "a", "env": [{"name": "Y"}]}],
                "affinity": {"nodeAffinity": {}}
            })
        );
    }

    #[test]
    fn smp_errors() {
        let err = apply_patch(
            PatchType::StrategicMerge,
            "Pod",
            &pod(),
            b"{\n  \"spec\": }",
        )
        .unwrap_err();
        match err {
            PatchError::Malformed(msg) => assert!(msg.contains("line 2"), "{msg}"),
            other => panic!("unexpected {other:?}"),
        }
        for patch in [
            json!([1]),
            json!("x"),
            json!({"spec": {"containers": ["app"]}}),
            json!({"spec": {"containers": [{"image": "no-name"}]}}),
            json!({"$patch": "delete"}),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
            json!({"spec": {"$setElementOrder/containers": {}}}),
            json!({"spec": {"$retainKeys": "containers"}}),
        ] {
            let err = smp(&pod(), patch.clone()).unwrap_err();
            assert!(matches!(err, PatchError::Invalid(_)), "{patch}: {err:?}");
        }
    }

    #[test]
    fn smp_kubectl_apply_update() {
        // What `kubectl apply` (client-side) sends after the image of one
        // container and an env var changed.
        let last_applied = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"annotations": {}, "name": "web", "namespace": "default"},
            "spec": {"containers": [
                {"name": "app", "image": "nginx:1.26", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]},
                {"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "inf"]}
            ]}
        })
        .to_string()
            + "\n";
        let body = format!(
            r#"{{"metadata":{{"annotations":{{"kubectl.kubernetes.io/last-applied-configuration":{}}}}},"spec":{{"$setElementOrder/containers":[{{"name":"app"}},{{"name":"sidecar"}}],"containers":[{{"$setElementOrder/env":[{{"name":"A"}},{{"name":"B"}}],"env":[{{"name":"B","value":"3"}}],"image":"nginx:1.26","name":"app"}}]}}}}"#,
            serde_json::to_string(&last_applied).unwrap()
        );
        let out = apply_patch(PatchType::StrategicMerge, "Pod", &pod(), body.as_bytes()).unwrap();
        assert_no_directives(&out);
        assert_eq!(
            out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            Value::String(last_applied)
        );
        assert_eq!(out["metadata"]["labels"], pod()["metadata"]["labels"]);
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 2);
        assert_eq!(containers[0]["name"], "app");
        assert_eq!(containers[0]["image"], "nginx:1.26");
        assert_eq!(
            containers[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}])
        );
        assert_eq!(
            containers[0]["ports"],
            pod()["spec"]["containers"][0]["ports"]
        );
        assert_eq!(containers[1], pod()["spec"]["containers"][1]);
    }

    #[test]
    fn smp_service_and_node() {
        let svc = json!({"kind": "Service", "spec": {"ports": [
            {"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}
        ]}});
        let out = apply_patch(
            PatchType::StrategicMerge,
            "Service",
            &svc,
            br#"{"spec":{"ports":[{"port":443,"targetPort":9443}]}}"#,
        )
        .unwrap();
        assert_eq!(
            out["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 9443}])
        );
        let node = json!({"kind": "Node", "status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "MemoryPressure", "status": "False"}
        ]}});
        let out = apply_patch(
            PatchType::StrategicMerge,
            "Node",
            &node,
            br#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#,
        )
        .unwrap();
        assert_eq!(out["status"]["conditions"][0]["status"], "True");
        assert_eq!(out["status"]["conditions"][1]["type"], "MemoryPressure");
    }
}
