//! A matrix across ranks, as a product reads it: every rank reads its part of the file's lines
//! ([`crate::io::load_part_as`]), and each entry travels to the rank owning its row, so that
//! each rank ends with one block of consecutive rows ([`Blocks`]) of exactly the matrix that the
//! single-process `spgemm` builds: entries as listed, self loops kept, repeated entries summed
//! (sorted by value first, as [`Csr::from_edges`] sums them, so the sums are bitwise the same),
//! and with `symmetrize` every entry also added to its mirror.
//!
//! The exchange runs in rounds of at most `stage_edges` of each rank's parsed entries, so its
//! buffers stay bounded (and every message below MPI's 32-bit counts).

use super::labels::LabelShare;
use super::{agree, in_rounds, Blocks, Comm, MAX_MESSAGE};
use crate::csr::{BuildOptions, Csr, Duplicates};
use crate::edges::EdgeList;
use crate::error::{Error, Result};
use crate::io::{self, Format, Loaded, PartFacts};
use crate::scalar::Scalar;
use std::path::Path;

/// One rank's block of rows of a matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixBlock<T> {
    /// How rows are cut among the ranks (`blocks.n` is the matrix's row count): evenly, or in
    /// blocks of equal work (a product's).
    pub blocks: Blocks,
    /// The matrix's column count.
    pub ncols: usize,
    /// This rank's block.
    pub rank: usize,
    /// The block's rows (row 0 is global row `first()`), all `ncols` columns.
    pub rows: Csr<T>,
}

impl<T: Scalar> MatrixBlock<T> {
    /// The block's first row.
    pub fn first(&self) -> usize {
        self.start(self.rank)
    }

    /// The first row of rank `p`'s block (the row count for `p` = the ranks).
    pub fn start(&self, p: usize) -> usize {
        self.blocks.start(p)
    }

    /// The rank whose block holds row `v`.
    pub fn owner(&self, v: usize) -> usize {
        self.blocks.owner(v)
    }

    /// Cuts a whole matrix into `comm`'s blocks and keeps this rank's (for tests and for
    /// matrices every rank already holds).
    pub fn of_whole(comm: &dyn Comm, m: &Csr<T>) -> MatrixBlock<T> {
        let blocks = Blocks::even(m.nrows(), comm.size());
        let r = blocks.range(comm.rank());
        let ptr = m.row_ptr();
        let (lo, hi) = (ptr[r.start] as usize, ptr[r.end] as usize);
        let rows = Csr::from_parts_unchecked(
            r.len(),
            m.ncols(),
            ptr[r.start..=r.end]
                .iter()
                .map(|&p| p - lo as u64)
                .collect(),
            m.col_idx()[lo..hi].to_vec(),
            m.values()[lo..hi].to_vec(),
        );
        MatrixBlock {
            blocks,
            ncols: m.ncols(),
            rank: comm.rank(),
            rows,
        }
    }
}

/// Reads this rank's part of `path` and builds its block of rows of the matrix `spgemm` reads
/// (see the module's comment). Collective; an error on any rank is the error of every rank.
pub fn load_block<T: Scalar>(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    symmetrize: bool,
    stage_edges: usize,
) -> Result<MatrixBlock<T>> {
    let (loaded, _) = read_part::<T>(comm, path, format, stage_edges)?;
    block_of_parts(comm, loaded, path, symmetrize, stage_edges)
}

/// This rank's part of `path` ([`io::load_part_as`]), with the checks that need every part made
/// on the facts every part gathered ([`io::check_parts`]), numbered as the whole file is
/// ([`super::labels::renumber`]: SNAP ids and `.abc` labels, with this rank's share of them).
/// Collective; an error on any rank is the error of every rank.
pub(crate) fn read_part<T: Scalar>(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    stage: usize,
) -> Result<(Loaded, Option<LabelShare>)> {
    read_part_checked::<T>(comm, path, format, stage, |_| Ok(()))
}

/// [`read_part`], with `check` of the part as it was read (its own ids and labels) before the
/// ranks agree on it.
pub(crate) fn read_part_checked<T: Scalar>(
    comm: &dyn Comm,
    path: &Path,
    format: Option<Format>,
    stage: usize,
    check: impl FnOnce(&Loaded) -> Result<()>,
) -> Result<(Loaded, Option<LabelShare>)> {
    let (loaded, facts) = agree(
        comm,
        io::load_part_as::<T>(path, format, comm.rank(), comm.size())
            .and_then(|(l, f)| check(&l).map(|()| (l, f))),
    )?;
    let (words, _) = comm.all_gather_u64(&facts.to_words());
    let all: Vec<PartFacts> = words
        .chunks_exact(PartFacts::WORDS)
        .map(PartFacts::from_words)
        .collect();
    io::check_parts(path, format, &all)?;
    super::labels::renumber(comm, loaded, path, stage)
}

/// Every rank's parsed part made into its block of rows. Collective.
pub(crate) fn block_of_parts<T: Scalar>(
    comm: &dyn Comm,
    loaded: Loaded,
    path: &Path,
    symmetrize: bool,
    stage_edges: usize,
) -> Result<MatrixBlock<T>> {
    let mut shape = [
        loaded.edges.nrows as u64,
        loaded.edges.ncols as u64,
        u64::from(loaded.edges.weights.is_some()),
    ];
    comm.max_u64(&mut shape);
    let (nrows, ncols, weighted) = (shape[0] as usize, shape[1] as usize, shape[2] == 1);
    let in_file = |message: String| Error::Input {
        path: path.to_path_buf(),
        message,
    };
    if symmetrize && nrows != ncols {
        return Err(in_file(format!(
            "cannot symmetrize a {nrows} x {ncols} matrix: it is not square"
        )));
    }
    if ncols > u32::MAX as usize + 1 {
        return Err(in_file(format!(
            "{ncols} columns do not fit 32-bit indices"
        )));
    }
    let blocks = Blocks::even(nrows, comm.size());
    let el = loaded.edges;
    // An entry travels as its row, its column and (weighted) its f64 weight in two words, and
    // twice when symmetrizing.
    let words = 2 + 2 * usize::from(weighted);
    let stage = stage_edges.clamp(1, MAX_MESSAGE / (2 * words));
    let mut received: Vec<u32> = Vec::new();
    in_rounds(comm, el.edges.len(), stage, |r| {
        let (send, counts) = by_owner(&el, r, &blocks, symmetrize, weighted);
        comm.all_to_all_append(&send, &counts, &mut received);
    })?;
    drop(el);
    let rows =
        build_rows::<T>(&blocks, comm.rank(), ncols, &received, weighted).map_err(|e| match e {
            Error::Invalid(msg) => in_file(msg),
            other => other,
        });
    let rows = agree(comm, rows)?;
    Ok(MatrixBlock {
        blocks,
        ncols,
        rank: comm.rank(),
        rows,
    })
}

/// The entries `range` of `el` (and their mirrors when symmetrizing: a self loop twice, as
/// A + Aᵀ has it), grouped by the owner of their row and flattened as `row, col[, w lo, w hi]`,
/// with the number of words for each owner.
fn by_owner(
    el: &EdgeList,
    range: std::ops::Range<usize>,
    blocks: &Blocks,
    symmetrize: bool,
    weighted: bool,
) -> (Vec<u32>, Vec<usize>) {
    let words = 2 + 2 * usize::from(weighted);
    let entries = |k: usize| {
        let (u, v) = el.edges[k];
        std::iter::once((u, v)).chain(symmetrize.then_some((v, u)))
    };
    let mut counts = vec![0usize; blocks.parts];
    for k in range.clone() {
        for (r, _) in entries(k) {
            counts[blocks.owner(r as usize)] += words;
        }
    }
    let mut at = super::offsets(&counts);
    let mut send = vec![0u32; counts.iter().sum()];
    for k in range {
        let w = el.weight(k).to_bits();
        for (r, c) in entries(k) {
            let o = blocks.owner(r as usize);
            send[at[o]] = r;
            send[at[o] + 1] = c;
            if weighted {
                send[at[o] + 2] = w as u32;
                send[at[o] + 3] = (w >> 32) as u32;
            }
            at[o] += words;
        }
    }
    (send, counts)
}

/// The block's rows from the entries it received (flattened as [`by_owner`] sends them), built
/// as the single-process matrix is: repeats summed, nothing dropped.
fn build_rows<T: Scalar>(
    blocks: &Blocks,
    rank: usize,
    ncols: usize,
    words: &[u32],
    weighted: bool,
) -> Result<Csr<T>> {
    let first = blocks.start(rank) as u32;
    let step = 2 + 2 * usize::from(weighted);
    let entries: Vec<(u32, u32)> = words
        .chunks_exact(step)
        .map(|e| (e[0] - first, e[1]))
        .collect();
    let weights = weighted.then(|| {
        words
            .chunks_exact(step)
            .map(|e| f64::from_bits(u64::from(e[2]) | (u64::from(e[3]) << 32)))
            .collect()
    });
    let el = EdgeList {
        nrows: blocks.range(rank).len(),
        ncols,
        edges: entries,
        weights,
    };
    let opts = BuildOptions {
        symmetrize: false,
        drop_self_loops: false,
        duplicates: Duplicates::Sum,
    };
    Csr::from_edges(&el, &opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::threads::ThreadComm;
    use crate::dist::SelfComm;
    use std::path::PathBuf;

    /// Every rank's block, `ranks` threads standing for the ranks.
    fn blocks_on<T: Scalar + Send>(
        ranks: usize,
        f: &Path,
        symmetrize: bool,
        stage: usize,
    ) -> Vec<Result<MatrixBlock<T>>> {
        let group = ThreadComm::group(ranks);
        std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|c| s.spawn(move || load_block::<T>(c, f, None, symmetrize, stage)))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// The blocks stacked back into one matrix.
    fn stacked<T: Scalar>(blocks: &[MatrixBlock<T>]) -> Csr<T> {
        let (mut ptr, mut cols, mut vals) = (vec![0u64], Vec::new(), Vec::new());
        for b in blocks {
            for i in 0..b.rows.nrows() {
                let (c, v) = b.rows.row(i);
                cols.extend_from_slice(c);
                vals.extend_from_slice(v);
                ptr.push(cols.len() as u64);
            }
        }
        Csr::from_parts(blocks[0].blocks.n, blocks[0].ncols, ptr, cols, vals).unwrap()
    }

    fn single<T: Scalar>(f: &Path, symmetrize: bool) -> Csr<T> {
        let l = io::load(f, None).unwrap();
        let opts = BuildOptions {
            symmetrize,
            drop_self_loops: false,
            duplicates: Duplicates::Sum,
        };
        Csr::from_edges(&l.edges, &opts).unwrap()
    }

    #[test]
    fn blocks_stack_to_the_single_process_matrix() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m.wel");
        let mut rng = crate::generate::rng::SplitMix64::new(3);
        let mut text = String::from("# weighted, with repeats and loops\n");
        for _ in 0..400 {
            let (u, v) = (rng.next_u64() % 37, rng.next_u64() % 37);
            let w = (rng.next_u64() % 1000) as f64 / 7.0 - 50.0;
            text.push_str(&format!("{u} {v} {w}\n{u} {u} 0.1\n"));
        }
        std::fs::write(&f, &text).unwrap();
        let g = dir.path().join("m.el");
        std::fs::write(
            &g,
            text.lines()
                .map(|l| {
                    let t: Vec<&str> = l.split(' ').collect();
                    if t.len() == 3 {
                        format!("{} {}\n", t[0], t[1])
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect::<String>(),
        )
        .unwrap();
        for file in [&f, &g] {
            for symmetrize in [false, true] {
                let want = single::<f64>(file, symmetrize);
                for ranks in 1..=4 {
                    for stage in [5, 1 << 20] {
                        let got: Vec<MatrixBlock<f64>> = blocks_on(ranks, file, symmetrize, stage)
                            .into_iter()
                            .map(|b| b.unwrap())
                            .collect();
                        assert_eq!(stacked(&got), want, "{ranks} ranks, stage {stage}");
                    }
                }
            }
        }
        let want = single::<f32>(&f, true);
        let got = load_block::<f32>(&SelfComm, &f, None, true, 9).unwrap();
        assert_eq!(got.rows, want);
    }

    /// A Matrix Market file of `rows x cols` with `entries` entries (one triangle when not
    /// general), comments among them.
    fn mtx(dir: &Path, name: &str, header: &str, rows: u64, cols: u64, seed: u64) -> PathBuf {
        let mut rng = crate::generate::rng::SplitMix64::new(seed);
        let general = header.ends_with("general");
        let mut lines = Vec::new();
        for k in 0..300 {
            let (mut i, mut j) = (rng.next_u64() % rows + 1, rng.next_u64() % cols + 1);
            if !general && i < j {
                std::mem::swap(&mut i, &mut j);
            }
            let v = match header.split(' ').nth(1) {
                Some("pattern") => String::new(),
                Some("integer") => format!(" {}", rng.next_u64() % 90),
                _ => format!(" {}", (rng.next_u64() % 10_000) as f64 / 9.0 - 500.0),
            };
            lines.push(format!("{i} {j}{v}\n"));
            if k % 50 == 0 {
                lines.push("% a comment\n".into());
            }
        }
        let f = dir.join(name);
        let mut text = format!("%%MatrixMarket matrix {header}\n% c\n{rows} {cols} 300\n");
        text.extend(lines);
        std::fs::write(&f, text).unwrap();
        f
    }

    #[test]
    fn matrix_market_blocks_stack_to_the_single_process_matrix() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            mtx(dir.path(), "g.mtx", "coordinate real general", 23, 37, 1),
            mtx(dir.path(), "s.mtx", "coordinate real symmetric", 29, 29, 2),
            mtx(
                dir.path(),
                "k.mtx",
                "coordinate real skew-symmetric",
                29,
                29,
                3,
            ),
            mtx(
                dir.path(),
                "p.mtx",
                "coordinate pattern symmetric",
                31,
                31,
                4,
            ),
            mtx(dir.path(), "i.mtx", "coordinate integer general", 31, 30, 5),
        ];
        for f in &files {
            for symmetrize in [false, true] {
                let square = !f.ends_with("g.mtx") && !f.ends_with("i.mtx");
                if symmetrize && !square {
                    let e = blocks_on::<f64>(2, f, true, 8).remove(0).unwrap_err();
                    assert!(e.to_string().contains("is not square"), "{e}");
                    continue;
                }
                let want = single::<f64>(f, symmetrize);
                for ranks in 1..=4 {
                    let got: Vec<MatrixBlock<f64>> = blocks_on(ranks, f, symmetrize, 7)
                        .into_iter()
                        .map(|b| b.unwrap())
                        .collect();
                    assert_eq!(stacked(&got), want, "{} on {ranks} ranks", f.display());
                }
            }
        }
    }

    #[test]
    fn matrix_market_whole_file_errors_are_the_single_process_ones() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m.mtx");
        let head = "%%MatrixMarket matrix coordinate integer symmetric\n% c\n40 40 ";
        let body: String = (1..=30).map(|i| format!("{} {} {i}\n", i + 5, i)).collect();
        for (text, line_in_single) in [
            // Too few entries; too many.
            (format!("{head}31\n{body}"), false),
            (format!("{head}29\n{body}"), false),
            // An entry above the diagonal, near the end.
            (format!("{head}31\n{body}3 9 2\n"), true),
            // A fraction under 'integer'.
            (format!("{head}31\n{body}9 3 2.5\n"), true),
        ] {
            std::fs::write(&f, &text).unwrap();
            let want = io::load(&f, None).unwrap_err().to_string();
            let named = want
                .split("m.mtx")
                .nth(1)
                .is_some_and(|r| r.starts_with(":3"));
            assert_eq!(named, line_in_single, "{want}");
            for ranks in 1..=3 {
                for b in blocks_on::<f64>(ranks, &f, false, 8) {
                    let got = b.unwrap_err().to_string();
                    // A bad line is its rank's (named when there are several); the checks of
                    // the whole file are every rank's.
                    let got = match got.split_once(&format!(" of {ranks}: ")) {
                        Some((rank, rest)) if rank.starts_with("rank ") => rest.to_string(),
                        _ => got,
                    };
                    assert_eq!(got, want, "{ranks} ranks");
                }
            }
        }
    }

    #[test]
    fn a_weight_beyond_f32_names_its_line_on_every_rank() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m.wel");
        let mut text: String = (0..100)
            .map(|i| format!("{i} {} 1.5\n", (i + 3) % 100))
            .collect();
        text.push_str("4 5 1e39\n");
        std::fs::write(&f, text).unwrap();
        for b in blocks_on::<f32>(3, &f, false, 8) {
            let e = b.unwrap_err().to_string();
            assert!(e.starts_with("rank 2 of 3: "), "{e}");
            assert!(e.contains("m.wel:101: weight 1e39 does not fit"), "{e}");
        }
        assert!(blocks_on::<f64>(3, &f, false, 8)
            .into_iter()
            .all(|b| b.is_ok()));
    }
}
