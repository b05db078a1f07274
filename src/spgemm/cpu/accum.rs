//! The per-thread accumulators of the CPU engine.
//!
//! Every accumulator sums an entry as `0 + p₁ + p₂ + …` in the order the products are fed, so all
//! of them give bitwise-identical values. Each is left empty (all zero) after a row, so it can be
//! reused for the next row without clearing.

use crate::csr::CsrRef;
use crate::scalar::Scalar;
use std::mem::MaybeUninit;

/// Entries of `A` ahead of the current one whose row of `B` is prefetched.
const AHEAD: usize = 4;

/// Hints the processor to bring the line holding `p` into cache. Never faults.
#[inline(always)]
pub(crate) fn prefetch<E>(p: *const E) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Hints the processor to bring every line of `s[start..end]` into cache: for a row of `B`
/// read soon and whole, whose later lines would otherwise arrive one stall at a time.
#[inline(always)]
pub(crate) fn prefetch_all<E>(s: &[E], start: usize, end: usize) {
    let step = (64 / std::mem::size_of::<E>()).max(1);
    let p = s.as_ptr();
    let mut q = start;
    while q < end {
        prefetch(p.wrapping_add(q));
        q += step;
    }
    // `start` need not begin a line, so the stride can step past the last one.
    if end > start {
        prefetch(p.wrapping_add(end - 1));
    }
}

/// The intermediate products of one row of `C = A·B`: row `i` of `A` is entries `s..e` of
/// `A`'s arrays. Walking them prefetches the rows of `B` that the next entries of `A` (in this
/// row or the rows after it) will read, since those reads are random and would stall.
#[derive(Clone, Copy)]
pub(crate) struct RowProduct<'a, T> {
    a: CsrRef<'a, T>,
    b: CsrRef<'a, T>,
    s: usize,
    e: usize,
    /// Prefetch the rows of `B` ahead whole, not only their first lines.
    whole_rows: bool,
}

impl<'a, T: Scalar> RowProduct<'a, T> {
    /// Row `i` of `A·B`.
    #[inline]
    pub(crate) fn new(a: CsrRef<'a, T>, b: CsrRef<'a, T>, i: usize) -> Self {
        RowProduct {
            a,
            b,
            s: a.row_ptr()[i] as usize,
            e: a.row_ptr()[i + 1] as usize,
            whole_rows: false,
        }
    }

    /// Row `i` of `A·B`, prefetching each row of `B` ahead whole: for rows of `B` long enough
    /// (hundreds of entries) that their later lines would stall the loop.
    #[inline]
    pub(crate) fn prefetching_whole_rows(a: CsrRef<'a, T>, b: CsrRef<'a, T>, i: usize) -> Self {
        RowProduct {
            whole_rows: true,
            ..Self::new(a, b, i)
        }
    }

    #[inline(always)]
    fn prefetch_ahead(&self, at: usize) {
        let (ac, bp) = (self.a.col_idx(), self.b.row_ptr());
        if let Some(&k) = ac.get(at + 2 * AHEAD) {
            prefetch(bp.as_ptr().wrapping_add(k as usize));
        }
        if let Some(&k) = ac.get(at + AHEAD) {
            let s = bp[k as usize] as usize;
            if self.whole_rows {
                let e = bp[k as usize + 1] as usize;
                prefetch_all(self.b.col_idx(), s, e);
                prefetch_all(self.b.values(), s, e);
            } else {
                prefetch(self.b.col_idx().as_ptr().wrapping_add(s));
                prefetch(self.b.values().as_ptr().wrapping_add(s));
            }
        }
    }

    /// Calls `f` with the column of every product, in order.
    #[inline(always)]
    pub(crate) fn for_each_col(&self, mut f: impl FnMut(u32)) {
        let (bp, bc) = (self.b.row_ptr(), self.b.col_idx());
        for (at, &k) in (self.s..).zip(&self.a.col_idx()[self.s..self.e]) {
            self.prefetch_ahead(at);
            let k = k as usize;
            for &c in &bc[bp[k] as usize..bp[k + 1] as usize] {
                f(c);
            }
        }
    }

    /// Calls `f` with the column and value of every product, in order.
    #[inline(always)]
    pub(crate) fn for_each_product(&self, mut f: impl FnMut(u32, T)) {
        self.for_each_factors(T::ONE, |c, a, b| f(c, a * b))
    }

    /// Calls `f` with the column and the factors `a·scale` and `b` of every product `a·b`, in
    /// order (the caller makes the product, in `T` or wider).
    #[inline(always)]
    pub(crate) fn for_each_factors(&self, scale: T, mut f: impl FnMut(u32, T, T)) {
        let (ac, av) = (
            &self.a.col_idx()[self.s..self.e],
            &self.a.values()[self.s..self.e],
        );
        let (bp, bc, bv) = (self.b.row_ptr(), self.b.col_idx(), self.b.values());
        for (at, (&k, &a)) in (self.s..).zip(ac.iter().zip(av)) {
            self.prefetch_ahead(at);
            let k = k as usize;
            let a = a * scale;
            let (s, e) = (bp[k] as usize, bp[k + 1] as usize);
            for (&c, &v) in bc[s..e].iter().zip(&bv[s..e]) {
                f(c, a, v);
            }
        }
    }
}

/// A dense accumulator over a column window of `width` columns: a value per column, a mark byte
/// per column, and a flag byte per block of 64 columns. Inserting is an add and two plain byte
/// stores: no branch, and no read-modify-write that later products would wait on (a bitmap
/// `|=` chains products that hit the same word). Draining visits the flagged blocks only, 8 flags
/// at a time, turns each block's 64 marks into a bit set (SSE2 compares, or multiplications
/// elsewhere), and walks it in column order, so the row comes out sorted without a sort.
#[derive(Default)]
pub(crate) struct Dense<T> {
    vals: Vec<T>,
    /// One byte per column, 1 when touched; a multiple of 512 long.
    marks: Vec<u8>,
    /// One byte per block of 64 columns, 1 when the block may hold a mark; a multiple of 8 long.
    flags: Vec<u8>,
    /// Groups of 8 flags in use for the current width.
    groups: usize,
    /// The window rounded up to a power of two, minus one: columns are masked with it, which keeps
    /// every index in bounds without a check per product.
    mask: usize,
}

/// Adds `p` at column `c & mask` and marks it.
///
/// # Safety
/// `vals` and `marks` must be longer than `mask`, and `flags` longer than `mask >> 6`.
#[inline(always)]
unsafe fn put<T: Scalar>(
    vals: &mut [T],
    marks: &mut [u8],
    flags: &mut [u8],
    mask: usize,
    c: u32,
    p: T,
) {
    let j = c as usize & mask;
    *vals.get_unchecked_mut(j) += p;
    *marks.get_unchecked_mut(j) = 1;
    *flags.get_unchecked_mut(j >> 6) = 1;
}

/// Marks column `c & mask`.
///
/// # Safety
/// `marks` must be longer than `mask`, and `flags` longer than `mask >> 6`.
#[inline(always)]
unsafe fn mark(marks: &mut [u8], flags: &mut [u8], mask: usize, c: u32) {
    let j = c as usize & mask;
    *marks.get_unchecked_mut(j) = 1;
    *flags.get_unchecked_mut(j >> 6) = 1;
}

/// The 8 bytes at `b[at..at + 8]` as a little-endian word.
#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Bit `i` of the result is set when byte `i` of the block `m` (64 bytes) is nonzero.
#[inline(always)]
fn block_bits(m: &[u8]) -> u64 {
    let m = &m[..64];
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64, and the four 16-byte loads stay within the 64 bytes of `m`.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{__m128i, _mm_setzero_si128};
        use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8};
        let p = m.as_ptr() as *const __m128i;
        let z = _mm_setzero_si128();
        let zero_bytes = |q: usize| _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(q)), z));
        let (a, b) = (zero_bytes(0) as u16 as u64, zero_bytes(1) as u16 as u64);
        let (c, d) = (zero_bytes(2) as u16 as u64, zero_bytes(3) as u16 as u64);
        !(a | (b << 16) | (c << 32) | (d << 48))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // Bytes are 0 or 1: one multiplication gathers 8 of them into a byte.
        let mut bits = 0u64;
        for q in 0..8 {
            bits |= (word(m, 8 * q).wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * q);
        }
        bits
    }
}

/// The number of 1 bytes of `x`, for `x` whose bytes are all 0 or 1.
#[inline(always)]
fn count_bytes(x: u64) -> u64 {
    x.wrapping_mul(0x0101_0101_0101_0101) >> 56
}

impl<T: Scalar> Dense<T> {
    /// Prepares for a window of `width` columns; `values` is false for counting only.
    pub(crate) fn begin(&mut self, width: usize, values: bool) {
        let width = width.next_power_of_two();
        let groups = width.div_ceil(512);
        if self.flags.len() < groups * 8 {
            self.flags.resize(groups * 8, 0);
            self.marks.resize(groups * 512, 0);
        }
        if values && self.vals.len() < width {
            self.vals.resize(width, T::ZERO);
        }
        self.groups = groups;
        self.mask = width - 1;
    }

    /// The arrays, checked long enough for [`put`] and [`mark`] with `self.mask`.
    #[inline(always)]
    fn parts(&mut self, values: bool) -> (&mut [T], &mut [u8], &mut [u8], usize) {
        let m = self.mask;
        assert!(self.marks.len() > m && self.flags.len() > m >> 6);
        assert!(!values || self.vals.len() > m);
        (&mut self.vals, &mut self.marks, &mut self.flags, m)
    }

    /// Marks the columns of the products of a row.
    #[inline]
    pub(crate) fn mark_product(&mut self, row: RowProduct<T>) {
        let (_, marks, flags, m) = self.parts(false);
        // SAFETY: `parts` checked the lengths against `m`.
        row.for_each_col(|c| unsafe { mark(marks, flags, m, c) });
    }

    /// Marks columns `cols`.
    #[inline]
    pub(crate) fn mark_cols(&mut self, cols: &[u32]) {
        let (_, marks, flags, m) = self.parts(false);
        for &c in cols {
            // SAFETY: `parts` checked the lengths against `m`.
            unsafe { mark(marks, flags, m, c) }
        }
    }

    /// Adds the products of a row.
    #[inline]
    pub(crate) fn add_product(&mut self, row: RowProduct<T>) {
        let (vals, marks, flags, m) = self.parts(true);
        // SAFETY: `parts` checked the lengths against `m`.
        row.for_each_product(|c, p| unsafe { put(vals, marks, flags, m, c, p) });
    }

    /// Adds `vs[e]` to column `cols[e]` for every `e`.
    #[inline]
    pub(crate) fn add_cols(&mut self, cols: &[u32], vs: &[T]) {
        let (vals, marks, flags, m) = self.parts(true);
        for (&c, &v) in cols.iter().zip(vs) {
            // SAFETY: `parts` checked the lengths against `m`.
            unsafe { put(vals, marks, flags, m, c, v) }
        }
    }

    /// Calls `f` with every flagged block of 64 columns, in order, after clearing its flag.
    #[inline(always)]
    fn for_each_block(&mut self, mut f: impl FnMut(&mut [u8], usize)) {
        let (flags, marks) = (&mut self.flags[..], &mut self.marks[..]);
        for g in 0..self.groups {
            let mut s = word(flags, 8 * g);
            if s == 0 {
                continue;
            }
            flags[8 * g..8 * g + 8].fill(0);
            while s != 0 {
                let q = (s.trailing_zeros() / 8) as usize;
                s &= !(0xFFu64 << (8 * q));
                let blk = 8 * g + q;
                f(&mut marks[64 * blk..64 * blk + 64], 64 * blk);
            }
        }
    }

    /// The number of columns marked; clears the marks.
    pub(crate) fn count_and_clear(&mut self) -> usize {
        let mut n = 0u64;
        self.for_each_block(|m, _| {
            for q in 0..8 {
                n += count_bytes(word(m, 8 * q));
            }
            m.fill(0);
        });
        n as usize
    }

    /// Writes the touched columns (plus `offset`) and their values in column order, starting at
    /// `cols[0]`/`vals[0]`; returns how many. Clears the accumulator.
    pub(crate) fn drain(
        &mut self,
        offset: usize,
        cols: &mut [MaybeUninit<u32>],
        vals: &mut [MaybeUninit<T>],
    ) -> usize {
        let mut o = 0usize;
        let mut acc = std::mem::take(&mut self.vals);
        self.for_each_block(|m, base| {
            let mut bits = block_bits(m);
            m.fill(0);
            if o + 64 <= cols.len().min(vals.len()) && base + 64 <= acc.len() {
                // A block has at most 64 entries: one check covers them all.
                while bits != 0 {
                    let j = base + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    // SAFETY: o < o_start + 64 <= the output lengths, j < base + 64 <= acc.len().
                    unsafe {
                        cols.get_unchecked_mut(o).write((offset + j) as u32);
                        vals.get_unchecked_mut(o).write(*acc.get_unchecked(j));
                        *acc.get_unchecked_mut(j) = T::ZERO;
                    }
                    o += 1;
                }
            } else {
                while bits != 0 {
                    let j = base + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    cols[o].write((offset + j) as u32);
                    vals[o].write(acc[j]);
                    acc[j] = T::ZERO;
                    o += 1;
                }
            }
        });
        self.vals = acc;
        o
    }
}

const EMPTY: u64 = u64::MAX;

/// An open-addressing hash accumulator (linear probing, multiplicative hashing), sized per row to
/// at least twice the row's product count; the touched slots are listed, so clearing and draining
/// cost the row's entries only. Drained entries are sorted by column.
#[derive(Default)]
pub(crate) struct Hash<T> {
    keys: Vec<u64>,
    vals: Vec<T>,
    used: Vec<u32>,
    pairs: Vec<(u32, T)>,
    shift: u32,
    mask: usize,
}

impl<T: Scalar> Hash<T> {
    /// Prepares for a row with `products` products over `ncols` columns.
    pub(crate) fn begin(&mut self, products: u64, ncols: usize, values: bool) {
        let distinct = products.min(ncols as u64).max(8);
        let size = (2 * distinct).next_power_of_two() as usize;
        if self.keys.len() < size {
            self.keys.resize(size, EMPTY);
        }
        if values && self.vals.len() < size {
            self.vals.resize(size, T::ZERO);
        }
        self.shift = 64 - size.trailing_zeros();
        self.mask = size - 1;
        self.used.clear();
    }

    /// Counts the distinct columns of a row's products.
    #[inline]
    pub(crate) fn count_product(&mut self, row: RowProduct<T>) -> usize {
        let (keys, used) = (&mut self.keys[..], &mut self.used);
        let (shift, mask) = (self.shift, self.mask);
        row.for_each_col(|c| {
            let key = c as u64;
            let mut s = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize;
            loop {
                let k = keys[s];
                if k == key {
                    break;
                }
                if k == EMPTY {
                    keys[s] = key;
                    used.push(s as u32);
                    break;
                }
                s = (s + 1) & mask;
            }
        });
        for &s in used.iter() {
            keys[s as usize] = EMPTY;
        }
        let n = used.len();
        used.clear();
        n
    }

    /// Sums a row's products.
    #[inline]
    pub(crate) fn add_product(&mut self, row: RowProduct<T>) {
        let (keys, vals, used) = (&mut self.keys[..], &mut self.vals[..], &mut self.used);
        let (shift, mask) = (self.shift, self.mask);
        row.for_each_product(|c, p| {
            let key = c as u64;
            let mut s = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize;
            loop {
                let k = keys[s];
                if k == key {
                    vals[s] += p;
                    break;
                }
                if k == EMPTY {
                    keys[s] = key;
                    vals[s] = T::ZERO + p;
                    used.push(s as u32);
                    break;
                }
                s = (s + 1) & mask;
            }
        });
    }

    /// Writes the entries sorted by column; returns how many. Clears the table.
    pub(crate) fn drain(
        &mut self,
        cols: &mut [MaybeUninit<u32>],
        vals: &mut [MaybeUninit<T>],
    ) -> usize {
        self.pairs.clear();
        for &s in &self.used {
            let s = s as usize;
            self.pairs.push((self.keys[s] as u32, self.vals[s]));
            self.keys[s] = EMPTY;
        }
        self.used.clear();
        self.pairs.sort_unstable_by_key(|p| p.0);
        for (o, &(c, v)) in self.pairs.iter().enumerate() {
            cols[o].write(c);
            vals[o].write(v);
        }
        self.pairs.len()
    }
}

/// MAGNUS's chunking on the CPU: a row's products are first bucketed by column chunk (a stable
/// counting sort, so each column still sees its products in order), then each chunk is summed in a
/// [`Dense`] accumulator one chunk wide, which stays in cache however many columns `C` has.
#[derive(Default)]
pub(crate) struct Chunked<T> {
    /// Start of each chunk's bucket, then (after scattering) its end.
    starts: Vec<usize>,
    cols: Vec<u32>,
    vals: Vec<T>,
    pub(crate) dense: Dense<T>,
}

impl<T: Scalar> Chunked<T> {
    /// Buckets the products of a row (`products` of them) by column chunk of `1 << shift`
    /// columns; with `values` false only columns are bucketed.
    pub(crate) fn bucket(
        &mut self,
        row: RowProduct<T>,
        products: usize,
        nchunks: usize,
        shift: u32,
        values: bool,
    ) {
        self.starts.clear();
        self.starts.resize(nchunks + 1, 0);
        let starts = &mut self.starts[..];
        row.for_each_col(|c| starts[(c >> shift) as usize + 1] += 1);
        for q in 0..nchunks {
            starts[q + 1] += starts[q];
        }
        if self.cols.len() < products {
            self.cols.resize(products, 0);
        }
        if values && self.vals.len() < products {
            self.vals.resize(products, T::ZERO);
        }
        // `starts[q]` serves as the cursor of chunk q, so after scattering it holds the chunk's
        // end, which is where chunk q + 1 starts.
        let lmask = (1u64 << shift).wrapping_sub(1) as u32;
        let cols = &mut self.cols[..];
        if values {
            let vals = &mut self.vals[..];
            row.for_each_product(|c, p| {
                let q = (c >> shift) as usize;
                let at = starts[q];
                starts[q] = at + 1;
                cols[at] = c & lmask;
                vals[at] = p;
            });
        } else {
            row.for_each_col(|c| {
                let q = (c >> shift) as usize;
                let at = starts[q];
                starts[q] = at + 1;
                cols[at] = c & lmask;
            });
        }
    }

    /// The range of bucketed products of chunk `q` (after [`Chunked::bucket`]).
    #[inline]
    fn range(&self, q: usize) -> (usize, usize) {
        let s = if q == 0 { 0 } else { self.starts[q - 1] };
        (s, self.starts[q])
    }

    /// Counts the distinct columns of the bucketed row.
    pub(crate) fn count(&mut self, nchunks: usize, width: usize) -> usize {
        let mut n = 0;
        self.dense.begin(width, false);
        for q in 0..nchunks {
            let (s, e) = self.range(q);
            if s == e {
                continue;
            }
            self.dense.mark_cols(&self.cols[s..e]);
            n += self.dense.count_and_clear();
        }
        n
    }

    /// Sums the bucketed row chunk by chunk and writes it in column order; returns how many
    /// entries were written.
    pub(crate) fn drain(
        &mut self,
        nchunks: usize,
        shift: u32,
        cols: &mut [MaybeUninit<u32>],
        vals: &mut [MaybeUninit<T>],
    ) -> usize {
        let width = 1usize << shift;
        self.dense.begin(width, true);
        let mut o = 0;
        for q in 0..nchunks {
            let (s, e) = self.range(q);
            if s == e {
                continue;
            }
            self.dense.add_cols(&self.cols[s..e], &self.vals[s..e]);
            o += self.dense.drain(q << shift, &mut cols[o..], &mut vals[o..]);
        }
        o
    }
}

/// The accumulator of masked rows: the mask row's columns are given slots (through a dense
/// column-to-slot array or a hash table), products outside the mask are dropped, and the entries
/// come out in the mask row's order, which is already sorted.
#[derive(Default)]
pub(crate) struct Masked<T> {
    /// Dense lookup: slot + 1 of each column, 0 when the column is not in the mask row.
    pos: Vec<u32>,
    /// Hash lookup: keys and slots.
    keys: Vec<u64>,
    slots: Vec<u32>,
    shift: u32,
    hmask: usize,
    dense: bool,
    vals: Vec<T>,
    hit: Vec<bool>,
}

impl<T: Scalar> Masked<T> {
    /// Prepares for a row masked by the sorted columns `mask_row`; `dense` picks the dense
    /// column-to-slot array (needs `ncols` words) over the hash table.
    pub(crate) fn begin(&mut self, mask_row: &[u32], ncols: usize, dense: bool) {
        let m = mask_row.len();
        self.dense = dense;
        if self.hit.len() < m {
            self.hit.resize(m, false);
            self.vals.resize(m, T::ZERO);
        }
        if dense {
            if self.pos.len() < ncols {
                self.pos.resize(ncols, 0);
            }
            for (s, &c) in mask_row.iter().enumerate() {
                self.pos[c as usize] = s as u32 + 1;
            }
        } else {
            let size = (2 * m.max(4)).next_power_of_two();
            if self.keys.len() < size {
                self.keys.resize(size, EMPTY);
                self.slots.resize(size, 0);
            }
            self.shift = 64 - size.trailing_zeros();
            self.hmask = size - 1;
            for (s, &c) in mask_row.iter().enumerate() {
                let key = c as u64;
                let mut h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
                while self.keys[h] != EMPTY {
                    h = (h + 1) & self.hmask;
                }
                self.keys[h] = key;
                self.slots[h] = s as u32;
            }
        }
    }

    #[inline(always)]
    fn lookup(&self, c: u32) -> Option<usize> {
        if self.dense {
            let p = self.pos[c as usize];
            if p == 0 {
                None
            } else {
                Some(p as usize - 1)
            }
        } else {
            let key = c as u64;
            let mut h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
            loop {
                let k = self.keys[h];
                if k == key {
                    return Some(self.slots[h] as usize);
                }
                if k == EMPTY {
                    return None;
                }
                h = (h + 1) & self.hmask;
            }
        }
    }

    /// Marks the mask columns a row's products hit.
    #[inline]
    pub(crate) fn mark_product(&mut self, row: RowProduct<T>) {
        row.for_each_col(|c| {
            if let Some(s) = self.lookup(c) {
                self.hit[s] = true;
            }
        });
    }

    /// Sums a row's products that fall in the mask.
    #[inline]
    pub(crate) fn add_product(&mut self, row: RowProduct<T>) {
        row.for_each_product(|c, p| {
            if let Some(s) = self.lookup(c) {
                self.vals[s] += p;
                self.hit[s] = true;
            }
        });
    }

    fn clear_lookup(&mut self, mask_row: &[u32]) {
        if self.dense {
            for &c in mask_row {
                self.pos[c as usize] = 0;
            }
        } else {
            for &c in mask_row {
                let key = c as u64;
                let mut h = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
                while self.keys[h] != key {
                    h = (h + 1) & self.hmask;
                }
                self.keys[h] = EMPTY;
            }
        }
    }

    /// The number of mask columns hit; clears the accumulator.
    pub(crate) fn count_and_clear(&mut self, mask_row: &[u32]) -> usize {
        self.clear_lookup(mask_row);
        let hit = &mut self.hit[..mask_row.len()];
        let n = hit.iter().filter(|&&h| h).count();
        hit.fill(false);
        n
    }

    /// Writes the mask columns hit and their values in order; returns how many. Clears.
    pub(crate) fn drain(
        &mut self,
        mask_row: &[u32],
        cols: &mut [MaybeUninit<u32>],
        vals: &mut [MaybeUninit<T>],
    ) -> usize {
        self.clear_lookup(mask_row);
        let mut o = 0;
        for (s, &c) in mask_row.iter().enumerate() {
            if self.hit[s] {
                cols[o].write(c);
                vals[o].write(self.vals[s]);
                o += 1;
                self.hit[s] = false;
            }
            self.vals[s] = T::ZERO;
        }
        o
    }
}
