use std::time::Duration;

use troupe_runtime::protocol::house::{ListenMode, Member, MemberKind, Post};

use super::*;

fn bot(handle: &str, listen: ListenMode) -> Member {
    Member {
        handle: handle.into(),
        kind: MemberKind::Bot,
        display_name: handle.into(),
        listen: Some(listen),
        bot: None,
    }
}

fn human(handle: &str) -> Member {
    Member {
        handle: handle.into(),
        kind: MemberKind::Human,
        display_name: handle.into(),
        listen: None,
        bot: None,
    }
}

fn post(author: &str, kind: MemberKind, text: &str, depth: u32) -> Post {
    Post {
        author: author.into(),
        author_kind: kind,
        text: text.into(),
        round: None,
        depth,
        via: None,
        answers_offer: false,
        failed: None,
        attachments: Vec::new(),
    }
}

fn guard() -> LoopGuard {
    LoopGuard::new(2, Duration::from_secs(600), Duration::from_secs(600))
}

fn house() -> Vec<Member> {
    vec![
        human("ada"),
        bot("alice", ListenMode::All),
        bot("bob", ListenMode::Mentions),
        bot("carol", ListenMode::Off),
        bot("dave", ListenMode::All),
    ]
}

fn everyone() -> Vec<String> {
    ["ada", "alice", "bob", "carol"].map(String::from).to_vec()
}

#[test]
fn a_person_without_mentions_wakes_the_bots_that_listen_to_all() {
    let d = decide(
        &post("ada", MemberKind::Human, "good morning", 0),
        &everyone(),
        &house(),
        &Rules::default(),
        0,
        &guard(),
    );
    // dave listens to all but is not in the thread.
    assert_eq!(d.offered, vec!["alice"]);
    assert!(d.joining.is_empty());
}

#[test]
fn a_persons_mentions_choose_who_answers_and_summon_members() {
    let d = decide(
        &post(
            "ada",
            MemberKind::Human,
            "@bob and @Dave, thoughts? cc @carol",
            0,
        ),
        &everyone(),
        &house(),
        &Rules::default(),
        0,
        &guard(),
    );
    assert_eq!(
        d.offered,
        vec!["bob", "dave"],
        "alice is not named, so not offered"
    );
    assert_eq!(d.joining, vec!["dave"]);
    assert_eq!(d.declined[0].0, "carol");
}

#[test]
fn a_bots_mention_asks_only_participants_and_the_chain_is_bounded() {
    let rules = Rules::default();
    let d = decide(
        &post("alice", MemberKind::Bot, "@bob can you check? @dave too", 1),
        &everyone(),
        &house(),
        &rules,
        1,
        &guard(),
    );
    assert_eq!(d.offered, vec!["bob"]);
    assert!(d.joining.is_empty(), "a bot's mention does not summon");
    assert!(d
        .declined
        .iter()
        .any(|(h, why)| h == "dave" && why.contains("not in this thread")));
    let d = decide(
        &post("alice", MemberKind::Bot, "@bob again", rules.max_chain),
        &everyone(),
        &house(),
        &rules,
        1,
        &guard(),
    );
    assert!(d.offered.is_empty());
    assert!(d.declined[0].1.contains("chain"));
}

#[test]
fn the_round_cap_and_the_pair_guard_stop_a_ping_pong() {
    let g = guard();
    let rules = Rules {
        max_turns_per_round: 10,
        max_chain: 10,
        context_messages: 30,
    };
    let mut author = "alice";
    let mut other = "bob";
    let mut turns = 0;
    for (offered, depth) in (1..10).enumerate() {
        let d = decide(
            &post(
                author,
                MemberKind::Bot,
                &format!("@{other} your turn"),
                depth,
            ),
            &everyone(),
            &house(),
            &rules,
            offered as u32,
            &g,
        );
        if d.offered.is_empty() {
            assert!(d.declined[0].1.contains("loop guard"), "{:?}", d.declined);
            break;
        }
        turns += 1;
        std::mem::swap(&mut author, &mut other);
    }
    assert_eq!(turns, 2, "the guard allows two exchanges between the pair");

    let d = decide(
        &post("ada", MemberKind::Human, "@alice @bob @dave", 0),
        &everyone(),
        &house(),
        &Rules {
            max_turns_per_round: 2,
            ..Rules::default()
        },
        0,
        &guard(),
    );
    assert_eq!(d.offered, vec!["alice", "bob"]);
    assert!(d.declined[0].1.contains("cap of 2"));
}

#[test]
fn the_author_is_never_offered_its_own_message() {
    let d = decide(
        &post("alice", MemberKind::Bot, "note to @alice", 1),
        &everyone(),
        &house(),
        &Rules::default(),
        0,
        &guard(),
    );
    assert!(d.offered.is_empty());
}
