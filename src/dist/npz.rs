//! A product made across ranks written as SciPy's `.npz`: the file
//! `scipy.sparse.save_npz(path, C, compressed=False)` writes, byte for byte the single-process
//! one.
//!
//! Where the ranks share one host (one page cache: ranks of several hosts writing parts of one
//! page of a network file system would each write back the whole page) and every rank can open
//! rank 0's temporary output, each rank writes its block's parts of the three arrays in place
//! ([`crate::io::npz::placed`]: the layout follows from the shape and the entry count) and
//! sends rank 0 their CRCs, from which rank 0 writes the headers and the directory: C never
//! travels. Otherwise the archive, which stores every column index, then the row offsets, then
//! every value, is written by rank 0 in three passes ([`CsrArray`]), each streaming one array
//! of C: its own block's, then every other rank's in rank order, in the pieces of
//! [`super::spgemm::send_to_root`] (at most `stage_entries` entries and rows each). A pass
//! sends only its array (columns, row lengths, values), so C travels to rank 0 once in all,
//! and rank 0 never holds more of it than its own block and one piece.

use super::matrix::MatrixBlock;
use super::spgemm::cut_pieces;
use super::words::{from_words, to_words};
use super::{agree, Comm, MAX_MESSAGE};
use crate::error::{Error, Result};
use crate::io::npz::placed::{self, CsrLayout, Placed};
use crate::io::npz::{self, CsrArray, CsrPiece};
use crate::output::{write_failed, AtomicOutput};
use crate::scalar::Scalar;
use crc32fast::Hasher;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;

/// Writes the product whose blocks the ranks hold (`c`, of `nnz` entries over all ranks) to
/// `out`, which rank 0 alone gives (`None` on the others). Collective: every rank takes part in
/// every pass. A write that fails stops the writing, not the exchange: rank 0 takes part in the
/// rest and returns that error (the other ranks return `Ok`: the caller ends the writing in
/// [`agree`]; written in place, every rank returns it); an interrupt is every rank's error at
/// once. Rank 0 gets the output back whole and synced, for the caller to commit.
pub fn write<T: Scalar>(
    comm: &dyn Comm,
    c: &MatrixBlock<T>,
    nnz: u64,
    stage_entries: usize,
    out: Option<AtomicOutput>,
) -> Result<Option<AtomicOutput>> {
    let in_place = comm.size() == 1 || super::one_host(comm);
    write_as(comm, c, nnz, stage_entries, out, in_place)
}

/// [`write`], in place where `in_place` (the same on every rank) and the ranks can open rank 0's
/// temporary file, else in passes through rank 0.
fn write_as<T: Scalar>(
    comm: &dyn Comm,
    c: &MatrixBlock<T>,
    nnz: u64,
    stage_entries: usize,
    out: Option<AtomicOutput>,
    in_place: bool,
) -> Result<Option<AtomicOutput>> {
    let path = out.as_ref().map(|o| o.path().to_path_buf());
    let shared = match in_place {
        true => shared_file(comm, out.as_ref()),
        false => None,
    };
    if let Some(shared) = shared {
        let placed = write_in_place(comm, c, nnz, &shared);
        return match (placed, out) {
            (Ok(()), Some(out)) => out.synced().map(Some),
            (r, _) => r.map(|()| None),
        };
    }
    match (write_to(comm, c, nnz, stage_entries, out)?, path) {
        ((Some(out), Ok(())), _) => out.synced().map(Some),
        ((_, Err(e)), Some(path)) => Err(Error::io(&path, "cannot write output", e)),
        _ => Ok(None),
    }
}

/// The temporary file of rank 0's `out`, open on every rank, with the output's final path,
/// where every rank could open it (and the system maps pages ahead: [`placed::supported`]);
/// `None` on every rank otherwise. Collective.
fn shared_file(comm: &dyn Comm, out: Option<&AtomicOutput>) -> Option<(File, PathBuf)> {
    // Rank 0 sends the final path and the temporary one, with a 0 between them.
    let mut names = Vec::new();
    let mut mine = None;
    if comm.rank() == 0 {
        let temp = out.and_then(|o| Some((o.file_in_place()?, o.temp_path()?, o.path())));
        if let Some((file, temp, path)) = temp.filter(|(f, _, _)| placed::supported(f)) {
            if let (Some(t), Some(p), Ok(f)) = (temp.to_str(), path.to_str(), file.try_clone()) {
                names = [p.as_bytes(), &[0], t.as_bytes()].concat();
                mine = Some(f);
            }
        }
    }
    comm.broadcast_bytes(0, &mut names);
    let named = std::str::from_utf8(&names)
        .ok()
        .and_then(|n| n.split_once('\0'));
    let opened = match (mine, named) {
        (Some(f), Some((path, _))) => Some((f, PathBuf::from(path))),
        (None, Some((path, temp))) => {
            let f = OpenOptions::new().read(true).write(true).open(temp).ok();
            f.map(|f| (f, PathBuf::from(path)))
        }
        _ => None,
    };
    let mut missing = [u64::from(opened.is_none())];
    comm.max_u64(&mut missing);
    opened.filter(|_| missing[0] == 0)
}

/// Every rank writes its block's parts of the arrays into `file` at their places; rank 0 sizes
/// the file first and writes the rest of the archive with the parts' CRCs last. Collective;
/// every rank returns the same outcome.
fn write_in_place<T: Scalar>(
    comm: &dyn Comm,
    c: &MatrixBlock<T>,
    nnz: u64,
    (file, path): &(File, PathBuf),
) -> Result<()> {
    let layout = CsrLayout::new::<T>(c.blocks.n, c.ncols, nnz);
    let m = &c.rows;
    let (before, _) = comm.all_gather_u64(&[m.nnz() as u64]);
    let entries: u64 = before[..comm.rank()].iter().sum();
    let first = c.first() as u64;
    // A fill stopped by an interrupt is the interrupt (every rank's, agreed).
    let failed = |e| write_failed(path, e);
    // Rank 0 sizes the file before the others map it.
    let sized = match comm.rank() {
        0 => Placed::map(file, layout.len(), true)
            .map(Some)
            .map_err(failed),
        _ => Ok(None),
    };
    let sized = agree(comm, sized)?;
    let mapped = match sized {
        Some(p) => Ok(p),
        None => Placed::map(file, layout.len(), false).map_err(failed),
    };
    let mut placed = agree(comm, mapped)?;
    let parts = (|| {
        Ok([
            placed.indices(&layout, entries, m.col_idx())?,
            placed.indptr(&layout, first, entries, m.row_ptr())?,
            placed.data(&layout, entries, m.values())?,
        ])
    })();
    let parts = agree(comm, parts.map_err(failed))?;
    agree(comm, crate::interrupt::check())?;
    let words: Vec<u64> = parts
        .iter()
        .flat_map(|h| [u64::from(h.clone().finalize()), h.total_len()])
        .collect();
    let (all, _) = comm.all_gather_u64(&words);
    let framed = match comm.rank() {
        0 => {
            let whole: Vec<Hasher> = (0..3)
                .map(|a| {
                    all.chunks_exact(6).fold(Hasher::new(), |mut sum, w| {
                        sum.combine(&Hasher::new_with_initial_len(w[2 * a] as u32, w[2 * a + 1]));
                        sum
                    })
                })
                .collect();
            placed
                .frame(&layout, [&whole[0], &whole[1], &whole[2]])
                .map_err(failed)
        }
        _ => Ok(()),
    };
    drop(placed);
    agree(comm, framed)
}

/// [`write`] into any writer: `Err` when every rank stops (an interrupt); else rank 0's writer
/// back with the outcome of its writes (`Ok` on the other ranks).
fn write_to<T: Scalar, W: Write>(
    comm: &dyn Comm,
    c: &MatrixBlock<T>,
    nnz: u64,
    stage_entries: usize,
    out: Option<W>,
) -> Result<(Option<W>, std::io::Result<()>)> {
    let budget = stage_entries.clamp(1, MAX_MESSAGE / 2) as u64;
    let pieces = cut_pieces(&c.rows, budget);
    let (counts, _) = comm.all_gather_u64(&[pieces.len() as u64]);
    let pass = |array: CsrArray, sink: &mut dyn FnMut(CsrPiece<'_, T>)| {
        send_array(comm, c, &pieces, &counts, array, sink)
    };
    const PASSES: [CsrArray; 3] = [CsrArray::Indices, CsrArray::Indptr, CsrArray::Data];
    let out = match out {
        Some(out) if comm.rank() == 0 => out,
        _ => {
            for array in PASSES {
                pass(array, &mut |_| {})?;
            }
            return Ok((None, Ok(())));
        }
    };
    let mut done = 0;
    // An error every rank has (an interrupt): no pass runs after it.
    let mut stopped = None;
    let written = npz::write_in_passes::<T, _>(out, c.blocks.n, c.ncols, nnz, |array, w| {
        done += 1;
        let mut failed = None;
        let sent = pass(array, &mut |piece| {
            if failed.is_none() {
                failed = w.put(piece).err();
            }
        });
        match (sent, failed) {
            (Err(e), _) => {
                stopped = Some(e);
                Err(std::io::Error::other("stopped on every rank"))
            }
            (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
        }
    });
    if let Some(e) = stopped {
        return Err(e);
    }
    // The passes a failed write left out: the other ranks are sending.
    for &array in &PASSES[done..] {
        pass(array, &mut |_| {})?;
    }
    Ok(match written {
        Ok(out) => (Some(out), Ok(())),
        Err(e) => (None, Err(e)),
    })
}

/// One pass: rank 0 hands `sink` its own block's `array`, then each other rank's in rank order,
/// piece by piece (`pieces`: this rank's; `counts`: every rank's number of pieces). Collective;
/// `sink` is called on rank 0 only.
fn send_array<T: Scalar>(
    comm: &dyn Comm,
    c: &MatrixBlock<T>,
    pieces: &[Range<usize>],
    counts: &[u64],
    array: CsrArray,
    sink: &mut dyn FnMut(CsrPiece<'_, T>),
) -> Result<()> {
    let m = &c.rows;
    let root = comm.rank() == 0;
    if root {
        sink(match array {
            CsrArray::Indices => CsrPiece::Indices(m.col_idx()),
            CsrArray::Indptr => CsrPiece::Indptr(m.row_ptr()),
            CsrArray::Data => CsrPiece::Data(m.values()),
        });
    }
    let to_root = |n: usize| {
        let mut counts = vec![0usize; comm.size()];
        counts[0] = n;
        counts
    };
    for (sender, &n) in counts.iter().enumerate().skip(1) {
        for p in 0..n as usize {
            // The sender gives its piece `p`; every other rank sends nothing.
            let rows = match comm.rank() == sender {
                true => pieces.get(p).cloned().unwrap_or(0..0),
                false => 0..0,
            };
            let span = m.row_ptr()[rows.start] as usize..m.row_ptr()[rows.end] as usize;
            let words: Vec<u32> = match array {
                CsrArray::Indices => m.col_idx()[span].to_vec(),
                CsrArray::Indptr => rows.map(|i| m.row_len(i) as u32).collect(),
                CsrArray::Data => to_words(&m.values()[span]),
            };
            let (got, _) = comm.all_to_all_u32(&words, &to_root(words.len()));
            if root {
                match array {
                    CsrArray::Indices => sink(CsrPiece::Indices(&got)),
                    CsrArray::Indptr => {
                        let mut ptr = Vec::with_capacity(got.len() + 1);
                        ptr.push(0u64);
                        for &l in &got {
                            ptr.push(ptr[ptr.len() - 1] + u64::from(l));
                        }
                        sink(CsrPiece::Indptr(&ptr));
                    }
                    CsrArray::Data => sink(CsrPiece::Data(&from_words(&got))),
                }
            }
            agree(comm, crate::interrupt::check())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::Csr;
    use crate::dist::threads::ThreadComm;

    /// A `rows x cols` matrix with empty rows, full rows and values whose every mantissa bit
    /// counts.
    fn matrix(rows: usize, cols: usize) -> Csr<f64> {
        let mut rng = crate::generate::rng::SplitMix64::new(rows as u64);
        let mut d = vec![0.0; rows * cols];
        for i in 0..rows {
            let per_row = match i % 5 {
                0 => 0,
                3 => cols,
                _ => 2,
            };
            for _ in 0..per_row {
                let j = (rng.next_u64() % cols as u64) as usize;
                d[i * cols + j] = f64::from_bits(rng.next_u64() >> 2) - 1.0;
            }
        }
        Csr::from_dense(rows, cols, &d)
    }

    /// `m` written to `out` by [`write_as`] (`in_place` or in passes) on `ranks` threads
    /// standing for ranks; every rank's result, agreed.
    fn on_ranks(
        ranks: usize,
        m: &Csr<f64>,
        stage: usize,
        out: &std::path::Path,
        in_place: bool,
    ) -> Vec<Result<()>> {
        let group = ThreadComm::group(ranks);
        std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|comm| {
                    s.spawn(move || {
                        let c = MatrixBlock::of_whole(comm, m);
                        let out = (comm.rank() == 0).then(|| AtomicOutput::create(out).unwrap());
                        let r = write_as(comm, &c, m.nnz() as u64, stage, out, in_place)
                            .and_then(|out| out.map_or(Ok(()), AtomicOutput::commit));
                        // Every rank can still meet the others.
                        agree(comm, r)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn every_rank_count_and_stage_writes_the_single_process_file() {
        let dir = tempfile::tempdir().unwrap();
        let want_path = dir.path().join("want.npz");
        let got_path = dir.path().join("got.npz");
        // Fewer rows than ranks too: ranks with no rows send no pieces.
        for (rows, cols) in [(23, 17), (3, 5), (0, 4)] {
            let m = matrix(rows, cols);
            crate::output::write_matrix(&want_path, &m).unwrap();
            let want = std::fs::read(&want_path).unwrap();
            for ranks in [1, 2, 3, 8] {
                for (stage, in_place) in [(1, false), (4, false), (1 << 20, false), (4, true)] {
                    for r in on_ranks(ranks, &m, stage, &got_path, in_place) {
                        r.unwrap();
                    }
                    let got = std::fs::read(&got_path).unwrap();
                    let how = format!("{rows} rows, {ranks} ranks, stage {stage}, {in_place}");
                    assert!(got == want, "{how}");
                    std::fs::remove_file(&got_path).unwrap();
                }
            }
        }
    }

    /// A writer whose space runs out after `room` bytes.
    struct Full {
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if b.len() > self.room {
                return Err(std::io::Error::other("no space left"));
            }
            self.room -= b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_write_that_fails_anywhere_is_rank_0_s_error_after_every_pass() {
        let m = matrix(40, 30);
        let size = npz::write(Vec::new(), &m).unwrap().len();
        for ranks in [1, 3] {
            // In a header, in each array (in rank 0's block and in another's), in the directory.
            for room in (0..8).map(|k| k * size / 8).chain([size - 10]) {
                let group = ThreadComm::group(ranks);
                let results: Vec<_> = std::thread::scope(|s| {
                    let hs: Vec<_> = group
                        .iter()
                        .map(|comm| {
                            let m = &m;
                            s.spawn(move || {
                                let c = MatrixBlock::of_whole(comm, m);
                                let out = (comm.rank() == 0).then_some(Full { room });
                                let (_, r) = write_to(comm, &c, m.nnz() as u64, 7, out).unwrap();
                                // Every rank can still meet the others.
                                agree(comm, r.map_err(|e| Error::Invalid(e.to_string())))
                            })
                        })
                        .collect();
                    hs.into_iter().map(|h| h.join().unwrap()).collect()
                });
                for r in results {
                    let e = r.unwrap_err().to_string();
                    assert!(
                        e.contains("no space left"),
                        "{ranks} ranks, room {room}: {e}"
                    );
                }
            }
        }
    }
}
