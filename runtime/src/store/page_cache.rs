//! SQLite's page cache, with a commit that does not scan it whole.
//!
//! When SQLite splits a B-tree page it puts the pages it wrote back in
//! ascending order, swapping two pages through a spare number: the locking
//! page's, past the end of any database under 1 GiB. SQLite's own cache
//! (`pcache1`) keeps the largest number it has held, and at the end of every
//! write transaction drops the pages past the database's end — by walking its
//! whole hash table and every page in it when that largest number is far past
//! the end, as the spare number always is. With the writer's cache of up to
//! 16,384 pages that walk took about a millisecond in each commit that had
//! split a page (a 1 MiB house file's commit: most of it).
//!
//! This cache is SQLite's own, wrapped: it keeps the largest number held
//! other than the spare one, and the page parked on the spare number while
//! it is there, and asks SQLite's cache to drop pages only when some may lie
//! past the limit. Every key enters the cache through [`fetch`] or
//! [`rekey`], so the largest number it keeps bounds every page but the
//! parked one.

use std::os::raw::{c_int, c_uint, c_void};
use std::sync::OnceLock;

use rusqlite::ffi;

/// SQLite's own methods, as they were before [`install`].
static INNER: OnceLock<Methods> = OnceLock::new();

/// SQLite's methods: function pointers and an argument SQLite's own cache
/// never reads (null), shared by every thread as SQLite shares them.
struct Methods(ffi::sqlite3_pcache_methods2);

// SAFETY: the struct is written once, before any connection, then only read.
unsafe impl Send for Methods {}
// SAFETY: as above.
unsafe impl Sync for Methods {}

/// The byte SQLite locks on: the page holding it is never used, and is the
/// spare number a page split swaps through.
const PENDING_BYTE: c_uint = 0x4000_0000;

/// One connection's cache: SQLite's, and what is known of its keys.
struct Cache {
    inner: *mut ffi::sqlite3_pcache,
    /// The spare (locking) page's number for this page size.
    spare: c_uint,
    /// At least the largest key held, the spare one aside.
    max_key: c_uint,
    /// The page held under the spare number, if one is.
    parked: *mut ffi::sqlite3_pcache_page,
}

fn inner() -> &'static ffi::sqlite3_pcache_methods2 {
    // Only called through the methods installed after INNER was set.
    match INNER.get() {
        Some(m) => &m.0,
        None => unreachable!("the page cache is used before it is installed"),
    }
}

/// Wraps SQLite's page cache (see the module); once per process, before
/// the first connection opens. Returns whether it is in place: false when
/// SQLite was already started (its cache then stays as it is, and only a
/// commit's cost differs).
pub(crate) fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let mut methods = std::mem::MaybeUninit::<ffi::sqlite3_pcache_methods2>::zeroed();
        // SAFETY: GETPCACHE2 fills the struct it is given; both calls fail
        // (SQLITE_MISUSE) without effect once SQLite is initialized.
        unsafe {
            if ffi::sqlite3_config(ffi::SQLITE_CONFIG_GETPCACHE2, methods.as_mut_ptr())
                != ffi::SQLITE_OK
            {
                return false;
            }
            let methods = methods.assume_init();
            if methods.xFetch.is_none() || INNER.set(Methods(methods)).is_err() {
                return false;
            }
            let wrapped = ffi::sqlite3_pcache_methods2 {
                iVersion: 1,
                pArg: std::ptr::null_mut(),
                xInit: Some(init),
                xShutdown: Some(shutdown),
                xCreate: Some(create),
                xCachesize: Some(cachesize),
                xPagecount: Some(pagecount),
                xFetch: Some(fetch),
                xUnpin: Some(unpin),
                xRekey: Some(rekey),
                xTruncate: Some(truncate),
                xDestroy: Some(destroy),
                xShrink: Some(shrink),
            };
            // SQLite copies the struct.
            ffi::sqlite3_config(ffi::SQLITE_CONFIG_PCACHE2, &wrapped as *const _) == ffi::SQLITE_OK
        }
    })
}

unsafe extern "C" fn init(_: *mut c_void) -> c_int {
    let m = inner();
    match m.xInit {
        Some(f) => f(m.pArg),
        None => ffi::SQLITE_OK,
    }
}

unsafe extern "C" fn shutdown(_: *mut c_void) {
    let m = inner();
    if let Some(f) = m.xShutdown {
        f(m.pArg)
    }
}

unsafe extern "C" fn create(
    sz_page: c_int,
    sz_extra: c_int,
    purgeable: c_int,
) -> *mut ffi::sqlite3_pcache {
    let Some(f) = inner().xCreate else {
        return std::ptr::null_mut();
    };
    let cache = f(sz_page, sz_extra, purgeable);
    if cache.is_null() {
        return cache;
    }
    let spare = PENDING_BYTE / c_uint::try_from(sz_page.max(1)).unwrap_or(1) + 1;
    let wrapper = Box::new(Cache {
        inner: cache,
        spare,
        max_key: 0,
        parked: std::ptr::null_mut(),
    });
    Box::into_raw(wrapper).cast()
}

unsafe fn this<'a>(p: *mut ffi::sqlite3_pcache) -> &'a mut Cache {
    &mut *p.cast::<Cache>()
}

unsafe extern "C" fn cachesize(p: *mut ffi::sqlite3_pcache, n: c_int) {
    if let Some(f) = inner().xCachesize {
        f(this(p).inner, n)
    }
}

unsafe extern "C" fn pagecount(p: *mut ffi::sqlite3_pcache) -> c_int {
    inner().xPagecount.map_or(0, |f| f(this(p).inner))
}

unsafe extern "C" fn fetch(
    p: *mut ffi::sqlite3_pcache,
    key: c_uint,
    create: c_int,
) -> *mut ffi::sqlite3_pcache_page {
    let c = this(p);
    let Some(f) = inner().xFetch else {
        return std::ptr::null_mut();
    };
    let page = f(c.inner, key, create);
    if !page.is_null() {
        if key == c.spare {
            c.parked = page;
        } else {
            if page == c.parked {
                // The parked page was reused for another key.
                c.parked = std::ptr::null_mut();
            }
            c.max_key = c.max_key.max(key);
        }
    }
    page
}

unsafe extern "C" fn unpin(
    p: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    discard: c_int,
) {
    let c = this(p);
    if discard != 0 && page == c.parked {
        c.parked = std::ptr::null_mut();
    }
    if let Some(f) = inner().xUnpin {
        f(c.inner, page, discard)
    }
}

unsafe extern "C" fn rekey(
    p: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    old: c_uint,
    new: c_uint,
) {
    let c = this(p);
    if new == c.spare {
        c.parked = page;
    } else {
        if old == c.spare || page == c.parked {
            c.parked = std::ptr::null_mut();
        }
        c.max_key = c.max_key.max(new);
    }
    if let Some(f) = inner().xRekey {
        f(c.inner, page, old, new)
    }
}

unsafe extern "C" fn truncate(p: *mut ffi::sqlite3_pcache, limit: c_uint) {
    let c = this(p);
    if c.parked.is_null() && limit > c.max_key {
        // No page at or past `limit`: nothing to drop.
        return;
    }
    if let Some(f) = inner().xTruncate {
        f(c.inner, limit)
    }
    if limit <= c.spare {
        c.parked = std::ptr::null_mut();
    }
    c.max_key = c.max_key.min(limit.saturating_sub(1));
}

unsafe extern "C" fn destroy(p: *mut ffi::sqlite3_pcache) {
    let c = Box::from_raw(p.cast::<Cache>());
    if let Some(f) = inner().xDestroy {
        f(c.inner)
    }
}

unsafe extern "C" fn shrink(p: *mut ffi::sqlite3_pcache) {
    if let Some(f) = inner().xShrink {
        f(this(p).inner)
    }
}

/// Gives SQLite's page cache back once the writer is idle with nothing left
/// to do, as the runtime's workers give back their heaps (`idle_heap`): a
/// burst leaves what it wrote cached (23 MB after `troupe bench w3 --n
/// 10000`). The next transaction reads the pages it needs again, from the
/// log or the file in the system's cache. With glibc, `malloc_trim` hands
/// the freed pages back to the system.
pub(crate) fn give_back(conn: &rusqlite::Connection, path: &std::path::Path) {
    if let Err(e) = conn.release_memory() {
        tracing::debug!(path = %path.display(), error = %e, "store could not release its page cache");
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of glibc's heaps to the
    // system; it touches no memory in use.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
#[path = "page_cache_tests.rs"]
mod tests;
