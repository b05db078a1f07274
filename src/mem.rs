//! Memory helpers shared by the loaders, the CSR builder and the engines: splitting a buffer into
//! disjoint regions, and hints to the kernel about how to back large buffers.

/// Cuts `data` into consecutive slices of the given lengths (which must sum to at most its
/// length), so that each can go to its own thread.
pub(crate) fn split_by_lengths<'a, E>(mut data: &'a mut [E], lens: &[usize]) -> Vec<&'a mut [E]> {
    let mut out = Vec::with_capacity(lens.len());
    for &n in lens {
        let (head, tail) = std::mem::take(&mut data).split_at_mut(n);
        out.push(head);
        data = tail;
    }
    out
}

/// `MADV_HUGEPAGE`: back the range with transparent huge pages where the kernel allows it.
pub(crate) const HUGE_PAGES: i32 = 14;
/// `MADV_POPULATE_WRITE` (Linux 5.14+): map the range for writing in one call.
pub(crate) const POPULATE_WRITE: i32 = 23;

/// Gives the kernel `advice` about the whole pages inside `bytes` bytes from `ptr`, when they
/// span at least `min_pages` pages. Only a hint: it changes no contents, and a failure (an older
/// kernel, another system) leaves things as they were. Does nothing off Linux.
pub(crate) fn advise<T>(ptr: *mut T, bytes: usize, advice: i32, min_pages: usize) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        let first = (ptr as usize).next_multiple_of(PAGE);
        let last = (ptr as usize + bytes) & !(PAGE - 1);
        if last >= first + min_pages.max(1) * PAGE {
            // SAFETY: the range lies inside the caller's buffer, and the advice used here only
            // changes how the kernel backs pages, never their contents.
            unsafe { madvise(first as *mut std::ffi::c_void, last - first, advice) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes, advice, min_pages);
}

/// Asks for transparent huge pages behind a large vector's whole buffer (fewer page faults and
/// TLB misses when it is first filled); buffers under 8 MiB are left alone.
pub(crate) fn advise_huge_pages<T>(v: &mut Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    advise(v.as_mut_ptr(), bytes, HUGE_PAGES, 4 * 512);
}

/// Maps the whole pages inside `s` for writing in one call, which costs markedly less than a
/// page fault on each of them.
pub(crate) fn prefault<E>(s: &mut [E]) {
    advise(s.as_mut_ptr(), std::mem::size_of_val(s), POPULATE_WRITE, 4);
}

/// Maps every page under `s` (the pages it touches, not only whole ones) for writing in one
/// call, and says whether the kernel could: where `s` lies in a file's shared mapping, a page
/// the file system cannot give (a full disk, a quota) is an error here rather than a signal on
/// the write. Does nothing off Linux.
pub(crate) fn populate_write(s: &mut [u8]) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        if s.is_empty() {
            return Ok(());
        }
        let first = (s.as_ptr() as usize) & !(PAGE - 1);
        let last = (s.as_ptr() as usize + s.len()).next_multiple_of(PAGE);
        // SAFETY: the range covers the pages under `s`, which the caller may write; populating
        // changes no contents.
        let r = unsafe { libc::madvise(first as *mut libc::c_void, last - first, POPULATE_WRITE) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = s;
    Ok(())
}

/// A slice that many threads may write at disjoint positions. The caller promises that no two
/// threads touch the same position.
pub(crate) struct SharedSlice<E> {
    ptr: *mut E,
    len: usize,
}
unsafe impl<E: Send> Sync for SharedSlice<E> {}
unsafe impl<E: Send> Send for SharedSlice<E> {}

impl<E> SharedSlice<E> {
    /// Over uninitialised spare capacity of a vector.
    pub(crate) fn new(s: &mut [std::mem::MaybeUninit<E>]) -> Self {
        SharedSlice {
            ptr: s.as_mut_ptr() as *mut E,
            len: s.len(),
        }
    }
    /// Over an initialised slice.
    pub(crate) fn new_init(s: &mut [E]) -> Self {
        SharedSlice {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }
    /// Writes `v` at `i` without dropping what was there.
    ///
    /// # Safety
    /// No other thread may access position `i` meanwhile.
    #[inline]
    pub(crate) unsafe fn write(&self, i: usize, v: E) {
        assert!(i < self.len);
        self.ptr.add(i).write(v)
    }
    /// The sub-slice `[s, e)`.
    ///
    /// # Safety
    /// No other thread may access `[s, e)` while the returned slice lives.
    #[inline]
    #[allow(clippy::mut_from_ref, dead_code)]
    pub(crate) unsafe fn slice_mut(&self, s: usize, e: usize) -> &mut [E] {
        assert!(s <= e && e <= self.len);
        std::slice::from_raw_parts_mut(self.ptr.add(s), e - s)
    }
}

/// An empty vector with room for `n` items of `T`, or an error saying how much `what` needed and
/// how much memory is available (instead of the abort of a failed allocation).
pub(crate) fn try_with_capacity<T>(n: usize, what: &str) -> crate::error::Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        let bytes = (n as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        crate::io::limits::out_of_memory(what, bytes)
    })?;
    Ok(v)
}

/// `n` copies of `value`, allocated as [`try_with_capacity`] does.
pub(crate) fn try_filled<T: Clone>(n: usize, value: T, what: &str) -> crate::error::Result<Vec<T>> {
    let mut v = try_with_capacity(n, what)?;
    v.resize(n, value);
    Ok(v)
}

/// `src` copied into `dst` (of the same length) in parallel chunks, so that large copies (and
/// the first touch of fresh pages) use every thread.
pub(crate) fn par_copy<E: Copy + Send + Sync>(dst: &mut [E], src: &[E]) {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 18;
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(o, x)| o.copy_from_slice(x));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_that_cannot_be_made_is_an_error_saying_what_it_needed() {
        // 2^60 bytes: more than any machine's address space.
        let e = try_with_capacity::<u64>(1 << 57, "the test's array").unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("not enough memory for the test's array: it needs 1048576.0 TiB"),
            "{m}"
        );
        assert_eq!(try_filled(3, 7u8, "x").unwrap(), vec![7, 7, 7]);
    }

    #[test]
    fn splits_into_the_given_lengths() {
        let mut v = [1, 2, 3, 4, 5, 6];
        let parts = split_by_lengths(&mut v, &[2, 0, 3]);
        assert_eq!(parts.len(), 3);
        assert_eq!(&*parts[0], &[1, 2]);
        assert!(parts[1].is_empty());
        assert_eq!(&*parts[2], &[3, 4, 5]);
    }

    #[test]
    fn advice_keeps_contents() {
        let mut v = vec![7u64; 1 << 21];
        advise_huge_pages(&mut v);
        prefault(&mut v);
        assert!(v.iter().all(|&x| x == 7));
    }
}
