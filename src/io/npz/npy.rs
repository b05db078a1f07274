//! NumPy's `.npy` array format, as `numpy.lib.format` writes it: the magic `\x93NUMPY`, a
//! version, a little-endian header length, a Python dict literal
//! `{'descr': '<i4', 'fortran_order': False, 'shape': (14,), }` padded with spaces to a multiple
//! of 64 bytes and ended by a newline, then the elements. Only what sparse matrices use is read:
//! one-dimensional (or scalar) arrays of little-endian integers, floats, booleans and short byte
//! strings.

/// An element type (`descr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// Signed integer of this many bytes (`<i1`, `<i2`, `<i4`, `<i8`).
    Int(usize),
    /// Unsigned integer of this many bytes.
    Uint(usize),
    /// IEEE float of 4 or 8 bytes.
    Float(usize),
    /// `|b1`.
    Bool,
    /// A byte string of this many bytes (`|S3`).
    Bytes(usize),
    /// A unicode string of this many characters (`<U3`, four bytes each).
    Unicode(usize),
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::Int(n) | Dtype::Uint(n) | Dtype::Float(n) | Dtype::Bytes(n) => n,
            Dtype::Bool => 1,
            Dtype::Unicode(n) => 4 * n,
        }
    }

    /// Reads a `descr` string; `None` for what gmcl does not read (big-endian, complex,
    /// structured, objects, dates).
    fn parse(descr: &str) -> Option<Dtype> {
        let (order, kind, size) = (
            descr.get(..1)?,
            descr.get(1..2)?,
            descr.get(2..)?.parse::<usize>().ok()?,
        );
        // '|' (not applicable) for one-byte and string types, '<' (or '=' on a little-endian
        // machine, which NumPy never writes) for the rest.
        let little = order == "<" || (order == "|" && (size == 1 || kind == "S"));
        if !little {
            return None;
        }
        match (kind, size) {
            ("i", 1 | 2 | 4 | 8) => Some(Dtype::Int(size)),
            ("u", 1 | 2 | 4 | 8) => Some(Dtype::Uint(size)),
            ("f", 4 | 8) => Some(Dtype::Float(size)),
            ("b", 1) => Some(Dtype::Bool),
            ("S", _) => Some(Dtype::Bytes(size)),
            ("U", _) => Some(Dtype::Unicode(size)),
            _ => None,
        }
    }

    /// The `descr` NumPy writes for this type.
    pub fn descr(self) -> String {
        match self {
            Dtype::Int(n) => format!("<i{n}"),
            Dtype::Uint(n) => format!("<u{n}"),
            Dtype::Float(n) => format!("<f{n}"),
            Dtype::Bool => "|b1".into(),
            Dtype::Bytes(n) => format!("|S{n}"),
            Dtype::Unicode(n) => format!("<U{n}"),
        }
    }
}

/// An array: its type, its length (1 for a scalar) and its elements' bytes.
#[derive(Debug)]
pub struct Array<'a> {
    pub dtype: Dtype,
    pub len: usize,
    pub data: &'a [u8],
}

impl<'a> Array<'a> {
    /// Reads an array from the bytes of a `.npy` file. Errors say what is wrong, for the
    /// caller to prefix with the member's name.
    pub fn parse(bytes: &'a [u8]) -> Result<Array<'a>, String> {
        if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
            return Err("not a NumPy array (no \\x93NUMPY magic)".into());
        }
        let (header_len, start) = match bytes[6] {
            1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
            2 | 3 => {
                let b = bytes.get(8..12).ok_or("truncated header")?;
                (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
            }
            v => {
                return Err(format!(
                    "NumPy format version {v} is not supported (1 to 3 are)"
                ))
            }
        };
        let header = bytes
            .get(start..start + header_len)
            .ok_or("truncated header")?;
        let header = std::str::from_utf8(header).map_err(|_| "header is not text")?;
        let descr = dict_value(header, "descr").ok_or("header has no 'descr'")?;
        let descr = descr
            .strip_prefix('\'')
            .and_then(|d| d.strip_suffix('\''))
            .ok_or_else(|| format!("element type {descr} is not supported"))?;
        let dtype = Dtype::parse(descr).ok_or_else(|| {
            format!("element type '{descr}' is not supported (little-endian integers, floats, booleans, strings are)")
        })?;
        if dict_value(header, "fortran_order") == Some("True") {
            // Harmless for one dimension, but NumPy would not write it so: refuse the oddity.
            return Err("Fortran-ordered arrays are not supported".into());
        }
        let shape = dict_value(header, "shape").ok_or("header has no 'shape'")?;
        let dims: Vec<&str> = shape
            .trim_start_matches('(')
            .trim_end_matches(')')
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let len = match dims.as_slice() {
            [] => 1,
            [n] => n
                .parse::<usize>()
                .map_err(|_| format!("bad shape {shape}"))?,
            _ => return Err(format!("shape {shape} has more than one dimension")),
        };
        let data = &bytes[start + header_len..];
        let need = len
            .checked_mul(dtype.size())
            .ok_or_else(|| format!("shape {shape} is too large"))?;
        if data.len() < need {
            return Err(format!(
                "holds {} bytes of elements where its shape {shape} needs {need}",
                data.len()
            ));
        }
        Ok(Array {
            dtype,
            len,
            data: &data[..need],
        })
    }

    /// Element `i` as an integer (integers and booleans; `None` for other types and past the
    /// array's end).
    #[inline]
    pub fn int(&self, i: usize) -> Option<i128> {
        let n = match self.dtype {
            Dtype::Int(n) | Dtype::Uint(n) if n <= 8 => n,
            Dtype::Bool => 1,
            _ => return None,
        };
        let b = self.data.get(i * n..i * n + n)?;
        let mut le = [0u8; 8];
        le[..n].copy_from_slice(b);
        let raw = u64::from_le_bytes(le);
        Some(match self.dtype {
            Dtype::Int(_) => {
                // Sign-extends from n bytes.
                let shift = 64 - 8 * n as u32;
                (((raw << shift) as i64) >> shift) as i128
            }
            _ => raw as i128,
        })
    }

    /// Calls `f(i, element i)` for the elements in `range` of an integer array, the element type
    /// decided once for the range (unsigned 64-bit values past `i64::MAX` come as -1, which no
    /// index is). Stops at the first error `f` returns.
    pub fn for_each_int<E>(
        &self,
        range: std::ops::Range<usize>,
        mut f: impl FnMut(usize, i64) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = range.start;
        macro_rules! each {
            ($n:literal, $t:ty) => {
                for (k, c) in self.data[range.start * $n..range.end * $n]
                    .chunks_exact($n)
                    .enumerate()
                {
                    let mut b = [0u8; $n];
                    b.copy_from_slice(c);
                    f(start + k, <$t>::from_le_bytes(b) as i64)?;
                }
            };
        }
        match self.dtype {
            Dtype::Int(4) => each!(4, i32),
            Dtype::Int(8) => each!(8, i64),
            Dtype::Uint(4) => each!(4, u32),
            Dtype::Uint(8) => {
                for (k, c) in self.data[range.start * 8..range.end * 8]
                    .chunks_exact(8)
                    .enumerate()
                {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    f(
                        start + k,
                        i64::try_from(u64::from_le_bytes(b)).unwrap_or(-1),
                    )?;
                }
            }
            _ => {
                for i in range {
                    let v = self
                        .int(i)
                        .and_then(|v| i64::try_from(v).ok())
                        .unwrap_or(-1);
                    f(i, v)?;
                }
            }
        }
        Ok(())
    }

    /// Element `i` as a float (floats, integers and booleans; `None` for strings).
    #[inline]
    pub fn float(&self, i: usize) -> Option<f64> {
        match self.dtype {
            Dtype::Float(4) => {
                let b = &self.data[i * 4..i * 4 + 4];
                Some(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
            }
            Dtype::Float(_) => {
                let b = &self.data[i * 8..i * 8 + 8];
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Some(f64::from_le_bytes(a))
            }
            _ => self.int(i).map(|v| v as f64),
        }
    }

    /// The array as text, for a string scalar (`|S3` or `<U3`; NUL padding dropped).
    pub fn text(&self) -> Option<String> {
        match self.dtype {
            Dtype::Bytes(_) => Some(
                String::from_utf8_lossy(self.data)
                    .trim_end_matches('\0')
                    .to_string(),
            ),
            Dtype::Unicode(_) => Some(
                self.data
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .take_while(|&c| c != 0)
                    .filter_map(char::from_u32)
                    .collect(),
            ),
            _ => None,
        }
    }
}

/// The value text of `key` in a Python dict literal: a quoted string, a word or a tuple.
fn dict_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = match rest.chars().next()? {
        '(' => rest.find(')')? + 1,
        '\'' => rest[1..].find('\'')? + 2,
        _ => rest.find([',', '}'])?,
    };
    Some(rest[..end].trim())
}

/// The `.npy` header (magic, version 1.0, length, dict) of a one-dimensional array of `len`
/// elements of `dtype` (`len` `None`: a scalar), padded as NumPy pads it: header and dict end on
/// a multiple of 64 bytes with a newline.
pub fn header(dtype: Dtype, len: Option<usize>) -> Vec<u8> {
    let shape = match len {
        Some(n) => format!("({n},)"),
        None => "()".into(),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        dtype.descr()
    );
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    let mut h = b"\x93NUMPY\x01\x00".to_vec();
    h.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(dtype: Dtype, len: Option<usize>, data: &[u8]) -> Vec<u8> {
        let mut b = header(dtype, len);
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn headers_are_numpys() {
        // As numpy.save writes np.arange(14, dtype=np.int32).
        let h = header(Dtype::Int(4), Some(14));
        assert_eq!(h.len(), 128);
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<i4', 'fortran_order': False, 'shape': (14,), }"));
        assert!(text.ends_with(" \n"));
        let s = header(Dtype::Bytes(3), None);
        assert!(std::str::from_utf8(&s[10..])
            .unwrap()
            .contains("'descr': '|S3', 'fortran_order': False, 'shape': ()"));
    }

    #[test]
    fn elements_read_back() {
        let b = npy(Dtype::Int(2), Some(3), &[1, 0, 0xff, 0xff, 0x00, 0x80]);
        let a = Array::parse(&b).unwrap();
        assert_eq!(
            (a.len, a.int(0), a.int(1), a.int(2)),
            (3, Some(1), Some(-1), Some(-32768))
        );
        let b = npy(Dtype::Uint(8), Some(1), &u64::MAX.to_le_bytes());
        assert_eq!(Array::parse(&b).unwrap().int(0), Some(u64::MAX as i128));
        let b = npy(Dtype::Float(4), Some(1), &1.5f32.to_le_bytes());
        assert_eq!(Array::parse(&b).unwrap().float(0), Some(1.5));
        let b = npy(Dtype::Bytes(3), None, b"csr");
        assert_eq!(Array::parse(&b).unwrap().text().as_deref(), Some("csr"));
        let mut u = Vec::new();
        for c in "coo".chars() {
            u.extend_from_slice(&(c as u32).to_le_bytes());
        }
        let b = npy(Dtype::Unicode(3), None, &u);
        assert_eq!(Array::parse(&b).unwrap().text().as_deref(), Some("coo"));
    }

    #[test]
    fn what_is_not_read_is_refused_clearly() {
        let e = |b: &[u8]| Array::parse(b).unwrap_err();
        assert!(e(b"PK\x03\x04 not npy").contains("magic"));
        let mut big = header(Dtype::Int(4), Some(1));
        let i = big.windows(3).position(|w| w == b"<i4").unwrap();
        big[i] = b'>';
        big.extend_from_slice(&[0; 4]);
        assert!(e(&big).contains("'>i4' is not supported"), "{}", e(&big));
        let short = npy(Dtype::Int(4), Some(3), &[0; 8]);
        assert!(e(&short).contains("holds 8 bytes"), "{}", e(&short));
        let dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }";
        let mut two = b"\x93NUMPY\x01\x00".to_vec();
        two.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        two.extend_from_slice(dict.as_bytes());
        assert!(e(&two).contains("more than one dimension"), "{}", e(&two));
        for cut in 0..20 {
            let b = npy(Dtype::Int(4), Some(2), &[1, 0, 0, 0, 2, 0, 0, 0]);
            let _ = Array::parse(&b[..cut]);
        }
    }
}
