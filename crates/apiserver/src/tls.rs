//! TLS credentials: a private CA and serving certificate for 127.0.0.1/localhost and a bearer
//! token, created on first start and kept (mode 0600) in the data directory, and the rustls
//! configuration that presents them. Serving connections is [`crate::serve`]'s.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use rand::Rng;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("generating certificates failed: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("{path} is not a valid PEM file: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("TLS configuration failed: {0}")]
    Config(#[from] rustls::Error),
}

/// What a client needs to trust and authenticate to the server.
#[derive(Clone)]
pub struct Credentials {
    pub ca_cert_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub token: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token and key are secrets: never print them.
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const SERVER_CERT: &str = "server.crt";
const SERVER_KEY: &str = "server.key";
const TOKEN: &str = "token";

fn read(dir: &Path, file: &str) -> Result<Option<String>, TlsError> {
    let path = dir.join(file);
    match std::fs::read_to_string(&path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TlsError::Io { path, source }),
    }
}

fn write_private(dir: &Path, file: &str, contents: &str) -> Result<(), TlsError> {
    let path = dir.join(file);
    crate::kubeconfig::write_private(&path, contents)
        .map_err(|source| TlsError::Io { path, source })
}

/// The directory holds the CA key and the token: owner-only from the moment it exists.
fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Load the credentials from `dir`, creating whatever is missing.
pub fn load_or_create(dir: &Path) -> Result<Credentials, TlsError> {
    create_private_dir(dir).map_err(|source| TlsError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let existing = (
        read(dir, CA_CERT)?,
        read(dir, SERVER_CERT)?,
        read(dir, SERVER_KEY)?,
    );
    let (ca_cert_pem, cert_pem, key_pem) = match existing {
        (Some(ca), Some(cert), Some(key)) if meets_strict_verification(&cert) => (ca, cert, key),
        _ => {
            let generated = generate()?;
            write_private(dir, CA_KEY, &generated.3)?;
            write_private(dir, CA_CERT, &generated.0)?;
            write_private(dir, SERVER_KEY, &generated.2)?;
            write_private(dir, SERVER_CERT, &generated.1)?;
            (generated.0, generated.1, generated.2)
        }
    };
    let token = match read(dir, TOKEN)? {
        Some(t) if !t.trim().is_empty() => t.trim().to_string(),
        _ => {
            let bytes: [u8; 32] = rand::rng().random();
            let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
            write_private(dir, TOKEN, &token)?;
            token
        }
    };
    Ok(Credentials {
        ca_cert_pem,
        cert_pem,
        key_pem,
        token,
    })
}

/// DER encoding of the Authority Key Identifier extension's OID, 2.5.29.35.
const AUTHORITY_KEY_IDENTIFIER_OID: [u8; 5] = [0x06, 0x03, 0x55, 0x1d, 0x23];

/// Whether a serving certificate written by an earlier steady satisfies strict X.509
/// verification (Python 3.13's default, Go's): it must name its issuer's key with an
/// Authority Key Identifier. Certificates from before that rule are re-issued at start; the
/// token is kept, and the kubeconfig is rewritten at every start anyway. A byte search for
/// the extension's OID is enough here: steady wrote these certificates itself, and five
/// bytes matching by chance inside a key or signature is vanishingly unlikely.
fn meets_strict_verification(cert_pem: &str) -> bool {
    CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .next()
        .and_then(Result::ok)
        .is_some_and(|der| {
            der.as_ref()
                .windows(AUTHORITY_KEY_IDENTIFIER_OID.len())
                .any(|w| w == AUTHORITY_KEY_IDENTIFIER_OID)
        })
}

/// (ca cert, server cert, server key, ca key), all PEM. Both certificates carry the key
/// identifiers and usages that strict verifiers demand (Python ≥ 3.13, Go): the CA a
/// Subject Key Identifier, critical basic constraints and certificate-signing usage; the
/// serving certificate an Authority Key Identifier, its own Subject Key Identifier,
/// `CA:FALSE`, digital-signature usage and server-auth extended usage.
fn generate() -> Result<(String, String, String, String), TlsError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "steady-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate()?;
    let mut params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "steady-apiserver");
    params.is_ca = IsCa::ExplicitNoCa;
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = params.signed_by(&server_key, &issuer)?;
    let ca_key_pem = issuer.key().serialize_pem();
    Ok((
        ca_cert.pem(),
        server_cert.pem(),
        server_key.serialize_pem(),
        ca_key_pem,
    ))
}

/// rustls server configuration offering HTTP/2 and HTTP/1.1.
pub fn server_config(credentials: &Credentials) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let pem_error = |file: &str, e: rustls::pki_types::pem::Error| TlsError::Pem {
        path: PathBuf::from(file),
        message: e.to_string(),
    };
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(credentials.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| pem_error(SERVER_CERT, e))?;
    let key = PrivateKeyDer::from_pem_slice(credentials.key_pem.as_bytes())
        .map_err(|e| pem_error(SERVER_KEY, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A serving certificate as steady wrote them before strict verification was required:
    /// no Authority Key Identifier.
    fn legacy_serving_cert() -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params.self_signed(&key).expect("cert").pem()
    }

    #[test]
    fn generated_serving_certificate_names_its_issuer_key() {
        let (_, cert, _, _) = generate().expect("generate");
        assert!(meets_strict_verification(&cert));
        assert!(!meets_strict_verification(&legacy_serving_cert()));
    }

    #[test]
    fn legacy_certificates_are_reissued_and_the_token_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = load_or_create(dir.path()).expect("create");
        std::fs::write(dir.path().join(SERVER_CERT), legacy_serving_cert()).expect("plant");
        let second = load_or_create(dir.path()).expect("reload");
        assert_eq!(second.token, first.token);
        assert!(meets_strict_verification(&second.cert_pem));
        let third = load_or_create(dir.path()).expect("reload again");
        assert_eq!(
            third.cert_pem, second.cert_pem,
            "a compliant certificate is kept"
        );
    }
}
