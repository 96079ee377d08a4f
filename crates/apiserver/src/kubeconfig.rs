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
///
/// The contents go first to a temporary file with a random name, created exclusively
/// (`O_EXCL`, mode 0600) beside `path`, then renamed over it: a file or symlink planted in
/// the directory under a predictable name is never opened, so it cannot redirect the write.
pub fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(path.file_name().unwrap_or_default());
    prefix.push(".");
    let mut file = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(dir)?;
    file.write_all(contents.as_bytes())?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    // The rename is durable once the directory entry is.
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn write_private_does_not_follow_a_symlink_planted_at_a_predictable_temporary_name() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("victim");
        std::fs::write(&target, "untouched").unwrap();
        let path = dir.path().join("kubeconfig");
        // The temporary name earlier versions used.
        std::os::unix::fs::symlink(&target, dir.path().join(".kubeconfig.tmp")).unwrap();

        write_private(&path, "secret: token").unwrap();

        assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "secret: token");
        let mode = std::fs::symlink_metadata(&path)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
    }

    #[cfg(unix)]
    #[test]
    fn write_private_replaces_a_readable_file_with_a_private_one_and_leaves_no_temporary() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();

        write_private(&path, "new").unwrap();

        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["kubeconfig"]);
    }
}
