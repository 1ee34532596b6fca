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

#[test]
fn the_schema_file_is_what_the_migrations_make() {
    let conn = migrated();
    let made = objects(&conn);
    let script: String = std::iter::once(HEADER.to_string())
        .chain(made.iter().map(|o| format!("{};\n", o.3)))
        .collect();
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
