//! The current schema (`schema.sql`, what a new database takes) is what
//! the migrations make, object for object, and a database made from it
//! holds the rows the migrations put in one.

use std::collections::HashSet;

use rusqlite::Connection;

use super::{MIGRATIONS, ROWS, SCHEMA};

const HEADER: &str = "\
-- The schema the migrations in migrations.rs make, as one script: what a
-- new database takes instead of replaying them. Written by
-- `TROUPE_BLESS_SCHEMA=1 cargo test -p troupe-runtime schema`; do not edit.
";

/// Every object's type, name, table and statement, in the order made;
/// FTS5's own tables left out (their virtual table makes them).
fn objects(conn: &Connection) -> Vec<(String, String, String, String)> {
    let shadow: HashSet<String> = conn
        .prepare("SELECT name FROM pragma_table_list WHERE type = 'shadow'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    conn.prepare(
        "SELECT type, name, tbl_name, sql FROM sqlite_master \
         WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
    )
    .unwrap()
    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
    .unwrap()
    .collect::<Result<Vec<(String, String, String, String)>, _>>()
    .unwrap()
    .into_iter()
    .filter(|o| !shadow.contains(&o.1))
    .collect()
}

/// A database taken through every migration, one after another.
fn migrated() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    for sql in MIGRATIONS.iter().flat_map(|m| m.iter()) {
        conn.execute_batch(sql).unwrap();
    }
    conn
}

/// The rows a new database holds, table by table (ids and times aside).
fn rows(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for (table, columns) in [
        ("houses", "name, settings"),
        (
            "house_members",
            "handle, kind, display_name, bot_id, listen",
        ),
        ("kv", "key, value"),
    ] {
        let mut statement = conn
            .prepare(&format!("SELECT {columns} FROM {table} ORDER BY 1"))
            .unwrap();
        let width = statement.column_count();
        let found = statement
            .query_map([], |r| {
                (0..width)
                    .map(|i| {
                        r.get::<_, rusqlite::types::Value>(i)
                            .map(|v| format!("{v:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap();
        for row in found {
            out.push(format!("{table}: {}", row.unwrap().join(", ")));
        }
    }
    out
}

/// The script `schema.sql` should hold: every object the migrations make.
fn script_of(made: &[(String, String, String, String)]) -> String {
    std::iter::once(HEADER.to_string())
        .chain(made.iter().map(|o| format!("{};\n", o.3)))
        .collect()
}

/// The new database's image made from `script`: its schema, no rows,
/// version 0, marked (see `fresh.rs`), compacted.
fn image_of(script: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let (made, compact) = (dir.path().join("made.db"), dir.path().join("image.db"));
    let conn = Connection::open(&made).unwrap();
    conn.execute_batch(script).unwrap();
    conn.pragma_update(None, "application_id", crate::store::fresh::MARK)
        .unwrap();
    conn.execute("VACUUM INTO ?1", [compact.to_str().unwrap()])
        .unwrap();
    let mut pages = std::fs::read(&compact).unwrap();
    // Already in WAL mode (the header's write and read versions): a store
    // opening it does not convert it through a rollback journal.
    pages[18] = 2;
    pages[19] = 2;
    lz4_flex::compress_prepend_size(&pages)
}

#[test]
fn the_new_database_image_is_what_the_schema_makes() {
    let script = script_of(&objects(&migrated()));
    if std::env::var_os("TROUPE_BLESS_SCHEMA").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/store/fresh.db.lz4");
        std::fs::write(path, image_of(&script)).unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.db");
    let pages = lz4_flex::decompress_size_prepended(crate::store::fresh::IMAGE).unwrap();
    assert_eq!(&pages[18..20], &[2, 2], "the image is not in WAL mode");
    std::fs::write(&path, pages).unwrap();
    let image = Connection::open(&path).unwrap();
    let fresh = Connection::open_in_memory().unwrap();
    fresh.execute_batch(&script).unwrap();
    let (mut a, mut b) = (objects(&image), objects(&fresh));
    a.sort();
    b.sort();
    assert_eq!(
        a, b,
        "fresh.db.lz4 is not what schema.sql makes: after a new migration, \
         `TROUPE_BLESS_SCHEMA=1 cargo test -p troupe-runtime schema` writes it again"
    );
    let pragma = |name: &str| -> i64 {
        image
            .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(pragma("user_version"), 0);
    assert_eq!(
        pragma("application_id"),
        i64::from(crate::store::fresh::MARK)
    );
    assert_eq!(pragma("page_size"), 4096);
    let mode: String = image
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert!(
        rows(&image).is_empty(),
        "the image holds rows: {:?}",
        rows(&image)
    );
}

#[test]
fn a_new_store_starts_from_the_image_and_holds_the_new_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    drop(crate::store::Store::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    let pragma = |name: &str| -> i64 {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(pragma("application_id"), 0);
    assert_eq!(pragma("user_version"), super::latest());
    let fresh = Connection::open_in_memory().unwrap();
    fresh.execute_batch(SCHEMA).unwrap();
    for sql in ROWS {
        fresh.execute_batch(sql).unwrap();
    }
    let (mut a, mut b) = (objects(&conn), objects(&fresh));
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert_eq!(rows(&conn), rows(&fresh));
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.contains(".new-"))
        .collect();
    assert!(entries.is_empty(), "the staged image was left: {entries:?}");
}

#[test]
fn stores_opened_at_once_on_one_new_path_make_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    let start = std::sync::Arc::new(std::sync::Barrier::new(4));
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let (path, start) = (path.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                crate::store::Store::open(&path).map(drop)
            })
        })
        .collect();
    for opener in openers {
        if let Err(e) = opener.join().unwrap() {
            panic!("{e}");
        }
    }
    let conn = Connection::open(&path).unwrap();
    let houses: i64 = conn
        .query_row("SELECT count(*) FROM houses WHERE name = 'home'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(houses, 1);
}

#[test]
fn the_schema_file_is_what_the_migrations_make() {
    let conn = migrated();
    let made = objects(&conn);
    let script = script_of(&made);
    if std::env::var_os("TROUPE_BLESS_SCHEMA").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/store/schema.sql");
        std::fs::write(path, &script).unwrap();
        return;
    }
    assert!(
        SCHEMA == script,
        "schema.sql is not what the migrations make: after a new migration, \
         `TROUPE_BLESS_SCHEMA=1 cargo test -p troupe-runtime schema` writes it again"
    );

    let fresh = Connection::open_in_memory().unwrap();
    fresh.execute_batch(SCHEMA).unwrap();
    for sql in ROWS {
        fresh.execute_batch(sql).unwrap();
    }
    let mut a = made;
    let mut b = objects(&fresh);
    a.sort();
    b.sort();
    assert_eq!(
        a, b,
        "a database made from schema.sql differs from a migrated one"
    );
    assert_eq!(rows(&conn), rows(&fresh));
    assert!(rows(&fresh)
        .iter()
        .any(|r| r.starts_with("houses: Text(\"home\")")));
}

#[test]
fn a_new_store_whose_first_log_is_lost_opens_as_new_again() {
    // The migration's commit into a new store's log is not flushed
    // (`fresh.rs`): a power loss before the first checkpoint may lose the
    // log. What is left is the flushed image, which opens as a new store.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("troupe.db");
    let store = crate::store::Store::open(&path).unwrap();
    // The writer commits at `synchronous = NORMAL` again after that commit.
    let synchronous = store
        .write_blocking(|tx| Ok(tx.query_row("PRAGMA synchronous", [], |r| r.get::<_, i64>(0))?))
        .unwrap();
    assert_eq!(synchronous, 1);
    // The database's file without its log: nothing was checkpointed yet.
    let lost = dir.path().join("lost.db");
    std::fs::copy(&path, &lost).unwrap();
    drop(store);
    {
        let conn = Connection::open(&lost).unwrap();
        let pragma = |name: &str| -> i64 {
            conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(
            pragma("application_id"),
            i64::from(crate::store::fresh::MARK)
        );
        assert_eq!(pragma("user_version"), 0);
    }
    drop(crate::store::Store::open(&lost).unwrap());
    let conn = Connection::open(&lost).unwrap();
    let pragma = |name: &str| -> i64 {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(pragma("application_id"), 0);
    assert_eq!(pragma("user_version"), super::latest());
    let fresh = Connection::open_in_memory().unwrap();
    fresh.execute_batch(SCHEMA).unwrap();
    for sql in ROWS {
        fresh.execute_batch(sql).unwrap();
    }
    assert_eq!(rows(&conn), rows(&fresh));
}

/// No write checks a row by building a table: SQLite codes a check's
/// `x IN (a, b, c…)` as a lookup in an index it makes for every row written
/// (half of a delegation entry's insert, until `CHECKS_IN_PLACE`); a list
/// of values is written `x = a OR x = b …` instead.
#[test]
fn no_insert_builds_a_table_to_check_its_row() {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM pragma_table_list \
             WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite_%'",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(tables.len() > 30, "{tables:?}");
    for table in tables {
        let columns: Vec<String> = conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .unwrap()
            .query_map([&table], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let insert = format!(
            "EXPLAIN INSERT INTO \"{table}\" ({}) VALUES ({})",
            columns.join(", "),
            vec!["?"; columns.len()].join(", ")
        );
        let opcodes: Vec<String> = conn
            .prepare(&insert)
            .unwrap()
            .query_map(
                rusqlite::params_from_iter(vec![rusqlite::types::Null; columns.len()]),
                |r| r.get(1),
            )
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            !opcodes.iter().any(|op| op == "OpenEphemeral"),
            "an insert into {table} builds a table to check its row"
        );
    }
}
