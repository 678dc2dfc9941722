//! TLS for the reference server: a certificate and key as PEM, turned into a rustls config
//! that offers HTTP/2 and HTTP/1.1 by ALPN.
//!
//! Tests hand in PEM bytes they generated; the binary reads files. Either way the PEM is
//! kept as given and parsed by [`TlsConfig::rustls_config`] (called from
//! [`crate::ServerConfig::validate`]), so errors name where the PEM came from. This module
//! does not accept connections or run handshakes (the server module does), and it offers no
//! client authentication: the server is for test networks.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::ConfigError;

/// ALPN protocols, most preferred first: a client that offers both gets HTTP/2.
const ALPN_PROTOCOLS: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// A certificate chain and its private key, as PEM, plus where each came from (for errors).
#[derive(Clone, PartialEq, Eq)]
pub struct TlsConfig {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    cert_source: String,
    key_source: String,
}

impl fmt::Debug for TlsConfig {
    /// Leaves the PEM out: the key is a secret, even a test one, and it would drown the rest.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("cert_source", &self.cert_source)
            .field("key_source", &self.key_source)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// A certificate chain (leaf first) and its private key, both PEM. Nothing is checked
    /// until the config is validated.
    pub fn from_pem(cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Self {
        Self {
            cert_pem,
            key_pem,
            cert_source: "the in-memory certificate PEM".to_owned(),
            key_source: "the in-memory key PEM".to_owned(),
        }
    }

    /// Reads both PEM files now; a file that cannot be read is an error naming it. Their
    /// content is checked when the config is validated, with errors naming the files too.
    pub fn from_files(cert_path: &Path, key_path: &Path) -> Result<Self, ConfigError> {
        let read = |what: &'static str, path: &Path| {
            std::fs::read(path).map_err(|e| ConfigError::TlsRead {
                what,
                path: path.display().to_string(),
                reason: e.to_string(),
            })
        };
        Ok(Self {
            cert_pem: read("certificate", cert_path)?,
            key_pem: read("private key", key_path)?,
            cert_source: cert_path.display().to_string(),
            key_source: key_path.display().to_string(),
        })
    }

    /// Parses the PEM and builds the rustls server config (ring provider, TLS 1.2 and 1.3,
    /// ALPN `h2` then `http/1.1`).
    pub(crate) fn rustls_config(&self) -> Result<Arc<rustls::ServerConfig>, ConfigError> {
        let certificate_error = |reason: String| ConfigError::TlsCertificate {
            source_name: self.cert_source.clone(),
            reason,
        };
        let certs = CertificateDer::pem_slice_iter(&self.cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| certificate_error(e.to_string()))?;
        if certs.is_empty() {
            return Err(certificate_error("no certificate found".to_owned()));
        }
        let key =
            PrivateKeyDer::from_pem_slice(&self.key_pem).map_err(|e| ConfigError::TlsKey {
                source_name: self.key_source.clone(),
                reason: match e {
                    rustls_pki_types::pem::Error::NoItemsFound => "no private key found".to_owned(),
                    other => other.to_string(),
                },
            })?;
        let pair_error = |e: rustls::Error| ConfigError::TlsPair {
            cert: self.cert_source.clone(),
            key: self.key_source.clone(),
            reason: e.to_string(),
        };
        // An explicit provider, not the process default: the binary and tests never install
        // one, and a dependency that did must not change what this server speaks.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(pair_error)?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(pair_error)?;
        config.alpn_protocols = ALPN_PROTOCOLS.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }
}
