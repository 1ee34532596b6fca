use pretty_assertions::assert_eq;

use super::*;
use crate::id::HouseId;
use crate::store::{house, Store, StoreError};

async fn two_houses(store: &Store) -> (HouseId, HouseId) {
    store
        .write(|tx| {
            Ok((
                house::create_house(tx, "acme")?.id,
                house::create_house(tx, "beta")?.id,
            ))
        })
        .await
        .unwrap()
}

async fn put(
    store: &Store,
    h: HouseId,
    files: Vec<NewFile>,
    limits: FileLimits,
) -> Result<i64, StoreError> {
    write_files(store, h, "ada", "msg", files, limits)
        .await
        .map(|(v, _)| v)
}

fn conflict_text(e: StoreError) -> String {
    match e {
        StoreError::Conflict(t) => t,
        other => panic!("expected a conflict, got {other}"),
    }
}

fn invalid_text(e: StoreError) -> String {
    match e {
        StoreError::Invalid(t) => t,
        other => panic!("expected a refusal, got {other}"),
    }
}

#[tokio::test]
async fn a_multi_file_write_is_one_version_and_older_versions_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let (acme, _) = two_houses(&store).await;
    let lim = FileLimits::default();
    let v1 = put(
        &store,
        acme,
        vec![
            NewFile::text("plans/a.md", "alpha v1"),
            NewFile::text("plans/b.md", "beta v1"),
        ],
        lim,
    )
    .await
    .unwrap();
    assert_eq!(v1, 1);
    let v2 = put(
        &store,
        acme,
        vec![NewFile::text("Plans/A.md", "alpha v2")],
        lim,
    )
    .await
    .unwrap();
    assert_eq!(v2, 2);
    let files = store.read(move |c| list(c, acme, None)).await.unwrap();
    let shown: Vec<(String, i64)> = files.iter().map(|f| (f.path.clone(), f.version)).collect();
    assert_eq!(
        shown,
        vec![("Plans/A.md".into(), 2), ("plans/b.md".into(), 1)],
        "one file, case-insensitively"
    );
    let old = store
        .read(move |c| read(c, acme, "plans/a.md", Some(1)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (old.version, old.latest, old.text.as_deref()),
        (1, 2, Some("alpha v1"))
    );
    let now = store
        .read(move |c| read(c, acme, "plans/a.md", None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now.text.as_deref(), Some("alpha v2"));
    // A version past the newest is refused, naming the newest.
    let future = store
        .read(move |c| read(c, acme, "plans/a.md", Some(3)))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        future.contains("no version 3") && future.contains("the newest is 2"),
        "{future}"
    );
    let versions = store.read(move |c| log(c, acme, None, 10)).await.unwrap();
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[1].changes.len(), 2, "both files in version 1");
    let only_b = store
        .read(move |c| log(c, acme, Some("plans/b.md"), 10))
        .await
        .unwrap();
    assert_eq!(
        only_b.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![1]
    );
}

#[tokio::test]
async fn a_write_refused_midway_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let (acme, _) = two_houses(&store).await;
    let lim = FileLimits {
        max_file_bytes: 10,
        house_quota_bytes: 20,
    };
    put(&store, acme, vec![NewFile::text("a.md", "one")], lim)
        .await
        .unwrap();
    for (files, says) in [
        (
            vec![NewFile::text("a.md", "two"), NewFile::text("../x", "y")],
            "not a valid file path",
        ),
        (
            vec![
                NewFile::text("a.md", "two"),
                NewFile::text("big", "x".repeat(11)),
            ],
            "over the limit of 10 bytes per file",
        ),
        (
            vec![
                NewFile::text("a.md", "two"),
                NewFile::text("b", "x".repeat(9)),
                NewFile::text("c", "x".repeat(9)),
            ],
            "over its quota of 20 bytes",
        ),
        (
            vec![NewFile::text("a.md", "two"), NewFile::text("A.md", "x")],
            "appears twice",
        ),
    ] {
        let err = invalid_text(put(&store, acme, files, lim).await.unwrap_err());
        assert!(err.contains(says), "{err}");
        assert!(
            err.contains("nothing was written") || err.contains("Use a relative path"),
            "{err}"
        );
    }
    let files = store.read(move |c| list(c, acme, None)).await.unwrap();
    assert_eq!(files.len(), 1);
    let a = store
        .read(move |c| read(c, acme, "a.md", None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((a.version, a.text.as_deref()), (1, Some("one")));
    assert_eq!(
        store.read(move |c| latest_version(c, acme)).await.unwrap(),
        1
    );
}

#[tokio::test]
async fn a_stale_delete_is_refused_whole_and_a_fresh_one_removes_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let (acme, _) = two_houses(&store).await;
    let lim = FileLimits::default();
    put(
        &store,
        acme,
        vec![
            NewFile::text("a.md", "a1"),
            NewFile::text("b.md", "b1 unique words"),
        ],
        lim,
    )
    .await
    .unwrap();
    put(&store, acme, vec![NewFile::text("a.md", "a2")], lim)
        .await
        .unwrap();
    let stale = vec![("a.md".to_string(), 1), ("b.md".to_string(), 1)];
    let err = store
        .write(move |tx| delete(tx, acme, "ada", "", &stale))
        .await
        .unwrap_err();
    let err = conflict_text(err);
    assert!(
        err.contains("nothing was deleted")
            && err.contains("`a.md` changed since version 1 (it is now version 2)"),
        "{err}"
    );
    assert_eq!(
        store
            .read(move |c| list(c, acme, None))
            .await
            .unwrap()
            .len(),
        2
    );
    let fresh = vec![("a.md".to_string(), 2), ("b.md".to_string(), 1)];
    let v = store
        .write(move |tx| delete(tx, acme, "ada", "cleanup", &fresh))
        .await
        .unwrap();
    assert_eq!(v, 3);
    assert!(store
        .read(move |c| list(c, acme, None))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .read(move |c| read(c, acme, "a.md", Some(1)))
            .await
            .unwrap(),
        None
    );
    let (pieces, contents, chunks): (i64, i64, i64) = store
        .read(|c| Ok(c.query_row(
            "SELECT (SELECT COUNT(*) FROM file_pieces), (SELECT COUNT(*) FROM file_contents), (SELECT COUNT(*) FROM house_file_chunks)",
            [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?))
        .await
        .unwrap();
    assert_eq!(
        (pieces, contents, chunks),
        (0, 0, 0),
        "every version's bytes are gone"
    );
    assert!(store
        .read(move |c| search(c, acme, "unique", 5))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn search_finds_chunks_of_its_own_house_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let (acme, beta) = two_houses(&store).await;
    let lim = FileLimits::default();
    let long: String = (0..400)
        .map(|i| format!("line {i} of filler text\n"))
        .collect::<String>()
        + "the code word is PERIWINKLE\n";
    put(
        &store,
        acme,
        vec![
            NewFile::text("notes/long.md", long.clone()),
            NewFile {
                path: "logo.png".into(),
                bytes: vec![0x89, 0, 1, 2],
                indexing: Indexing::Binary,
            },
        ],
        lim,
    )
    .await
    .unwrap();
    put(
        &store,
        beta,
        vec![NewFile::text("other.md", "periwinkle in beta")],
        lim,
    )
    .await
    .unwrap();
    catch_up(&store, acme).await.unwrap();
    let hits = store
        .read(move |c| search(c, acme, "periwinkle", 5))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    let chunk = &chunks(&long)[hits[0].chunk as usize - 1];
    assert!(
        chunk.1.contains("PERIWINKLE") && hits[0].chunk > 2,
        "{hits:?}"
    );
    assert!(hits[0].snippet.contains("[PERIWINKLE]"));
    let files = store.read(move |c| list(c, acme, None)).await.unwrap();
    assert_eq!(files[0].state, FileState::NotIndexable);
    assert_eq!(files[1].state, FileState::Indexed);
    assert_eq!(
        store
            .read(move |c| list(c, beta, Some("notes")))
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        store
            .read(move |c| read(c, beta, "notes/long.md", None))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .read(move |c| list(c, acme, Some("notes/")))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn chunks_cover_the_text_and_end_at_line_ends() {
    let text: String = (0..300).map(|i| format!("é line {i}\n")).collect();
    let parts = chunks(&text);
    assert!(parts.len() > 1);
    assert_eq!(parts.iter().map(|p| p.1).collect::<String>(), text);
    for (start, part) in &parts {
        assert!(part.ends_with('\n') || *start + part.chars().count() == text.chars().count());
        assert!(part.chars().count() <= CHUNK_CHARS);
        assert_eq!(
            text.chars()
                .skip(*start)
                .take(part.chars().count())
                .collect::<String>(),
            *part
        );
    }
}

#[test]
fn similar_versions_share_most_pieces() {
    let base: Vec<u8> = (0..100 * 1024u32)
        .map(|i| b"abcdefghij klmnop\n"[(i as usize * 7 + i as usize / 13) % 18])
        .collect();
    let mut edited = base.clone();
    edited[50_000] = b'Z';
    let pieces = |b: &[u8]| -> Vec<Vec<u8>> {
        let mut start = 0;
        pieces::cuts(b, pieces::Grain::of(b.len()))
            .into_iter()
            .map(|e| {
                let p = b[start..e].to_vec();
                start = e;
                p
            })
            .collect()
    };
    let (a, b) = (pieces(&base), pieces(&edited));
    let shared = b.iter().filter(|p| a.contains(p)).count();
    assert!(
        b.len() - shared <= 2,
        "{} of {} pieces differ",
        b.len() - shared,
        b.len()
    );
}

#[tokio::test]
async fn a_write_leaves_text_pending_and_indexing_after_it_cites_the_version_searched() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let (acme, _) = two_houses(&store).await;
    let lim = FileLimits::default();
    // Written and indexed inside one job, so the writer cannot index between.
    let (states, hits) = store
        .write(move |tx| {
            let (_, written) = write(
                tx,
                acme,
                "ada",
                "",
                &pack(vec![NewFile::text("a.md", "first periwinkle")]),
                lim,
            )?;
            let before = search(tx, acme, "periwinkle", 5)?.len();
            index::index_house(tx, acme)?;
            let (_, rewritten) = write(
                tx,
                acme,
                "ada",
                "",
                &pack(vec![NewFile::text("a.md", "second periwinkle")]),
                lim,
            )?;
            Ok((
                (written[0].state.clone(), rewritten[0].state.clone(), before),
                search(tx, acme, "periwinkle", 5)?,
            ))
        })
        .await
        .unwrap();
    assert_eq!(states, (FileState::Pending, FileState::Pending, 0));
    assert_eq!(
        hits.iter()
            .map(|h| (h.chunk, h.version))
            .collect::<Vec<_>>(),
        vec![(1, 1)],
        "until version 2 is indexed, version 1's chunk is found and cited as version 1"
    );
    catch_up(&store, acme).await.unwrap();
    let hits = store
        .read(move |c| search(c, acme, "second", 5))
        .await
        .unwrap();
    assert_eq!(hits.iter().map(|h| h.version).collect::<Vec<_>>(), vec![2]);
    assert!(store
        .read(move |c| search(c, acme, "first", 5))
        .await
        .unwrap()
        .is_empty());
    let files = store.read(move |c| list(c, acme, None)).await.unwrap();
    assert_eq!(files[0].state, FileState::Indexed);
}

#[tokio::test]
async fn the_writer_indexes_what_a_crash_left_pending_when_the_store_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    let long: String = (0..3000)
        .map(|i| format!("row {i} of the ledger\n"))
        .collect();
    // Written by a process killed before its writer indexed it: no
    // writer here, so the file is left pending.
    let acme = {
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        crate::store::migrations::migrate(&mut conn, &path).unwrap();
        let tx = conn.transaction().unwrap();
        let acme = house::create_house(&tx, "acme").unwrap().id;
        let files = pack(vec![NewFile::text("ledger.md", long.clone())]);
        let (_, written) = write(&tx, acme, "ada", "", &files, FileLimits::default()).unwrap();
        assert_eq!(written[0].state, FileState::Pending);
        tx.commit().unwrap();
        acme
    };
    let store = Store::open(&path).unwrap();
    let indexed = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let files = store.read(move |c| list(c, acme, None)).await.unwrap();
            if files[0].state == FileState::Indexed {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        indexed.is_ok(),
        "the writer indexed the pending file by itself"
    );
    let hits = store
        .read(move |c| search(c, acme, "2999", 5))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(
        chunks(&long).len() as i64,
        store
            .read(|c| Ok(
                c.query_row("SELECT COUNT(*) FROM house_file_chunks", [], |r| r
                    .get::<_, i64>(0))?
            ))
            .await
            .unwrap()
    );
}

/// The codecs of the stored pieces and the sum of their stored bytes.
fn stored_pieces(conn: &rusqlite::Connection) -> Result<(Vec<i64>, i64), StoreError> {
    let codecs = conn
        .prepare("SELECT DISTINCT codec FROM file_pieces ORDER BY codec")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let bytes = conn.query_row(
        "SELECT COALESCE(SUM(length(data)), 0) FROM file_pieces",
        [],
        |r| r.get(0),
    )?;
    Ok((codecs, bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pieces_written_raw_are_compressed_by_the_idle_writer_even_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    let text: String = (0..2000)
        .map(|i| format!("line {} says hello\n", i % 50))
        .collect();
    let mut noise = vec![0u8; 3000];
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    for b in &mut noise {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        *b = (seed >> 24) as u8;
    }
    // Written by a process killed before its writer was idle: no writer
    // here, so the pieces stay as the write stored them, raw.
    let (text_id, noise_id, raw) = {
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        crate::store::migrations::migrate(&mut conn, &path).unwrap();
        let tx = conn.transaction().unwrap();
        let text_id = content::put(&tx, &pieces::Packed::new(text.as_bytes())).unwrap();
        let noise_id = content::put(&tx, &pieces::Packed::new(&noise)).unwrap();
        // A content as migration 6 wrote it: raw pieces, 8-byte ids.
        tx.execute(
            "INSERT INTO file_pieces (hash, refs, data) VALUES (x'00', 1, CAST('old ' AS BLOB)), (x'01', 1, CAST('bytes' AS BLOB))",
            [],
        )
        .unwrap();
        let ids: Vec<u8> = [tx.last_insert_rowid() - 1, tx.last_insert_rowid()]
            .iter()
            .flat_map(|i| i.to_le_bytes())
            .collect();
        tx.execute(
            "INSERT INTO file_contents (hash, size, refs, pieces) VALUES (x'02', 9, 1, ?1)",
            [ids],
        )
        .unwrap();
        let (codecs, bytes) = stored_pieces(&tx).unwrap();
        assert_eq!(codecs, vec![pieces::RAW, pieces::UNTRIED]);
        // Stored whole: the repeated lines' pieces once.
        assert!((bytes as usize) <= text.len() + noise.len() + 9);
        tx.commit().unwrap();
        (text_id, noise_id, bytes as usize)
    };
    let options = crate::store::OpenOptions {
        index_when_idle: std::time::Duration::from_millis(1),
        ..crate::store::OpenOptions::default()
    };
    let store = Store::open_with(&path, options).unwrap();
    // Readable as they are, before the writer gets to them.
    let back = store.read(move |c| content::get(c, text_id)).await.unwrap();
    assert_eq!(back, text.as_bytes());
    let mut steps = store.idle_compressed().unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            if !store.read(compress::any_untried).await.unwrap() {
                return;
            }
            steps.changed().await.unwrap();
        }
    })
    .await
    .expect("the idle writer compresses every untried piece");
    let (codecs, bytes) = store.read(stored_pieces).await.unwrap();
    assert_eq!(
        codecs,
        vec![pieces::RAW, pieces::LZ4],
        "text as LZ4, noise raw for good"
    );
    let text_raw = raw - noise.len() - 9;
    assert!(
        (bytes as usize) < noise.len() + 9 + text_raw / 2,
        "{bytes} bytes stored, {raw} raw"
    );
    let back = store.read(move |c| content::get(c, text_id)).await.unwrap();
    assert_eq!(back, text.into_bytes());
    let back = store
        .read(move |c| content::get(c, noise_id))
        .await
        .unwrap();
    assert_eq!(back, noise);
    let old = store
        .read(|c| {
            let id: i64 =
                c.query_row("SELECT id FROM file_contents WHERE hash = x'02'", [], |r| {
                    r.get(0)
                })?;
            content::get(c, id)
        })
        .await
        .unwrap();
    assert_eq!(old, b"old bytes");
}

#[test]
fn a_step_compressed_late_leaves_pieces_done_or_stored_anew_meanwhile_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    crate::store::migrations::migrate(&mut conn, &path).unwrap();
    let text: String = (0..2000)
        .map(|i| format!("line {} of text\n", i % 40))
        .collect();
    let tx = conn.transaction().unwrap();
    content::put(&tx, &pieces::Packed::new(text.as_bytes())).unwrap();
    // A step read, then its pieces compressed by someone else before it
    // comes back (a settle, a step done here after a restart).
    let step = compress::untried_step(&tx).unwrap();
    assert!(!step.is_empty());
    let late = compress::squeeze(step.clone());
    compress::store_squeezed(&tx, &compress::squeeze(step)).unwrap();
    let done = stored_pieces(&tx).unwrap();
    assert_eq!(done.0, vec![pieces::LZ4]);
    // A piece dropped and stored anew, raw, under another id.
    let (hash, data): (Vec<u8>, Vec<u8>) = tx
        .query_row(
            "SELECT hash, data FROM file_pieces ORDER BY id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    tx.execute("DELETE FROM file_pieces WHERE hash = ?1", [&hash])
        .unwrap();
    tx.execute(
        "INSERT INTO file_pieces (hash, refs, data, codec) VALUES (?1, 1, CAST('anew' AS BLOB), 0)",
        [&hash],
    )
    .unwrap();
    compress::store_squeezed(&tx, &late).unwrap();
    let anew: (Vec<u8>, i64) = tx
        .query_row(
            "SELECT data, codec FROM file_pieces WHERE hash = ?1",
            [&hash],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(anew, (b"anew".to_vec(), pieces::RAW));
    tx.execute("DELETE FROM file_pieces WHERE hash = ?1", [&hash])
        .unwrap();
    let others = stored_pieces(&tx).unwrap();
    assert_eq!(others.0, vec![pieces::LZ4]);
    assert_eq!(others.1, done.1 - data.len() as i64);
}

#[tokio::test]
async fn the_untried_pieces_are_found_by_their_partial_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("troupe.db")).unwrap();
    let plans = store
        .read(|c| {
            let plan = |sql: &str| -> Result<String, StoreError> {
                Ok(c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?
                    .query_map([], |r| r.get::<_, String>(3))?
                    .collect::<Result<Vec<_>, _>>()?
                    .join("; "))
            };
            Ok((
                plan("SELECT EXISTS (SELECT 1 FROM file_pieces WHERE codec = 2)")?,
                plan("SELECT hash, data FROM file_pieces WHERE codec = 2 ORDER BY id LIMIT 64")?,
            ))
        })
        .await
        .unwrap();
    assert!(plans.0.contains("file_pieces_untried"), "{}", plans.0);
    assert!(plans.1.contains("file_pieces_untried"), "{}", plans.1);
}

/// The usage row and the sum of the house's current file sizes.
async fn usage_and_sum(store: &Store, h: HouseId) -> (i64, i64) {
    store
        .read(move |c| {
            let h = h.to_string();
            Ok(c.query_row(
                "SELECT COALESCE((SELECT bytes FROM house_file_usage WHERE house_id = ?1), 0),
                        (SELECT COALESCE(SUM(size), 0) FROM house_files WHERE house_id = ?1)",
                [&h],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .await
        .unwrap()
}

/// Writes `path` holding `len` bytes of `x`.
async fn put_x(
    store: &Store,
    h: HouseId,
    path: &str,
    len: usize,
    limits: FileLimits,
) -> Result<i64, StoreError> {
    put(store, h, vec![NewFile::text(path, "x".repeat(len))], limits).await
}

#[tokio::test]
async fn the_quota_counts_current_files_through_writes_overwrites_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    let store = Store::open(&path).unwrap();
    let (acme, beta) = two_houses(&store).await;
    let lim = FileLimits {
        max_file_bytes: 100,
        house_quota_bytes: 30,
    };
    put_x(&store, acme, "a.md", 10, lim).await.unwrap();
    put(
        &store,
        acme,
        vec![
            NewFile::text("A.md", "x".repeat(4)),
            NewFile::text("b.md", "x".repeat(20)),
        ],
        lim,
    )
    .await
    .unwrap();
    put_x(&store, beta, "a.md", 25, lim).await.unwrap();
    assert_eq!(usage_and_sum(&store, acme).await, (24, 24));
    assert_eq!(usage_and_sum(&store, beta).await, (25, 25));
    // 24 + 7 is over 30; refused, and the count is unchanged.
    let err = put_x(&store, acme, "c.md", 7, lim).await.unwrap_err();
    assert!(invalid_text(err).contains("to 31 bytes, over its quota of 30"));
    assert_eq!(usage_and_sum(&store, acme).await, (24, 24));
    // A refused delete frees nothing; a delete naming one file twice frees it once.
    let stale = store
        .write(move |tx| delete(tx, acme, "ada", "", &[("b.md".into(), 1)]))
        .await
        .unwrap_err();
    assert!(conflict_text(stale).contains("changed since version 1"));
    store
        .write(move |tx| {
            delete(
                tx,
                acme,
                "ada",
                "",
                &[("b.md".into(), 2), ("B.md".into(), 2)],
            )
        })
        .await
        .unwrap();
    assert_eq!(usage_and_sum(&store, acme).await, (4, 4));
    put_x(&store, acme, "c.md", 26, lim).await.unwrap();
    assert_eq!(usage_and_sum(&store, acme).await, (30, 30));

    // The migration counts the files a store already holds.
    store
        .write(|tx| {
            tx.execute_batch("DROP TABLE house_file_usage")?;
            Ok(())
        })
        .await
        .unwrap();
    drop(store);
    // (Its SQL run as is: later migrations are not run twice.)
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(crate::store::house_files::HOUSE_FILE_USAGE)
        .unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(usage_and_sum(&store, acme).await, (30, 30));
    assert_eq!(usage_and_sum(&store, beta).await, (25, 25));
}
