//! The workspace's one HTTP stack: reqwest 0.13 over rustls with the *ring*
//! crypto provider.
//!
//! reqwest is built with `rustls-no-provider` so that no aws-lc (and its C
//! and cmake build) enters the workspace; the price is that a client built
//! before a process-wide provider is installed panics. Every client in troupe
//! (the model providers, the MCP client, the web tools) is therefore built
//! from [`client_builder`], which installs ring once.
//!
//! # Examples
//!
//! ```
//! let client = troupe_runtime::net::client_builder()
//!     .connect_timeout(std::time::Duration::from_secs(5))
//!     .build();
//! assert!(client.is_ok());
//! ```

use std::sync::Once;

/// Installs ring as the process's rustls crypto provider, once. Harmless if
/// something else installed one first (that one stays).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An error only means a provider is already installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A reqwest client builder that is safe to `build()`: the crypto provider is
/// installed first.
pub fn client_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
}
