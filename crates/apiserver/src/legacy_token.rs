//! Secret-based service-account tokens, as kube 1.32 keeps them for whoever creates a
//! `kubernetes.io/service-account-token` Secret by hand (a CI system, a dashboard, an
//! operator handing a long-lived credential to something outside the cluster): the
//! in-server token controller (`controllers/service_account_tokens.rs`, kube-controller-
//! manager's) fills the Secret's `token`, `namespace` and `ca.crt`, and the API accepts the
//! token for as long as the Secret holds it and the account it names is the same one.
//! Using it marks the Secret `kubernetes.io/legacy-token-last-used` with the day, as kube's
//! legacy-token tracking does.
//!
//! The tokens are signed by the same key as TokenRequest's (`review.rs`), with kube's
//! legacy claims and no expiry.

use serde_json::{Value, json};

use crate::ApiServer;
use crate::auth::Identity;
use crate::meta;
use crate::objects::Target;
use crate::patch::DecodedPatch;
use crate::request::WriteOptions;

/// The Secret type a token controller fills.
pub(crate) const SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming the token's service account (required by validation).
pub(crate) const ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";
/// The annotation pinning the account's uid (set by the token controller).
pub(crate) const ACCOUNT_UID: &str = "kubernetes.io/service-account.uid";
/// The issuer of secret-based tokens (kube's `LegacyIssuer`).
pub(crate) const ISSUER: &str = "kubernetes/serviceaccount";
const LAST_USED: &str = "kubernetes.io/legacy-token-last-used";
const INVALID_SINCE: &str = "kubernetes.io/legacy-token-invalid-since";

const NAMESPACE_CLAIM: &str = "kubernetes.io/serviceaccount/namespace";
const SECRET_CLAIM: &str = "kubernetes.io/serviceaccount/secret.name";
const ACCOUNT_NAME_CLAIM: &str = "kubernetes.io/serviceaccount/service-account.name";
const ACCOUNT_UID_CLAIM: &str = "kubernetes.io/serviceaccount/service-account.uid";

/// The claims of the token Secret `secret` holds for the account `account` (uid `uid`).
pub(crate) fn claims(namespace: &str, secret: &str, account: &str, uid: &str) -> Value {
    json!({
        "iss": ISSUER,
        "sub": format!("system:serviceaccount:{namespace}:{account}"),
        NAMESPACE_CLAIM: namespace,
        SECRET_CLAIM: secret,
        ACCOUNT_NAME_CLAIM: account,
        ACCOUNT_UID_CLAIM: uid,
    })
}

/// Whether `claims` (of a token this server signed) are a secret-based token's.
pub(crate) fn is_legacy(claims: &Value) -> bool {
    claims.get("iss").and_then(Value::as_str) == Some(ISSUER)
}

/// Who a secret-based `token` with `claims` is, or kube's reason to refuse it.
pub(crate) fn authenticate(
    server: &ApiServer,
    token: &str,
    claims: &Value,
) -> Result<Identity, String> {
    let claim = |name: &str| claims.get(name).and_then(Value::as_str).unwrap_or("");
    let (namespace, secret_name) = (claim(NAMESPACE_CLAIM), claim(SECRET_CLAIM));
    let (account, uid) = (claim(ACCOUNT_NAME_CLAIM), claim(ACCOUNT_UID_CLAIM));
    for (value, what) in [
        (claim("sub"), "sub"),
        (namespace, "namespace"),
        (secret_name, "secretName"),
        (account, "serviceAccountName"),
        (uid, "serviceAccountUID"),
    ] {
        if value.is_empty() {
            return Err(format!("{what} claim is missing"));
        }
    }
    if claim("sub") != format!("system:serviceaccount:{namespace}:{account}") {
        return Err("sub claim is invalid".into());
    }
    let secret = read(server, "secrets", namespace, secret_name)
        .filter(|secret| meta::deletion_timestamp(secret).is_none())
        .ok_or("Token has been invalidated")?;
    let held = meta::str_at(&secret, "/data/token")
        .and_then(base64_decoded)
        .unwrap_or_default();
    if !crate::auth::constant_time_eq(&held, token.as_bytes()) {
        return Err("Token does not match server's copy".into());
    }
    let account_object = read(server, "serviceaccounts", namespace, account)
        .ok_or_else(|| format!("serviceaccounts \"{account}\" not found"))?;
    if meta::deletion_timestamp(&account_object).is_some() {
        return Err(format!(
            "ServiceAccount {namespace}/{account} has been deleted"
        ));
    }
    let current_uid = meta::uid(&account_object).unwrap_or("");
    if current_uid != uid {
        return Err(format!(
            "ServiceAccount UID ({current_uid}) does not match claim ({uid})"
        ));
    }
    if meta::label(&secret, INVALID_SINCE).is_some_and(|since| !since.is_empty()) {
        return Err(format!(
            "the token in secret {namespace}/{secret_name} for service account {namespace}/{account} has been marked invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the '{INVALID_SINCE}' label from the secret to regain access"
        ));
    }
    track_use(server, &secret);
    Ok(Identity::service_account(
        namespace,
        account,
        Some(uid.to_string()),
    ))
}

fn read(server: &ApiServer, plural: &str, namespace: &str, name: &str) -> Option<Value> {
    let rt = server.registry().builtin("", plural)?;
    server
        .get_value(&rt, Some(namespace), name)
        .ok()
        .map(|(object, _)| object)
}

fn base64_decoded(encoded: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
}

/// Label the Secret with today's date (the server's clock, UTC) unless it says today or
/// tomorrow already, as kube does; in the background, so the request does not wait.
fn track_use(server: &ApiServer, secret: &Value) {
    let now = server.now();
    let today = now.format("%Y-%m-%d").to_string();
    let tomorrow = (now + chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string();
    let last_used = meta::label(secret, LAST_USED).unwrap_or("");
    if last_used == today || last_used == tomorrow {
        return;
    }
    let (Some(namespace), Some(name), Some(uid)) = (
        meta::namespace(secret),
        meta::name(secret),
        meta::uid(secret),
    ) else {
        return;
    };
    let (namespace, name) = (namespace.to_string(), name.to_string());
    let patch = json!({"metadata": {"uid": uid, "labels": {LAST_USED: today}}});
    let server = server.clone();
    tokio::spawn(async move {
        let Some(rt) = server.registry().builtin("", "secrets") else {
            return;
        };
        let target = Target::object(&rt, Some(&namespace), &name);
        if let Err(e) = server
            .patch(
                target,
                &DecodedPatch::Merge(patch),
                &WriteOptions::default(),
            )
            .await
        {
            tracing::debug!(%namespace, %name, error = %e, "could not mark a legacy token's last use");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_claims_are_kubes() {
        let claims = claims("ci", "builder-token", "builder", "u-1");
        assert!(is_legacy(&claims));
        assert_eq!(claims["sub"], "system:serviceaccount:ci:builder");
        assert_eq!(
            claims["kubernetes.io/serviceaccount/secret.name"],
            "builder-token"
        );
        assert_eq!(
            claims["kubernetes.io/serviceaccount/service-account.uid"],
            "u-1"
        );
        assert!(
            claims.get("exp").is_none(),
            "secret-based tokens do not expire"
        );
        assert!(!is_legacy(
            &json!({"iss": "https://kubernetes.default.svc.cluster.local"})
        ));
    }
}
