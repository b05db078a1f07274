//! GetMagnusParams (paper section III-D): the heavy-row threshold τ and the chunk plan of the
//! hierarchical multisplit, from the column count of C and the shared memory one block may use.
//! Pure integer arithmetic, so it is tested without a GPU.

/// Byte sizes of the data the kernels keep in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeModel {
    /// Bytes of a column index of C (u32).
    pub col: u64,
    /// Bytes of a value of C (4 for f32, 8 for f64).
    pub val: u64,
    /// Bits of the dense accumulator's occupancy flag per column.
    pub flag_bits: u64,
    /// Bytes of a histogram counter in the multisplit (u32).
    pub histo: u64,
    /// Bytes of an offset into Ĉ (u64: Ĉ passes 2^32 entries on large products).
    pub row_ptr: u64,
    /// Hash-table slots per stored entry (the paper's 1/α with α = 1/2: tables at most half full).
    pub load_factor: u64,
}

impl SizeModel {
    /// The sizes for values of `val_bytes` bytes.
    pub fn for_values(val_bytes: u64) -> Self {
        SizeModel {
            col: 4,
            val: val_bytes,
            flag_bits: 1,
            histo: 4,
            row_ptr: 8,
            load_factor: 2,
        }
    }
}

/// The work-group shape of the multisplit kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupShape {
    /// Warps per block, each with its own histogram (the paper's n_subGroups).
    pub warps: u64,
    /// Rows of Ĉ one block may span (the paper's n_groupRows).
    pub rows: u64,
}

impl Default for GroupShape {
    fn default() -> Self {
        GroupShape { warps: 32, rows: 2 }
    }
}

/// The runtime parameters of gMAGNUS for one product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MagnusParams {
    /// Rows (and chunks) with more intermediate products than this are heavy: a shared-memory
    /// hash table for τ entries at the load factor fills the shared memory.
    pub tau: u64,
    /// Columns a dense shared-memory accumulator can cover (values plus flag bits).
    pub dense_columns: u64,
    /// Chunks each heavy row is split into in all (a power of two).
    pub chunks_required: u64,
    /// Most chunks one multisplit level can make (a power of two).
    pub chunks_max: u64,
    /// Chunks per row at each level; their product is `chunks_required`. Empty when one chunk
    /// (the whole row) already fits a dense accumulator.
    pub levels: Vec<u64>,
    /// Columns per final chunk: the largest power of two the dense accumulator covers (or C.m
    /// rounded up to a power of two, if smaller), so a column maps to its chunk by a shift.
    pub chunk_width: u64,
    /// Elements per block of the multisplit kernel that stay in shared memory (n_minGroupElems).
    pub multisplit_group_elems: u64,
    /// Elements per block of the outer-product kernel (shared memory / offset size).
    pub outer_group_elems: u64,
}

/// Computes the parameters for a product whose C has `c_cols` columns, given `shared_bytes` of
/// shared memory per block (read off the device), the sizes in use and the multisplit block shape.
///
/// Two choices differ from the paper's text, both so that a final chunk always fits: the chunk
/// width is a power of two no wider than the dense accumulator and the chunk count is rounded
/// *up* to a power of two (the paper rounds down, which can leave chunks wider than the dense
/// accumulator), and the last level takes `required / max^(levels-1)` chunks (the product of the
/// levels must equal the chunks required).
pub fn magnus_params(c_cols: u64, shared_bytes: u64, s: SizeModel, g: GroupShape) -> MagnusParams {
    let entry = s.col + s.val;
    let tau = (shared_bytes / (s.load_factor * entry)).max(1);
    let dense_columns = (shared_bytes * 8 / (s.val * 8 + s.flag_bits)).max(1);
    // Power-of-two chunk widths map a column to its chunk by a shift; the widest one that fits
    // the dense accumulator gives the fewest chunks.
    let chunk_width = prev_power_of_two(dense_columns).min(c_cols.max(1).next_power_of_two());
    let chunks_required = c_cols.div_ceil(chunk_width).max(1).next_power_of_two();
    let multisplit_group_elems = shared_bytes / (2 * entry);
    let histo_room = shared_bytes
        .saturating_sub(multisplit_group_elems * entry)
        .saturating_sub(s.histo);
    let per_chunk = g.rows * (g.warps * s.histo + s.row_ptr);
    let chunks_max = prev_power_of_two((histo_room / per_chunk).max(2));
    let levels = chunk_levels(chunks_required, chunks_max);
    MagnusParams {
        tau,
        dense_columns,
        chunks_required,
        chunks_max,
        levels,
        chunk_width,
        multisplit_group_elems,
        outer_group_elems: shared_bytes / s.row_ptr,
    }
}

/// Splits `required` chunks (a power of two) into levels of at most `max` chunks (a power of
/// two): as many full levels as needed, the remainder last.
pub(crate) fn chunk_levels(required: u64, max: u64) -> Vec<u64> {
    let mut levels = Vec::new();
    let mut left = required;
    while left > 1 {
        let here = left.min(max);
        levels.push(here);
        left /= here;
    }
    levels
}

fn prev_power_of_two(x: u64) -> u64 {
    1 << (63 - x.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's H200 column of its runtime-parameter table (R-MAT A4·B8, scales 15-20)
    /// comes out of a 48 KiB block with f32 values.
    #[test]
    fn reproduces_the_papers_h200_chunk_plan() {
        let expect: [(u32, &[u64]); 6] = [
            (15, &[4]),
            (16, &[8]),
            (17, &[16]),
            (18, &[32]),
            (19, &[64]),
            (20, &[64, 2]),
        ];
        for (scale, levels) in expect {
            let p = magnus_params(
                1 << scale,
                48 * 1024,
                SizeModel::for_values(4),
                GroupShape::default(),
            );
            assert_eq!(p.levels, levels, "scale {scale}");
            assert_eq!(p.chunks_max, 64);
            assert!(p.chunk_width <= p.dense_columns);
        }
    }

    #[test]
    fn chunks_always_fit_and_levels_multiply_out() {
        for shared in [16 * 1024, 48 * 1024, 100 * 1024, 227 * 1024] {
            for val in [4, 8] {
                for cols in [
                    1u64,
                    2,
                    1000,
                    4097,
                    1 << 20,
                    3_000_000_000,
                    u32::MAX as u64 + 1,
                ] {
                    let p = magnus_params(
                        cols,
                        shared,
                        SizeModel::for_values(val),
                        GroupShape::default(),
                    );
                    assert!(
                        p.chunk_width <= p.dense_columns,
                        "{shared} {val} {cols}: {p:?}"
                    );
                    assert!(p.chunk_width * p.chunks_required >= cols);
                    assert_eq!(p.levels.iter().product::<u64>(), p.chunks_required);
                    assert!(p
                        .levels
                        .iter()
                        .all(|&l| l <= p.chunks_max && l.is_power_of_two()));
                    assert!(p.tau >= 1);
                }
            }
        }
    }

    #[test]
    fn small_column_ranges_need_no_split() {
        let p = magnus_params(
            1000,
            48 * 1024,
            SizeModel::for_values(8),
            GroupShape::default(),
        );
        assert!(p.levels.is_empty());
        assert_eq!(p.chunks_required, 1);
        assert_eq!(p.tau, 48 * 1024 / (2 * 12));
    }
}
