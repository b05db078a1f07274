//! Reading an input that cannot be mapped (a pipe, a FIFO, a device, a size-0 `/proc` file) into
//! memory: interruptibly, and no further than the memory gmcl may use.
//!
//! A FIFO is opened without waiting for a writer, and every read waits for data a short while
//! at a time, checking the interrupt flag in between: a read blocked on a quiet pipe stops on the
//! first Ctrl-C. An endless input (`/dev/zero`) ends in an error once it has sent more than the
//! memory limit ([`super::limits::memory_bytes`]), instead of filling memory.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// How long one wait for data lasts before the interrupt flag is checked again, in ms.
const WAIT_MS: i32 = 100;
/// The most one read takes in.
const PIECE: usize = 1 << 20;

/// Opens `path` for reading; a FIFO without a writer yet does not block the open.
pub(super) fn open(path: &Path) -> Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| Error::io(path, "cannot open", e))?;
        // Reads block again (they only start once `poll` saw data); the flag was only for the
        // open.
        let fd = file.as_raw_fd();
        // SAFETY: fcntl on a descriptor this function owns, with integer arguments only.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
        Ok(file)
    }
    #[cfg(not(unix))]
    {
        File::open(path).map_err(|e| Error::io(path, "cannot open", e))
    }
}

/// Waits until `file` has data (or its end) to read, checking the interrupt flag every
/// [`WAIT_MS`].
fn wait_readable(file: &File) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        loop {
            crate::interrupt::check()?;
            let mut p = libc::pollfd {
                fd: file.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, its count 1.
            let n = unsafe { libc::poll(&mut p, 1, WAIT_MS) };
            // Ready, or poll itself failed (the read then reports the error); 0 is a timeout
            // and a signal (EINTR) ends the wait early: check the flag and wait again.
            if n > 0
                || (n < 0
                    && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted)
            {
                return Ok(());
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        crate::interrupt::check()
    }
}

/// Reads all of `file` into memory; more than `limit` bytes is an error.
pub(super) fn read_all(file: &File, path: &Path, limit: Option<u64>) -> Result<Vec<u8>> {
    let mut bytes: Vec<u8> = Vec::new();
    let mut piece = vec![0u8; PIECE];
    loop {
        wait_readable(file)?;
        let n = match (&*file).read(&mut piece) {
            Ok(0) => return Ok(bytes),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(path, "cannot read", e)),
        };
        let total = bytes.len() as u64 + n as u64;
        if let Some(limit) = limit.filter(|&l| total > l) {
            return Err(Error::Input {
                path: path.to_path_buf(),
                message: format!(
                    "the input is not a regular file (a pipe or a device) and has sent more \
                     than {limit} bytes, the memory gmcl may use; gmcl holds such an input in \
                     memory, so save it to a file first (or check it is not endless)"
                ),
            });
        }
        if bytes.try_reserve(n).is_err() {
            return Err(Error::Input {
                path: path.to_path_buf(),
                message: format!("not enough memory to hold the input's first {total} bytes"),
            });
        }
        bytes.extend_from_slice(&piece[..n]);
    }
}
