//! The hasher of troupe's own in-process maps.
//!
//! std's maps hash with SipHash, which resists keys chosen to collide, at
//! 100–250 instructions a key: a conversation's id hashed nine times on the
//! way to its first turn cost more than the map lookups themselves. The
//! maps on that path take foldhash instead, a few instructions a key: they
//! are keyed by ids troupe makes (UUIDs), names of bots and tools (checked,
//! and few), file paths, and the keys of the routers' actors. foldhash is
//! seeded at random per process, so keys cannot be worked out ahead to
//! collide, though it promises less than SipHash; a map keyed by free text
//! that a peer or a model sends (the guard's failed calls, the server's
//! rate limits) keeps std's hasher.

/// The hasher's builder: randomly seeded per process.
pub type FastState = foldhash::fast::RandomState;

/// A `HashMap` with [`FastState`] (make one with `FastMap::default()`).
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastState>;

/// A `DashMap` with [`FastState`] (make one with `FastDashMap::default()`).
pub type FastDashMap<K, V> = dashmap::DashMap<K, V, FastState>;
