//! Memory-mapped input files that change while they are read.
//!
//! When another program truncates a mapped file (`truncate -s 0 g.el`, `cp other.el g.el`), a
//! read of a page past the new end raises SIGBUS, which kills the process. The handler
//! installed here catches a SIGBUS whose address lies in a registered map, maps zeros over the
//! rest of that map (so the read, and every later one, finds bytes) and marks the map: the
//! parse runs to its end on zeros, and the loader then reports the file as changed instead of
//! anything the parse says ([`MapGuard::faulted`]). A SIGBUS anywhere else keeps its default
//! action. The handler makes only system calls (`mmap`, `signal`) on its arguments and on
//! atomics, and takes no lock.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Once;

/// More than the files one run has mapped at once.
const SLOTS: usize = 16;

struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    faulted: AtomicBool,
    taken: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)] // the initialiser of the array below
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faulted: AtomicBool::new(false),
    taken: AtomicBool::new(false),
};

static MAPS: [Slot; SLOTS] = [FREE; SLOTS];

/// A registered map: faults inside it are caught until this is dropped (before the map is).
pub(crate) struct MapGuard {
    slot: &'static Slot,
}

impl MapGuard {
    /// Registers the `len` bytes mapped at `start`; `None` when every slot is taken or the
    /// handler cannot be installed (the map is then read unguarded, as before).
    pub(crate) fn register(start: *const u8, len: usize) -> Option<MapGuard> {
        if !install() {
            return None;
        }
        let slot = MAPS.iter().find(|s| {
            s.taken
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })?;
        slot.faulted.store(false, Ordering::Release);
        slot.start.store(start as usize, Ordering::Release);
        slot.len.store(len, Ordering::Release);
        Some(MapGuard { slot })
    }

    /// True when a read of the map faulted: the file shrank while it was read, and what was
    /// read past its new end is zeros, not the file.
    pub(crate) fn faulted(&self) -> bool {
        self.slot.faulted.load(Ordering::Acquire)
    }
}

impl Drop for MapGuard {
    fn drop(&mut self) {
        self.slot.len.store(0, Ordering::Release);
        self.slot.start.store(0, Ordering::Release);
        self.slot.taken.store(false, Ordering::Release);
    }
}

/// Installs the SIGBUS handler once; false when it could not be.
fn install() -> bool {
    static ONCE: Once = Once::new();
    static OK: AtomicBool = AtomicBool::new(false);
    ONCE.call_once(|| {
        // SAFETY: the handler only makes async-signal-safe system calls on atomics and its
        // arguments.
        let ok = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0
        };
        OK.store(ok, Ordering::Release);
    });
    OK.load(Ordering::Acquire)
}

extern "C" fn on_sigbus(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a SIGBUS handler installed with SA_SIGINFO.
    let addr = unsafe { (*info).si_addr() } as usize;
    // SAFETY: sysconf is a plain query.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    for slot in &MAPS {
        let (start, len) = (
            slot.start.load(Ordering::Acquire),
            slot.len.load(Ordering::Acquire),
        );
        if len == 0 || addr < start || addr - start >= len {
            continue;
        }
        let from = addr & !(page - 1);
        let to = (start + len).next_multiple_of(page);
        // SAFETY: the range lies inside the registered map, which the guard's owner keeps
        // mapped; zeros replace pages that no longer exist in the file.
        let zeros = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                to - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if zeros != libc::MAP_FAILED {
            slot.faulted.store(true, Ordering::Release);
            return;
        }
        break;
    }
    // Not a map of ours (or zeros could not be mapped): the default action, when the faulting
    // read runs again.
    // SAFETY: setting a disposition installs no code.
    unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
}

#[cfg(test)]
mod tests {
    use super::super::reader::Source;
    use std::io::Write;

    #[test]
    fn a_file_truncated_under_its_map_reads_zeros_and_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.el");
        let mut f = std::fs::File::create(&path).unwrap();
        for i in 0..200_000u32 {
            writeln!(f, "{i} {}", i + 1).unwrap();
        }
        drop(f);
        let source = Source::open(&path).unwrap();
        assert!(source.unchanged(&path).is_ok());
        // Shrink the file under the map: reading past the new end would raise SIGBUS.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(10)
            .unwrap();
        let bytes = source.bytes();
        let tail_sum: u64 = bytes[100_000..].iter().map(|&b| u64::from(b)).sum();
        assert_eq!(tail_sum, 0);
        let e = source.unchanged(&path).unwrap_err().to_string();
        assert!(
            e.contains("g.el: the file changed while it was read"),
            "{e}"
        );
    }
}
