//! The temporary output files of this process, remembered where code that may not allocate
//! (the command line's exit on an allocation failure) can still remove them.
//!
//! A temporary file is normally removed by dropping its value; an abort drops nothing, so
//! [`remove_all`] unlinks every remembered path with plain system calls.

use std::ffi::CString;
use std::path::Path;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

/// More than the temporary files one run has at once.
const SLOTS: usize = 64;

/// The process's remembered temporary files.
static PATHS: Paths = Paths::new();

/// A set of remembered paths (the process has one; a test makes its own, so that emptying it
/// cannot remove the files of tests running beside it).
struct Paths([AtomicPtr<libc::c_char>; SLOTS]);

/// Remembers a temporary file that [`remove_all`] is to remove (past [`SLOTS`] files at once,
/// the rest are not remembered).
pub fn remember(path: &Path) {
    PATHS.remember(path)
}

/// Forgets `path` (renamed into place: it is no longer a temporary file). Its name is not freed:
/// [`remove_all`] may be reading it on another thread at this moment.
pub fn forget(path: &Path) {
    PATHS.forget(path)
}

/// Unlinks every remembered temporary file. Allocates nothing and takes no lock, so it may run
/// in a signal handler.
pub fn remove_all() {
    PATHS.remove_all()
}

impl Paths {
    const fn new() -> Self {
        Paths([const { AtomicPtr::new(null_mut()) }; SLOTS])
    }

    fn remember(&self, path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
            return;
        };
        let ptr = c.into_raw();
        for slot in &self.0 {
            if slot
                .compare_exchange(null_mut(), ptr, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
        // SAFETY: `ptr` came from `into_raw` above and went into no slot.
        drop(unsafe { CString::from_raw(ptr) });
    }

    fn forget(&self, path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        for slot in &self.0 {
            let p = slot.load(Ordering::Acquire);
            // SAFETY: a non-null slot holds a CString that is never freed.
            if !p.is_null() && unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes() == bytes {
                slot.store(null_mut(), Ordering::Release);
            }
        }
    }

    fn remove_all(&self) {
        for slot in &self.0 {
            let p = slot.swap(null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                // SAFETY: a non-null slot holds a NUL-terminated name that is never freed.
                unsafe { libc::unlink(p) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_files_are_removed_and_forgotten_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join(".a.x.tmp");
        let b = dir.path().join(".b.x.tmp");
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        // A set of its own: the process's would also hold the files of tests running beside.
        let paths = Paths::new();
        paths.remember(&a);
        paths.remember(&b);
        paths.forget(&b);
        paths.remove_all();
        assert!(!a.exists());
        assert!(b.exists());
    }
}
