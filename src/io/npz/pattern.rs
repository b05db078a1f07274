//! The pattern of a CSR or CSC archive without its diagonal, for a caller that needs neither the
//! values nor the loops (a simple graph's adjacency): the indices read in parts of whole rows,
//! twice, each part in cache between its two uses. The first pass makes each part's CRC and
//! counts its diagonal entries; the parts' CRCs, combined in order, check the member, and the
//! counts say where each part's entries go. The second decodes each part into its place, checks
//! every index against the shape, skips the diagonal, notes whether its rows strictly increase
//! and rewrites the offsets of its rows. The output is written once, and the values are never
//! read.

use super::npy::Array;
use super::MemberCrc;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Entries per part: a part's indices stay in cache from its CRC to its decoding.
const PART: u64 = 1 << 16;

/// A compressed matrix's pattern without its diagonal.
pub(super) struct OffDiagonal {
    /// Offsets of the groups (rows, or columns of a CSC archive) into `cols`.
    pub ptr: Vec<u64>,
    /// The entries' minor indices, group after group, in stored order.
    pub cols: Vec<u32>,
    /// Every group's indices strictly increase.
    pub sorted: bool,
}

/// The pattern of the compressed matrix whose checked offsets are `ptr` and whose `indices` lie
/// in a member whose CRC `crc` (when given) is checked in the same pass, every index checked to
/// be below `minor`, the entries `(i, i)` left out.
pub(super) fn off_diagonal(
    ptr: Vec<u64>,
    indices: &Array<'_>,
    crc: Option<&MemberCrc<'_>>,
    minor: usize,
) -> Result<OffDiagonal, String> {
    let parts = parts(&ptr);
    let scanned = scan(&ptr, &parts, 0, indices, crc.is_some());
    if let Some(c) = crc {
        c.check(indices, scanned.iter().map(|(h, _)| h))?;
    }
    decode(ptr, &parts, &scanned, 0, indices, minor)
}

/// The pattern of the groups `first_row..` of a compressed matrix, one block of a larger one:
/// `ptr` holds their checked offsets into the whole `indices` (starting where the block's
/// entries start), every index is checked to be below `minor` and the entries `(i, i)` (global
/// `i`) are left out. The result's offsets start from 0. With `crc`, the CRC of the block's
/// bytes of `indices` too, for the caller to combine with the other blocks'.
pub(super) fn off_diagonal_block(
    ptr: Vec<u64>,
    first_row: usize,
    indices: &Array<'_>,
    minor: usize,
    crc: bool,
) -> Result<(OffDiagonal, Option<crc32fast::Hasher>), String> {
    let parts = parts(&ptr);
    let scanned = scan(&ptr, &parts, first_row, indices, crc);
    let piece = crc.then(|| {
        scanned
            .iter()
            .fold(crc32fast::Hasher::new(), |mut all, (c, _)| {
                all.combine(c);
                all
            })
    });
    let mut read = decode(ptr, &parts, &scanned, first_row, indices, minor)?;
    read.ptr[0] = 0;
    Ok((read, piece))
}

/// First pass: each part's CRC (when asked) and diagonal entries, the rows of `ptr` being the
/// global rows from `first_row`.
fn scan(
    ptr: &[u64],
    parts: &[usize],
    first_row: usize,
    indices: &Array<'_>,
    crc: bool,
) -> Vec<(crc32fast::Hasher, u64)> {
    let width = indices.dtype.size();
    parts
        .par_windows(2)
        .map(|w| {
            let (entries, rows) = ((ptr[w[0]], ptr[w[1]]), w[0]..w[1]);
            let mut part_crc = crc32fast::Hasher::new();
            if crc {
                part_crc
                    .update(&indices.data[entries.0 as usize * width..entries.1 as usize * width]);
            }
            let mut diagonal = 0u64;
            for i in rows {
                let g = (first_row + i) as i64;
                let _ = indices.for_each_int(ptr[i] as usize..ptr[i + 1] as usize, |_, j| {
                    diagonal += u64::from(j == g);
                    Ok::<(), ()>(())
                });
            }
            (part_crc, diagonal)
        })
        .collect()
}

/// Second pass: each part decoded into its place, the offsets rewritten (all but the first).
fn decode(
    mut ptr: Vec<u64>,
    parts: &[usize],
    scanned: &[(crc32fast::Hasher, u64)],
    first_row: usize,
    indices: &Array<'_>,
    minor: usize,
) -> Result<OffDiagonal, String> {
    let kept: Vec<usize> = parts
        .windows(2)
        .zip(scanned)
        .map(|(w, s)| (ptr[w[1]] - ptr[w[0]] - s.1) as usize)
        .collect();
    let total: usize = kept.iter().sum();
    let mut cols: Vec<u32> = Vec::new();
    cols.try_reserve_exact(total)
        .map_err(|_| format!("{total} indices do not fit in memory"))?;
    // Ordinary pages: advised for huge pages, the first writes stalled on compacting memory
    // whenever earlier work had left it fragmented.
    let outs = crate::mem::split_by_lengths(&mut cols.spare_capacity_mut()[..total], &kept);
    let firsts: Vec<u64> = parts.iter().map(|&r| ptr[r]).collect();
    let ends = {
        let lens: Vec<usize> = parts.windows(2).map(|w| w[1] - w[0]).collect();
        crate::mem::split_by_lengths(&mut ptr[1..], &lens)
    };
    let mut base = 0u64;
    let tasks: Vec<_> = outs
        .into_iter()
        .zip(ends)
        .enumerate()
        .map(|(p, (out, ends))| {
            let task = (first_row + parts[p], firsts[p], base, out, ends);
            base += kept[p] as u64;
            task
        })
        .collect();
    let sorted = tasks
        .into_par_iter()
        .map(|(first_row, first, base, out, ends)| {
            decode_part(indices, (first_row, first), base, out, ends, minor)
        })
        .collect::<Vec<_>>()
        .into_iter()
        .collect::<Result<Vec<bool>, String>>()?;
    // SAFETY: each part wrote its whole slice (`decode_part` checks its count), and the slices
    // cover the first `total` positions.
    unsafe { cols.set_len(total) };
    Ok(OffDiagonal {
        ptr,
        cols,
        sorted: sorted.into_iter().all(|s| s),
    })
}

/// The first row of each part, then the row count: rows cut where the entries (counted from the
/// first row's) pass multiples of [`PART`] (a part of one long row may hold more).
pub(super) fn parts(ptr: &[u64]) -> Vec<usize> {
    let n = ptr.len() - 1;
    let (base, entries) = (ptr[0], ptr[n] - ptr[0]);
    let mut bounds: Vec<usize> = (0..entries.div_ceil(PART).max(1))
        .map(|k| ptr.partition_point(|&p| p < base + k * PART).min(n))
        .collect();
    bounds.push(n);
    bounds.dedup();
    bounds
}

/// Decodes the rows from `first_row` (whose entries start at `first`) into `out`: `ends` holds
/// the rows' stored ends and is rewritten with their ends in the output (which starts at
/// `base`). Whether every row strictly increases, or the first index (in stored order) outside
/// `0..minor`.
fn decode_part(
    indices: &Array<'_>,
    (first_row, first): (usize, u64),
    base: u64,
    out: &mut [MaybeUninit<u32>],
    ends: &mut [u64],
    minor: usize,
) -> Result<bool, String> {
    // The new memory's pages mapped in one call rather than a fault each.
    crate::mem::prefault(out);
    let mut at = 0usize;
    let mut start = first as usize;
    let mut sorted = true;
    for (r, end) in ends.iter_mut().enumerate() {
        let i = (first_row + r) as i64;
        let mut last = -1i64;
        let stop = *end as usize;
        indices.for_each_int(start..stop, |k, j| {
            if j < 0 || j >= minor as i64 {
                return Err(super::outside(indices, k, j, minor));
            }
            if j != i {
                // More entries off the diagonal than the first pass counted: the bytes changed
                // between the passes.
                let slot = out.get_mut(at).ok_or_else(changed)?;
                slot.write(j as u32);
                at += 1;
                sorted &= j > last;
                last = j;
            }
            Ok(())
        })?;
        *end = base + at as u64;
        start = stop;
    }
    if at != out.len() {
        return Err(changed());
    }
    Ok(sorted)
}

fn changed() -> String {
    "array 'indices' changed while it was read".into()
}

#[cfg(test)]
mod tests {
    use super::super::npy::{header, Dtype};
    use super::super::zip;
    use super::super::{parse_grouped, parse_pattern, Grouped, Pattern};
    use proptest::prelude::*;
    use std::path::Path;

    /// A `.npy` array of `dtype` holding `v` (integers, or floats when `dtype` is one).
    fn npy(dtype: Dtype, v: &[f64]) -> Vec<u8> {
        let mut b = header(dtype, Some(v.len()));
        for &x in v {
            match dtype {
                Dtype::Float(8) => b.extend_from_slice(&x.to_le_bytes()),
                Dtype::Float(_) => b.extend_from_slice(&(x as f32).to_le_bytes()),
                _ => b.extend_from_slice(&(x as i64).to_le_bytes()[..dtype.size()]),
            }
        }
        b
    }

    /// A ZIP archive of the `.npy` members given.
    fn zipped(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut z = zip::Writer::new(Vec::new());
        for (name, bytes) in members {
            z.member(name, bytes.len() as u64, |o| o.write_all(bytes))
                .unwrap();
        }
        z.finish().unwrap()
    }

    /// The `format` member of `name`.
    fn format(name: &str) -> Vec<u8> {
        let mut b = header(Dtype::Bytes(3), None);
        b.extend_from_slice(name.as_bytes());
        b
    }

    /// A SciPy archive of a compressed matrix: `format` "csr" or "csc", the groups `groups`
    /// (each a list of minor indices) of a `shape` matrix, indices of `index` type, values `data`.
    fn archive(
        format_name: &str,
        shape: (usize, usize),
        groups: &[Vec<u32>],
        index: Dtype,
        data: &[f64],
    ) -> Vec<u8> {
        let mut ptr = vec![0f64];
        let mut idx = Vec::new();
        for g in groups {
            idx.extend(g.iter().map(|&c| c as f64));
            ptr.push(idx.len() as f64);
        }
        zipped(&[
            ("indices.npy", npy(index, &idx)),
            ("indptr.npy", npy(index, &ptr)),
            ("format.npy", format(format_name)),
            (
                "shape.npy",
                npy(Dtype::Int(8), &[shape.0 as f64, shape.1 as f64]),
            ),
            ("data.npy", npy(Dtype::Float(8), data)),
        ])
    }

    /// What `parse_pattern` must give: `parse_grouped`'s groups without their diagonal
    /// entries, and whether each then strictly increases.
    fn expected(bytes: &[u8]) -> (Vec<u64>, Vec<u32>, bool) {
        let Ok(Grouped::Stored(m)) = parse_grouped(bytes, Path::new("m.npz")) else {
            panic!("not grouped");
        };
        let e = &m.entries;
        let (mut ptr, mut cols, mut sorted) = (vec![0u64], Vec::new(), true);
        for g in 0..e.nrows {
            let row: Vec<u32> = e.cols[e.ptr[g] as usize..e.ptr[g + 1] as usize]
                .iter()
                .copied()
                .filter(|&c| c as usize != g)
                .collect();
            sorted &= row.windows(2).all(|w| w[0] < w[1]);
            cols.extend(row);
            ptr.push(cols.len() as u64);
        }
        (ptr, cols, sorted)
    }

    fn pattern(bytes: &[u8]) -> crate::error::Result<(Vec<u64>, Vec<u32>, bool, bool)> {
        match parse_pattern(bytes, Path::new("m.npz"))? {
            Pattern::Stored { matrix, sorted } => Ok((
                matrix.entries.ptr,
                matrix.entries.cols,
                sorted,
                matrix.transposed,
            )),
            Pattern::Edges(_) => panic!("a compressed archive read as edges"),
        }
    }

    /// Groups of a `major x minor` matrix from raw draws, sorted or not.
    fn groups_of(major: usize, minor: usize, raw: &[(u32, u32)], sorted: bool) -> Vec<Vec<u32>> {
        let mut groups = vec![Vec::new(); major];
        for &(g, c) in raw {
            groups[g as usize % major].push(c % minor as u32);
        }
        if sorted {
            for g in groups.iter_mut() {
                g.sort_unstable();
                g.dedup();
            }
        }
        groups
    }

    #[test]
    fn many_parts_give_the_groups_off_the_diagonal_and_their_crc_is_checked() {
        // Enough entries for several parts, with a long first row and loops on every row.
        let n = 3000;
        let mut rng = crate::generate::rng::SplitMix64::new(5);
        let mut raw: Vec<(u32, u32)> = (0..n as u32).map(|i| (i, i)).collect();
        raw.extend((0..4000).map(|c| (0, c % n as u32)));
        raw.extend((0..300_000).map(|_| {
            let r = rng.next_u64();
            ((r % n as u64) as u32, ((r >> 32) % n as u64) as u32)
        }));
        for sorted in [true, false] {
            for index in [Dtype::Int(4), Dtype::Int(8)] {
                let groups = groups_of(n, n, &raw, sorted);
                let len = groups.iter().map(Vec::len).sum::<usize>();
                let bytes = archive("csr", (n, n), &groups, index, &vec![2.5; len]);
                let (ptr, cols, got_sorted, transposed) = pattern(&bytes).unwrap();
                assert_eq!((ptr, cols, got_sorted), expected(&bytes));
                assert!(!transposed);
                assert_eq!(got_sorted, sorted);
                // A bit flipped in the last part of the indices fails the CRC.
                let mut bad = bytes.clone();
                let at = bad.windows(11).position(|w| w == b"indices.npy").unwrap() + 11;
                let elements = at + 10 + u16::from_le_bytes([bad[at + 8], bad[at + 9]]) as usize;
                bad[elements + len * index.size() - 3] ^= 4;
                let e = pattern(&bad).unwrap_err().to_string();
                assert!(e.contains("m.npz") && e.contains("CRC"), "{e}");
            }
        }
    }

    #[test]
    fn values_are_not_read_but_their_count_is_checked() {
        let groups = vec![vec![1], vec![0, 1]];
        // Values parse_grouped refuses (not finite) do not matter to the pattern.
        let bytes = archive("csr", (2, 2), &groups, Dtype::Int(4), &[f64::NAN, 1.0, 1.0]);
        assert!(parse_grouped(&bytes, Path::new("m.npz")).is_err());
        assert_eq!(
            pattern(&bytes).unwrap(),
            (vec![0, 1, 2], vec![1, 0], true, false)
        );
        let short = archive("csr", (2, 2), &groups, Dtype::Int(4), &[1.0, 1.0]);
        let e = pattern(&short).unwrap_err().to_string();
        assert!(e.contains("'data' has 2 values for 3 entries"), "{e}");
        // A COO archive: its entries, loops included, without values.
        let coo = zipped(&[
            ("row.npy", npy(Dtype::Int(4), &[0.0, 1.0, 1.0])),
            ("col.npy", npy(Dtype::Int(4), &[1.0, 0.0, 1.0])),
            ("format.npy", format("coo")),
            ("shape.npy", npy(Dtype::Int(8), &[2.0, 2.0])),
            ("data.npy", npy(Dtype::Float(8), &[1.0, f64::NAN, 1.0])),
        ]);
        assert!(super::super::parse(&coo, Path::new("m.npz")).is_err());
        let Ok(Pattern::Edges(l)) = parse_pattern(&coo, Path::new("m.npz")) else {
            panic!("a COO archive is its edges");
        };
        assert_eq!(l.edges.edges, [(0, 1), (1, 0), (1, 1)]);
        assert_eq!(l.edges.weights, None);
        let outside = archive("csc", (2, 2), &[vec![1], vec![2]], Dtype::Int(8), &[1.0; 2]);
        let e = pattern(&outside).unwrap_err().to_string();
        assert!(
            e.contains("'indices' holds 2 at position 1, outside 0..2"),
            "{e}"
        );
    }

    proptest! {
        #[test]
        fn the_pattern_is_the_grouped_entries_off_the_diagonal(
            major in 1usize..9,
            minor in 1usize..9,
            raw in proptest::collection::vec((0u32..9, 0u32..9), 0..40),
            sorted in any::<bool>(),
            csc in any::<bool>(),
            index in 0usize..4,
        ) {
            let index = [Dtype::Int(4), Dtype::Int(8), Dtype::Uint(2), Dtype::Uint(8)][index];
            let groups = groups_of(major, minor, &raw, sorted);
            let len = groups.iter().map(Vec::len).sum::<usize>();
            let (format, shape) = if csc { ("csc", (minor, major)) } else { ("csr", (major, minor)) };
            let bytes = archive(format, shape, &groups, index, &vec![1.0; len]);
            let (ptr, cols, got_sorted, transposed) = pattern(&bytes).unwrap();
            prop_assert_eq!((ptr, cols, got_sorted), expected(&bytes));
            prop_assert_eq!(transposed, csc);
        }
    }
}
