use pretty_assertions::assert_eq;

use super::*;
use crate::store::Store;

/// A migrated store at `dir/troupe.db` holding `rows` rows of text, closed.
fn filled(dir: &Path, rows: usize) -> PathBuf {
    let path = dir.join("troupe.db");
    drop(Store::open(&path).unwrap());
    let mut conn = Connection::open(&path).unwrap();
    let tx = conn.transaction().unwrap();
    tx.execute_batch("CREATE TABLE filler (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
        .unwrap();
    let mut insert = tx.prepare("INSERT INTO filler (text) VALUES (?1)").unwrap();
    for i in 0..rows {
        insert
            .execute([format!("row {i} {}", "some words ".repeat(20))])
            .unwrap();
    }
    drop(insert);
    tx.commit().unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    drop(conn);
    path
}

#[test]
fn random_bytes_in_the_middle_of_the_database_are_found_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = filled(dir.path(), 2000);
    quick_check(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 64 * 1024, "{} bytes", bytes.len());
    let middle = bytes.len() / 2;
    let mut x: u32 = 0x2545_f491;
    for b in &mut bytes[middle..middle + 16 * 1024] {
        // xorshift: noise that is the same on every run.
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x.to_le_bytes()[0];
    }
    std::fs::write(&path, &bytes).unwrap();
    let err = quick_check(&path).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("troupe doctor"), "{text}");
    assert!(!diagnose(&path).unwrap().healthy());
}

#[test]
fn doctor_checks_the_file_and_every_full_text_index_and_copies_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = filled(dir.path(), 10);
    let found = diagnose(&path).unwrap();
    assert_eq!(found.integrity, vec!["ok".to_string()]);
    let names: Vec<&str> = found.full_text.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "delegation_fts",
            "house_file_fts",
            "messages_fts",
            "thread_fts"
        ]
    );
    assert!(found.healthy(), "{found:?}");
    let copy = dir.path().join("copy.db");
    recover_into(&path, &copy).unwrap();
    assert!(diagnose(&copy).unwrap().healthy());
    let again = recover_into(&path, &copy).unwrap_err();
    assert!(again.to_string().contains("exists already"), "{again}");
}

#[test]
fn an_empty_database_beside_its_wal_is_refused_not_started_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    refuse_missing(&path, &[]).unwrap();
    std::fs::write(&path, b"").unwrap();
    refuse_missing(&path, &[]).unwrap();
    std::fs::write(wal_of(&path), b"frames").unwrap();
    let err = refuse_missing(&path, &[]).unwrap_err();
    let StoreError::Missing { evidence, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(evidence, &wal_of(&path).display().to_string());
    std::fs::remove_file(wal_of(&path)).unwrap();
    let bots = dir.path().join("bots").join("scout");
    assert!(refuse_missing(&path, std::slice::from_ref(&bots)).is_err());
}
