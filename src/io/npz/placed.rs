//! A CSR archive written in place. The file [`super::write`] streams is laid out by the shape
//! and the entry count alone, so the parts of its three large arrays can be written where they
//! belong by many threads (a file's page cache takes one `write` at a time, but many threads
//! filling a shared mapping of it), and by many ranks into one shared file; each part's CRC is
//! made as it is written and the parts' CRCs are combined in order. The headers, the small
//! members, the data descriptors and the directory ([`CsrLayout::frame`]) come last. The bytes
//! are [`super::write`]'s, whatever the parts and the threads.

use super::npy::{self, Dtype};
use super::zip::{self, Framed};
use super::CsrArray;
use crate::scalar::Scalar;
use crc32fast::Hasher;
use rayon::prelude::*;
use std::fs::File;

/// The members of a CSR archive, in the order [`super::write`] stores them.
const MEMBERS: [&str; 5] = [
    "indices.npy",
    "indptr.npy",
    "format.npy",
    "shape.npy",
    "data.npy",
];

/// Where each member lies in the archive of an `nrows x ncols` matrix of `nnz` entries.
#[derive(Clone, Debug)]
pub struct CsrLayout {
    /// Bytes of an index and an offset (4 where all fit `int32`, as SciPy chooses).
    width: usize,
    /// Bytes of a value.
    value_width: usize,
    /// Each member's size and the offset of its local header, in [`MEMBERS`]' order.
    members: [(u64, u64); 5],
    /// What each member's data starts with: its `.npy` header, and all of it for `format` and
    /// `shape`, and `indptr`'s first offset (0).
    prefixes: [Vec<u8>; 5],
    /// The archive's length.
    len: u64,
}

impl CsrArray {
    /// The array's place in [`MEMBERS`].
    fn member(self) -> usize {
        match self {
            CsrArray::Indices => 0,
            CsrArray::Indptr => 1,
            CsrArray::Data => 4,
        }
    }

    /// The array's place among the three (the order of [`CsrLayout::frame`]'s `parts`).
    fn part(self) -> usize {
        match self {
            CsrArray::Indices => 0,
            CsrArray::Indptr => 1,
            CsrArray::Data => 2,
        }
    }
}

impl CsrLayout {
    /// The layout of the archive of an `nrows x ncols` matrix of `nnz` entries of `T`.
    pub fn new<T: Scalar>(nrows: usize, ncols: usize, nnz: u64) -> Self {
        let width = super::index_width(nnz, ncols);
        let value_width = std::mem::size_of::<T>();
        let index = Dtype::Int(width);
        let header = |dtype: Dtype, len: u64| npy::header(dtype, Some(len as usize));
        let mut indptr = header(index, nrows as u64 + 1);
        indptr.extend_from_slice(&0u64.to_le_bytes()[..width]);
        let mut format = npy::header(Dtype::Bytes(3), None);
        format.extend_from_slice(b"csr");
        let mut shape = header(Dtype::Int(8), 2);
        shape.extend_from_slice(&(nrows as u64).to_le_bytes());
        shape.extend_from_slice(&(ncols as u64).to_le_bytes());
        let prefixes = [
            header(index, nnz),
            indptr,
            format,
            shape,
            header(Dtype::Float(value_width), nnz),
        ];
        // Each array's elements after its prefix.
        let elements = [
            nnz * width as u64,
            nrows as u64 * width as u64,
            0,
            0,
            nnz * value_width as u64,
        ];
        let mut members = [(0, 0); 5];
        let mut at = 0;
        for (k, name) in MEMBERS.iter().enumerate() {
            let size = prefixes[k].len() as u64 + elements[k];
            members[k] = (size, at);
            at = Framed::new(name, size, at).end();
        }
        let framed = MEMBERS
            .iter()
            .zip(&members)
            .map(|(name, &(size, offset))| (Framed::new(name, size, offset), 0))
            .collect::<Vec<_>>();
        let len = at + zip::directory(&framed, at).len() as u64;
        CsrLayout {
            width,
            value_width,
            members,
            prefixes,
            len,
        }
    }

    /// Bytes of an index and an offset.
    pub fn index_width(&self) -> usize {
        self.width
    }

    /// The members in the archive's order: each name, size (bytes of data), what its data
    /// starts with, and the array that follows that (`None`: the prefix is all of it).
    pub fn members(&self) -> impl Iterator<Item = (&'static str, u64, &[u8], Option<CsrArray>)> {
        let arrays = [CsrArray::Indices, CsrArray::Indptr, CsrArray::Data];
        (0..MEMBERS.len()).map(move |k| {
            let array = arrays.into_iter().find(|a| a.member() == k);
            (MEMBERS[k], self.members[k].0, &self.prefixes[k][..], array)
        })
    }

    /// The archive's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    fn framed(&self, k: usize) -> Framed<'static> {
        let (size, offset) = self.members[k];
        Framed::new(MEMBERS[k], size, offset)
    }

    /// The byte offset of element `i` of `array` (for `indptr`, of row `i`'s end).
    fn element_at(&self, array: CsrArray, i: u64) -> u64 {
        let k = array.member();
        let width = match array {
            CsrArray::Data => self.value_width,
            _ => self.width,
        } as u64;
        self.framed(k).data_at() + self.prefixes[k].len() as u64 + i * width
    }

    /// Everything of the archive outside the arrays' parts, as (offset, bytes): the local
    /// headers, the members' prefixes and the small members, the data descriptors and the
    /// directory. `parts` are the CRCs of [`CsrArray`]'s arrays' elements, each over the whole
    /// array (the parts combined in order); an array whose CRC covers another length than the
    /// layout's is an error (a part missing or written twice).
    pub fn frame(&self, parts: [&Hasher; 3]) -> std::io::Result<Vec<(u64, Vec<u8>)>> {
        let mut pieces = Vec::new();
        let mut crcs = [0u32; 5];
        for (k, (_, size, prefix, array)) in self.members().enumerate() {
            let framed = self.framed(k);
            let mut crc = Hasher::new();
            crc.update(prefix);
            if let Some(a) = array {
                crc.combine(parts[a.part()]);
            }
            if crc.total_len() != size {
                return Err(std::io::Error::other(format!(
                    "member {}: {} bytes written where {size} were announced",
                    MEMBERS[k],
                    crc.total_len()
                )));
            }
            crcs[k] = crc.finalize();
            pieces.push((self.members[k].1, framed.local()));
            pieces.push((framed.data_at(), prefix.to_vec()));
            pieces.push((framed.data_at() + size, framed.descriptor(crcs[k])));
        }
        let at = self.framed(MEMBERS.len() - 1).end();
        let framed: Vec<_> = (0..MEMBERS.len())
            .map(|k| (self.framed(k), crcs[k]))
            .collect();
        pieces.push((at, zip::directory(&framed, at)));
        Ok(pieces)
    }
}

/// Elements a thread writes (and maps, and sums into the CRC) at a time: its bytes stay in the
/// cache between the copy and the CRC.
const CHUNK: usize = 1 << 17;

/// An archive's file mapped for writing in place, `len` bytes long.
pub struct Placed {
    map: memmap2::MmapMut,
}

impl Placed {
    /// Maps `file` (open for reading and writing) for an archive of `len` bytes, sizing it
    /// first when `size` (one writer of a shared file sizes it, before the others map it).
    pub fn map(file: &File, len: u64, size: bool) -> std::io::Result<Placed> {
        if size {
            file.set_len(len)?;
        }
        if file.metadata()?.len() != len {
            return Err(std::io::Error::other(format!(
                "the output is {} bytes long where {len} were laid out",
                file.metadata()?.len()
            )));
        }
        // SAFETY: the file is this run's temporary output, which nothing else truncates while
        // it is mapped; the pages are mapped before they are written (`populate`), so that a
        // file system that cannot give them (full, over quota) is an error, not a signal.
        let map = unsafe { memmap2::MmapMut::map_mut(file)? };
        Ok(Placed { map })
    }

    /// The mapped bytes `at..at + len`; a span past the archive's end (a part that does not
    /// belong to it) is an error.
    fn span(&mut self, at: u64, len: usize) -> std::io::Result<&mut [u8]> {
        let end = self.map.len();
        usize::try_from(at)
            .ok()
            .and_then(|at| Some(at..at.checked_add(len)?))
            .filter(|r| r.end <= end)
            .map(move |r| &mut self.map[r])
            .ok_or_else(|| {
                std::io::Error::other(format!(
                    "{len} bytes at {at} do not fit the {end}-byte archive laid out"
                ))
            })
    }

    /// Writes `len` elements of `width` bytes from the file's byte `at` on, element `i` made by
    /// `put(i, its bytes)` or, with `raw`, copied from it as they lie; returns their CRC.
    fn fill(
        &mut self,
        at: u64,
        len: usize,
        width: usize,
        raw: Option<&[u8]>,
        put: impl Fn(usize, &mut [u8]) + Sync,
    ) -> std::io::Result<Hasher> {
        let dst = self.span(at, len * width)?;
        let crcs = dst
            .par_chunks_mut(CHUNK * width)
            .enumerate()
            .map(|(c, out)| {
                // An interrupt stops the fill within a chunk's time, not the whole archive's.
                if crate::interrupt::requested() {
                    return Err(std::io::ErrorKind::Interrupted.into());
                }
                populate(out)?;
                let first = c * CHUNK;
                match raw {
                    Some(raw) => out.copy_from_slice(&raw[first * width..][..out.len()]),
                    None => {
                        for (k, o) in out.chunks_exact_mut(width).enumerate() {
                            put(first + k, o);
                        }
                    }
                }
                let mut crc = Hasher::new();
                crc.update(out);
                Ok(crc)
            })
            .collect::<std::io::Result<Vec<Hasher>>>()?;
        Ok(crcs.iter().fold(Hasher::new(), |mut all, c| {
            all.combine(c);
            all
        }))
    }

    /// Writes `cols`, the columns of the entries `first..`, in place; returns their CRC.
    pub fn indices(&mut self, l: &CsrLayout, first: u64, cols: &[u32]) -> std::io::Result<Hasher> {
        let at = l.element_at(CsrArray::Indices, first);
        let raw = (l.width == 4 && cfg!(target_endian = "little")).then(|| super::raw_bytes(cols));
        self.fill(at, cols.len(), l.width, raw, |i, o| {
            o.copy_from_slice(&u64::from(cols[i]).to_le_bytes()[..o.len()])
        })
    }

    /// Writes the offsets of rows `first..` from `ptr` (their own offsets, `ptr[0]` the first
    /// row's start), `entries` entries lying before them; returns their CRC.
    pub fn indptr(
        &mut self,
        l: &CsrLayout,
        first: u64,
        entries: u64,
        ptr: &[u64],
    ) -> std::io::Result<Hasher> {
        let at = l.element_at(CsrArray::Indptr, first);
        let start = ptr.first().copied().unwrap_or(0);
        let rows = ptr.len().saturating_sub(1);
        self.fill(at, rows, l.width, None, |i, o| {
            o.copy_from_slice(&(entries + ptr[i + 1] - start).to_le_bytes()[..o.len()])
        })
    }

    /// Writes `vals`, the values of the entries `first..`, in place; returns their CRC.
    pub fn data<T: Scalar>(
        &mut self,
        l: &CsrLayout,
        first: u64,
        vals: &[T],
    ) -> std::io::Result<Hasher> {
        let at = l.element_at(CsrArray::Data, first);
        let raw = cfg!(target_endian = "little").then(|| super::raw_bytes(vals));
        self.fill(at, vals.len(), l.value_width, raw, |i, o| {
            let v = vals[i].to_f64();
            match o.len() {
                4 => o.copy_from_slice(&(v as f32).to_le_bytes()),
                _ => o.copy_from_slice(&v.to_le_bytes()),
            }
        })
    }

    /// Writes [`CsrLayout::frame`]'s pieces.
    pub fn frame(&mut self, l: &CsrLayout, parts: [&Hasher; 3]) -> std::io::Result<()> {
        for (at, bytes) in l.frame(parts)? {
            let out = self.span(at, bytes.len())?;
            populate(out)?;
            out.copy_from_slice(&bytes);
        }
        Ok(())
    }
}

/// Maps the pages under `s` for writing ([`crate::mem::populate_write`]), naming the likely
/// cause where the file system refused them.
fn populate(s: &mut [u8]) -> std::io::Result<()> {
    crate::mem::populate_write(s).map_err(|e| match e.raw_os_error() {
        Some(libc::EFAULT) | Some(libc::ENOMEM) => std::io::Error::other(format!(
            "the file system did not give the output's pages ({e}): is it full, or over a quota?"
        )),
        _ => e,
    })
}

/// Whether this system maps an output's pages ahead ([`populate`]), which [`Placed`] needs to
/// turn a full disk into an error: Linux 5.14 and later.
pub fn supported(file: &File) -> bool {
    #[cfg(target_os = "linux")]
    {
        let probe = || -> std::io::Result<()> {
            let was = file.metadata()?.len();
            file.set_len(was.max(1))?;
            // SAFETY: as in `Placed::map`; the probe writes nothing.
            let mut map = unsafe { memmap2::MmapOptions::new().len(1).map_mut(file)? };
            let r = populate(&mut map[..1]);
            drop(map);
            file.set_len(was)?;
            r
        };
        probe().is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        false
    }
}

/// Writes `m` into `file` as [`super::write`] writes it, in place, on the pool's threads.
pub fn write<T: Scalar>(file: &File, m: &crate::csr::Csr<T>) -> std::io::Result<()> {
    let l = CsrLayout::new::<T>(m.nrows(), m.ncols(), m.nnz() as u64);
    let mut p = Placed::map(file, l.len(), true)?;
    let indices = p.indices(&l, 0, m.col_idx())?;
    let indptr = p.indptr(&l, 0, 0, m.row_ptr())?;
    let data = p.data(&l, 0, m.values())?;
    p.frame(&l, [&indices, &indptr, &data])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::Csr;

    fn random(rows: usize, cols: usize, seed: u64) -> Csr<f32> {
        let mut rng = crate::generate::rng::SplitMix64::new(seed);
        let mut d = vec![0f32; rows * cols];
        for x in d.iter_mut() {
            if rng.next_u64() % 3 == 0 {
                *x = (rng.next_u64() % 1000) as f32 / 7.0 - 50.0;
            }
        }
        Csr::from_dense(rows, cols, &d)
    }

    /// Whether this system maps pages ahead (Linux 5.14 on); the tests need it.
    fn system_supports() -> bool {
        let f = tempfile::tempfile().unwrap();
        let yes = supported(&f);
        if !yes {
            eprintln!("skipped: this kernel does not map a file's pages ahead");
        }
        yes
    }

    fn placed<T: Scalar>(m: &Csr<T>) -> Vec<u8> {
        let f = tempfile::NamedTempFile::new().unwrap();
        write(f.as_file(), m).unwrap();
        std::fs::read(f.path()).unwrap()
    }

    #[test]
    fn placed_archives_are_the_streamed_ones_byte_for_byte() {
        if !system_supports() {
            return;
        }
        let big = random(1000, 1000, 1);
        assert!(big.nnz() > 2 * CHUNK, "more than one chunk a thread");
        for m in [random(0, 0, 2), random(5, 0, 3), random(40, 30, 4), big] {
            assert_eq!(placed(&m), super::super::write(Vec::new(), &m).unwrap());
            let wide = Csr::<f64>::from_parts_unchecked(
                m.nrows(),
                m.ncols(),
                m.row_ptr().to_vec(),
                m.col_idx().to_vec(),
                m.values().iter().map(|&v| f64::from(v) / 3.0).collect(),
            );
            assert_eq!(
                placed(&wide),
                super::super::write(Vec::new(), &wide).unwrap()
            );
        }
    }

    #[test]
    fn parts_written_in_any_order_make_the_same_archive() {
        if !system_supports() {
            return;
        }
        let m = random(300, 200, 5);
        let l = CsrLayout::new::<f32>(m.nrows(), m.ncols(), m.nnz() as u64);
        let f = tempfile::NamedTempFile::new().unwrap();
        let mut p = Placed::map(f.as_file(), l.len(), true).unwrap();
        // Three parts of rows, written last part first; their CRCs combined in row order.
        let cuts = [0, 17, 150, 300];
        let mut parts: Vec<[Hasher; 3]> = Vec::new();
        for w in cuts.windows(2).rev() {
            let (r0, r1) = (w[0], w[1]);
            let (e0, e1) = (m.row_ptr()[r0] as usize, m.row_ptr()[r1] as usize);
            parts.push([
                p.indices(&l, e0 as u64, &m.col_idx()[e0..e1]).unwrap(),
                p.indptr(&l, r0 as u64, e0 as u64, &m.row_ptr()[r0..=r1])
                    .unwrap(),
                p.data(&l, e0 as u64, &m.values()[e0..e1]).unwrap(),
            ]);
        }
        let whole: Vec<Hasher> = (0..3)
            .map(|a| {
                parts.iter().rev().fold(Hasher::new(), |mut all, p| {
                    all.combine(&p[a]);
                    all
                })
            })
            .collect();
        // A part past the end, or a missing part, is an error, not an archive.
        let past = p.data(&l, l.len(), &[1f32]).unwrap_err();
        assert!(past.to_string().contains("do not fit"), "{past}");
        let short = l.frame([&whole[0], &parts[0][1], &whole[2]]).unwrap_err();
        assert!(short.to_string().contains("indptr.npy"), "{short}");
        p.frame(&l, [&whole[0], &whole[1], &whole[2]]).unwrap();
        drop(p);
        let bytes = std::fs::read(f.path()).unwrap();
        assert_eq!(bytes, super::super::write(Vec::new(), &m).unwrap());
    }
}
