//! One shared copy of equal values: a thousand conversations of one bot
//! hold one system prompt and one toolset between them, not a thousand.
//!
//! The interner keeps weak references, so a value nobody holds any more is
//! freed; its entry is swept out as new values arrive.

use std::borrow::Borrow;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// Entries past which dead ones are swept before adding another.
const SWEEP_AT: usize = 64;

/// Keeps one shared copy of each distinct value while anyone holds it.
#[derive(Debug)]
pub struct Interner<T: ?Sized> {
    known: Mutex<troupe_runtime::hash::FastMap<u64, Weak<T>>>,
}

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Self {
            known: Mutex::new(Default::default()),
        }
    }
}

impl<T: ?Sized + PartialEq> Interner<T> {
    /// The shared copy of `value`, whose hash is `key`: an equal value
    /// interned before and still held, or `value` itself, now shared.
    pub fn intern<V>(&self, key: u64, value: V) -> Arc<T>
    where
        V: Borrow<T> + Into<Arc<T>>,
    {
        let mut known = self.known.lock();
        if let Some(shared) = known.get(&key).and_then(Weak::upgrade) {
            if *shared == *value.borrow() {
                return shared;
            }
        }
        if known.len() >= SWEEP_AT {
            known.retain(|_, weak| weak.strong_count() > 0);
        }
        let shared: Arc<T> = value.into();
        known.insert(key, Arc::downgrade(&shared));
        shared
    }

    /// The shared copy of what `parts` (whose hash is `key`) make when
    /// `same` says a held one is it, or else what `make` builds of them,
    /// now shared: the value is built only when no equal one is held.
    pub fn get_or_make<P>(
        &self,
        key: u64,
        parts: P,
        same: impl FnOnce(&T, &P) -> bool,
        make: impl FnOnce(P) -> Arc<T>,
    ) -> Arc<T> {
        let mut known = self.known.lock();
        if let Some(shared) = known.get(&key).and_then(Weak::upgrade) {
            if same(&shared, &parts) {
                return shared;
            }
        }
        if known.len() >= SWEEP_AT {
            known.retain(|_, weak| weak.strong_count() > 0);
        }
        let shared = make(parts);
        known.insert(key, Arc::downgrade(&shared));
        shared
    }

    /// How many distinct values are held.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.known
            .lock()
            .values()
            .filter(|weak| weak.strong_count() > 0)
            .count()
    }
}

/// The hash of `value`, as [`Interner::intern`] takes it.
pub fn key_of<H: std::hash::Hash + ?Sized>(value: &H) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_one_copy_while_held() {
        let prompts: Interner<str> = Interner::default();
        let a = prompts.intern(key_of("Be useful."), "Be useful.".to_string());
        let b = prompts.intern(key_of("Be useful."), "Be useful.".to_string());
        let c = prompts.intern(key_of("Be brief."), "Be brief.".to_string());
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(prompts.live(), 2);
        drop((a, b));
        assert_eq!(prompts.live(), 1, "a value nobody holds is freed");
    }

    #[test]
    fn a_colliding_key_never_returns_another_value() {
        let interner: Interner<str> = Interner::default();
        let a = interner.intern(7, "alpha".to_string());
        let b = interner.intern(7, "beta".to_string());
        assert_eq!(&*a, "alpha");
        assert_eq!(&*b, "beta");
    }
}
