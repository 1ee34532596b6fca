//! The hasher of troupe's own in-process maps.
//!
//! std's maps hash with SipHash, which resists keys chosen to collide, at
//! 100–250 instructions a key: a conversation's id hashed nine times on the
//! way to its first turn cost more than the map lookups themselves. The
//! maps here are keyed by ids troupe makes (UUIDs), bot and tool names from
//! the home's own files, and file paths, never by what a network peer
//! chooses, so they take foldhash (seeded per process, a few instructions a
//! key). A map keyed by what arrives over the network keeps std's hasher.

/// The hasher's builder: randomly seeded per process.
pub type FastState = foldhash::fast::RandomState;

/// A `HashMap` with [`FastState`] (make one with `FastMap::default()`).
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastState>;

/// A `DashMap` with [`FastState`] (make one with `FastDashMap::default()`).
pub type FastDashMap<K, V> = dashmap::DashMap<K, V, FastState>;

/// The hash of `value` with a hasher fixed for the process: equal values
/// hash equal wherever it is called.
pub fn hash_of<H: std::hash::Hash + ?Sized>(value: &H) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one(value)
}
