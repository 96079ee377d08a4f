//! Kubeconfig files that kubectl, kube-rs, the Python client and kopf use as they are.

use base64::Engine;
use serde_json::json;

/// A kubeconfig for `server` (an https URL) trusting `ca_cert_pem` and sending `token`.
pub fn render(server: &str, ca_cert_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_cert_pem);
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "steady", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "steady", "user": {"token": token}}],
        "contexts": [{"name": "steady", "context": {"cluster": "steady", "user": "steady", "namespace": "default"}}],
        "current-context": "steady",
        "preferences": {},
    });
    serde_yaml::to_string(&config).unwrap_or_default()
}

/// Write a kubeconfig readable only by its owner.
pub fn write(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(contents.as_bytes())
}
