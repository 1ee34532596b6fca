//! `[browser]`: troupe's own browser, driven by `browser_exec`.
//!
//! The browser is found on `PATH` (Chromium, Chrome, Edge) unless `chrome`
//! names one; without either, `browser_exec` is not offered at all. A
//! browser nobody used for `idle_s` seconds is stopped, so an idle troupe
//! does not keep one running.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[browser]`: which browser `browser_exec` drives and how long it idles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Browser {
    /// The browser program (a path, or a name looked up on `PATH`); unset:
    /// the first of `chromium`, `google-chrome`, `microsoft-edge`, … found.
    pub chrome: Option<PathBuf>,
    /// Seconds a browser may sit unused before it is stopped.
    pub idle_s: u64,
}

impl Default for Browser {
    fn default() -> Self {
        Self {
            chrome: None,
            idle_s: 300,
        }
    }
}
