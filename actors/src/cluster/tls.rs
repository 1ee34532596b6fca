//! TLS between the nodes of a cluster: both ends prove who they are.
//!
//! ractor_cluster takes a TLS acceptor for its node server and a TLS
//! connector for each connection it is asked to open; this module makes
//! both from three PEM files the operator gives (`[cluster] tls_cert`,
//! `tls_key`, `tls_ca`): this node's certificate chain and key, and the
//! authority that signed every node's certificate. Each side checks the
//! other's certificate against that authority (mutual TLS), so a machine
//! without a certificate of the cluster's authority cannot even reach the
//! cookie's challenge. A node dials another by the address it was given
//! (`--join`, or the address a peer said it listens on), and the
//! certificate it is answered with must name that host (an IP address or
//! a DNS name in its subject alternative names), as a browser checks a
//! web site's. rustls with the ring provider, as everywhere in troupe.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::ClusterError;

/// The three files TLS between nodes is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// This node's certificate chain (PEM), its own certificate first.
    pub cert: PathBuf,
    /// This node's private key (PEM: PKCS #8, PKCS #1 or SEC1).
    pub key: PathBuf,
    /// The authority that signed every node's certificate (PEM).
    pub ca: PathBuf,
}

/// TLS as a node server accepts it and as its connections open it.
#[derive(Clone)]
pub struct Tls {
    /// What the node server accepts with.
    pub acceptor: TlsAcceptor,
    /// What a connection to another node opens with.
    pub connector: TlsConnector,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl Tls {
    /// Reads the files and makes both ends; what is wrong is named with
    /// its file.
    pub fn load(files: &TlsFiles) -> Result<Self, ClusterError> {
        let refused = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
            ClusterError::Refused(format!(
                "TLS between nodes: {what} {} could not be read: {e}",
                path.display()
            ))
        };
        let chain =
            certificates(&files.cert).map_err(|e| refused("the certificate", &files.cert, &e))?;
        let key = PrivateKeyDer::from_pem_file(&files.key)
            .map_err(|e| refused("the private key", &files.key, &e))?;
        let authority =
            certificates(&files.ca).map_err(|e| refused("the authority", &files.ca, &e))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in authority {
            roots
                .add(cert)
                .map_err(|e| refused("the authority", &files.ca, &e))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let wrong = |e: rustls::Error| {
            ClusterError::Refused(format!(
                "TLS between nodes: {} and {} do not make a certificate and its key: {e}",
                files.cert.display(),
                files.key.display()
            ))
        };
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::clone(&roots),
            Arc::clone(&provider),
        )
        .build()
        .map_err(|e| refused("the authority", &files.ca, &e))?;
        let server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(wrong)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(wrong)?;
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(wrong)?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(wrong)?;
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
        })
    }
}

/// Every certificate of a PEM file; none is an error.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("it holds no certificate (`-----BEGIN CERTIFICATE-----`)".into());
    }
    Ok(certs)
}

/// The name the certificate of the node at `addr` (`HOST:PORT`) must hold.
pub fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("`{host}` of `{addr}` is neither an IP address nor a DNS name: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_named_by_the_host_it_is_dialled_at() {
        assert_eq!(
            server_name("127.0.0.1:7900").unwrap(),
            ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into())
        );
        assert_eq!(
            server_name("[::1]:7900").unwrap(),
            ServerName::IpAddress(std::net::Ipv6Addr::LOCALHOST.into())
        );
        assert_eq!(
            server_name("node-b.internal:7900").unwrap(),
            ServerName::try_from("node-b.internal").unwrap()
        );
        assert!(server_name("not a host:1").is_err());
    }

    #[test]
    fn a_missing_or_empty_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let files = TlsFiles {
            cert: empty.clone(),
            key: dir.path().join("missing.key"),
            ca: empty,
        };
        let e = Tls::load(&files).unwrap_err().to_string();
        assert!(
            e.contains("empty.pem") && e.contains("no certificate"),
            "{e}"
        );
    }
}
