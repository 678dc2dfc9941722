//! TLS client settings: which certificates to trust and which protocols to offer (ALPN).
//!
//! Verification is on by default against the operating system's roots (`/etc/ssl/certs` on
//! Debian); `--cacert` trusts a private CA instead, `--insecure` turns verification off (the
//! summary and run.json say so). The handshake itself happens in `connect.rs`, whose time is
//! part of `connect_ns`. This module builds the shared `rustls` configuration once per run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Which server certificates to accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verify {
    /// The operating system's trusted roots.
    System,
    /// Only certificates issued by the CA(s) in this PEM file (`--cacert`).
    CaFile(PathBuf),
    /// Anything (`--insecure`): encryption without authentication.
    Insecure,
}

/// Why the TLS settings could not be built; reported before any request is sent (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("--cacert {path}: cannot read a PEM certificate from it ({reason}); give the CA certificate that signed the server's, in PEM")]
    CaFile { path: String, reason: String },
    #[error("no trusted root certificates found on this system ({0}); install Debian's ca-certificates, or pass --cacert FILE (or --insecure)")]
    NoSystemRoots(String),
}

/// The ALPN protocol a run's connections offer, alone, so the server cannot pick a protocol
/// the run did not ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    Http1,
    /// `h2` (`--http2`, gRPC).
    H2,
    /// `h3` (`--http3`; QUIC carries TLS 1.3 only, which rustls then negotiates).
    H3,
}

/// The rustls configuration every connection of the run uses, offering `alpn`.
pub fn client_config(verify: &Verify, alpn: Alpn) -> Result<Arc<ClientConfig>, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("the ring provider supports the default protocol versions");
    let mut config = match verify {
        Verify::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
            .with_no_client_auth(),
        Verify::System => builder
            .with_root_certificates(system_roots()?)
            .with_no_client_auth(),
        Verify::CaFile(path) => builder
            .with_root_certificates(ca_file_roots(path)?)
            .with_no_client_auth(),
    };
    config.alpn_protocols = vec![match alpn {
        Alpn::Http1 => b"http/1.1".to_vec(),
        Alpn::H2 => b"h2".to_vec(),
        Alpn::H3 => super::http3::ALPN.to_vec(),
    }];
    Ok(Arc::new(config))
}

fn system_roots() -> Result<RootCertStore, TlsSetupError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let reason = found
            .errors
            .first()
            .map_or_else(|| "the store is empty".to_string(), |e| e.to_string());
        return Err(TlsSetupError::NoSystemRoots(reason));
    }
    Ok(roots)
}

fn ca_file_roots(path: &Path) -> Result<RootCertStore, TlsSetupError> {
    let bad = |reason: String| TlsSetupError::CaFile {
        path: path.display().to_string(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("it holds no CERTIFICATE block".to_string()));
    }
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(bad(format!("{ignored} certificate(s) could not be parsed")));
    }
    Ok(roots)
}

/// `--insecure`: accepts any certificate, but still checks that the handshake's signatures
/// are valid for the certificate presented, so the connection is at least well-formed TLS.
#[derive(Debug)]
struct AcceptAnything(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
