//! Output files that appear whole or not at all: written to a temporary file beside the target,
//! flushed to disk, then renamed over it.

use crate::csr::Csr;
use crate::error::{Error, Result};
use crate::scalar::Scalar;
use rayon::prelude::*;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

mod matrix;
pub use matrix::{refuse_non_finite, stage_matrix, write_matrix, MatrixFormat, RowWriter};

/// A file being written under a temporary name; [`AtomicOutput::commit`] moves it into place.
/// Dropped without commit, the temporary file is removed and the target is left untouched.
/// The writers (`stage_*`) hand back an output written whole but not committed, so that a
/// command commits it only once everything else it does (a report on stdout) has succeeded.
///
/// A path naming a symbolic link replaces the file the link points to (the link stays). A path
/// naming something other than a regular file or a directory (`/dev/stdout`, `/dev/null`, a
/// named pipe) is written directly: there is no file to replace, so nothing is atomic there.
/// The path `-` (and `/dev/stdout`) is the process's standard output, `/dev/stderr` its standard
/// error: the descriptors it inherited, written in place, so that a shell's `> file` or `>> log`
/// behind them is written as the shell opened it, never replaced.
#[must_use = "an output dropped without `commit` is removed"]
pub struct AtomicOutput {
    path: PathBuf,
    writer: BufWriter<Sink>,
}

/// A standard stream of the process, as an output path can name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StandardStream {
    /// `-` or `/dev/stdout`.
    Stdout,
    /// `/dev/stderr`.
    Stderr,
}

/// The standard stream `path` names (written through the inherited descriptor, never replaced),
/// or `None` for any other path.
pub fn standard_stream(path: &Path) -> Option<StandardStream> {
    match path.to_str()? {
        "-" | "/dev/stdout" => Some(StandardStream::Stdout),
        "/dev/stderr" => Some(StandardStream::Stderr),
        _ => None,
    }
}

/// Where the bytes go.
enum Sink {
    /// A temporary file beside the target, renamed over it by `commit`.
    Temp {
        file: tempfile::NamedTempFile,
        /// The regular file to replace: the path, or the file a symbolic link points to.
        target: PathBuf,
    },
    /// A device or a pipe, written in place.
    Direct(std::fs::File),
    /// The standard output (`-`, `/dev/stdout`).
    Stdout(std::io::Stdout),
    /// The standard error (`/dev/stderr`).
    Stderr(std::io::Stderr),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Temp { file, .. } => file.write(buf),
            Sink::Direct(f) => f.write(buf),
            Sink::Stdout(s) => s.write(buf),
            Sink::Stderr(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Temp { file, .. } => file.flush(),
            Sink::Direct(f) => f.flush(),
            Sink::Stdout(s) => s.flush(),
            Sink::Stderr(s) => s.flush(),
        }
    }
}

/// Bytes written through [`std::io::Write`] go where [`AtomicOutput::write_all`] puts them.
impl Write for AtomicOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}

impl AtomicOutput {
    /// Starts writing `path` (creating a temporary file in the same directory as the file that
    /// will be replaced).
    pub fn create(path: &Path) -> Result<Self> {
        let inherited = standard_stream(path).map(|s| match s {
            StandardStream::Stdout => ("<stdout>", Sink::Stdout(std::io::stdout())),
            StandardStream::Stderr => ("<stderr>", Sink::Stderr(std::io::stderr())),
        });
        if let Some((name, sink)) = inherited {
            return Ok(AtomicOutput {
                path: PathBuf::from(name),
                writer: BufWriter::with_capacity(1 << 20, sink),
            });
        }
        let sink = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => {
                return Err(Error::Invalid(format!(
                    "{}: is a directory, not a file",
                    path.display()
                )))
            }
            Ok(m) if !m.is_file() => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| Error::io(path, "cannot open output", e))?;
                Sink::Direct(f)
            }
            _ => {
                // Replace what a symbolic link points to, not the link (a dangling link is
                // replaced by the file).
                let target = match std::fs::symlink_metadata(path) {
                    Ok(m) if m.file_type().is_symlink() => {
                        std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
                    }
                    _ => path.to_path_buf(),
                };
                refuse_write_protected(path, &target)?;
                let file =
                    temp_beside(&target).map_err(|e| Error::io(path, "cannot create output", e))?;
                Sink::Temp { file, target }
            }
        };
        Ok(AtomicOutput {
            path: path.to_path_buf(),
            writer: BufWriter::with_capacity(1 << 20, sink),
        })
    }

    /// Appends bytes.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, "cannot write output", e))
    }

    /// Flushes what is written and, for a file, syncs it to disk: all that [`Self::commit`]
    /// then has left to do is the rename.
    pub fn sync(&mut self) -> Result<()> {
        self.writer
            .flush()
            .map_err(|e| Error::io(&self.path, "cannot write output", e))?;
        if let Sink::Temp { file, .. } = self.writer.get_ref() {
            file.as_file()
                .sync_all()
                .map_err(|e| Error::io(&self.path, "cannot write output", e))?;
        }
        Ok(())
    }

    /// This output once [`Self::sync`]ed: the end of every `stage_*` writer.
    pub fn synced(mut self) -> Result<Self> {
        self.sync()?;
        Ok(self)
    }

    /// The temporary file behind the output, for writing at places rather than in order, while
    /// nothing has been written through [`Write`]: `None` where the output is a device, a pipe
    /// or a standard stream (written in order only).
    pub fn file_in_place(&self) -> Option<&std::fs::File> {
        match (self.writer.buffer().is_empty(), self.writer.get_ref()) {
            (true, Sink::Temp { file, .. }) => Some(file.as_file()),
            _ => None,
        }
    }

    /// The temporary file's path, where the output is one.
    pub fn temp_path(&self) -> Option<&Path> {
        match self.writer.get_ref() {
            Sink::Temp { file, .. } => Some(file.path()),
            _ => None,
        }
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes, syncs and renames the file into place. After an interrupt
    /// ([`crate::interrupt`]) it fails with [`Error::Interrupted`] and the file does not appear.
    pub fn commit(self) -> Result<()> {
        Self::commit_all(vec![self])
    }

    /// Commits the outputs of one run together: every file is flushed and synced first, and
    /// only when all are whole are they renamed into place, so that one failing output (a full
    /// disk, an interrupt) leaves every target as it was.
    pub fn commit_all(outputs: Vec<AtomicOutput>) -> Result<()> {
        crate::interrupt::check()?;
        let ready = outputs
            .into_iter()
            .map(AtomicOutput::finish_writing)
            .collect::<Result<Vec<_>>>()?;
        crate::interrupt::check()?;
        for (path, file) in ready {
            if let Some((file, target)) = file {
                let temp = file.path().to_path_buf();
                file.persist(&target)
                    .map_err(|e| Error::io(&path, "cannot rename output into place", e.error))?;
                crate::tempfiles::forget(&temp);
            }
        }
        Ok(())
    }

    /// Flushes and syncs; a temporary file comes back with its target, to be renamed.
    #[allow(clippy::type_complexity)]
    fn finish_writing(self) -> Result<(PathBuf, Option<(tempfile::NamedTempFile, PathBuf)>)> {
        let path = self.path;
        let sink = self
            .writer
            .into_inner()
            .map_err(|e| Error::io(&path, "cannot write output", e.into_error()))?;
        match sink {
            Sink::Temp { file, target } => {
                file.as_file()
                    .sync_all()
                    .map_err(|e| Error::io(&path, "cannot write output", e))?;
                return Ok((path, Some((file, target))));
            }
            Sink::Direct(mut f) => f
                .flush()
                .map_err(|e| Error::io(&path, "cannot write output", e))?,
            Sink::Stdout(mut s) => s
                .flush()
                .map_err(|e| Error::io(&path, "cannot write output", e))?,
            Sink::Stderr(mut s) => s
                .flush()
                .map_err(|e| Error::io(&path, "cannot write output", e))?,
        }
        Ok((path, None))
    }
}

/// Fails when `target` (the file `path` names) exists and this process may not write it: the
/// rename would replace it all the same, where `>`, `cp` and mcl refuse, and a file made
/// read-only to keep it is not one to replace.
fn refuse_write_protected(path: &Path, target: &Path) -> Result<()> {
    // Opened for writing without truncation: nothing changes, the permission is what is asked.
    match std::fs::OpenOptions::new().write(true).open(target) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(Error::Invalid(format!(
            "{}: the file is write-protected, so gmcl does not replace it; make it writable \
             (chmod u+w) or name another output",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Bytes of the target's name kept in the temporary name: with `.`, `.`, 6 random characters
/// and `.tmp` it stays within the 255 bytes a file name may have, whatever the target's length.
const TEMP_NAME_KEEPS: usize = 200;

/// A new temporary file `.NAME.XXXXXX.tmp` in the directory of `target` (NAME cut to
/// [`TEMP_NAME_KEEPS`] bytes). On Unix it has the mode of the file it replaces, else 0644
/// (the output is an ordinary file, though temporary files are usually private).
fn temp_beside(target: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut name = target.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    if name.len() > TEMP_NAME_KEEPS {
        let mut end = TEMP_NAME_KEEPS;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name = &name[..end];
    }
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let mode = std::fs::metadata(target)
            .ok()
            .filter(|m| m.is_file())
            .map_or(0o644, |m| m.permissions().mode() & 0o7777);
        options.mode(mode);
    }
    // Opened here rather than by `tempfile_in`, whose errors name the temporary file: the user
    // named the output, and the OS error (its number kept, for Python's `OSError`) is enough.
    let file = builder.make_in(dir, |path| options.open(path))?;
    crate::tempfiles::remember(file.path());
    Ok(file)
}

/// Formats `items` in parallel blocks and writes the blocks in order, so output is byte-identical
/// whatever the thread count. `fmt` appends the text of one item.
pub fn write_formatted<I: Sync>(
    out: &mut AtomicOutput,
    items: &[I],
    fmt: impl Fn(&I, &mut Vec<u8>) + Sync,
    mut progress: impl FnMut(usize),
) -> Result<()> {
    const BLOCK: usize = 1 << 16;
    // A few blocks per thread at a time bounds the memory held in text.
    let group = BLOCK * 4 * rayon::current_num_threads().max(1);
    let parts: Vec<&[I]> = items.chunks(group).collect();
    write_in_order(
        out,
        parts.len(),
        |p| {
            parts[p]
                .par_chunks(BLOCK)
                .map(|block| {
                    let mut buf = Vec::with_capacity(block.len() * 16);
                    for it in block {
                        fmt(it, &mut buf);
                    }
                    buf
                })
                .collect()
        },
        |p| progress(parts[p].len()),
    )
}

/// Writes the texts of `groups` groups in order: `format(g)` makes group `g`'s texts (in
/// parallel, as it likes), and group `g + 1` is made while group `g` is written, so the write
/// (one thread) overlaps the formatting (the others). `written(g)` follows each group's write.
pub fn write_in_order(
    out: &mut AtomicOutput,
    groups: usize,
    format: impl Fn(usize) -> Vec<Vec<u8>> + Sync,
    mut written: impl FnMut(usize),
) -> Result<()> {
    let mut ready: Option<Vec<Vec<u8>>> = None;
    for g in 0..=groups {
        crate::interrupt::check()?;
        let texts = ready.take();
        let (write, next) = rayon::join(
            || -> Result<()> {
                for t in texts.iter().flatten() {
                    out.write_all(t)?;
                }
                Ok(())
            },
            || (g < groups).then(|| format(g)),
        );
        write?;
        if g > 0 {
            written(g - 1);
        }
        ready = next;
    }
    Ok(())
}

/// The threads from which an `.npz` file is written in place: the kernel clears each page of a
/// mapped file before it is written, so in place every byte is written twice, where `write`
/// copies it once on one thread.
const PLACED_FROM_THREADS: usize = 4;

/// The error of an output's write to `path` that failed with `e`: the interrupt when one stopped
/// it (the in-place `.npz` writer stops so), else the I/O error.
pub(crate) fn write_failed(path: &Path, e: std::io::Error) -> Error {
    match crate::interrupt::check() {
        Err(interrupted) => interrupted,
        Ok(()) => Error::io(path, "cannot write output", e),
    }
}

/// Writes a matrix as SciPy's `save_npz(..., compressed=False)` writes a CSR matrix
/// ([`crate::io::npz`]), whole and synced but not committed.
pub fn stage_npz<T: Scalar>(path: &Path, m: &Csr<T>) -> Result<AtomicOutput> {
    use crate::io::npz::{self, placed};
    let out = AtomicOutput::create(path)?;
    let failed = |e| write_failed(path, e);
    // A file is written in place by every thread where there are enough of them; a pipe or a
    // device in order.
    let threads = rayon::current_num_threads() >= PLACED_FROM_THREADS;
    let file = out
        .file_in_place()
        .filter(|f| threads && placed::supported(f));
    let out = match file {
        Some(f) => placed::write(f, m).map(|()| out),
        None => npz::write(out, m),
    };
    out.map_err(failed)?.synced()
}

/// The header of a Matrix Market `coordinate real general` file of this shape and entry count.
fn mtx_header(nrows: usize, ncols: usize, nnz: u64) -> String {
    format!(
        "%%MatrixMarket matrix coordinate real general\n% written by gmcl {}\n{nrows} {ncols} {nnz}\n",
        env!("CARGO_PKG_VERSION"),
    )
}

/// Writes a matrix as Matrix Market `coordinate real general`, 1-based, rows in order, whole
/// and synced but not committed.
pub fn stage_mtx<T: Scalar>(path: &Path, m: &Csr<T>) -> Result<AtomicOutput> {
    let mut out = AtomicOutput::create(path)?;
    out.write_all(mtx_header(m.nrows(), m.ncols(), m.nnz() as u64).as_bytes())?;
    matrix::write_entries(&mut out, m, 1)?;
    out.synced()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_in_a_missing_directory_names_the_output_not_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("missing").join("x.npz");
        let Err(e) = AtomicOutput::create(&p) else {
            panic!("created in a missing directory")
        };
        let text = e.to_string();
        assert!(text.starts_with(&p.display().to_string()), "{text}");
        assert!(!text.contains(".x.npz."), "{text}");
        let Error::Io { source, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        assert!(source.raw_os_error().is_some());
    }

    #[test]
    fn uncommitted_output_leaves_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.txt");
        std::fs::write(&p, "old").unwrap();
        {
            let mut o = AtomicOutput::create(&p).unwrap();
            o.write_all(b"new").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut o = AtomicOutput::create(&p).unwrap();
        o.write_all(b"new").unwrap();
        o.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o644);
        }
    }

    #[test]
    fn mtx_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.mtx");
        let m = Csr::from_dense(2, 3, &[0.0f64, 1.5, 0.0, 2.0, 0.0, 3.0]);
        stage_mtx(&p, &m).unwrap().commit().unwrap();
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.starts_with("%%MatrixMarket matrix coordinate real general\n"));
        assert!(t.ends_with("2 3 3\n1 2 1.5\n2 1 2\n2 3 3\n"), "{t}");
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_and_devices_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        let link = dir.path().join("link.txt");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut o = AtomicOutput::create(&link).unwrap();
        o.write_all(b"new").unwrap();
        o.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);

        // A device is written, not replaced by a regular file.
        let mut o = AtomicOutput::create(Path::new("/dev/null")).unwrap();
        o.write_all(b"gone").unwrap();
        o.commit().unwrap();
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
        // A device that is always full: the error names it.
        let mut o = AtomicOutput::create(Path::new("/dev/full")).unwrap();
        o.write_all(b"x").unwrap();
        let e = o.commit().unwrap_err().to_string();
        assert!(e.starts_with("/dev/full: cannot write output"), "{e}");
        assert!(!std::fs::metadata("/dev/full").unwrap().is_file());
    }

    #[cfg(unix)]
    #[test]
    fn a_replaced_file_keeps_its_mode_and_long_names_work() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("private.txt");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut o = AtomicOutput::create(&p).unwrap();
        o.write_all(b"new").unwrap();
        o.commit().unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let long = dir.path().join("x".repeat(248));
        let mut o = AtomicOutput::create(&long).unwrap();
        o.write_all(b"long").unwrap();
        o.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&long).unwrap(), "long");
    }

    #[test]
    fn outputs_committed_together_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        std::fs::write(&a, "old").unwrap();
        let mut oa = AtomicOutput::create(&a).unwrap();
        oa.write_all(b"new").unwrap();
        let mut full = AtomicOutput::create(Path::new("/dev/full")).unwrap();
        full.write_all(b"x").unwrap();
        assert!(AtomicOutput::commit_all(vec![oa, full]).is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn unwritable_directory_is_an_error() {
        let e = AtomicOutput::create(Path::new("/nonexistent-dir/x.mtx"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("/nonexistent-dir/x.mtx"));
    }
}
