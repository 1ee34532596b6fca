//! The network sandboxed programs share: one namespace whose only way out
//! is the egress proxy ([`super::egress`]), started with the first program
//! that needs it and again if its process died.
//!
//! `run_command`'s commands and `browser_exec`'s Python programs are both
//! code run on the machine, so they get the same network: the one
//! `[sandbox] network` says (the public internet through the proxy, or
//! none), from one [`CommandNetwork`] that both tools hold.

use std::sync::Arc;

use troupe_runtime::sandbox::network::{Held, Namespace};
use troupe_runtime::sandbox::{Network, Sandbox, SandboxSettings};

use super::egress::Egress;

/// The namespace sandboxed programs share, and the rule of its proxy.
pub struct CommandNetwork {
    settings: SandboxSettings,
    held: tokio::sync::Mutex<Option<Held>>,
    egress: Arc<Egress>,
}

impl CommandNetwork {
    /// The network `settings` (`[sandbox]`) gives sandboxed programs.
    pub fn new(settings: SandboxSettings) -> Self {
        Self {
            egress: Arc::new(Egress::new(settings.allow_addresses.clone())),
            held: tokio::sync::Mutex::new(None),
            settings,
        }
    }

    /// The network a program in `sandbox` gets: the shared namespace when
    /// `[sandbox] network` is on, else none.
    ///
    /// # Errors
    ///
    /// The namespace could not be started (its message says why).
    pub async fn for_program(&self, sandbox: &Sandbox) -> Result<Network, String> {
        if !self.settings.network {
            return Ok(Network::None);
        }
        Ok(Network::Joined(self.namespace(sandbox).await?))
    }

    /// The addresses the proxy reaches on the machine anyway
    /// (`[sandbox] allow_addresses`).
    pub fn allowed(&self) -> &[std::net::IpAddr] {
        &self.settings.allow_addresses
    }

    async fn namespace(&self, sandbox: &Sandbox) -> Result<Arc<Namespace>, String> {
        let mut held = self.held.lock().await;
        if let Some(h) = held.as_ref().filter(|h| h.alive()) {
            return Ok(h.namespace());
        }
        let helper = self
            .settings
            .helper
            .clone()
            .or_else(|| std::env::current_exe().ok())
            .unwrap_or_else(|| "troupe".into());
        let started = Held::start(sandbox, &helper, self.egress.on_connection()).await?;
        let namespace = started.namespace();
        *held = Some(started);
        Ok(namespace)
    }
}
