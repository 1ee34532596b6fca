//! Where the scheduler reads the time from.
//!
//! The scheduler never calls `Utc::now()` itself: it asks a [`Clock`]. In
//! production that is the [`SystemClock`]; in tests a [`VirtualClock`] is
//! set and advanced by hand, so a test can cross a week, a daylight-saving
//! change or a lease expiry without waiting.

use chrono::{DateTime, TimeDelta, Utc};
use parking_lot::Mutex;

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// The machine's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that stands still until it is set or advanced.
#[derive(Debug)]
pub struct VirtualClock {
    now: Mutex<DateTime<Utc>>,
}

impl VirtualClock {
    /// A clock showing `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// Sets the time to `to` (it may go backwards, as a real clock can).
    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock() = to;
    }

    /// Moves the time forward by `by` and returns the new time.
    pub fn advance(&self, by: TimeDelta) -> DateTime<Utc> {
        let mut now = self.now.lock();
        *now += by;
        *now
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock()
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn virtual_clock_moves_only_when_told() {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let clock = VirtualClock::new(start);
        assert_eq!(clock.now(), start);
        assert_eq!(clock.now(), start);
        let later = clock.advance(TimeDelta::minutes(90));
        assert_eq!(later, Utc.with_ymd_and_hms(2026, 1, 1, 1, 30, 0).unwrap());
        assert_eq!(clock.now(), later);
        clock.set(start);
        assert_eq!(clock.now(), start);
    }

    #[test]
    fn system_clock_is_close_to_utc_now() {
        let before = Utc::now();
        let now = SystemClock.now();
        assert!(now >= before && now <= Utc::now());
    }
}
