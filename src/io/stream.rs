//! Reading an input that cannot be mapped (a pipe, a FIFO, a device, a size-0 `/proc` file) into
//! memory: interruptibly, and no further than the memory gmcl may use. A gzip-compressed file
//! is decompressed into memory the same way.
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

/// Decompresses the gzip file `path` (every member of a multi-member file, as `zcat` does) into
/// memory, interruptibly; more than `limit` bytes of decompressed data is an error, and so is
/// data that is not gzip, damaged (a bad checksum) or cut off.
pub(super) fn gunzip(path: &Path, limit: Option<u64>) -> Result<Vec<u8>> {
    let file = open(path)?;
    let mut compressed = Counted {
        inner: std::io::BufReader::with_capacity(PIECE, file),
        bytes: 0,
    };
    let mut bytes: Vec<u8> = Vec::new();
    let mut piece = vec![0u8; PIECE];
    let damaged = |e: std::io::Error, read: u64| {
        let why = if read == 0 {
            "is empty, not gzip-compressed data (its name ends in .gz)".to_string()
        } else if e.kind() == std::io::ErrorKind::UnexpectedEof {
            "is cut off: the gzip data ends before its end mark (an incomplete download or \
             copy?)"
                .to_string()
        } else {
            format!("is not valid gzip data ({e}); check it with `gzip -t`")
        };
        Error::Input {
            path: path.to_path_buf(),
            message: why,
        }
    };
    {
        use std::io::BufRead;
        let head = compressed
            .fill_buf()
            .map_err(|e| Error::io(path, "cannot read", e))?;
        if head.is_empty() {
            return Err(damaged(std::io::ErrorKind::UnexpectedEof.into(), 0));
        }
        if head.len() >= 2 && head[..2] != [0x1f, 0x8b] {
            return Err(Error::Input {
                path: path.to_path_buf(),
                message: "is not gzip-compressed data (it lacks gzip's first bytes), though its \
                          name ends in .gz: rename it without the .gz"
                    .into(),
            });
        }
    }
    for member in 0.. {
        if member > 0 {
            match what_follows(&mut compressed).map_err(|e| damaged(e, compressed.bytes))? {
                Follows::End => break,
                Follows::Member => {}
                Follows::Other => {
                    return Err(Error::Input {
                        path: path.to_path_buf(),
                        message: "has data after its gzip data that is not gzip (`gzip -t` \
                                  warns of it as trailing garbage); remove it, e.g. \
                                  `zcat IN | gzip > OUT`"
                            .into(),
                    })
                }
            }
        }
        let mut decoder = flate2::bufread::GzDecoder::new(&mut compressed);
        loop {
            crate::interrupt::check()?;
            let n = match decoder.read(&mut piece) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    drop(decoder);
                    return Err(damaged(e, compressed.bytes));
                }
            };
            let total = bytes.len() as u64 + n as u64;
            if let Some(limit) = limit.filter(|&l| total > l) {
                return Err(Error::Input {
                    path: path.to_path_buf(),
                    message: format!(
                        "decompresses to more than {limit} bytes, the memory gmcl may use; gmcl \
                         holds a compressed input's text in memory, so decompress it to a file \
                         first"
                    ),
                });
            }
            if bytes.try_reserve(n).is_err() {
                return Err(Error::Input {
                    path: path.to_path_buf(),
                    message: format!(
                        "not enough memory to hold the first {total} decompressed bytes"
                    ),
                });
            }
            bytes.extend_from_slice(&piece[..n]);
        }
    }
    Ok(bytes)
}

/// What follows a gzip member.
enum Follows {
    /// Nothing, or only zero bytes (padding, which `gzip` and Python's `gzip` read as the end).
    End,
    /// Another member (its header not yet checked), after any zero padding.
    Member,
    /// Bytes that begin no member.
    Other,
}

/// Reads past the zero bytes that follow a member and says what comes after them.
fn what_follows<R: std::io::BufRead>(r: &mut R) -> std::io::Result<Follows> {
    loop {
        let buf = r.fill_buf()?;
        let Some(&first) = buf.first() else {
            return Ok(Follows::End);
        };
        match buf.iter().position(|&b| b != 0) {
            Some(0) if first == 0x1f => return Ok(Follows::Member),
            Some(0) => return Ok(Follows::Other),
            Some(k) => r.consume(k),
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// A buffered reader that counts the bytes it hands out.
struct Counted<R> {
    inner: R,
    bytes: u64,
}

impl<R: std::io::BufRead> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for Counted<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.bytes += n as u64;
        self.inner.consume(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gunzip_reads_every_member_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("g.el.gz");
        let mut two = gz(b"0 1\n");
        two.extend(gz(b"1 2\n"));
        std::fs::write(&p, &two).unwrap();
        assert_eq!(gunzip(&p, None).unwrap(), b"0 1\n1 2\n");
        assert_eq!(gunzip(&p, Some(8)).unwrap().len(), 8);
        let e = gunzip(&p, Some(7)).unwrap_err().to_string();
        assert!(e.contains("more than 7 bytes"), "{e}");
        std::fs::write(&p, &two[..two.len() - 3]).unwrap();
        let e = gunzip(&p, None).unwrap_err().to_string();
        assert!(e.contains("g.el.gz") && e.contains("cut off"), "{e}");
        std::fs::write(&p, b"").unwrap();
        let e = gunzip(&p, None).unwrap_err().to_string();
        assert!(e.contains("is empty"), "{e}");
        // Zero padding after a member (and between members) is read as gzip and Python read it.
        let mut padded = gz(b"0 1\n");
        padded.extend([0u8; 1000]);
        std::fs::write(&p, &padded).unwrap();
        assert_eq!(gunzip(&p, None).unwrap(), b"0 1\n");
        padded.extend(gz(b"1 2\n"));
        padded.extend([0u8; 3]);
        std::fs::write(&p, &padded).unwrap();
        assert_eq!(gunzip(&p, None).unwrap(), b"0 1\n1 2\n");
        // Other bytes after the data are neither a cut nor ignored.
        for tail in [&b"x"[..], b"\0\0junk", b"\n"] {
            let mut t = gz(b"0 1\n");
            t.extend_from_slice(tail);
            std::fs::write(&p, &t).unwrap();
            let e = gunzip(&p, None).unwrap_err().to_string();
            assert!(
                e.contains("after its gzip data that is not gzip"),
                "{tail:?}: {e}"
            );
        }
    }
}
