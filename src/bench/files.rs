//! House files: what storing and finding a house's files costs.
//!
//! - `write_1mib`: a 1 MiB text file written (one version) until committed,
//!   through the Rust API (cutting, hashing, deduplication; each write on a
//!   store at rest: the last one's text indexed and its pieces compressed,
//!   the writer's idle work, so that a write does not share the cores with
//!   the last one's); `write_1mib_to_indexed`:
//!   the same until its text is searchable; `write_1mib_phases`: where
//!   that time goes (packing, the writer's queue, its job, the commit);
//! - `search`: `search_files`' query over `n` files of about 10 KB of text
//!   (words drawn with a Zipf-like spread), through the Rust API;
//! - `list`: the listing of a 10,000-file house, once its files are
//!   indexed;
//! - `storage`: 100 versions of a 100 KiB file, one line changed each
//!   time: the bytes stored for them (pieces and piece lists) over the
//!   file's size, and the growth of the database's used pages (search
//!   index included) over the file's size; the same for 20 versions of a
//!   1 MiB file (cut in coarser pieces, see `house_files::pieces`), with
//!   the bytes one edit adds; each once the pieces a write stores raw are
//!   compressed, as the writer does when idle.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use troupe_runtime::model::{ScriptedProvider, Turn};
use troupe_runtime::store::house_files::{compress, index as table, NewFile};

use super::percentiles;
use crate::Runtime;

const WORDS: usize = 5_000;

/// A deterministic pseudo-random word source.
struct Words(u64);

impl Words {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        // Zipf-like: squaring a uniform draw favours the first words.
        let u = (self.0 % 1_000_000) as f64 / 1_000_000.0;
        ((u * u) * WORDS as f64) as usize
    }

    fn text(&mut self, bytes: usize) -> String {
        let mut out = String::with_capacity(bytes + 16);
        let mut n = 0;
        while out.len() < bytes {
            out.push_str(&format!("w{}", self.next()));
            n += 1;
            out.push(if n % 12 == 0 { '\n' } else { ' ' });
        }
        out
    }
}

/// Runs the files workloads over `files` searched files.
pub async fn files(files: usize) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let model = ScriptedProvider::from_fn(|_| Turn::text("ok")).recording(false);
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(model))
        .set("review.enabled", "false")
        .set("files.house_quota_bytes", "100000000000")
        .build()
        .await?;
    let mut words = Words(0x2545_F491_4F6C_DD1D);

    // Writes of 1 MiB.
    let w = runtime.create_house("writes").await?;
    let store = runtime.node().store().clone();
    let (mut samples, mut indexed) = (Vec::new(), Vec::new());
    for i in 0..30 {
        let file = NewFile::text(format!("big{i}.txt"), words.text(1024 * 1024));
        let start = Instant::now();
        w.write_files("bench", "", vec![file]).await?;
        samples.push(start.elapsed());
        // Each write on a writer that is done with the last one's index.
        table::catch_up(&store, w.house.id).await?;
        indexed.push(start.elapsed());
        compress::settle(&store).await?;
    }
    let write_1mib = percentiles(samples);
    let write_1mib_indexed = percentiles(indexed);
    let write_1mib_phases = phases(&runtime, &mut words).await?;

    // Search over `files` files of ~10 KB.
    let s = runtime.create_house("search").await?;
    let load = Instant::now();
    for batch in 0..files.div_ceil(100) {
        let batch_files: Vec<NewFile> = (0..100)
            .map(|j| batch * 100 + j)
            .take_while(|i| *i < files)
            .map(|i| NewFile::text(format!("docs/{}/f{i}.md", i % 50), words.text(10_000)))
            .collect();
        s.write_files("bench", "", batch_files).await?;
    }
    let load_secs = load.elapsed().as_secs_f64();
    // A store at rest: the pieces the load wrote raw compressed, so the
    // writer's idle work does not share the cores with the searches
    // measured.
    compress::settle(&store).await?;
    let mut samples = Vec::new();
    for q in 0..200 {
        let query = format!("w{} w{}", 50 + q * 7 % 900, 100 + q * 13 % 2000);
        let start = Instant::now();
        s.search_files(&query, 5).await?;
        samples.push(start.elapsed());
    }
    let search = percentiles(samples);

    // The list of a 10,000-file house.
    let l = runtime.create_house("list").await?;
    for batch in 0..20 {
        let batch_files: Vec<NewFile> = (0..500)
            .map(|j| NewFile::text(format!("d{}/file{}.md", j % 20, batch * 500 + j), "x"))
            .collect();
        l.write_files("bench", "", batch_files).await?;
    }
    // A house at rest: its files indexed, so the writer's indexing of the
    // 10,000 new files does not share the cores with the listing measured.
    table::catch_up(&store, l.house.id).await?;
    let mut samples = Vec::new();
    for _ in 0..50 {
        let start = Instant::now();
        let all = l.files(None).await?;
        samples.push(start.elapsed());
        anyhow::ensure!(all.len() == 10_000, "listed {}", all.len());
    }
    let list = percentiles(samples);

    // 100 versions of a 100 KiB file, one line changed each time; and 20
    // of a 1 MiB file, cut in coarser pieces.
    let storage_100k = versions(&runtime, &mut words, "versions", 100 * 1024, 100).await?;
    let storage_1mib = versions(&runtime, &mut words, "versions-1mib", 1024 * 1024, 20).await?;
    runtime.shutdown().await;
    Ok(json!({
        "workload": "files",
        "write_1mib": write_1mib,
        "write_1mib_to_indexed": write_1mib_indexed,
        "write_1mib_phases": write_1mib_phases,
        "search": {"files": files, "text_mb": files as f64 * 10_000.0 / 1e6, "load_secs": load_secs, "latency": search},
        "list_10000": list,
        "storage_100_versions": storage_100k,
        "storage_20_versions_1mib": storage_1mib,
    }))
}

/// Where a 1 MiB write's time goes, over 30 writes made as
/// `write_files` makes them, each phase timed apart: `pack` (cut, hashed
/// and compressed, on a blocking thread), `queued` (sent to the store's
/// writer until its job starts), `job` (the rows, in the writer's
/// transaction), `commit` (the job's end until the caller has the answer:
/// the commit and the reply).
async fn phases(runtime: &Runtime, words: &mut Words) -> anyhow::Result<serde_json::Value> {
    use troupe_runtime::store::house_files::{pack, write};
    let w = runtime.create_house("phases").await?;
    let (store, house) = (runtime.node().store().clone(), w.house.id);
    let limits = runtime.node().settings().files;
    let (mut packing, mut queued, mut job, mut commit) = (vec![], vec![], vec![], vec![]);
    for i in 0..30 {
        let file = NewFile::text(format!("big{i}.txt"), words.text(1024 * 1024));
        let start = Instant::now();
        let packed = tokio::task::spawn_blocking(move || pack(vec![file])).await?;
        let sent = Instant::now();
        let (began, ended) = store
            .write(move |tx| {
                let began = Instant::now();
                write(tx, house, "bench", "", &packed, limits)?;
                Ok((began, Instant::now()))
            })
            .await?;
        let answered = Instant::now();
        packing.push(sent - start);
        queued.push(began - sent);
        job.push(ended - began);
        commit.push(answered - ended);
        table::catch_up(&store, house).await?;
        compress::settle(&store).await?;
    }
    Ok(json!({
        "pack": percentiles(packing),
        "queued": percentiles(queued),
        "job": percentiles(job),
        "commit": percentiles(commit),
    }))
}

/// `count` versions of a file of `bytes` bytes written to a new house
/// named `house`, one line changed each time: what they added to the
/// stored contents (pieces and piece lists) and to the database's used
/// pages (search index included), as ratios to the file's size, and the
/// content bytes one edit added, on average.
async fn versions(
    runtime: &Runtime,
    words: &mut Words,
    house: &str,
    bytes: usize,
    count: usize,
) -> anyhow::Result<serde_json::Value> {
    let v = runtime.create_house(house).await?;
    let store = runtime.node().store().clone();
    compress::settle(&store).await?;
    let size_of = || {
        store.read(|c| {
            Ok(c.query_row(
                "SELECT (SELECT COALESCE(SUM(length(data)), 0) FROM file_pieces)
                      + (SELECT COALESCE(SUM(length(pieces) + length(hash) + 24), 0) FROM file_contents),
                        (SELECT (page_count - freelist_count) * page_size
                         FROM pragma_page_count, pragma_freelist_count, pragma_page_size)",
                [],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
            )?)
        })
    };
    let (content_before, db_before) = size_of().await?;
    let base = words.text(bytes);
    let mut lines: Vec<String> = base.lines().map(str::to_string).collect();
    let file_size = base.len() as f64;
    let mut first = 0;
    for i in 0..count {
        let at = (i * 37) % lines.len();
        lines[at] = format!("line {at} changed in version {i}");
        let text = lines.join("\n");
        v.write_files("bench", "", vec![NewFile::text("report.md", text)])
            .await?;
        if i == 0 {
            compress::settle(&store).await?;
            first = size_of().await?.0;
        }
    }
    table::catch_up(&store, v.house.id).await?;
    // What the writer's idle work comes to: every piece compressed.
    compress::settle(&store).await?;
    let (content_after, db_after) = size_of().await?;
    Ok(json!({
        "versions": count,
        "file_bytes": file_size,
        "content_ratio": (content_after - content_before) as f64 / file_size,
        "database_growth_ratio": (db_after - db_before) as f64 / file_size,
        "content_bytes_per_edit": (content_after - first) as f64 / (count - 1) as f64,
    }))
}
