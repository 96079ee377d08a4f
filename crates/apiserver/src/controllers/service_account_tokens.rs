//! kube-controller-manager's service-account token controller, as steps of the in-server
//! collector's pass: a `kubernetes.io/service-account-token` Secret gets a signed token,
//! its namespace and the cluster's CA (`token`, `namespace`, `ca.crt`) and the account's
//! uid annotation; a token Secret whose account does not exist (or is another one by now)
//! is deleted, and so are an account's token Secrets when the account goes. The token
//! format and its authentication are `legacy_token.rs`'s.
//!
//! Only writes whose bytes name the Secret type are read again (a cheap byte search on
//! the event), so Opaque Secrets cost the pass nothing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::GarbageCollector;
use crate::error::{ApiError, ApiResult};
use crate::legacy_token::{ACCOUNT_NAME, ACCOUNT_UID, SECRET_TYPE, claims};
use crate::meta;
use crate::request::{DeleteOptions, WriteOptions};

const SECRET_PREFIX: &str = "/core/secrets/";
const ACCOUNT_PREFIX: &str = "/core/serviceaccounts/";

/// The namespace and name in a namespaced core key under `prefix`.
fn namespace_and_name<'k>(key: &'k str, prefix: &str) -> Option<(&'k str, &'k str)> {
    key.strip_prefix(prefix)?.split_once('/')
}

/// Whether a Secret's stored bytes may be a token Secret's (the type string appears).
fn may_be_token_secret(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, SECRET_TYPE.as_bytes()).is_some()
}

impl GarbageCollector {
    /// A write of `key` (its stored `bytes`): a token Secret is looked at in this pass.
    pub(super) fn secret_written(&mut self, key: &str, bytes: &[u8]) {
        if !key.starts_with(SECRET_PREFIX) {
            return;
        }
        if may_be_token_secret(bytes) {
            self.token_secrets.insert(key.to_string());
            self.tokens_due.insert(key.to_string());
        } else {
            self.token_secrets.remove(key);
        }
    }

    /// The object at `key` is gone: if it was a service account, the token Secrets of its
    /// namespace are looked at (those holding its tokens are deleted).
    pub(super) fn token_object_gone(&mut self, key: &str) {
        self.token_secrets.remove(key);
        let Some((namespace, _)) = namespace_and_name(key, ACCOUNT_PREFIX) else {
            return;
        };
        let prefix = format!("{SECRET_PREFIX}{namespace}/");
        let from = (
            std::ops::Bound::Included(prefix.as_str()),
            std::ops::Bound::Unbounded,
        );
        let secrets: Vec<String> = self
            .token_secrets
            .range::<str, _>(from)
            .take_while(|secret| secret.starts_with(&prefix))
            .cloned()
            .collect();
        self.tokens_due.extend(secrets);
    }

    /// Fill or delete every token Secret due; a failure is tried again after the retry
    /// interval.
    pub(super) async fn sync_token_secrets(&mut self) {
        for key in std::mem::take(&mut self.tokens_due) {
            if let Err(e) = self.sync_token_secret(&key).await {
                tracing::warn!(%key, error = %e, "service-account token step failed; will retry");
                self.tokens_retry.insert(key);
                self.retry_at
                    .get_or_insert_with(|| tokio::time::Instant::now() + super::RETRY_INTERVAL);
            }
        }
    }

    async fn sync_token_secret(&self, key: &str) -> ApiResult<()> {
        let Some((namespace, name)) = namespace_and_name(key, SECRET_PREFIX) else {
            return Ok(());
        };
        let Some(secret) = self.read("secrets", namespace, name)? else {
            return Ok(());
        };
        if meta::str_at(&secret, "/type") != Some(SECRET_TYPE)
            || meta::deletion_timestamp(&secret).is_some()
        {
            return Ok(());
        }
        let annotation = |key: &str| meta::annotation(&secret, key).filter(|v| !v.is_empty());
        let account_name = annotation(ACCOUNT_NAME).unwrap_or_default();
        let pinned_uid = annotation(ACCOUNT_UID);
        let account = self
            .read("serviceaccounts", namespace, account_name)?
            .filter(|account| pinned_uid.is_none_or(|uid| meta::uid(account) == Some(uid)));
        match account {
            None => self.delete_token_secret(&secret, namespace, name).await,
            Some(account) => {
                self.fill_token_secret(secret, &account, namespace, name)
                    .await
            }
        }
    }

    /// The object `plural`/`namespace`/`name`, or `None` when there is none.
    fn read(&self, plural: &str, namespace: &str, name: &str) -> ApiResult<Option<Value>> {
        let Some(rt) = self.server.registry().builtin("", plural) else {
            return Ok(None);
        };
        match self.server.get_value(&rt, Some(namespace), name) {
            Ok((object, _)) => Ok(Some(object)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A token of no account: deleted, only if it is still the same Secret.
    async fn delete_token_secret(
        &self,
        secret: &Value,
        namespace: &str,
        name: &str,
    ) -> ApiResult<()> {
        let Some(rt) = self.server.registry().builtin("", "secrets") else {
            return Ok(());
        };
        let opts = DeleteOptions {
            precondition_uid: meta::uid(secret).map(str::to_string),
            ..Default::default()
        };
        tracing::debug!(%namespace, %name, "token secret of no service account deleted");
        settled(self.server.delete(&rt, Some(namespace), name, &opts).await)
    }

    /// Put in what the Secret lacks: a token, its namespace, the cluster's CA; and the
    /// account's name and uid in its annotations. Written only when something was missing.
    async fn fill_token_secret(
        &self,
        mut secret: Value,
        account: &Value,
        namespace: &str,
        name: &str,
    ) -> ApiResult<()> {
        let data_of = |secret: &Value, key: &str| {
            meta::str_at(secret, &format!("/data/{}", key.replace('/', "~1")))
                .unwrap_or("")
                .to_string()
        };
        let ca = self
            .server
            .config()
            .root_ca_pem
            .as_deref()
            .map(|pem| STANDARD.encode(pem));
        let needs_ca = ca
            .as_ref()
            .is_some_and(|ca| data_of(&secret, "ca.crt") != *ca);
        let needs_namespace = data_of(&secret, "namespace").is_empty();
        let needs_token = data_of(&secret, "token").is_empty();
        if !needs_ca && !needs_namespace && !needs_token {
            return Ok(());
        }
        let account_name = meta::name(account).unwrap_or_default();
        let uid = meta::uid(account).unwrap_or_default();
        let data = meta::object_mut(&mut secret, "data");
        if let (true, Some(ca)) = (needs_ca, ca) {
            data.insert("ca.crt".into(), json!(ca));
        }
        if needs_namespace {
            data.insert("namespace".into(), json!(STANDARD.encode(namespace)));
        }
        if needs_token {
            let token = self
                .server
                .token_keys()
                .sign(&claims(namespace, name, account_name, uid));
            data.insert("token".into(), json!(STANDARD.encode(token)));
        }
        let annotations = meta::metadata_mut(&mut secret)
            .entry("annotations")
            .or_insert_with(|| json!({}));
        annotations[ACCOUNT_NAME] = json!(account_name);
        annotations[ACCOUNT_UID] = json!(uid);
        let Some(rt) = self.server.registry().builtin("", "secrets") else {
            return Ok(());
        };
        let target = crate::objects::Target::object(&rt, Some(namespace), name);
        // Written over the version read: a concurrent change conflicts, and its event
        // brings the Secret back here.
        settled(
            self.server
                .update(target, secret, &WriteOptions::default())
                .await
                .map(drop),
        )
    }
}

/// A write that lost to another (409) or found the object gone (404) is done: the event
/// of what happened instead brings the Secret back if it still needs something.
fn settled(outcome: ApiResult<impl Sized>) -> ApiResult<()> {
    match outcome {
        Ok(_) => Ok(()),
        Err(ApiError {
            code: 404 | 409, ..
        }) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bytes_naming_the_type_are_read_again() {
        assert!(may_be_token_secret(
            br#"{"type":"kubernetes.io/service-account-token"}"#
        ));
        assert!(!may_be_token_secret(br#"{"type":"Opaque"}"#));
        assert_eq!(
            namespace_and_name("/core/secrets/ci/builder-token", SECRET_PREFIX),
            Some(("ci", "builder-token"))
        );
        assert_eq!(namespace_and_name("/core/pods/ci/x", SECRET_PREFIX), None);
    }
}
