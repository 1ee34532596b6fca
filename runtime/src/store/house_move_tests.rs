use pretty_assertions::assert_eq;

use super::*;
use crate::id::{HouseId, MsgId};
use crate::protocol::house::{Member, MemberKind};
use crate::store::house::{self as house_messages};
use crate::store::house_files::{self, FileLimits, NewFile};
use crate::store::{house, tokens, Store};

struct Two {
    _dir: tempfile::TempDir,
    a: Store,
    b: Store,
}

fn two() -> Two {
    let dir = tempfile::tempdir().unwrap();
    let a = Store::open(&dir.path().join("a.db")).unwrap();
    let b = Store::open(&dir.path().join("b.db")).unwrap();
    Two { _dir: dir, a, b }
}

/// A house `acme` on `store`: two threads of 50 messages, three files (two
/// versions of one), a person's token.
async fn acme(store: &Store) -> HouseId {
    let id = store
        .write(|tx| {
            let h = house::create_house(tx, "acme")?;
            for name in ["general", "ops"] {
                let t = house::create_thread(tx, h.id, Some(name), &[], "ann", &[])?;
                for i in 0..50 {
                    let text = format!("{name} message {i} about zebras");
                    house_messages::append_message(
                        tx,
                        t.id,
                        MsgId::new(),
                        "ann",
                        MemberKind::Human,
                        None,
                        &text,
                    )?;
                }
            }
            let ann = Member {
                handle: "ann".into(),
                kind: MemberKind::Human,
                display_name: "Ann".into(),
                listen: None,
                bot: None,
            };
            house::put_member(tx, h.id, &ann)?;
            tokens::insert(tx, "tok_1", &tokens::hash("secret"), h.id, "ann")?;
            Ok(h.id)
        })
        .await
        .unwrap();
    let big: Vec<u8> = (0..300_000u32).flat_map(|i| i.to_le_bytes()).collect();
    for files in [
        vec![
            NewFile::text("notes/plan.md", "the plan mentions giraffes"),
            NewFile {
                path: "data.bin".into(),
                bytes: big,
                indexing: house_files::Indexing::Binary,
            },
        ],
        vec![NewFile::text(
            "notes/plan.md",
            "the plan now mentions okapis",
        )],
    ] {
        house_files::write_files(store, id, "ann", "", files, FileLimits::default())
            .await
            .unwrap();
    }
    id
}

/// The house's parts, as [`export`] gives them.
async fn parts(store: &Store, id: HouseId) -> Vec<Vec<u8>> {
    let h = id.to_string();
    store
        .read(move |c| {
            let mut parts = Vec::new();
            export(c, &h, |p| {
                parts.push(p);
                Ok(())
            })?;
            Ok(parts)
        })
        .await
        .unwrap()
}

/// Stages `parts` of house `id` at `epoch` on `to`.
async fn stage_all(to: &Store, id: HouseId, epoch: i64, parts: Vec<Vec<u8>>) -> i64 {
    let mut seq = 0;
    for piece in parts {
        let h = id.to_string();
        to.write(move |tx| stage(tx, &h, epoch, seq, &piece))
            .await
            .unwrap();
        seq += 1;
    }
    seq
}

async fn moved(from: &Store, to: &Store, id: HouseId) -> Counts {
    let parts = parts(from, id).await;
    let h = id.to_string();
    let epoch = from
        .write(move |tx| begin(tx, &h, "acme", "b"))
        .await
        .unwrap();
    let seq = stage_all(to, id, epoch, parts).await;
    let h = id.to_string();
    let h2 = h.clone();
    let Committed::Now(counts) = to
        .write(move |tx| commit(tx, &h2, "acme", epoch, "a", seq))
        .await
        .unwrap()
    else {
        panic!("committed before")
    };
    assert!(from
        .write(move |tx| finish(tx, &h, epoch))
        .await
        .unwrap()
        .is_some());
    counts
}

#[tokio::test]
async fn a_house_moves_with_its_threads_files_and_tokens_and_leaves_nothing_behind() {
    let s = two();
    let id = acme(&s.a).await;
    let before =
        s.a.read(move |c| house_files::read(c, id, "data.bin", None))
            .await
            .unwrap();
    let counts = moved(&s.a, &s.b, id).await;
    assert_eq!((counts.threads, counts.messages, counts.files), (2, 100, 2));

    // On b: the threads, in order, searchable; the files and their history.
    let threads =
        s.b.read(move |c| {
            let all = crate::protocol::house::ThreadFilter {
                limit: 10,
                ..Default::default()
            };
            house::list_threads(c, id, &all)
        })
        .await
        .unwrap();
    assert_eq!(threads.len(), 2);
    let general = threads
        .iter()
        .find(|t| t.name.as_deref() == Some("general"))
        .unwrap()
        .id;
    let read =
        s.b.read(move |c| house_messages::read_messages(c, general, 0, 100))
            .await
            .unwrap();
    assert_eq!(read.len(), 50);
    assert_eq!(read[49].text, "general message 49 about zebras");
    let hits =
        s.b.read(move |c| house_messages::search(c, id, "zebras", 200))
            .await
            .unwrap();
    assert_eq!(hits.len(), 100);
    let after =
        s.b.read(move |c| house_files::read(c, id, "data.bin", None))
            .await
            .unwrap();
    assert_eq!(after, before);
    let log =
        s.b.read(move |c| house_files::log(c, id, Some("notes/plan.md"), 10))
            .await
            .unwrap();
    assert_eq!(log.len(), 2);
    s.b.write(move |tx| house_files::index::index_house(tx, id))
        .await
        .unwrap();
    let found =
        s.b.read(move |c| house_files::search(c, id, "okapis", 5))
            .await
            .unwrap();
    assert_eq!(found.len(), 1, "the files are indexed again on b");
    let who =
        s.b.read(|c| tokens::authenticate(c, &tokens::hash("secret")))
            .await
            .unwrap();
    assert!(who.is_some(), "the person's token works on b");

    // On b: each content counted once per revision that refers to it.
    let (refs, referred): (i64, i64) =
        s.b.read(|c| {
            Ok(c.query_row(
                "SELECT (SELECT SUM(refs) FROM file_contents),
                        (SELECT COUNT(content) + COUNT(text_content) FROM house_file_revisions)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(refs, referred);

    // On a: nothing of the house, no content left over.
    let h = id.to_string();
    let left: i64 =
        s.a.read(move |c| {
            Ok(c.query_row(
                "SELECT (SELECT COUNT(*) FROM houses WHERE id = ?1)
                      + (SELECT COUNT(*) FROM threads WHERE house_id = ?1)
                      + (SELECT COUNT(*) FROM thread_messages)
                      + (SELECT COUNT(*) FROM file_contents)
                      + (SELECT COUNT(*) FROM file_pieces)
                      + (SELECT COUNT(*) FROM house_file_chunks)
                      + (SELECT COUNT(*) FROM member_tokens)",
                params![h],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(left, 0);
    let h = id.to_string();
    let fence = s.a.read(move |c| fence(c, &h)).await.unwrap().unwrap();
    assert_eq!(
        (fence.state.as_str(), fence.peer.as_str(), fence.epoch),
        ("moved", "b", 1)
    );
}

#[tokio::test]
async fn a_refused_epoch_cannot_be_committed_late_and_the_source_serves_again() {
    let s = two();
    let id = acme(&s.a).await;
    let h = id.to_string();
    let epoch =
        s.a.write(move |tx| begin(tx, &h, "acme", "b"))
            .await
            .unwrap();
    let staged = stage_all(&s.b, id, epoch, parts(&s.a, id).await).await;
    assert!(staged > 3, "the 1.2 MB file is in slices: {staged} parts");
    // The source could not tell: it asks the target to refuse the epoch.
    let h = id.to_string();
    let committed =
        s.b.write(move |tx| refuse(tx, &h, "acme", epoch))
            .await
            .unwrap();
    assert!(!committed);
    let h = id.to_string();
    let late =
        s.b.write(move |tx| commit(tx, &h, "acme", epoch, "a", staged))
            .await;
    assert!(matches!(late, Err(StoreError::Conflict(_))), "{late:?}");
    let h = id.to_string();
    assert!(s.a.write(move |tx| roll_back(tx, &h, epoch)).await.unwrap());
    assert!(s
        .a
        .read(|c| house::house_by_name(c, "acme"))
        .await
        .unwrap()
        .is_some());
    assert!(s
        .b
        .read(|c| house::house_by_name(c, "acme"))
        .await
        .unwrap()
        .is_none());
    // A second move takes the next epoch, and goes through.
    let counts = moved(&s.a, &s.b, id).await;
    assert_eq!(counts.messages, 100);
    let h = id.to_string();
    assert_eq!(
        s.b.read(move |c| fence(c, &h))
            .await
            .unwrap()
            .unwrap()
            .epoch,
        2
    );
}

#[tokio::test]
async fn a_committed_move_answers_a_retry_and_a_refusal_with_committed() {
    let s = two();
    let id = acme(&s.a).await;
    moved(&s.a, &s.b, id).await;
    let h = id.to_string();
    let again =
        s.b.write(move |tx| commit(tx, &h, "acme", 1, "a", 1))
            .await
            .unwrap();
    assert_eq!(again, Committed::Already);
    let h = id.to_string();
    assert!(s
        .b
        .write(move |tx| refuse(tx, &h, "acme", 1))
        .await
        .unwrap());
    // And it moves back, at the next epoch.
    let parts = parts(&s.b, id).await;
    let h = id.to_string();
    let epoch =
        s.b.write(move |tx| begin(tx, &h, "acme", "a"))
            .await
            .unwrap();
    assert_eq!(epoch, 2);
    let n = stage_all(&s.a, id, epoch, parts).await;
    let h = id.to_string();
    let back =
        s.a.write(move |tx| commit(tx, &h, "acme", epoch, "b", n))
            .await
            .unwrap();
    assert!(matches!(back, Committed::Now(c) if c.messages == 100));
}

#[tokio::test]
async fn posts_queued_during_a_move_go_to_the_new_node_and_its_threads_are_routed_there() {
    use crate::protocol::house::Post;
    use crate::protocol::{Address, Envelope, Payload};
    let s = two();
    let id = acme(&s.a).await;
    let h = id.to_string();
    let epoch =
        s.a.write(move |tx| begin(tx, &h, "acme", "b"))
            .await
            .unwrap();
    let h = id.to_string();
    let threads = s.a.read(move |c| thread_ids(c, &h)).await.unwrap();
    // A post made while the house is fenced: committed here, not applied.
    let post = Envelope {
        id: MsgId::new(),
        from: Address::Service("test".into()),
        to: Address::Thread(threads[0].parse().unwrap()),
        body: Payload::Post(Post {
            author: "ann".into(),
            author_kind: MemberKind::Human,
            text: "posted during the move".into(),
            round: None,
            depth: 0,
            via: None,
            answers_offer: false,
            failed: None,
            attachments: Vec::new(),
        }),
        sent_at: chrono::Utc::now(),
    };
    let held = post.id.to_string();
    s.a.send(post.clone()).await.unwrap();
    let h = id.to_string();
    let busy_unless_held =
        s.a.read(move |c| Ok((busy(c, &h, &|_| false)?, busy(c, &h, &|m| m == held)?)))
            .await
            .unwrap();
    assert_eq!(
        busy_unless_held,
        (true, false),
        "a held post does not keep the house busy"
    );

    let seq = stage_all(&s.b, id, epoch, parts(&s.a, id).await).await;
    let h = id.to_string();
    s.b.write(move |tx| commit(tx, &h, "acme", epoch, "a", seq))
        .await
        .unwrap();
    let h = id.to_string();
    let finished =
        s.a.write(move |tx| finish(tx, &h, epoch))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(finished.forwarded.len(), 1);
    assert_eq!(finished.threads.len(), 2);
    let (outbox, routes, pending) =
        s.a.read(|c| {
            Ok((
                cluster::outbox(c, "b", 10)?,
                cluster::routes(c)?,
                mailbox::pending_count(c)?,
            ))
        })
        .await
        .unwrap();
    assert_eq!(
        outbox,
        vec![post],
        "the post waits for node b in the outbox"
    );
    assert_eq!(pending, 0, "and not in a's mailbox");
    let mut routed: Vec<String> = routes
        .into_iter()
        .filter(|(_, node)| node == "b")
        .map(|(addr, _)| addr)
        .collect();
    routed.sort();
    let mut expected = threads.clone();
    expected.sort();
    assert_eq!(routed, expected, "a later send to a thread goes to b");

    // Moved back, a's threads are its own again.
    let h = id.to_string();
    let back =
        s.b.write(move |tx| begin(tx, &h, "acme", "a"))
            .await
            .unwrap();
    let seq = stage_all(&s.a, id, back, parts(&s.b, id).await).await;
    let h = id.to_string();
    s.a.write(move |tx| commit(tx, &h, "acme", back, "b", seq))
        .await
        .unwrap();
    let routes = s.a.read(cluster::routes).await.unwrap();
    assert!(routes.is_empty(), "{routes:?}");
}
