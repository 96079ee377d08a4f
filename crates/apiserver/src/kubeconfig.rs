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

/// Write a file readable only by its owner (0600, also when it already existed), atomically
/// (a reader sees the old or the new contents, never half) and durably.
pub fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.tmp"));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp)?;
    #[cfg(unix)]
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}
