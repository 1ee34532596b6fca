//! Which of a kind's actors a house's bots reach.
//!
//! A house is a tenant boundary: its bots see its threads, files and
//! members, not another house's. A kind the program offers to bots
//! ([`KindOptions::offer`](super::KindOptions::offer)) is offered to all
//! of them — the home's own bots and every house's — and the program
//! chooses whether the houses share its actors ([`HouseKeys`]):
//!
//! - [`HouseKeys::PerHouse`] (the default): each house has its own keys.
//!   A bot of house `acme` naming `desk/KEY` reaches the key `acme:KEY`
//!   (`desk` alone, `acme:main`), and no key outside `acme:`; what the
//!   actor keeps is that house's. The home's own bots (and the home's own
//!   house) reach keys as they name them, the other houses' included: the
//!   home's people own the machine.
//! - [`HouseKeys::Shared`]: every house reaches the same keys; the actor
//!   serves all tenants at once, and what it keeps or tells is the
//!   program's to scope.

/// Whether the houses share an offered kind's actors; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HouseKeys {
    /// Each house reaches only its own keys, `HOUSE:KEY`.
    #[default]
    PerHouse,
    /// Every house reaches every key, as named.
    Shared,
}

/// What separates a house's name from the key its bots named (`acme:main`);
/// no house name holds it.
pub const HOUSE_SEPARATOR: char = ':';

/// The key a bot reaches when it names `key`: from a house other than the
/// home's own (`house`), under per-house keys, the house's own key.
pub(crate) fn reached(keys: HouseKeys, house: Option<&str>, key: &str) -> String {
    match (keys, house) {
        (HouseKeys::PerHouse, Some(house)) => format!("{house}{HOUSE_SEPARATOR}{key}"),
        (HouseKeys::PerHouse, None) | (HouseKeys::Shared, _) => key.to_string(),
    }
}

/// The house whose key `key` is under per-house keys (`acme` for
/// `acme:main`).
pub(crate) fn house_of(key: &str) -> Option<&str> {
    key.split_once(HOUSE_SEPARATOR).map(|(house, _)| house)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_house_reaches_only_keys_under_its_name_unless_shared() {
        assert_eq!(
            reached(HouseKeys::PerHouse, Some("acme"), "main"),
            "acme:main"
        );
        // Naming another house's key from a house stays inside the house.
        assert_eq!(
            reached(HouseKeys::PerHouse, Some("acme"), "globex:main"),
            "acme:globex:main"
        );
        assert_eq!(
            reached(HouseKeys::PerHouse, None, "globex:main"),
            "globex:main"
        );
        assert_eq!(reached(HouseKeys::Shared, Some("acme"), "main"), "main");
        assert_eq!(house_of("acme:globex:main"), Some("acme"));
        assert_eq!(house_of("main"), None);
    }
}
