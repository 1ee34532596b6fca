//! Where a new house goes: rendezvous (highest random weight) hashing.
//!
//! Each candidate node gets a score from the pair (house name, node name);
//! the house goes to the node with the highest. Every node computes the
//! same answer from the same members without asking anyone, and a node
//! joining or leaving moves only the houses it wins or held — not that
//! houses move by themselves: placement is asked once, when a house is
//! made, over the members connected then. The hash is FNV-1a with a
//! final mix (SplitMix64's), written here so the answer never changes
//! with a library or compiler version.

/// The score of `node` for `house`: the house goes to the highest.
pub fn score(house: &str, node: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    // The house's name, a separator no name holds, the node's name.
    for b in house.bytes().chain([0u8]).chain(node.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The node among `nodes` where `house` goes; ties (never seen) go to the
/// smaller name. None when `nodes` is empty.
pub fn place<'a>(house: &str, nodes: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    nodes
        .into_iter()
        .max_by(|a, b| score(house, a).cmp(&score(house, b)).then(b.cmp(a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_members_place_a_house_on_the_same_node_in_any_order() {
        let nodes = ["a", "b", "c"];
        for house in ["acme", "globex", "initech", "umbrella"] {
            let one = place(house, nodes).unwrap();
            let other = place(house, ["c", "a", "b"]).unwrap();
            assert_eq!(one, other, "{house}");
        }
        assert_eq!(place("acme", std::iter::empty()), None);
    }

    #[test]
    fn the_scores_are_fixed_so_every_version_places_alike() {
        // Pinned: a change here moves where new houses go in a cluster of
        // mixed versions.
        assert_eq!(score("acme", "a"), 0x9e7d_6bb4_b43a_f022);
        assert_eq!(place("acme", ["a", "b", "c"]), Some("b"));
    }

    #[test]
    fn houses_spread_over_the_nodes_and_a_leaving_node_moves_only_its_own() {
        let nodes = ["a", "b", "c"];
        let houses: Vec<String> = (0..300).map(|i| format!("house-{i}")).collect();
        let mut counts = std::collections::HashMap::new();
        for h in &houses {
            *counts.entry(place(h, nodes).unwrap()).or_insert(0) += 1;
        }
        for n in nodes {
            let c = counts.get(n).copied().unwrap_or(0);
            assert!((60..=140).contains(&c), "{n} got {c} of 300");
        }
        for h in &houses {
            let before = place(h, nodes).unwrap();
            let after = place(h, ["a", "b"]).unwrap();
            if before != "c" {
                assert_eq!(before, after, "{h} moved though its node stayed");
            }
        }
    }
}
