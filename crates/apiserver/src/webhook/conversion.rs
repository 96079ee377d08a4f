//! CRD conversion: an object stored in one version of a custom resource, read or written
//! through another. `strategy: None` only rewrites `apiVersion`; `strategy: Webhook` sends
//! an `apiextensions.k8s.io/v1` ConversionReview to `spec.conversion.webhook.clientConfig`
//! and checks what comes back as kube-apiserver does (same count, the desired apiVersion,
//! the same kind, name, namespace and uid). Objects of a Webhook CRD are stored in its
//! storage version; the others keep the version they were written in.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use super::client::{self, CallError};
use crate::ApiServer;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::registry::ResourceType;
use crate::versions;

/// kube-apiserver gives a conversion webhook 30 s (not configurable).
const CONVERSION_TIMEOUT: Duration = Duration::from_secs(30);

fn api_version_of(object: &Value) -> &str {
    object["apiVersion"].as_str().unwrap_or("")
}

/// `example.com/v1, Kind=Widget`, as Go prints a GroupVersionKind.
fn group_version_kind(object: &Value) -> String {
    format!(
        "{}, Kind={}",
        api_version_of(object),
        object["kind"].as_str().unwrap_or("")
    )
}

/// A conversion failure: 500, no reason (a plain error in kube-apiserver's handlers).
fn conversion_failed(object: &Value, why: impl std::fmt::Display) -> ApiError {
    ApiError {
        code: 500,
        reason: "",
        message: format!(
            "conversion webhook for {} failed: {why}",
            group_version_kind(object)
        ),
        details: None,
    }
}

fn uses_webhook(crd: &Value) -> bool {
    crd.pointer("/spec/conversion/strategy")
        .and_then(Value::as_str)
        == Some("Webhook")
}

fn storage_version(crd: &Value) -> Option<&str> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["storage"] == true)?
        .get("name")?
        .as_str()
}

impl ApiServer {
    /// The CRD that defines `rt`, when it converts by webhook.
    fn webhook_crd(&self, rt: &ResourceType) -> ApiResult<Option<Value>> {
        let Some(name) = rt.crd_name.as_deref() else {
            return Ok(None);
        };
        let key = format!("/apiextensions.k8s.io/customresourcedefinitions/{name}");
        let Some(stored) = self
            .store()
            .get(&key, None)
            .map_err(|e| ApiError::from_store(e, "customresourcedefinitions", name))?
        else {
            return Ok(None);
        };
        // Every write of a custom resource asks; most CRDs convert by `None`, and their
        // compact JSON then never holds this pair, so they are not parsed.
        const WEBHOOK_STRATEGY: &[u8] = br#""strategy":"Webhook""#;
        if memchr::memmem::find(&stored.value, WEBHOOK_STRATEGY).is_none() {
            return Ok(None);
        }
        let crd: Value = serde_json::from_slice(&stored.value)
            .map_err(|e| ApiError::internal(format!("stored CRD {name} is corrupt: {e}")))?;
        Ok(uses_webhook(&crd).then_some(crd))
    }

    /// `object` as version `rt` of its kind.
    pub(crate) async fn convert_object(
        &self,
        rt: &ResourceType,
        object: Value,
    ) -> ApiResult<Value> {
        let desired = rt.api_version();
        if api_version_of(&object) == desired {
            return Ok(object);
        }
        match self.webhook_crd(rt)? {
            Some(crd) => convert_by_webhook(&crd, object, &desired).await,
            None => Ok(convert_builtin(object, desired)),
        }
    }

    /// Stored bytes as the client's version of the kind: unchanged when already in it.
    pub(crate) async fn present_converted(
        &self,
        rt: &ResourceType,
        stored: Bytes,
    ) -> ApiResult<Bytes> {
        if written_in_version(&stored, rt) {
            return Ok(stored);
        }
        let object: Value = serde_json::from_slice(&stored)
            .map_err(|e| ApiError::internal(format!("stored object is corrupt: {e}")))?;
        let converted = self.convert_object(rt, object).await?;
        serde_json::to_vec(&converted)
            .map(Bytes::from)
            .map_err(|e| ApiError::internal(format!("encoding failed: {e}")))
    }

    /// `object` as it is stored: the storage version for a CRD converted by webhook, as
    /// written otherwise.
    pub(crate) async fn to_storage_version(
        &self,
        rt: &ResourceType,
        object: Value,
    ) -> ApiResult<Value> {
        if rt.builtin {
            return Ok(match versions::storage_version(&rt.group, &rt.kind) {
                Some(storage) => convert_builtin(object, storage.to_string()),
                None => object,
            });
        }
        let Some(crd) = self.webhook_crd(rt)? else {
            return Ok(object);
        };
        let Some(storage) = storage_version(&crd) else {
            return Ok(object);
        };
        let desired = format!("{}/{storage}", rt.group);
        if api_version_of(&object) == desired {
            return Ok(object);
        }
        convert_by_webhook(&crd, object, &desired).await
    }
}

/// Whether `stored` begins `{"apiVersion":"<rt's group/version>"`, as the store writes an
/// object of that version (its keys in order). Asked of every object read: nothing is
/// allocated.
fn written_in_version(stored: &[u8], rt: &ResourceType) -> bool {
    let Some(rest) = stored.strip_prefix(br#"{"apiVersion":""#) else {
        return false;
    };
    let rest = match rt.group.as_str() {
        "" => Some(rest),
        group => rest
            .strip_prefix(group.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"/")),
    };
    rest.and_then(|rest| rest.strip_prefix(rt.version.as_bytes()))
        .is_some_and(|rest| rest.starts_with(b"\""))
}

/// A built-in kind's (or a CRD's converted by `None`) object in `desired`: the shapes of
/// its versions converted where they differ (`versions`), its `apiVersion` replaced.
fn convert_builtin(object: Value, desired: String) -> Value {
    let mut object = versions::convert(object, &desired);
    object["apiVersion"] = Value::String(desired);
    object
}

async fn convert_by_webhook(crd: &Value, object: Value, desired: &str) -> ApiResult<Value> {
    let accepted = crd
        .pointer("/spec/conversion/webhook/conversionReviewVersions")
        .and_then(Value::as_array)
        .is_some_and(|versions| versions.iter().any(|v| v == "v1"));
    if !accepted {
        return Err(conversion_failed(
            &object,
            "webhook does not accept v1 ConversionReview",
        ));
    }
    let uid = uuid::Uuid::new_v4().hyphenated().to_string();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [object]},
    });
    let client_config = crd
        .pointer("/spec/conversion/webhook/clientConfig")
        .unwrap_or(&Value::Null);
    let answer = client::post_json(client_config, &review, CONVERSION_TIMEOUT)
        .await
        .map_err(|e| conversion_failed(&object, e))?;
    converted_object(&answer, &uid, &object, desired)
}

/// The one converted object of a ConversionReview answer, checked as kube-apiserver does.
fn converted_object(
    answer: &Value,
    uid: &str,
    original: &Value,
    desired: &str,
) -> ApiResult<Value> {
    let fail = |why: String| conversion_failed(original, CallError::InvalidResponse(why));
    let response = client::review_response(answer, uid, "no response provided")
        .map_err(|e| conversion_failed(original, e))?;
    if response.pointer("/result/status").and_then(Value::as_str) != Some("Success") {
        let message = meta::str_at(response, "/result/message").unwrap_or("");
        return Err(ApiError {
            message: match message {
                "" => format!(
                    "conversion webhook for {} failed",
                    group_version_kind(original)
                ),
                m => format!(
                    "conversion webhook for {} failed: {m}",
                    group_version_kind(original)
                ),
            },
            ..conversion_failed(original, "")
        });
    }
    let objects = response["convertedObjects"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let [converted] = objects else {
        return Err(fail(format!(
            "expected 1 converted objects, got {}",
            objects.len()
        )));
    };
    if api_version_of(converted) != desired {
        return Err(fail(format!(
            "invalid apiVersion {:?}, expected {desired:?}",
            api_version_of(converted)
        )));
    }
    if converted["kind"] != original["kind"] {
        return Err(fail(format!(
            "invalid kind {}, expected {}",
            converted["kind"], original["kind"]
        )));
    }
    for field in ["name", "namespace", "uid"] {
        if meta::meta_str(converted, field) != meta::meta_str(original, field) {
            return Err(fail(format!("must not change metadata.{field}")));
        }
    }
    Ok(converted.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn original() -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "uid": "u"}})
    }

    #[test]
    fn an_object_is_presented_as_stored_only_when_written_in_the_version_asked() {
        let registry = crate::registry::Registry::default();
        let pods = registry.builtin("", "pods").expect("pods");
        let deployments = registry
            .builtin("apps", "deployments")
            .expect("deployments");
        assert!(written_in_version(
            br#"{"apiVersion":"v1","kind":"Pod"}"#,
            &pods
        ));
        assert!(written_in_version(
            br#"{"apiVersion":"apps/v1","kind":"Deployment"}"#,
            &deployments
        ));
        for stored in [
            &br#"{"apiVersion":"v1beta1","kind":"Deployment"}"#[..],
            br#"{"apiVersion":"apps/v1beta1","kind":"Deployment"}"#,
            br#"{"apiVersion":"apps/v1"#,
            br#"{"kind":"Deployment","apiVersion":"apps/v1"}"#,
            br#"{"apiVersion":"extensions/v1","kind":"Deployment"}"#,
            br#"{"apiVersion":"v1","kind":"Deployment"}"#,
        ] {
            assert!(
                !written_in_version(stored, &deployments),
                "{}",
                String::from_utf8_lossy(stored)
            );
        }
        assert!(!written_in_version(br#"{"apiVersion":"v1beta1"}"#, &pods));
    }

    #[test]
    fn a_converted_object_must_keep_its_identity() {
        let answer = |object: Value| json!({"response": {"uid": "1", "result": {"status": "Success"}, "convertedObjects": [object]}});
        let good = json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "w", "uid": "u"}});
        assert_eq!(
            converted_object(&answer(good.clone()), "1", &original(), "example.com/v2"),
            Ok(good)
        );
        let renamed = json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "x", "uid": "u"}});
        let error = converted_object(&answer(renamed), "1", &original(), "example.com/v2")
            .expect_err("renaming is refused");
        assert_eq!(error.code, 500);
        assert!(
            error
                .message
                .starts_with("conversion webhook for example.com/v1, Kind=Widget failed: "),
            "{}",
            error.message
        );
    }

    #[test]
    fn a_failure_result_carries_the_webhooks_message() {
        let answer =
            json!({"response": {"uid": "1", "result": {"status": "Failure", "message": "cannot"}}});
        let error =
            converted_object(&answer, "1", &original(), "example.com/v2").expect_err("fails");
        assert_eq!(
            error.message,
            "conversion webhook for example.com/v1, Kind=Widget failed: cannot"
        );
    }
}
