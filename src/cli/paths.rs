//! Outputs that would destroy data, or could not be written, are refused before any work: an
//! output that is one of the run's input files, two outputs of one run that are the same file,
//! an output whose directory is missing or not writable.

use gmcl::{Error, Result};
use std::path::{Path, PathBuf};

/// Refuses `--json` (the report on stdout) with an output `option` that also goes to stdout
/// (`-` or /dev/stdout): the two would mix there.
pub fn refuse_json_beside_stdout(
    json: bool,
    option: &str,
    out: Option<&Path>,
    what: &str,
) -> Result<()> {
    use gmcl::output::{standard_stream, StandardStream};
    let on_stdout = out.is_some_and(|p| standard_stream(p) == Some(StandardStream::Stdout));
    if json && on_stdout {
        return Err(Error::Invalid(format!(
            "--json and {option} - both write to stdout: write {what} to a file, or leave out --json"
        )));
    }
    Ok(())
}

/// Fails (exit status 2) when more than one of `inputs` is the standard input (`-`): it can be
/// read once.
pub fn refuse_stdin_twice(inputs: &[&Path]) -> Result<()> {
    match inputs.iter().filter(|p| gmcl::io::is_stdin(p)).count() > 1 {
        true => Err(Error::Invalid(
            "only one input can be the standard input ('-'): it can be read once".into(),
        )),
        false => Ok(()),
    }
}

/// Fails (exit status 2) when an input is the standard input in a run across MPI ranks, where
/// every rank reads its own part of a file.
pub fn refuse_stdin_across_ranks(inputs: &[&Path]) -> Result<()> {
    match inputs.iter().any(|p| gmcl::io::is_stdin(p)) {
        true => Err(Error::Invalid(
            "the standard input ('-') cannot be read across ranks: every rank reads its part of \
             a file; give a file"
                .into(),
        )),
        false => Ok(()),
    }
}

/// Fails (exit status 2) when an output in `outputs` (named by its option) is the same regular
/// file as an input, or as another output. Devices and pipes (`/dev/stdout`, `/dev/null`, a
/// FIFO) may be named more than once: writing them replaces nothing. Then each output that is
/// (or will be) a regular file must be creatable: its temporary file is made beside it and
/// removed, so that a missing or read-only directory fails now, not after the work.
pub fn refuse_clobbering(inputs: &[&Path], outputs: &[(&str, &Path)]) -> Result<()> {
    refuse_same_files(inputs, outputs)?;
    for &(_, out) in outputs {
        let special = gmcl::output::standard_stream(out).is_some()
            || std::fs::metadata(out).is_ok_and(|m| !m.is_file());
        // Devices and pipes are opened only when written (a FIFO would wait for a reader).
        if !special {
            drop(gmcl::output::AtomicOutput::create(out)?);
        }
    }
    Ok(())
}

/// The same-file half of [`refuse_clobbering`].
fn refuse_same_files(inputs: &[&Path], outputs: &[(&str, &Path)]) -> Result<()> {
    for (i, &(option, out)) in outputs.iter().enumerate() {
        let Some(key) = identity(out) else { continue };
        if let Some(input) = inputs.iter().find(|p| identity(p).as_ref() == Some(&key)) {
            return Err(Error::Invalid(format!(
                "{option} {} is the input file {}: refusing to overwrite it",
                out.display(),
                input.display()
            )));
        }
        if let Some((other, p)) = outputs[..i]
            .iter()
            .find(|(_, p)| identity(p).as_ref() == Some(&key))
        {
            return Err(Error::Invalid(format!(
                "{option} {} and {other} {} are the same file: one would overwrite the other",
                out.display(),
                p.display()
            )));
        }
    }
    Ok(())
}

/// What makes two paths the same file, for paths that are (or would be) regular files: the
/// device and inode of an existing file (links and other spellings of it included), else the
/// absolute path of the file to be created. `None` for devices, pipes and sockets.
#[derive(PartialEq, Eq, Debug)]
enum Identity {
    Inode(u64, u64),
    Path(PathBuf),
}

fn identity(path: &Path) -> Option<Identity> {
    if gmcl::output::standard_stream(path).is_some() {
        return None; // written through the inherited descriptor, never replaced
    }
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => None,
        Ok(m) => Some(inode(&m).unwrap_or_else(|| Identity::Path(absolute(path)))),
        Err(_) => Some(Identity::Path(absolute(path))),
    }
}

#[cfg(unix)]
fn inode(m: &std::fs::Metadata) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    Some(Identity::Inode(m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn inode(_: &std::fs::Metadata) -> Option<Identity> {
    None
}

/// The path made absolute through its folder's canonical path (the file need not exist).
fn absolute(path: &Path) -> PathBuf {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().map(PathBuf::from).unwrap_or_default();
    std::fs::canonicalize(dir)
        .map(|d| d.join(&name))
        .unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_and_repeated_outputs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path().join("g.el");
        std::fs::write(&g, "0 1\n").unwrap();
        let new = dir.path().join("out.txt");
        // The input itself, and another spelling of it.
        let other = dir.path().join(".").join("g.el");
        assert!(refuse_clobbering(&[&g], &[("-o", &other)]).is_err());
        // Two outputs on one new file.
        let same = dir.path().join("sub").join("..").join("out.txt");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let e = refuse_clobbering(&[&g], &[("-o", &new), ("--json", &same)]).unwrap_err();
        assert!(e.to_string().contains("are the same file"), "{e}");
        // Distinct files, and devices named twice, are fine.
        assert!(refuse_clobbering(&[&g], &[("-o", &new)]).is_ok());
        let null = Path::new("/dev/null");
        assert!(refuse_clobbering(&[&g], &[("-o", null), ("--json", null)]).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_the_input_is_the_input() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path().join("g.el");
        std::fs::write(&g, "0 1\n").unwrap();
        let link = dir.path().join("link.el");
        std::os::unix::fs::symlink(&g, &link).unwrap();
        let e = refuse_clobbering(&[&g], &[("--per-vertex", &link)]).unwrap_err();
        assert!(e.to_string().contains("is the input file"), "{e}");
    }
}
