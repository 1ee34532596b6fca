use pretty_assertions::assert_eq;
use rusqlite::{params, Connection};

use super::*;
use crate::id::{BotId, ConversationId, MsgId};
use crate::protocol::house::{ListenMode, Member, MemberKind, ThreadFilter};
use crate::protocol::Message;
use crate::store::{conversations, migrations, Store};

fn member(handle: &str, kind: MemberKind) -> Member {
    Member {
        handle: handle.into(),
        kind,
        display_name: handle.into(),
        listen: (kind == MemberKind::Bot).then_some(ListenMode::All),
        bot: None,
    }
}

#[test]
fn a_home_of_the_previous_release_becomes_the_house_home() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    // A database as the previous release left it: schema 4, a bot, a
    // conversation with a message.
    let (bot, conv) = (BotId::new(), ConversationId::new());
    {
        let mut conn = Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        for part in migrations::MIGRATIONS.iter().take(4).flat_map(|m| m.iter()) {
            tx.execute_batch(part).unwrap();
        }
        tx.execute(
            "INSERT INTO bots (id, name, created_at) VALUES (?1, 'scout', '2026-11-01T00:00:00Z')",
            params![bot.to_string()],
        )
        .unwrap();
        conversations::create_conversation(
            &tx,
            &conversations::NewConversation::new(conv, bot, "bot"),
        )
        .unwrap();
        conversations::append_message(&tx, conv, &Message::user("the harbour opens at dawn"))
            .unwrap();
        tx.execute_batch("PRAGMA user_version = 4").unwrap();
        tx.commit().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let (houses, members, history) = store
        .read_blocking(move |c| {
            let houses = list_houses(c)?;
            let home = house_by_name(c, "home")?.expect("the home's house");
            Ok((
                houses,
                members(c, home.id)?,
                conversations::load_messages(c, conv)?,
            ))
        })
        .unwrap();
    assert_eq!(houses.len(), 1);
    let described: Vec<(String, MemberKind)> =
        members.iter().map(|m| (m.handle.clone(), m.kind)).collect();
    assert_eq!(
        described,
        [
            ("owner".to_string(), MemberKind::Human),
            ("scout".to_string(), MemberKind::Bot)
        ]
    );
    assert_eq!(members[1].bot, Some(bot));
    assert_eq!(members[1].listen, Some(ListenMode::Mentions));
    assert_eq!(
        history[0].message,
        Message::user("the harbour opens at dawn")
    );
    // Its conversations are still searched.
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(store.catch_up())
        .unwrap();
    let hits = store
        .read_blocking(|c| conversations::search_messages(c, "harbour", 5))
        .unwrap();
    assert_eq!(hits.len(), 1);
}

#[test]
fn threads_are_found_only_in_their_house() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let (a, b, ta) = store
        .write_blocking(|tx| {
            let a = create_house(tx, "acme")?;
            let b = create_house(tx, "beta")?;
            put_member(tx, a.id, &member("ada", MemberKind::Human))?;
            put_member(tx, b.id, &member("bea", MemberKind::Human))?;
            let ta = create_thread(tx, a.id, Some("general"), &[], "ada", &["ada".into()])?;
            create_thread(tx, b.id, Some("general"), &[], "bea", &["bea".into()])?;
            append_message(
                tx,
                ta.id,
                MsgId::new(),
                "ada",
                MemberKind::Human,
                None,
                "acme's plans",
            )?;
            Ok((a, b, ta))
        })
        .unwrap();
    store
        .read_blocking(move |c| {
            // By id, by link, by name (case-insensitively): only in its house.
            assert_eq!(
                resolve_thread(c, a.id, &ta.id.to_string())?.unwrap().id,
                ta.id
            );
            assert_eq!(resolve_thread(c, a.id, &ta.link())?.unwrap().id, ta.id);
            assert_eq!(resolve_thread(c, a.id, "GENERAL")?.unwrap().id, ta.id);
            assert!(resolve_thread(c, b.id, &ta.id.to_string())?.is_none());
            assert!(resolve_thread(c, b.id, &ta.link())?.is_none());
            assert_ne!(resolve_thread(c, b.id, "general")?.unwrap().id, ta.id);
            assert_eq!(search(c, a.id, "plans", 10)?.len(), 1);
            assert!(search(c, b.id, "plans", 10)?.is_empty());
            let filter = ThreadFilter {
                limit: 10,
                ..ThreadFilter::default()
            };
            assert_eq!(list_threads(c, b.id, &filter)?.len(), 1);
            assert_eq!(members(c, b.id)?.len(), 1);
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_thread_pages_back_from_its_newest_message_and_lists_by_activity() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let (house, first, second) = store
        .write_blocking(|tx| {
            let h = create_house(tx, "acme")?;
            let first = create_thread(tx, h.id, Some("first"), &[], "x", &[])?;
            let second = create_thread(tx, h.id, None, &[], "x", &[])?;
            for i in 0..5 {
                append_message(
                    tx,
                    first.id,
                    MsgId::new(),
                    "ada",
                    MemberKind::Human,
                    None,
                    &format!("m{i}"),
                )?;
            }
            Ok((h, first, second))
        })
        .unwrap();
    let id = first.id;
    let (page, older, again) = store
        .read_blocking(move |c| {
            Ok((
                read_messages(c, id, 0, 2)?,
                read_messages(c, id, 2, 2)?,
                messages_after(c, id, 0, 3)?,
            ))
        })
        .unwrap();
    let texts = |m: &[crate::protocol::house::ThreadMessage]| {
        m.iter().map(|m| m.text.clone()).collect::<Vec<_>>()
    };
    assert_eq!(texts(&page), ["m3", "m4"]);
    assert_eq!(texts(&older), ["m1", "m2"]);
    assert_eq!(
        texts(&again),
        ["m2", "m3", "m4"],
        "the newest three after seq 0"
    );
    // A message appended twice (a redelivery) lands once.
    let dup = page[0].id;
    let landed = store
        .write_blocking(move |tx| append_message(tx, id, dup, "ada", MemberKind::Human, None, "m3"))
        .unwrap();
    assert!(landed.is_none());
    let listed = store
        .read_blocking(move |c| {
            list_threads(
                c,
                house.id,
                &ThreadFilter {
                    limit: 10,
                    ..ThreadFilter::default()
                },
            )
        })
        .unwrap();
    let order: Vec<_> = listed.iter().map(|t| t.id).collect();
    assert_eq!(order, [first.id, second.id], "the active one first");
    let named = store
        .read_blocking(move |c| {
            list_threads(
                c,
                house.id,
                &ThreadFilter {
                    named_only: true,
                    limit: 10,
                    ..ThreadFilter::default()
                },
            )
        })
        .unwrap();
    assert_eq!(named.len(), 1);
}

#[test]
fn members_among_handles_are_found_in_any_case_in_the_members_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let (a, b) = store
        .write_blocking(|tx| {
            let a = create_house(tx, "acme")?;
            let b = create_house(tx, "beta")?;
            for m in [
                member("Zed", MemberKind::Bot),
                member("ada", MemberKind::Human),
                member("bob", MemberKind::Bot),
                member("cy", MemberKind::Bot),
            ] {
                put_member(tx, a.id, &m)?;
            }
            put_member(tx, b.id, &member("dee", MemberKind::Bot))?;
            Ok((a, b))
        })
        .unwrap();
    store
        .read_blocking(move |c| {
            let handles = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
            let among = |house, names: &[&str]| -> Result<Vec<String>, StoreError> {
                Ok(members_among(c, house, &handles(names))?
                    .into_iter()
                    .map(|m| m.handle)
                    .collect())
            };
            // Any case, unknown and repeated handles ignored, another
            // house's member left out; people first, then bots by handle,
            // as `members` orders them all.
            assert_eq!(
                among(a.id, &["zed", "BOB", "nobody", "ADA", "bob", "dee"])?,
                vec!["ada", "bob", "Zed"]
            );
            let all: Vec<String> = members(c, a.id)?.into_iter().map(|m| m.handle).collect();
            assert_eq!(among(a.id, &["ada", "bob", "cy", "zed"])?, all);
            assert!(among(a.id, &[])?.is_empty());
            assert_eq!(among(b.id, &["ada", "DEE"])?, vec!["dee"]);
            Ok(())
        })
        .unwrap();
}
