//! Values as the `u32` words the exchanges carry: each value's bits in [`Scalar::WORDS`] words,
//! low word first (f32 one word, f64 two), so every value crosses exactly.

use crate::scalar::Scalar;
use rayon::prelude::*;

/// `values`' words into `out` (`T::WORDS` words a value).
pub(crate) fn put_words<T: Scalar>(out: &mut [u32], values: &[T]) {
    for (w, x) in out.chunks_exact_mut(T::WORDS).zip(values) {
        let bits = x.to_bits64();
        for (i, word) in w.iter_mut().enumerate() {
            *word = (bits >> (32 * i)) as u32;
        }
    }
}

/// `values`' words, made by the threads.
pub(crate) fn to_words<T: Scalar>(values: &[T]) -> Vec<u32> {
    const CHUNK: usize = 1 << 14;
    let mut words = vec![0u32; values.len() * T::WORDS];
    words
        .par_chunks_mut(CHUNK * T::WORDS)
        .zip(values.par_chunks(CHUNK))
        .for_each(|(w, v)| put_words(w, v));
    words
}

/// The values of [`to_words`]'s words.
pub(crate) fn from_words<T: Scalar>(words: &[u32]) -> Vec<T> {
    words
        .par_chunks_exact(T::WORDS)
        .with_min_len(1 << 14)
        .map(|w| {
            let bits = w
                .iter()
                .enumerate()
                .fold(0u64, |b, (i, &word)| b | (u64::from(word) << (32 * i)));
            T::from_bits64(bits)
        })
        .collect()
}

/// The values of [`to_words`]'s words, taking them over: `f32`'s words are its values' bits,
/// so their buffer becomes the values' (no copy); `f64`'s are converted.
pub(crate) fn into_values<T: Scalar>(words: Vec<u32>) -> Vec<T> {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() {
        return from_words(&words);
    }
    let mut words = std::mem::ManuallyDrop::new(words);
    let (ptr, len, cap) = (words.as_mut_ptr(), words.len(), words.capacity());
    // SAFETY: T is f32: the same size and alignment as u32 (so the allocation's layout is the
    // same), every bit pattern is an f32, and one word is exactly an f32's bits (`put_words`).
    unsafe { Vec::from_raw_parts(ptr.cast::<T>(), len, cap) }
}

/// An element that crosses an exchange as `u32` words, exactly (its bits viewed as words).
///
/// # Safety
/// An implementor is a plain number of exactly `WORDS` words (`4 * WORDS` bytes, aligned to at
/// most 8) for which every bit pattern is a value: [`elements_mut`] views words as elements.
pub(crate) unsafe trait Wire: Copy + Send + Sync + Sized {
    /// Words an element takes.
    const WORDS: usize;
}

// SAFETY: one word.
unsafe impl Wire for u32 {
    const WORDS: usize = 1;
}

// SAFETY: two words.
unsafe impl Wire for u64 {
    const WORDS: usize = 2;
}

// SAFETY: the scalars are f32 and f64, of one and two words.
unsafe impl<T: Scalar> Wire for T {
    const WORDS: usize = T::WORDS;
}

/// `words` (whose length is a multiple of `E::WORDS`) as elements; `None` where they are not
/// aligned for `E`.
pub(crate) fn elements_mut<E: Wire>(words: &mut [u32]) -> Option<&mut [E]> {
    debug_assert_eq!(std::mem::size_of::<E>(), 4 * E::WORDS);
    // SAFETY: `Wire`'s contract: every bit pattern of an element's words is an element.
    let (head, body, tail) = unsafe { words.align_to_mut::<E>() };
    (head.is_empty() && tail.is_empty()).then_some(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_cross_as_words_exactly() {
        let v32 = [0.0f32, -1.5, f32::MIN_POSITIVE / 3.0, f32::MAX, 1.0 / 3.0];
        assert_eq!(to_words(&v32).len(), v32.len());
        assert_eq!(from_words::<f32>(&to_words(&v32)), v32);
        let v64 = [0.0f64, -1.5, f64::MIN_POSITIVE / 3.0, f64::MAX, 1.0 / 3.0];
        assert_eq!(to_words(&v64).len(), 2 * v64.len());
        assert_eq!(from_words::<f64>(&to_words(&v64)), v64);
        assert_eq!(into_values::<f32>(to_words(&v32)), v32);
        assert_eq!(into_values::<f64>(to_words(&v64)), v64);
    }

    #[test]
    fn words_view_as_the_elements_they_carry() {
        let v32 = [0.0f32, -1.5, f32::MAX, 1.0 / 3.0];
        let v64 = [0.0f64, -1.5, f64::MIN_POSITIVE / 3.0, 1.0 / 3.0];
        let mut w = to_words(&v64);
        let got = elements_mut::<f64>(&mut w).map(|e| e.to_vec());
        assert_eq!(got, Some(v64.to_vec()));
        let mut w = to_words(&v32);
        let got = elements_mut::<f32>(&mut w).map(|e| e.to_vec());
        assert_eq!(got, Some(v32.to_vec()));
        let mut w = vec![7u32, 8];
        let got = elements_mut::<u32>(&mut w).map(|e| e.to_vec());
        assert_eq!(got, Some(vec![7, 8]));
    }
}
