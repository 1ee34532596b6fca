//! The crates link together.

#[test]
fn ids_are_reexported() {
    let id = troupe::runtime::id::BotId::new();
    assert!(id.to_string().starts_with("bot_"));
}
