//! One block of a CSR or CSC archive's pattern without its diagonal, as one rank of a
//! distributed run reads it when the archive may already hold a simple graph: the block's
//! slices of `indptr` and `indices` only, decoded as [`super::parse_pattern`] decodes the whole
//! (`data` is checked to hold one number per entry, and its values are read only when asked),
//! with each stored member's CRC cut into pieces: every block computes the CRC of its own bytes
//! of the member, the first from the member's start and the last to its end, so that the pieces
//! combined in block order are the member's CRC, and no rank reads another's bytes to check it.

use super::npy::Array;
use super::{array_of, integers, part_crc, pattern, values_unread, Archive, Layout};
use crate::io::{limits, Format};
use rayon::prelude::*;
use std::ops::Range;
use std::path::Path;

/// One block of a compressed archive's pattern without its diagonal.
#[derive(Clone, Debug, PartialEq)]
pub struct PatternBlock {
    /// The side of the square pattern: the larger of the archive's two sizes.
    pub n: usize,
    /// The archive's shape, rows by columns.
    pub shape: (usize, usize),
    /// The groups read: rows of a CSR archive, columns of a CSC one (of a symmetric pattern,
    /// its rows alike); groups past the stored ones are empty.
    pub rows: Range<usize>,
    /// Offsets of the block's groups into `cols`, from 0.
    pub ptr: Vec<u64>,
    /// The groups' indices but their diagonal entries, in stored order.
    pub cols: Vec<u32>,
    /// Every group's indices strictly increase.
    pub sorted: bool,
    /// This block's pieces of the CRCs of `indptr` and `indices`, in that order.
    pub crcs: [CrcPiece; 2],
    /// The block's values, where [`parse_pattern_block`] was asked for them.
    pub values: Option<BlockValues>,
}

/// The values of a block read with its pattern, for a graph whose weights are the stored values.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockValues {
    /// Every value of the block, its diagonal ones too, passed the caller's check.
    pub valid: bool,
    /// The values of the block's entries but the diagonal ones, in the order of its `cols`
    /// (empty where some value failed the check).
    pub values: Vec<f64>,
    /// The block's piece of the CRC of `data`.
    pub crc: CrcPiece,
    /// For each group of the block, 1 where it stores any entry (a diagonal one too), else 0.
    pub stored: Vec<u8>,
}

/// A block's share of a member's CRC check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrcPiece {
    /// The CRC-32 of the block's bytes of the member.
    pub crc: u32,
    /// How many bytes that is.
    pub len: u64,
    /// The CRC the whole member must have; `None` when it needs no check from the blocks (a
    /// deflated member, checked as it was inflated).
    pub want: Option<u32>,
}

/// Whether `pieces`, every block's piece of one member in block order, make the CRC the member
/// must have (or the member needs no check).
pub fn crc_pieces_match(pieces: &[CrcPiece]) -> bool {
    let Some(want) = pieces.first().and_then(|p| p.want) else {
        return true;
    };
    let all = pieces.iter().fold(crc32fast::Hasher::new(), |mut all, p| {
        all.combine(&crc32fast::Hasher::new_with_initial_len(p.crc, p.len));
        all
    });
    all.finalize() == want
}

/// The groups of an archive's square pattern that a block is chosen from: the side `n`, and
/// the offsets of the `stored` groups (groups from `stored` to `n` are empty).
pub struct GroupOffsets<'a> {
    /// The side of the square pattern.
    pub n: usize,
    /// The groups the archive stores.
    pub stored: usize,
    offset: &'a dyn Fn(usize) -> u64,
}

impl<'a> GroupOffsets<'a> {
    /// The groups of a side `n` pattern storing `stored` groups, group `g` starting at
    /// `offset(g)`.
    pub fn new(n: usize, stored: usize, offset: &'a dyn Fn(usize) -> u64) -> GroupOffsets<'a> {
        GroupOffsets { n, stored, offset }
    }

    /// Where group `g` (at most `stored`) starts among the indices; the entries for `stored`.
    pub fn offset(&self, g: usize) -> u64 {
        (self.offset)(g)
    }
}

/// Reads block `part` of `parts` of the pattern in the `.npz` file `bytes`: the groups
/// `rows_of(groups)` of the `n x n` square pattern; with `values`, the block's values too,
/// each checked by `values` ([`BlockValues`]). `None` when the file is not a CSR or CSC archive,
/// or when the block does not read cleanly (an index out of the shape, offsets that decrease,
/// values that are not numbers, no memory for it): the caller then reads the file as any
/// other, which says what is wrong.
pub(crate) fn parse_pattern_block(
    bytes: &[u8],
    path: &Path,
    (part, parts): (usize, usize),
    rows_of: &dyn Fn(&GroupOffsets<'_>) -> Range<usize>,
    values: Option<&ValueCheck<'_>>,
) -> Option<PatternBlock> {
    let archive = Archive::open(bytes, path).ok()?;
    let csr = match archive.layout {
        Layout::Csr => true,
        Layout::Csc => false,
        Layout::Coo => return None,
    };
    let (nrows, ncols) = (archive.nrows, archive.ncols);
    let (major, minor) = if csr { (nrows, ncols) } else { (ncols, nrows) };
    let n = nrows.max(ncols);
    let (ptr_body, _) = archive.member_unchecked("indptr").ok()?;
    let indptr = array_of(path, "indptr", &ptr_body.bytes).ok()?;
    let (idx_body, _) = archive.member_unchecked("indices").ok()?;
    let indices = array_of(path, "indices", &idx_body.bytes).ok()?;
    values_unread(&archive, indices.len).ok()?;
    integers(&indptr, "indptr").ok()?;
    integers(&indices, "indices").ok()?;
    if indptr.len != major + 1 {
        return None;
    }
    let ptr_at = |i: usize| indptr.int(i).unwrap_or(-1).clamp(-1, u64::MAX as i128 / 2) as u64;
    let total = indices.len as u64;
    if ptr_at(0) != 0 || ptr_at(major) != total {
        return None;
    }
    let rows = rows_of(&GroupOffsets::new(n, major, &ptr_at));
    if rows.start > rows.end || rows.end > n {
        return None;
    }
    // The stored groups of the block; groups from `major` on are empty.
    let stored = rows.start.min(major)..rows.end.min(major);
    let mut ptr: Vec<u64> = (stored.start..=stored.end)
        .into_par_iter()
        .map(ptr_at)
        .collect();
    let increasing = ptr.par_windows(2).all(|w| w[0] <= w[1]);
    if !increasing || ptr[ptr.len() - 1] > total {
        return None;
    }
    let entries = (ptr[ptr.len() - 1] - ptr[0]) as usize;
    let fits = limits::check_size(
        Format::Npz,
        (nrows, ncols),
        entries,
        path,
        &limits::Footprint::MINIMUM,
        |_| None,
    );
    fits.ok()?;
    let (first, last) = (part == 0, part + 1 == parts);
    // The offsets `stored.start..stored.end` are this block's bytes of `indptr` (the last block
    // takes the final offset as well).
    let ptr_elements = stored.start..if last { major + 1 } else { stored.end };
    let indptr_piece = piece(
        &ptr_body.bytes,
        &indptr,
        ptr_elements,
        first,
        last,
        |b| match ptr_body.crc {
            Some(_) => hasher_of(b),
            None => crc32fast::Hasher::new(),
        },
    );
    let index_range = ptr[0] as usize..ptr[ptr.len() - 1] as usize;
    let stored_ptr = values.map(|_| ptr.clone());
    let read = pattern::off_diagonal_block(
        std::mem::take(&mut ptr),
        stored.start,
        &indices,
        minor,
        idx_body.crc.is_some(),
    );
    let (mut block, scanned) = read.ok()?;
    let values = match (values, stored_ptr) {
        (Some(check), Some(stored_ptr)) => {
            let at = Placed {
                stored: &stored_ptr,
                kept: &block.ptr,
                first_row: stored.start,
            };
            let read = block_values(&archive, &at, &indices, rows.len(), check, (first, last));
            Some(read?)
        }
        _ => None,
    };
    let indices_piece = piece(&idx_body.bytes, &indices, index_range, first, last, |_| {
        scanned.clone().unwrap_or_default()
    });
    // Groups past the stored ones: empty.
    let end = block.cols.len() as u64;
    block.ptr.resize(rows.len() + 1, end);
    Some(PatternBlock {
        n,
        shape: (nrows, ncols),
        rows,
        ptr: block.ptr,
        cols: block.cols,
        sorted: block.sorted,
        crcs: [
            CrcPiece {
                want: ptr_body.crc,
                ..indptr_piece
            },
            CrcPiece {
                want: idx_body.crc,
                ..indices_piece
            },
        ],
        values,
    })
}

/// The check a caller makes of each value it asks [`parse_pattern_block`] for.
pub type ValueCheck<'a> = dyn Fn(f64) -> bool + Sync + 'a;

/// Where a block's stored groups' entries lie: `stored`, their offsets into the whole arrays;
/// `kept`, the offsets of their entries but the diagonal ones (from 0); `first_row`, the first
/// group's number.
struct Placed<'a> {
    stored: &'a [u64],
    kept: &'a [u64],
    first_row: usize,
}

/// [`BlockValues`] of the block whose stored groups are placed `at` (then empty ones, `groups`
/// in all), every value checked by `check`; `(first, last)`: whether the block is the first and
/// the last. `None` when `data` cannot be read.
fn block_values(
    archive: &Archive<'_>,
    at: &Placed<'_>,
    indices: &Array<'_>,
    groups: usize,
    check: &ValueCheck<'_>,
    (first, last): (bool, bool),
) -> Option<BlockValues> {
    let (body, _) = archive.member_unchecked("data").ok()?;
    let data = array_of(archive.path, "data", &body.bytes).ok()?;
    let width = data.dtype.size();
    let (sp, kp) = (at.stored, at.kept);
    let entries = sp[0] as usize..sp[sp.len() - 1] as usize;
    // The pattern's parts of whole groups: each part's values read once, in cache.
    let bounds = pattern::parts(sp);
    let lens: Vec<usize> = bounds
        .windows(2)
        .map(|w| (kp[w[1]] - kp[w[0]]) as usize)
        .collect();
    let mut values = vec![0f64; kp[kp.len() - 1] as usize];
    let outs = crate::mem::split_by_lengths(&mut values, &lens);
    let check_crc = body.crc.is_some();
    let parts: Vec<(crc32fast::Hasher, bool)> = bounds
        .par_windows(2)
        .zip(outs)
        .map(|(w, out)| {
            let (lo, hi) = (sp[w[0]] as usize, sp[w[1]] as usize);
            let h = part_crc(check_crc, &data.data[lo * width..hi * width]);
            let mut valid = true;
            let mut o = 0;
            for g in w[0]..w[1] {
                let diagonal = (at.first_row + g) as i64;
                let whole = kp[g + 1] - kp[g] == sp[g + 1] - sp[g];
                for k in sp[g] as usize..sp[g + 1] as usize {
                    let v = data.float(k).unwrap_or(f64::NAN);
                    valid &= check(v);
                    if whole || indices.int(k) != Some(i128::from(diagonal)) {
                        // As many as the decoding kept, unless the bytes changed under the map.
                        if let Some(slot) = out.get_mut(o) {
                            *slot = v;
                        }
                        o += 1;
                    }
                }
            }
            (h, valid && o == out.len())
        })
        .collect();
    let valid = parts.iter().all(|p| p.1);
    let crc = piece(&body.bytes, &data, entries, first, last, |_| {
        parts
            .iter()
            .fold(crc32fast::Hasher::new(), |mut all, (h, _)| {
                all.combine(h);
                all
            })
    });
    let mut stored: Vec<u8> = sp.windows(2).map(|w| u8::from(w[0] < w[1])).collect();
    stored.resize(groups, 0);
    Some(BlockValues {
        valid,
        values: if valid { values } else { Vec::new() },
        crc: CrcPiece {
            want: body.crc,
            ..crc
        },
        stored,
    })
}

/// The CRC of this block's bytes of the member `body` holding `array`: its `elements` (whose
/// CRC `middle` gives), after the member's header when `first`, and with what follows the
/// array's elements when `last`.
fn piece(
    body: &[u8],
    array: &Array<'_>,
    elements: Range<usize>,
    first: bool,
    last: bool,
    middle: impl FnOnce(&[u8]) -> crc32fast::Hasher,
) -> CrcPiece {
    let width = array.dtype.size();
    let start = array.data.as_ptr() as usize - body.as_ptr() as usize;
    let (lo, hi) = (start + elements.start * width, start + elements.end * width);
    let mut all = crc32fast::Hasher::new();
    if first {
        all.update(&body[..start]);
    }
    all.combine(&middle(&body[lo..hi]));
    if last {
        all.update(&body[start + array.data.len()..]);
    }
    CrcPiece {
        crc: all.clone().finalize(),
        len: all.total_len(),
        want: None,
    }
}

/// The CRC of `b`, in parallel blocks combined in order.
fn hasher_of(b: &[u8]) -> crc32fast::Hasher {
    const BLOCK: usize = 1 << 23;
    b.par_chunks(BLOCK)
        .map(|c| {
            let mut h = crc32fast::Hasher::new();
            h.update(c);
            h
        })
        .collect::<Vec<_>>()
        .into_iter()
        .fold(crc32fast::Hasher::new(), |mut all, h| {
            all.combine(&h);
            all
        })
}

#[cfg(test)]
mod tests {
    use super::super::testing::compressed;
    use super::super::{parse_pattern, Pattern};
    use super::*;

    /// Groups `0..parts` cut into consecutive runs of equal sizes (the first ones one longer).
    fn cut(n: usize, parts: usize, p: usize) -> Range<usize> {
        let start = |p: usize| p * (n / parts) + p.min(n % parts);
        start(p)..start(p + 1)
    }

    /// Every block of `bytes` in `parts`, in order.
    fn blocks(bytes: &[u8], parts: usize) -> Vec<Option<PatternBlock>> {
        (0..parts)
            .map(|p| {
                parse_pattern_block(
                    bytes,
                    Path::new("m.npz"),
                    (p, parts),
                    &|g| cut(g.n, parts, p),
                    None,
                )
            })
            .collect()
    }

    /// The blocks joined: offsets, indices, whether all are sorted, and whether each member's
    /// CRC pieces match.
    fn joined(blocks: &[Option<PatternBlock>]) -> (Vec<u64>, Vec<u32>, bool, [bool; 2]) {
        let (mut ptr, mut cols, mut sorted) = (vec![0u64], Vec::new(), true);
        for b in blocks.iter().map(|b| b.as_ref().unwrap()) {
            let base = cols.len() as u64;
            ptr.extend(b.ptr[1..].iter().map(|&p| p + base));
            cols.extend_from_slice(&b.cols);
            sorted &= b.sorted;
        }
        let crcs = [0, 1].map(|m| {
            let pieces: Vec<CrcPiece> =
                blocks.iter().map(|b| b.as_ref().unwrap().crcs[m]).collect();
            crc_pieces_match(&pieces)
        });
        (ptr, cols, sorted, crcs)
    }

    #[test]
    fn the_blocks_together_are_the_whole_pattern_and_their_crcs_check_the_members() {
        let mut rng = crate::generate::rng::SplitMix64::new(11);
        for (kind, shape, wide, sorted) in [
            ("csr", (40, 40), false, true),
            ("csc", (40, 40), true, true),
            ("csr", (31, 45), true, false),
            ("csc", (45, 31), false, true),
        ] {
            let major = if kind == "csr" { shape.0 } else { shape.1 };
            let minor = if kind == "csr" { shape.1 } else { shape.0 };
            let groups: Vec<Vec<u32>> = (0..major)
                .map(|g| {
                    let mut v: Vec<u32> = (0..rng.next_u64() % 9)
                        .map(|_| (rng.next_u64() % minor as u64) as u32)
                        .collect();
                    if g % 4 == 0 && g < minor {
                        v.push(g as u32);
                    }
                    if sorted {
                        v.sort_unstable();
                        v.dedup();
                    }
                    v
                })
                .collect();
            let bytes = compressed(kind, shape, &groups, wide);
            let Ok(Pattern::Stored {
                matrix,
                sorted: want_sorted,
            }) = parse_pattern(&bytes, Path::new("m.npz"))
            else {
                panic!("not stored");
            };
            let n = shape.0.max(shape.1);
            let mut want_ptr = matrix.entries.ptr.clone();
            want_ptr.resize(n + 1, matrix.entries.cols.len() as u64);
            for parts in 1..=6 {
                let got = blocks(&bytes, parts);
                assert!(got.iter().all(|b| b.as_ref().is_some_and(|b| b.n == n)));
                let (ptr, cols, got_sorted, crcs) = joined(&got);
                let what = format!("{kind} {shape:?} in {parts} parts");
                assert_eq!(ptr, want_ptr, "{what}");
                assert_eq!(cols, matrix.entries.cols, "{what}");
                assert_eq!(got_sorted, want_sorted, "{what}");
                assert_eq!(crcs, [true, true], "{what}");
            }
            // Each member's CRC in the directory changed: the data read the same, the member
            // fails its CRC, and the pieces say so.
            for (m, name) in [(0, b"indptr.npy".as_slice()), (1, b"indices.npy")] {
                let mut bad = bytes.clone();
                let at = bad.windows(name.len()).rposition(|w| w == name).unwrap() - 30;
                bad[at] ^= 1;
                for parts in [1, 3] {
                    let (_, _, _, crcs) = joined(&blocks(&bad, parts));
                    assert!(
                        !crcs[m] && crcs[1 - m],
                        "{kind} member {m} in {parts} parts"
                    );
                }
            }
        }
    }

    #[test]
    fn blocks_read_with_values_keep_those_off_the_diagonal_and_check_every_one() {
        // Group 2's diagonal entry and group 3's only entry, a loop: their values are checked
        // and dropped.
        let groups = vec![vec![1, 2], vec![], vec![0, 2], vec![3], vec![]];
        let mut bytes = compressed("csr", (5, 6), &groups, false);
        let read = |bytes: &[u8], parts: usize, check: &ValueCheck<'_>| -> Vec<BlockValues> {
            (0..parts)
                .map(|p| {
                    let b = parse_pattern_block(
                        bytes,
                        Path::new("m.npz"),
                        (p, parts),
                        &|g| cut(g.n, parts, p),
                        Some(check),
                    );
                    b.unwrap().values.unwrap()
                })
                .collect()
        };
        for parts in 1..=4 {
            let got = read(&bytes, parts, &|v| v == 1.0);
            let stored: Vec<u8> = got.iter().flat_map(|b| b.stored.clone()).collect();
            assert_eq!(stored, [1, 0, 1, 1, 0, 0], "{parts} parts");
            let values: Vec<f64> = got.iter().flat_map(|b| b.values.clone()).collect();
            assert_eq!(values, [1.0; 3], "{parts} parts");
            assert!(got.iter().all(|b| b.valid));
            let pieces: Vec<CrcPiece> = got.iter().map(|b| b.crc).collect();
            assert!(pieces[0].want.is_some() && crc_pieces_match(&pieces));
            // Every value checked, the diagonal ones too.
            let seen = std::sync::atomic::AtomicUsize::new(0);
            let got = read(&bytes, parts, &|_| {
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                false
            });
            assert_eq!(seen.into_inner(), 5, "{parts} parts");
            let valid: Vec<bool> = got.iter().map(|b| b.valid).collect();
            let groups_read: Vec<bool> = got.iter().map(|b| b.stored.contains(&1)).collect();
            assert_eq!(valid, groups_read.iter().map(|g| !g).collect::<Vec<_>>());
            assert!(got.iter().all(|b| b.values.is_empty()));
        }
        let name = b"data.npy";
        let at = bytes.windows(name.len()).rposition(|w| w == name).unwrap() - 30;
        bytes[at] ^= 1;
        for parts in [1, 3] {
            let pieces: Vec<CrcPiece> = read(&bytes, parts, &|_| true)
                .iter()
                .map(|b| b.crc)
                .collect();
            assert!(!crc_pieces_match(&pieces), "{parts} parts");
        }
    }

    #[test]
    fn what_does_not_read_cleanly_is_left_to_the_general_path() {
        let groups = vec![vec![1], vec![0, 2], vec![1, 7]];
        let bytes = compressed("csr", (3, 3), &groups, false);
        let got = blocks(&bytes, 3);
        assert!(got[0].is_some() && got[1].is_some());
        assert!(got[2].is_none(), "an index outside the shape");
        let coo = compressed("coo", (3, 3), &groups, false);
        assert!(blocks(&coo, 1)[0].is_none(), "a COO archive");
        assert!(
            parse_pattern_block(b"PK", Path::new("m.npz"), (0, 1), &|g| 0..g.n, None).is_none()
        );
    }
}
