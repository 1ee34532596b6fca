//! The write-ahead log's frames written in one system call per commit.
//!
//! SQLite appends a commit to its log a frame at a time, each frame in two
//! writes (its 24-byte header, then the page): a commit of ten pages is
//! twenty `pwrite`s. On the virtual machines troupe is measured on, a
//! `pwrite` into ext4's page cache costs 3–7 µs whatever its size (the
//! inode's times, the folio's lookup and dirtying), so those writes were
//! most of a durable turn's commit; one write of the same bytes took a
//! seventh of the time (a commit of ten frames: 104 µs → 14.5 µs).
//!
//! This is SQLite's own file system layer (the `unix` VFS) with one change,
//! for log files only: writes that continue the one before are gathered in
//! memory, and go to the file as one write
//!
//! - when a commit's last frame is complete (the frame whose header holds
//!   the database's size after the commit): at that write, whose result is
//!   the gathered write's, so a failure fails the commit as it did before;
//! - before any other call on the file (a read, a sync, a truncation, its
//!   size, a lock), before a write elsewhere in it, and when the next write
//!   would take them past 124 KiB (the most SQLite's layer writes at once).
//!
//! So nothing SQLite or another connection reads is ever held back: a
//! commit's frames are in the file before its commit writes the log's
//! index (which is what readers go by), and a crash before that loses only
//! a commit no caller was told of, as a crash between two of SQLite's own
//! writes did. Database and other files go to SQLite's layer untouched, and
//! so does a log whose database is opened without power-safe overwrite
//! (`psow=0`), where SQLite pads a commit and writes after its last flush.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;

use rusqlite::ffi;

/// A log frame's header: its page number, then the database's size in
/// pages after the commit it ends (0 when it ends none), salts, checksums.
const FRAME_HEADER: c_int = 24;

/// The most one write to SQLite's file may carry: its `unix` layer takes
/// the length modulo 128 KiB (it never writes more than a page itself).
/// Gathered bytes go out when the next would pass it, so the buffer
/// (kept between commits, one per log file written) never grows further.
const MAX_WRITE: usize = 128 * 1024 - 4096;

#[cfg(test)]
thread_local! {
    /// How many writes reached a log file from this thread (for tests).
    static LOG_WRITES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count_write() {
    #[cfg(test)]
    LOG_WRITES.with(|n| n.set(n.get() + 1));
}

/// SQLite's own VFS, and this one (both live as long as the process).
struct Vfs {
    inner: *mut ffi::sqlite3_vfs,
}

// SAFETY: both structs are written once, before any connection, then only
// read, as SQLite shares its own VFS between threads.
unsafe impl Send for Vfs {}
// SAFETY: as above.
unsafe impl Sync for Vfs {}

static VFS: OnceLock<Option<Vfs>> = OnceLock::new();

/// The writes that reached a log file so far from this thread.
#[cfg(test)]
fn log_writes() -> u64 {
    LOG_WRITES.with(std::cell::Cell::get)
}

/// Makes this VFS SQLite's default, once per process, before the first
/// connection opens. Returns whether it is in place (false: SQLite's own
/// default has no `xOpen`, and stays as it is).
pub(crate) fn install() -> bool {
    VFS.get_or_init(|| {
        // SAFETY: finding the default VFS and registering a new one are
        // SQLite's API; the new struct is leaked, so it outlives SQLite's use.
        unsafe {
            let inner = ffi::sqlite3_vfs_find(std::ptr::null());
            if inner.is_null() || (*inner).xOpen.is_none() {
                return None;
            }
            let mut ours: ffi::sqlite3_vfs = std::ptr::read(inner);
            ours.pNext = std::ptr::null_mut();
            ours.zName = c"troupe".as_ptr();
            ours.szOsFile = (*inner).szOsFile.max(size_of::<LogFile>() as c_int);
            ours.xOpen = Some(open);
            let ours = Box::into_raw(Box::new(ours));
            if ffi::sqlite3_vfs_register(ours, 1) != ffi::SQLITE_OK {
                return None;
            }
            Some(Vfs { inner })
        }
    })
    .is_some()
}

fn inner_vfs() -> *mut ffi::sqlite3_vfs {
    match VFS.get() {
        Some(Some(vfs)) => vfs.inner,
        // Only called through the VFS registered after VFS was set.
        _ => unreachable!("the log's VFS is used before it is installed"),
    }
}

/// A log file: SQLite's own, and the writes gathered for it.
#[repr(C)]
struct LogFile {
    /// What SQLite sees: its methods are [`METHODS`].
    base: ffi::sqlite3_file,
    /// SQLite's own file, in `storage`.
    inner: *mut ffi::sqlite3_file,
    /// The memory `inner` points into, freed with this struct.
    _storage: Box<[u64]>,
    /// Gathered bytes, to be written at `start`.
    gathered: Vec<u8>,
    start: i64,
    /// Where the log's next append begins (unknown until a first write).
    next: Option<i64>,
    /// The last write was the header of a frame that ends a commit.
    commit_header: bool,
    /// Whether writes are gathered at all: not on a device without
    /// power-safe overwrite, where SQLite pads a commit past a sector's end
    /// and writes a frame's tail after its flush, with no call after it.
    gathers: bool,
}

impl LogFile {
    /// SQLite's own methods for the file.
    fn methods(&self) -> &ffi::sqlite3_io_methods {
        // SAFETY: the inner file opened (its methods are set) before this
        // struct was made, and they stay until its `xClose`.
        unsafe { &*(*self.inner).pMethods }
    }

    /// Writes what is gathered; SQLite's result code.
    fn flush(&mut self) -> c_int {
        if self.gathered.is_empty() {
            return ffi::SQLITE_OK;
        }
        let rc = self.write_through(&self.gathered, self.start);
        self.gathered.clear();
        rc
    }

    /// One write to SQLite's own file.
    fn write_through(&self, bytes: &[u8], offset: i64) -> c_int {
        let Some(write) = self.methods().xWrite else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        count_write();
        let len = c_int::try_from(bytes.len()).unwrap_or(c_int::MAX);
        // SAFETY: the inner file is open; `bytes` holds `len` bytes.
        unsafe { write(self.inner, bytes.as_ptr().cast(), len, offset) }
    }

    /// Gathers a write that appends to the log (or starts it over at its
    /// first byte); writes any other one through, after what is gathered.
    fn write(&mut self, bytes: &[u8], offset: i64) -> c_int {
        let header = bytes.len() == FRAME_HEADER as usize;
        let ends_commit =
            std::mem::replace(&mut self.commit_header, header && bytes[4..8] != [0; 4]);
        // The first write after opening appends (a frame is rewritten only
        // by a transaction that appended before); one at 0 starts a new log.
        let appends = self.gathers && (offset == 0 || self.next.is_none_or(|next| next == offset));
        let full = self.gathered.len() + bytes.len() > MAX_WRITE;
        if !appends || offset == 0 || full {
            let rc = self.flush();
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        if !appends {
            // A frame rewritten in place (its page, or its header's
            // checksums): as SQLite wrote it. The appends go on after.
            return self.write_through(bytes, offset);
        }
        if bytes.len() > MAX_WRITE {
            // Larger than any page: written as it comes.
            self.next = Some(offset + bytes.len() as i64);
            return self.write_through(bytes, offset);
        }
        if self.gathered.is_empty() {
            self.start = offset;
            self.gathered.reserve_exact(MAX_WRITE);
        }
        self.gathered.extend_from_slice(bytes);
        self.next = Some(offset + bytes.len() as i64);
        if ends_commit && !header {
            // The page of the frame that ends a commit: the commit is whole.
            return self.flush();
        }
        ffi::SQLITE_OK
    }
}

/// The file behind SQLite's handle.
///
/// # Safety
///
/// `file` is a handle [`open`] made a [`LogFile`] of, not yet closed.
unsafe fn log<'a>(file: *mut ffi::sqlite3_file) -> &'a mut LogFile {
    // SAFETY: as the caller promises.
    unsafe { &mut *file.cast::<LogFile>() }
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let inner = inner_vfs();
    // SAFETY: the default VFS was found with an `xOpen` at install.
    let Some(inner_open) = (unsafe { (*inner).xOpen }) else {
        return ffi::SQLITE_CANTOPEN;
    };
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // SAFETY: `file` has room for SQLite's own file (`szOsFile`).
        return unsafe { inner_open(inner, name, file, flags, out_flags) };
    }
    // SAFETY: read once at install, a positive size.
    let size = usize::try_from(unsafe { (*inner).szOsFile }).unwrap_or(0);
    let mut storage = vec![0u64; size.div_ceil(8)].into_boxed_slice();
    let inner_file = storage.as_mut_ptr().cast::<ffi::sqlite3_file>();
    // SAFETY: `inner_file` has room for SQLite's own file.
    let rc = unsafe { inner_open(inner, name, inner_file, flags, out_flags) };
    if rc != ffi::SQLITE_OK {
        // SQLite closes a file whose methods are set even when its open
        // failed; this one it will not see, so it is closed here.
        // SAFETY: the inner file's methods, when set, are SQLite's own.
        unsafe {
            if let Some(close) = (*inner_file).pMethods.as_ref().and_then(|m| m.xClose) {
                close(inner_file);
            }
            (*file).pMethods = std::ptr::null();
        }
        return rc;
    }
    // SQLite pads by the database file's characteristics: its `psow` URI
    // parameter, which the log's name carries too.
    // SAFETY: `name` is the log's name as SQLite made it, with the
    // database's URI parameters after it.
    let psow =
        name.is_null() || unsafe { ffi::sqlite3_uri_boolean(name, c"psow".as_ptr(), 1) } != 0;
    // SAFETY: the inner file opened; its methods are SQLite's own.
    let characteristics = unsafe {
        (*(*inner_file).pMethods)
            .xDeviceCharacteristics
            .map_or(0, |f| f(inner_file))
    };
    let log = LogFile {
        base: ffi::sqlite3_file { pMethods: &METHODS },
        inner: inner_file,
        _storage: storage,
        gathered: Vec::new(),
        start: 0,
        next: None,
        commit_header: false,
        gathers: characteristics & ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE != 0 && psow,
    };
    // SAFETY: `file` has room for a `LogFile` (`szOsFile`), and SQLite
    // aligns it for any type.
    unsafe { std::ptr::write(file.cast::<LogFile>(), log) };
    ffi::SQLITE_OK
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

/// Writes what is gathered, then calls SQLite's own method `$method` with
/// the inner file and `$args`; a method the inner file lacks answers `$none`.
macro_rules! flushed {
    ($file:ident, $method:ident, $none:expr $(, $arg:expr)*) => {{
        // SAFETY: SQLite calls a log file's methods on a handle `open` made.
        let log = unsafe { log($file) };
        let rc = log.flush();
        match log.methods().$method {
            // SAFETY: SQLite's own method, on its own open file.
            Some(method) if rc == ffi::SQLITE_OK => unsafe { method(log.inner $(, $arg)*) },
            Some(_) => rc,
            None => $none,
        }
    }};
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a handle `open` made once, and uses it no more.
    let mut log = unsafe { std::ptr::read(file.cast::<LogFile>()) };
    let flushed = log.flush();
    let closed = match log.methods().xClose {
        // SAFETY: SQLite's own method, on its own open file.
        Some(close) => unsafe { close(log.inner) },
        None => ffi::SQLITE_OK,
    };
    // SAFETY: SQLite does not touch a closed handle's methods.
    unsafe { (*file).pMethods = std::ptr::null() };
    drop(log);
    if flushed != ffi::SQLITE_OK {
        flushed
    } else {
        closed
    }
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    flushed!(file, xRead, ffi::SQLITE_IOERR_READ, buf, amount, offset)
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let Ok(len) = usize::try_from(amount) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    // SAFETY: SQLite passes `amount` readable bytes at `buf`.
    let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
    // SAFETY: SQLite calls a log file's methods on a handle `open` made.
    unsafe { log(file) }.write(bytes, offset)
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    flushed!(file, xTruncate, ffi::SQLITE_IOERR_TRUNCATE, size)
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    flushed!(file, xSync, ffi::SQLITE_IOERR_FSYNC, flags)
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    flushed!(file, xFileSize, ffi::SQLITE_IOERR_FSTAT, size)
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    flushed!(file, xLock, ffi::SQLITE_IOERR_LOCK, level)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    flushed!(file, xUnlock, ffi::SQLITE_IOERR_UNLOCK, level)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    flushed!(
        file,
        xCheckReservedLock,
        ffi::SQLITE_IOERR_CHECKRESERVEDLOCK,
        out
    )
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    flushed!(file, xFileControl, ffi::SQLITE_NOTFOUND, op, arg)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls a log file's methods on a handle `open` made.
    let log = unsafe { log(file) };
    match log.methods().xSectorSize {
        // SAFETY: SQLite's own method, on its own open file.
        Some(method) => unsafe { method(log.inner) },
        None => 4096,
    }
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls a log file's methods on a handle `open` made.
    let log = unsafe { log(file) };
    match log.methods().xDeviceCharacteristics {
        // SAFETY: SQLite's own method, on its own open file.
        Some(method) => unsafe { method(log.inner) },
        None => 0,
    }
}

unsafe extern "C" fn shm_map(
    file: *mut ffi::sqlite3_file,
    page: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    flushed!(
        file,
        xShmMap,
        ffi::SQLITE_IOERR_SHMMAP,
        page,
        size,
        extend,
        out
    )
}

unsafe extern "C" fn shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    flushed!(file, xShmLock, ffi::SQLITE_IOERR_SHMLOCK, offset, n, flags)
}

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: SQLite calls a log file's methods on a handle `open` made.
    let log = unsafe { log(file) };
    // Nothing is gathered here in SQLite's use (a commit's writes went out
    // at its last frame); a failure would surface at the next call.
    let _ = log.flush();
    if let Some(method) = log.methods().xShmBarrier {
        // SAFETY: SQLite's own method, on its own open file.
        unsafe { method(log.inner) }
    }
}

unsafe extern "C" fn shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    flushed!(file, xShmUnmap, ffi::SQLITE_OK, delete)
}

unsafe extern "C" fn fetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls a log file's methods on a handle `open` made.
    let log = unsafe { log(file) };
    let rc = log.flush();
    match log.methods().xFetch {
        // SAFETY: SQLite's own method, on its own open file.
        Some(method) if rc == ffi::SQLITE_OK => unsafe { method(log.inner, offset, amount, out) },
        Some(_) => rc,
        None => {
            // SAFETY: SQLite passes a place for the mapping.
            unsafe { *out = std::ptr::null_mut() };
            rc
        }
    }
}

unsafe extern "C" fn unfetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    page: *mut c_void,
) -> c_int {
    flushed!(file, xUnfetch, ffi::SQLITE_OK, offset, page)
}

#[cfg(test)]
#[path = "wal_writes_tests.rs"]
mod tests;
