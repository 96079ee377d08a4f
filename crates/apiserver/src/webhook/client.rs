//! The HTTPS client admission and conversion webhooks are called with: resolves a
//! `clientConfig` (`url`, or `service` — see below), verifies the server against the
//! `caBundle`, posts one JSON document and reads one back, all within a deadline.
//!
//! steady has no cluster network, so a `service` reference is resolved to the local machine:
//! `service {namespace, name, port, path}` connects to `127.0.0.1:<port>` (default 443) and
//! verifies the certificate for `<name>.<namespace>.svc`, the name kube-apiserver verifies.
//! A webhook server run beside steady (an operator under test) is reached that way with the
//! manifests it would use in a cluster. One connection per call: no pooling.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

/// Largest webhook response read (kube-apiserver reads at most 3 MiB as well).
const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;

/// Why a webhook could not be called, or answered nothing usable. The texts follow Go's
/// `net/http` client where kube-apiserver's messages embed them (`Post "<url>": ...`).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("invalid webhook configuration: {0}")]
    Config(String),
    #[error("Post \"{url}\": {reason}")]
    Transport { url: String, reason: String },
    #[error("Post \"{url}\": context deadline exceeded")]
    Timeout { url: String },
    #[error(
        "an error on the server ({body}) has prevented the request from succeeding (status {status})"
    )]
    Status { status: u16, body: String },
    #[error("received invalid webhook response: {0}")]
    InvalidResponse(String),
}

/// Where a webhook is, and how its certificate is checked.
#[derive(Debug)]
struct Endpoint {
    /// The URL as kube-apiserver would name it in messages.
    url: String,
    connect_host: String,
    port: u16,
    server_name: ServerName<'static>,
    path_and_query: String,
    host_header: String,
}

fn config_error(message: impl Into<String>) -> CallError {
    CallError::Config(message.into())
}

fn resolve(client_config: &Value, timeout: Duration) -> Result<Endpoint, CallError> {
    let timeout_query = format!("timeout={}s", timeout.as_secs());
    if let Some(url) = client_config.get("url").and_then(Value::as_str) {
        return resolve_url(url, &timeout_query);
    }
    let Some(service) = client_config.get("service") else {
        return Err(config_error("exactly one of url or service is required"));
    };
    let text = |field: &str| service.get(field).and_then(Value::as_str).unwrap_or("");
    let (namespace, name) = (text("namespace"), text("name"));
    if namespace.is_empty() || name.is_empty() {
        return Err(config_error(
            "service.namespace and service.name are required",
        ));
    }
    let port = service
        .get("port")
        .and_then(Value::as_u64)
        .unwrap_or(443)
        .try_into()
        .map_err(|_| config_error("service.port must be between 1 and 65535"))?;
    let host = format!("{name}.{namespace}.svc");
    let path = Some(text("path")).filter(|p| !p.is_empty()).unwrap_or("/");
    let server_name = ServerName::try_from(host.clone())
        .map_err(|e| config_error(format!("service name {host:?}: {e}")))?;
    Ok(Endpoint {
        url: format!("https://{host}:{port}{path}?{timeout_query}"),
        connect_host: "127.0.0.1".into(),
        port,
        server_name,
        path_and_query: format!("{path}?{timeout_query}"),
        host_header: format!("{host}:{port}"),
    })
}

fn resolve_url(url: &str, timeout_query: &str) -> Result<Endpoint, CallError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| config_error(format!("url {url:?}: {e}")))?;
    if uri.scheme_str() != Some("https") {
        return Err(config_error(format!(
            "url {url:?}: the scheme must be https"
        )));
    }
    let host = uri
        .host()
        .ok_or_else(|| config_error(format!("url {url:?} has no host")))?;
    let bare_host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let server_name = ServerName::try_from(bare_host.clone())
        .map_err(|e| config_error(format!("url {url:?}: {e}")))?;
    let path_and_query = match uri.query() {
        Some(query) => format!("{}?{query}&{timeout_query}", uri.path()),
        None => format!("{}?{timeout_query}", uri.path()),
    };
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
    Ok(Endpoint {
        url: format!("https://{authority}{path_and_query}"),
        connect_host: bare_host,
        port,
        server_name,
        path_and_query,
        host_header: authority.to_string(),
    })
}

/// rustls configuration trusting only the `caBundle` (base64 of PEM certificates in the API
/// object; the JSON carries the bytes base64-encoded).
fn tls_config(client_config: &Value) -> Result<Arc<rustls::ClientConfig>, CallError> {
    let bundle = client_config
        .get("caBundle")
        .and_then(Value::as_str)
        .filter(|b| !b.is_empty())
        .ok_or_else(|| {
            config_error("caBundle is required: steady trusts no system roots for webhooks")
        })?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle)
        .map_err(|e| config_error(format!("caBundle is not base64: {e}")))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| config_error(format!("caBundle: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| config_error(format!("caBundle: {e}")))?;
    }
    if roots.is_empty() {
        return Err(config_error("caBundle holds no PEM certificate"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The `response` of a review a webhook answered, checked to be the answer to request
/// `uid` (admission and conversion reviews carry it alike); `absent` is what is wrong when
/// there is no response at all.
pub fn review_response<'a>(
    answer: &'a Value,
    uid: &str,
    absent: &str,
) -> Result<&'a Value, CallError> {
    let response = answer
        .get("response")
        .filter(|r| r.is_object())
        .ok_or_else(|| CallError::InvalidResponse(absent.into()))?;
    let answered_uid = response["uid"].as_str().unwrap_or("");
    if answered_uid != uid {
        return Err(CallError::InvalidResponse(format!(
            "expected response.uid={uid:?}, got {answered_uid:?}"
        )));
    }
    Ok(response)
}

/// POST `body` to the webhook `client_config` names and return the JSON it answers, within
/// `timeout` (connection, TLS, request and response together).
pub async fn post_json(
    client_config: &Value,
    body: &Value,
    timeout: Duration,
) -> Result<Value, CallError> {
    let endpoint = resolve(client_config, timeout)?;
    let tls = tls_config(client_config)?;
    let body = serde_json::to_vec(body).map_err(|e| config_error(e.to_string()))?;
    match tokio::time::timeout(timeout, exchange(&endpoint, tls, body)).await {
        Ok(result) => result,
        Err(_) => Err(CallError::Timeout { url: endpoint.url }),
    }
}

async fn exchange(
    endpoint: &Endpoint,
    tls: Arc<rustls::ClientConfig>,
    body: Vec<u8>,
) -> Result<Value, CallError> {
    let transport = |reason: String| CallError::Transport {
        url: endpoint.url.clone(),
        reason,
    };
    let tcp = tokio::net::TcpStream::connect((endpoint.connect_host.as_str(), endpoint.port))
        .await
        .map_err(|e| {
            transport(format!(
                "dial tcp {}:{}: {e}",
                endpoint.connect_host, endpoint.port
            ))
        })?;
    crate::serve::without_nagle(&tcp);
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(endpoint.server_name.clone(), tcp)
        .await
        .map_err(|e| transport(format!("tls: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| transport(e.to_string()))?;
    let driver = tokio::spawn(connection);
    let request = http::Request::post(endpoint.path_and_query.as_str())
        .header(http::header::HOST, endpoint.host_header.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| config_error(e.to_string()))?;
    let response = sender.send_request(request).await;
    let result = match response {
        Ok(response) => read_answer(response).await.map_err(|e| match e {
            ReadError::Body(reason) => transport(reason),
            ReadError::Call(e) => e,
        }),
        Err(e) => Err(transport(e.to_string())),
    };
    driver.abort();
    result
}

enum ReadError {
    Body(String),
    Call(CallError),
}

async fn read_answer(response: http::Response<hyper::body::Incoming>) -> Result<Value, ReadError> {
    let status = response.status();
    let bytes = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| ReadError::Body(e.to_string()))?
        .to_bytes();
    if !status.is_success() {
        return Err(ReadError::Call(CallError::Status {
            status: status.as_u16(),
            body: String::from_utf8_lossy(&bytes).chars().take(1024).collect(),
        }));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| ReadError::Call(CallError::InvalidResponse(e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_service_resolves_to_the_local_machine_with_its_cluster_name() {
        let config = json!({"service": {"namespace": "ops", "name": "hooks", "port": 8443, "path": "/validate"}});
        let endpoint = resolve(&config, Duration::from_secs(10)).expect("resolves");
        assert_eq!(endpoint.connect_host, "127.0.0.1");
        assert_eq!(endpoint.port, 8443);
        assert_eq!(
            endpoint.server_name,
            ServerName::try_from("hooks.ops.svc").expect("a name")
        );
        assert_eq!(
            endpoint.url,
            "https://hooks.ops.svc:8443/validate?timeout=10s"
        );
    }

    #[test]
    fn a_url_keeps_its_host_port_and_query() {
        let config = json!({"url": "https://127.0.0.1:9443/mutate?x=1"});
        let endpoint = resolve(&config, Duration::from_secs(5)).expect("resolves");
        assert_eq!(endpoint.connect_host, "127.0.0.1");
        assert_eq!(endpoint.port, 9443);
        assert_eq!(endpoint.path_and_query, "/mutate?x=1&timeout=5s");
        let http = json!({"url": "http://127.0.0.1:9443/"});
        assert!(matches!(
            resolve(&http, Duration::from_secs(5)),
            Err(CallError::Config(_))
        ));
    }
}
