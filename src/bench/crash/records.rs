//! The crash harness's record files (`ledger`, `sent`, `acks`,
//! `file-writes`): one tab-separated record a line, each appended whole in
//! one `write` and synced.
//!
//! One write is not always whole when the writer is killed. Linux copies a
//! buffered write into the file page by page and, between two pages, stops
//! if the process has a fatal signal pending: a record that crosses a 4 KiB
//! boundary of the file can end there, without its newline, when SIGKILL
//! (or the worker's own abort) lands in the middle. The next worker's first
//! record was then glued to that fragment. In the ledger, a fragment cut
//! inside the call id made one line whose id no call has (`calls_missing`)
//! and hid the next line's run (`tools_missing`): the one failure of
//! `crash::thirty_kills_lose_nothing_and_do_nothing_twice` (seed 7) was
//! this, not a tool run before its call's commit.
//!
//! So each worker, before it writes anything, [`seal`]s every record file:
//! a cut-off last line is moved to `<file>.torn` and the file truncated to
//! its last whole record. The files then only hold whole records; a
//! fragment is judged on its own ([`super::verify`]): a cut-off note of a
//! send or an acknowledgement is no note (the act noted before it was not
//! made; the one acknowledged after it was not acknowledged), and a
//! cut-off ledger line is a run of a call the store must hold.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Appends `line` to `path` in one write, then syncs it to disk.
pub fn append_synced(path: &Path, line: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    file.write_all(line.as_bytes())?;
    file.sync_data()
}

/// Where the fragments cut off the end of `path` are kept: `<path>.torn`.
pub fn torn_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".torn");
    PathBuf::from(name)
}

/// Moves a cut-off last line of `path` (one without its newline) to
/// [`torn_path`], then truncates `path` to its last whole record. Only
/// while nobody appends to `path`: the harness runs one worker at a time,
/// and a worker seals before it starts. Does nothing to a missing file.
pub fn seal(path: &Path) -> std::io::Result<()> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if bytes.last().is_none_or(|b| *b == b'\n') {
        return Ok(());
    }
    let whole = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |at| at + 1);
    let fragment = String::from_utf8_lossy(&bytes[whole..]);
    // Kept first: killed between the two, the next seal keeps it again
    // (a fragment counted twice), never loses it.
    append_synced(&torn_path(path), &format!("{fragment}\n"))?;
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.set_len(whole as u64)?;
    file.sync_data()
}

/// The whole records of `path`, split at tabs. A cut-off last line (a
/// file no worker sealed after its writer was killed) is left out: it is
/// in [`torn`].
pub fn read(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let whole = text.rfind('\n').map_or("", |at| &text[..at]);
    whole
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// The fragments cut off `path`: those a seal kept, and a cut-off last
/// line still in it.
pub fn torn(path: &Path) -> Vec<String> {
    let mut fragments: Vec<String> = std::fs::read_to_string(torn_path(path))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail = text.rfind('\n').map_or(text.as_str(), |at| &text[at + 1..]);
    if !tail.is_empty() {
        fragments.push(tail.to_string());
    }
    fragments
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_cut_off_by_a_kill_is_set_aside_and_the_next_one_stands_alone() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger");
        append_synced(&ledger, "La-0\tc1\tLa-0\t0\n").unwrap();
        // A worker killed inside its write: the line stops in the call id.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&ledger)
            .unwrap()
            .write_all(b"Lb-")
            .unwrap();
        assert_eq!(torn(&ledger), vec!["Lb-"]);
        assert_eq!(read(&ledger).len(), 1);

        seal(&ledger).unwrap();
        // The next worker's first record is a line of its own.
        append_synced(&ledger, "Lc-1\tc2\tLc-1\t1\n").unwrap();
        let ids: Vec<_> = read(&ledger).into_iter().map(|r| r[0].clone()).collect();
        assert_eq!(ids, vec!["La-0", "Lc-1"]);
        assert_eq!(torn(&ledger), vec!["Lb-"]);

        // Whole files, and missing ones, are left as they are.
        seal(&ledger).unwrap();
        seal(&dir.path().join("acks")).unwrap();
        assert_eq!(read(&ledger).len(), 2);
        assert_eq!(torn(&ledger), vec!["Lb-"]);
        assert!(!dir.path().join("acks").exists());
    }
}
