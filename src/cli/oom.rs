//! Running out of memory ends the run as other errors do: exit status 2, a message saying what
//! was asked for and what is available, and no temporary output file left behind.
//!
//! Rust aborts the process (SIGABRT, status 134) when an allocation fails. The allocator below
//! passes every call to the system's and notes the size of a request that failed; the SIGABRT
//! handler then removes the run's temporary files ([`gmcl::tempfiles`]), prints the message and
//! exits with 2. An abort with no failed allocation keeps its usual meaning (the handler puts
//! the default action back and raises the signal again). The handler allocates nothing: it
//! reads `/proc` into a buffer on the stack and writes with `write(2)`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The size of the largest allocation the system refused (0: none): the one that failed the run
/// rather than a small one made while printing its message.
static FAILED: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, noting the size of requests it refuses.
pub struct NotingAllocator;

fn noted(p: *mut u8, size: usize) -> *mut u8 {
    if p.is_null() {
        FAILED.fetch_max(size.max(1), Ordering::Relaxed);
    }
    p
}

// SAFETY: every call is passed to the system allocator unchanged.
unsafe impl GlobalAlloc for NotingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        noted(System.alloc(layout), layout.size())
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        noted(System.alloc_zeroed(layout), layout.size())
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        noted(System.realloc(ptr, layout, new_size), new_size)
    }
}

/// Installs the SIGABRT handler. Call once, early in `main`.
pub fn install() {
    // SAFETY: the handler only makes async-signal-safe calls (unlink, open, read, write, close,
    // getrlimit, signal, raise, _exit) on memory of its own stack.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_abort as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGABRT, &action, std::ptr::null_mut());
    }
}

/// Set by the first thread in [`on_abort`]: threads whose allocations fail at once print one
/// message between them.
static HANDLING: AtomicBool = AtomicBool::new(false);

extern "C" fn on_abort(_: libc::c_int) {
    if HANDLING.swap(true, Ordering::SeqCst) {
        // Another thread is ending the process; this one waits for it.
        loop {
            // SAFETY: pause only waits for a signal.
            unsafe {
                libc::pause();
            }
        }
    }
    gmcl::tempfiles::remove_all();
    let size = FAILED.load(Ordering::Relaxed);
    if size == 0 {
        // SAFETY: back to the default action, which ends the process as abort() would.
        unsafe {
            libc::signal(libc::SIGABRT, libc::SIG_DFL);
            libc::raise(libc::SIGABRT);
        }
        return;
    }
    let mut m = Line::new();
    m.push(b"gmcl: error: not enough memory: an allocation of ");
    m.size(size as u64);
    m.push(b" failed");
    if let Some((bytes, source)) = available() {
        m.push(b", with ");
        m.size(bytes);
        m.push(b" available (");
        m.push(source);
        m.push(b")");
    }
    m.push(b"\n");
    // SAFETY: writes the line from the stack, then ends the process without running anything
    // else (other threads may hold the allocator's locks).
    unsafe {
        libc::write(2, m.buf.as_ptr().cast(), m.len);
        libc::_exit(2);
    }
}

/// A message line on the stack.
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    fn new() -> Self {
        Line {
            buf: [0; 256],
            len: 0,
        }
    }

    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn number(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    /// `bytes` as `1.5 GiB` (one decimal, as `gmcl::io::limits::human` writes it).
    fn size(&mut self, bytes: u64) {
        const UNITS: [&[u8]; 5] = [b" bytes", b" KiB", b" MiB", b" GiB", b" TiB"];
        let mut unit = 0;
        let mut scale = 1u64;
        while unit + 1 < UNITS.len() && bytes / scale >= 1024 {
            scale *= 1024;
            unit += 1;
        }
        if unit == 0 {
            self.number(bytes);
        } else {
            let tenths = (bytes as u128 * 10 + scale as u128 / 2) / scale as u128;
            self.number((tenths / 10) as u64);
            self.push(b".");
            self.number((tenths % 10) as u64);
        }
        self.push(UNITS[unit]);
    }
}

/// The least of the memory available and the address space left under `ulimit -v`, read
/// without allocating.
fn available() -> Option<(u64, &'static [u8])> {
    let memory = proc_kib(c"/proc/meminfo", b"MemAvailable:").map(|k| k * 1024);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let limited = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0
        && lim.rlim_cur != libc::RLIM_INFINITY;
    #[allow(clippy::unnecessary_cast)] // rlim_t is narrower than u64 on some targets
    let address = limited.then(|| {
        let used = proc_kib(c"/proc/self/status", b"VmSize:").unwrap_or(0) * 1024;
        (lim.rlim_cur as u64).saturating_sub(used)
    });
    match (memory, address) {
        (Some(m), Some(a)) if a < m => Some((a, b"the address space left under ulimit -v")),
        (_, Some(a)) if memory.is_none() => Some((a, b"the address space left under ulimit -v")),
        (Some(m), _) => Some((m, b"the memory available")),
        _ => None,
    }
}

/// The number after `key` in a `/proc` file of `key value kB` lines.
fn proc_kib(path: &std::ffi::CStr, key: &[u8]) -> Option<u64> {
    let mut buf = [0u8; 8192];
    // SAFETY: reads into the buffer on the stack, within its length.
    let n = unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
        if fd < 0 {
            return None;
        }
        let mut n = 0usize;
        while n < buf.len() {
            let r = libc::read(fd, buf[n..].as_mut_ptr().cast(), buf.len() - n);
            if r <= 0 {
                break;
            }
            n += r as usize;
        }
        libc::close(fd);
        n
    };
    let text = &buf[..n];
    let at = text.windows(key.len()).position(|w| w == key)? + key.len();
    let digits = text[at..]
        .iter()
        .skip_while(|b| **b == b' ' || **b == b'\t')
        .take_while(|b| b.is_ascii_digit());
    let mut v = 0u64;
    let mut any = false;
    for d in digits {
        v = v.saturating_mul(10).saturating_add(u64::from(d - b'0'));
        any = true;
    }
    any.then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_written_as_the_library_writes_them() {
        for b in [0, 5, 1023, 1024, 1536, 134_217_728, 3 << 30, 29_000_000_000] {
            let mut l = Line::new();
            l.size(b);
            assert_eq!(
                std::str::from_utf8(&l.buf[..l.len]).unwrap(),
                gmcl::io::limits::human(b),
                "{b}"
            );
        }
    }

    #[test]
    fn proc_files_are_read_without_allocating() {
        assert!(proc_kib(c"/proc/self/status", b"VmSize:").is_some_and(|k| k > 0));
        assert_eq!(proc_kib(c"/proc/self/status", b"NoSuchKey:"), None);
    }
}
