//! A cap on concurrent calls to one provider endpoint.
//!
//! A thousand agents on one node must not open a thousand connections to the
//! same endpoint: each call takes a permit from the endpoint's semaphore
//! before it connects and holds it until its stream ends or is dropped.
//! Endpoints are keyed by base URL, so every model resolved against the same
//! server shares one cap.

use std::sync::{Arc, LazyLock};

use dashmap::DashMap;
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

/// Concurrent calls allowed per endpoint unless configured otherwise.
pub const DEFAULT_CONCURRENCY: usize = 8;

/// The caps of every endpoint, by key (the base URL).
#[derive(Debug, Default)]
pub struct ConcurrencyLimits {
    caps: DashMap<String, ConcurrencyLimit>,
}

impl ConcurrencyLimits {
    /// An empty set of caps.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide set used by [`super::spec::resolve`].
    pub fn global() -> Arc<ConcurrencyLimits> {
        static GLOBAL: LazyLock<Arc<ConcurrencyLimits>> =
            LazyLock::new(|| Arc::new(ConcurrencyLimits::new()));
        Arc::clone(&GLOBAL)
    }

    /// The cap for `key`, created with `permits` on first use (later calls
    /// get the existing cap whatever `permits` they pass).
    pub fn get(&self, key: &str, permits: usize) -> ConcurrencyLimit {
        self.caps
            .entry(key.to_string())
            .or_insert_with(|| ConcurrencyLimit::new(permits))
            .clone()
    }
}

/// One endpoint's cap; clones share it.
#[derive(Debug, Clone)]
pub struct ConcurrencyLimit {
    semaphore: Arc<Semaphore>,
    permits: usize,
}

impl ConcurrencyLimit {
    /// A cap of `permits` concurrent calls (at least 1).
    pub fn new(permits: usize) -> Self {
        let permits = permits.max(1);
        Self {
            semaphore: Arc::new(Semaphore::new(permits)),
            permits,
        }
    }

    /// Waits for a permit; hold it for the call's whole life. (The
    /// semaphore is never closed, so the error does not happen in practice.)
    pub async fn acquire(&self) -> Result<OwnedSemaphorePermit, AcquireError> {
        Arc::clone(&self.semaphore).acquire_owned().await
    }

    /// The cap's size.
    pub fn permits(&self) -> usize {
        self.permits
    }

    /// Permits free right now.
    pub fn available(&self) -> usize {
        self.semaphore.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn permits_are_shared_by_key_and_returned_on_drop() {
        let limits = ConcurrencyLimits::new();
        let a = limits.get("http://x", 2);
        let same = limits.get("http://x", 50);
        assert_eq!(same.permits(), 2);
        let first = a.acquire().await.unwrap();
        let _second = same.acquire().await.unwrap();
        assert_eq!(a.available(), 0);
        let third = tokio::time::timeout(std::time::Duration::from_millis(20), a.acquire()).await;
        assert!(third.is_err(), "a third call must wait");
        drop(first);
        let _third = tokio::time::timeout(std::time::Duration::from_secs(5), a.acquire())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(limits.get("http://other", 1).available(), 1);
    }
}
