//! Restart intensity and backoff.
//!
//! A child that fails as soon as it starts would otherwise be restarted in a
//! tight loop forever. OTP's answer is an intensity limit: at most N restarts
//! within a window of T; one more and the supervisor gives up and fails,
//! handing the problem to its own parent. A backoff spaces the restarts out.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// At most `max_restarts` restarts within `within`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intensity {
    /// How many restarts the window tolerates.
    pub max_restarts: u32,
    /// The sliding window.
    pub within: Duration,
}

impl Intensity {
    /// A limit of `max_restarts` within `within`.
    pub fn new(max_restarts: u32, within: Duration) -> Self {
        Self {
            max_restarts,
            within,
        }
    }
}

impl Default for Intensity {
    /// OTP's default: 3 restarts within 5 seconds.
    fn default() -> Self {
        Self::new(3, Duration::from_secs(5))
    }
}

/// The times of recent restarts, checked against an [`Intensity`].
#[derive(Debug, Clone, Default)]
pub struct RestartLog {
    times: VecDeque<Instant>,
}

impl RestartLog {
    /// Records a restart now. Returns `false` when this restart exceeds the
    /// limit, i.e. the caller must give up instead of restarting.
    pub fn record(&mut self, limit: Intensity) -> bool {
        let now = Instant::now();
        while let Some(first) = self.times.front() {
            if now.duration_since(*first) > limit.within {
                self.times.pop_front();
            } else {
                break;
            }
        }
        self.times.push_back(now);
        self.times.len() <= limit.max_restarts as usize
    }

    /// How many restarts are in the current window (including the last one
    /// recorded).
    pub fn recent(&self) -> u32 {
        u32::try_from(self.times.len()).unwrap_or(u32::MAX)
    }
}

/// How long to wait before a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backoff {
    /// Restart at once.
    #[default]
    None,
    /// Wait the same time before every restart.
    Fixed(Duration),
    /// Wait `base`, then twice that, and so on (by the number of restarts in
    /// the current intensity window), never more than `max`.
    Exponential {
        /// The first delay.
        base: Duration,
        /// The longest delay.
        max: Duration,
    },
}

impl Backoff {
    /// The delay before a restart when `recent` restarts (counting this one)
    /// fall in the current window.
    pub fn delay(self, recent: u32) -> Duration {
        match self {
            Self::None => Duration::ZERO,
            Self::Fixed(d) => d,
            Self::Exponential { base, max } => {
                let shift = recent.saturating_sub(1).min(20);
                base.saturating_mul(1u32 << shift).min(max)
            }
        }
    }
}
