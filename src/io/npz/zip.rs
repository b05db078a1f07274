//! The part of the ZIP format `.npz` files use (APPNOTE 6.3): the members listed in the central
//! directory (ZIP64 records and extra fields included), stored or deflated; and a writer of
//! stored members, with ZIP64 fields where sizes or offsets pass 4 GiB, as Python's `zipfile`
//! writes them for `numpy.savez`.

use std::borrow::Cow;
use std::io::Write;

const LOCAL: u32 = 0x0403_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const END: u32 = 0x0605_4b50;
const END64: u32 = 0x0606_4b50;
const END64_LOCATOR: u32 = 0x0706_4b50;
const STORED: u16 = 0;
const DEFLATED: u16 = 8;
const ZIP64_EXTRA: u16 = 0x0001;

/// A member of an archive, as its central directory lists it.
#[derive(Clone, Debug)]
pub struct Member {
    pub name: String,
    method: u16,
    crc: u32,
    compressed: u64,
    size: u64,
    local_offset: u64,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The members of the archive `zip`. Errors say what is wrong with it.
pub fn members(zip: &[u8]) -> Result<Vec<Member>, String> {
    const NOT: &str = "not a ZIP archive (NumPy's .npz is one)";
    // The end record is the last 22 bytes, or earlier by the length of a comment.
    let lowest = zip.len().saturating_sub(22 + u16::MAX as usize);
    let end = (lowest..=zip.len().saturating_sub(22))
        .rev()
        .find(|&at| u32_at(zip, at) == Some(END))
        .ok_or(NOT)?;
    let trunc = || "the ZIP archive is truncated or damaged".to_string();
    let mut count = u16_at(zip, end + 10).ok_or_else(trunc)? as u64;
    let mut offset = u32_at(zip, end + 16).ok_or_else(trunc)? as u64;
    if count == 0xffff || offset == 0xffff_ffff {
        let locator = end.checked_sub(20).ok_or_else(trunc)?;
        if u32_at(zip, locator) != Some(END64_LOCATOR) {
            return Err(trunc());
        }
        let end64 = u64_at(zip, locator + 8).ok_or_else(trunc)? as usize;
        if u32_at(zip, end64) != Some(END64) {
            return Err(trunc());
        }
        count = u64_at(zip, end64 + 32).ok_or_else(trunc)?;
        offset = u64_at(zip, end64 + 48).ok_or_else(trunc)?;
    }
    let mut at = usize::try_from(offset).map_err(|_| trunc())?;
    let mut out = Vec::new();
    for _ in 0..count {
        if u32_at(zip, at) != Some(CENTRAL) {
            return Err(trunc());
        }
        let flags = u16_at(zip, at + 8).ok_or_else(trunc)?;
        let method = u16_at(zip, at + 10).ok_or_else(trunc)?;
        let crc = u32_at(zip, at + 16).ok_or_else(trunc)?;
        let mut compressed = u32_at(zip, at + 20).ok_or_else(trunc)? as u64;
        let mut size = u32_at(zip, at + 24).ok_or_else(trunc)? as u64;
        let name_len = u16_at(zip, at + 28).ok_or_else(trunc)? as usize;
        let extra_len = u16_at(zip, at + 30).ok_or_else(trunc)? as usize;
        let comment_len = u16_at(zip, at + 32).ok_or_else(trunc)? as usize;
        let mut local_offset = u32_at(zip, at + 42).ok_or_else(trunc)? as u64;
        let name = zip.get(at + 46..at + 46 + name_len).ok_or_else(trunc)?;
        let name = String::from_utf8_lossy(name).into_owned();
        let extra = zip
            .get(at + 46 + name_len..at + 46 + name_len + extra_len)
            .ok_or_else(trunc)?;
        // ZIP64: the fields set to all ones are in the extra field, in this order.
        let mut e = 0;
        while e + 4 <= extra.len() {
            let (id, len) = (
                u16_at(extra, e).unwrap_or(0),
                u16_at(extra, e + 2).unwrap_or(0),
            );
            let body = extra.get(e + 4..e + 4 + len as usize).ok_or_else(trunc)?;
            if id == ZIP64_EXTRA {
                let mut k = 0;
                for field in [&mut size, &mut compressed, &mut local_offset] {
                    if *field == 0xffff_ffff {
                        *field = u64_at(body, k).ok_or_else(trunc)?;
                        k += 8;
                    }
                }
            }
            e += 4 + len as usize;
        }
        if flags & 1 != 0 {
            return Err(format!("member {name} is encrypted"));
        }
        out.push(Member {
            name,
            method,
            crc,
            compressed,
            size,
            local_offset,
        });
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(out)
}

/// The bytes of `m`: a slice of `zip` when stored, inflated when deflated (the CRC checked).
pub fn read<'a>(zip: &'a [u8], m: &Member) -> Result<Cow<'a, [u8]>, String> {
    let body = read_unchecked(zip, m)?;
    if body.crc.is_some_and(|crc| crc32(&body.bytes) != crc) {
        return Err(crc_failure(m));
    }
    Ok(body.bytes)
}

/// A member's bytes whose CRC may still be to check.
pub struct Body<'a> {
    /// The member's bytes.
    pub bytes: Cow<'a, [u8]>,
    /// The CRC the bytes must have, for a caller that reads them anyway to check in the same
    /// pass (or not at all, when it ignores them); `None` when already checked (an inflated
    /// member, whose bytes were just made).
    pub crc: Option<u32>,
}

/// The error for a member whose bytes fail their CRC.
pub fn crc_failure(m: &Member) -> String {
    format!("member {} fails its CRC check", m.name)
}

/// The bytes of `m` as [`read`] gives them, but a stored member's CRC left to the caller.
pub fn read_unchecked<'a>(zip: &'a [u8], m: &Member) -> Result<Body<'a>, String> {
    let trunc = || format!("member {} is truncated", m.name);
    let at = usize::try_from(m.local_offset).map_err(|_| trunc())?;
    if u32_at(zip, at) != Some(LOCAL) {
        return Err(trunc());
    }
    let name_len = u16_at(zip, at + 26).ok_or_else(trunc)? as usize;
    let extra_len = u16_at(zip, at + 28).ok_or_else(trunc)? as usize;
    let start = at + 30 + name_len + extra_len;
    let len = usize::try_from(m.compressed).map_err(|_| trunc())?;
    let body = zip
        .get(start..start.checked_add(len).ok_or_else(trunc)?)
        .ok_or_else(trunc)?;
    match m.method {
        STORED => Ok(Body {
            bytes: Cow::Borrowed(body),
            crc: Some(m.crc),
        }),
        DEFLATED => {
            let size = usize::try_from(m.size).map_err(|_| trunc())?;
            // The output buffer grows as the data inflates, never past the size the directory
            // states, so a forged size cannot make it allocate more than it holds.
            let mut out = Vec::with_capacity(size.min(body.len().saturating_mul(8)));
            let mut d = flate2::write::DeflateDecoder::new(&mut out);
            d.write_all(body)
                .and_then(|_| d.finish().map(|_| ()))
                .map_err(|e| format!("member {} cannot be inflated: {e}", m.name))?;
            if out.len() != size {
                return Err(format!(
                    "member {} inflates to {} bytes where the directory says {size}",
                    m.name,
                    out.len()
                ));
            }
            if crc32(&out) != m.crc {
                return Err(crc_failure(m));
            }
            Ok(Body {
                bytes: Cow::Owned(out),
                crc: None,
            })
        }
        other => Err(format!(
            "member {} uses compression method {other} (stored and deflated are read)",
            m.name
        )),
    }
}

/// The CRC-32 of `b`, in parallel blocks combined in order.
fn crc32(b: &[u8]) -> u32 {
    crc_of(b).sum()
}

/// The CRC of `b` (its value and length), in parallel blocks combined in order when `b` is
/// large.
pub fn crc_of(b: &[u8]) -> flate2::Crc {
    use rayon::prelude::*;
    const BLOCK: usize = 1 << 23;
    if b.len() <= BLOCK {
        let mut crc = flate2::Crc::new();
        crc.update(b);
        return crc;
    }
    b.par_chunks(BLOCK)
        .map(|c| {
            let mut crc = flate2::Crc::new();
            crc.update(c);
            crc
        })
        .collect::<Vec<_>>()
        .iter()
        .fold(flate2::Crc::new(), |mut all, c| {
            all.combine(c);
            all
        })
}

/// A stored member's place in an archive and the records around it: the local header (sizes
/// given, the CRC left to a data descriptor after the data, as a writer that streams must), the
/// descriptor, and its entry in the central directory. ZIP64 fields where the size or the offset
/// passes 4 GiB.
#[derive(Clone, Copy, Debug)]
pub struct Framed<'a> {
    name: &'a str,
    size: u64,
    offset: u64,
}

impl<'a> Framed<'a> {
    /// The member `name` of `size` bytes whose local header starts at `offset`.
    pub fn new(name: &'a str, size: u64, offset: u64) -> Self {
        Framed { name, size, offset }
    }

    fn zip64(&self) -> bool {
        self.size >= 0xffff_ffff || self.offset >= 0xffff_ffff
    }

    /// Version 4.5 where ZIP64 fields are used; 2.0 otherwise.
    fn version(&self) -> u16 {
        if self.zip64() {
            45
        } else {
            20
        }
    }

    fn clip(&self, v: u64) -> u32 {
        if self.zip64() {
            0xffff_ffff
        } else {
            v as u32
        }
    }

    /// The local header.
    pub fn local(&self) -> Vec<u8> {
        let (name, size, zip64) = (self.name, self.size, self.zip64());
        let mut local = Vec::with_capacity(64);
        local.extend_from_slice(&LOCAL.to_le_bytes());
        local.extend_from_slice(&self.version().to_le_bytes());
        local.extend_from_slice(&8u16.to_le_bytes()); // bit 3: sizes and CRC follow the data
        local.extend_from_slice(&STORED.to_le_bytes());
        local.extend_from_slice(&[0, 0, 0x21, 0]); // time 00:00, date 1980-01-01
        local.extend_from_slice(&0u32.to_le_bytes()); // CRC: in the descriptor
        local.extend_from_slice(&self.clip(size).to_le_bytes());
        local.extend_from_slice(&self.clip(size).to_le_bytes());
        local.extend_from_slice(&(name.len() as u16).to_le_bytes());
        local.extend_from_slice(&(if zip64 { 20u16 } else { 0 }).to_le_bytes());
        local.extend_from_slice(name.as_bytes());
        if zip64 {
            local.extend_from_slice(&ZIP64_EXTRA.to_le_bytes());
            local.extend_from_slice(&16u16.to_le_bytes());
            local.extend_from_slice(&size.to_le_bytes());
            local.extend_from_slice(&size.to_le_bytes());
        }
        local
    }

    /// Where the member's data starts.
    pub fn data_at(&self) -> u64 {
        let extra = if self.zip64() { 20 } else { 0 };
        self.offset + 30 + self.name.len() as u64 + extra
    }

    /// The data descriptor that follows the data, with the data's CRC.
    pub fn descriptor(&self, crc: u32) -> Vec<u8> {
        let size = self.size;
        let mut descriptor = Vec::with_capacity(24);
        descriptor.extend_from_slice(&0x0807_4b50u32.to_le_bytes());
        descriptor.extend_from_slice(&crc.to_le_bytes());
        if self.zip64() {
            descriptor.extend_from_slice(&size.to_le_bytes());
            descriptor.extend_from_slice(&size.to_le_bytes());
        } else {
            descriptor.extend_from_slice(&(size as u32).to_le_bytes());
            descriptor.extend_from_slice(&(size as u32).to_le_bytes());
        }
        descriptor
    }

    /// Where the next member's local header starts: past the data and its descriptor.
    pub fn end(&self) -> u64 {
        let descriptor = if self.zip64() { 24 } else { 16 };
        self.data_at() + self.size + descriptor
    }

    /// Appends the member's entry in the central directory to `c`.
    fn central(&self, crc: u32, c: &mut Vec<u8>) {
        let (name, size, offset, zip64) = (self.name, self.size, self.offset, self.zip64());
        let version = self.version();
        c.extend_from_slice(&CENTRAL.to_le_bytes());
        c.extend_from_slice(&version.to_le_bytes()); // made by
        c.extend_from_slice(&version.to_le_bytes()); // needed
        c.extend_from_slice(&8u16.to_le_bytes());
        c.extend_from_slice(&STORED.to_le_bytes());
        c.extend_from_slice(&[0, 0, 0x21, 0]);
        c.extend_from_slice(&crc.to_le_bytes());
        c.extend_from_slice(&self.clip(size).to_le_bytes());
        c.extend_from_slice(&self.clip(size).to_le_bytes());
        c.extend_from_slice(&(name.len() as u16).to_le_bytes());
        c.extend_from_slice(&(if zip64 { 28u16 } else { 0 }).to_le_bytes());
        c.extend_from_slice(&[0; 6]); // comment length, disk, internal attributes
        c.extend_from_slice(&0o100644u32.wrapping_shl(16).to_le_bytes()); // a regular file
        c.extend_from_slice(&self.clip(offset).to_le_bytes());
        c.extend_from_slice(name.as_bytes());
        if zip64 {
            c.extend_from_slice(&ZIP64_EXTRA.to_le_bytes());
            c.extend_from_slice(&24u16.to_le_bytes());
            c.extend_from_slice(&size.to_le_bytes());
            c.extend_from_slice(&size.to_le_bytes());
            c.extend_from_slice(&offset.to_le_bytes());
        }
    }
}

/// The archive's tail, which starts at `at`, after the last member: the central directory of
/// `members` with their CRCs, then the end records (ZIP64 ones where the directory's place or
/// the member count need them).
pub fn directory(members: &[(Framed<'_>, u32)], at: u64) -> Vec<u8> {
    let mut central = Vec::new();
    for (m, crc) in members {
        m.central(*crc, &mut central);
    }
    let count = members.len() as u64;
    let size = central.len() as u64;
    let zip64 = at >= 0xffff_ffff || count >= 0xffff;
    let mut r = central;
    if zip64 {
        let end64_at = at + size;
        r.extend_from_slice(&END64.to_le_bytes());
        r.extend_from_slice(&44u64.to_le_bytes());
        r.extend_from_slice(&45u16.to_le_bytes());
        r.extend_from_slice(&45u16.to_le_bytes());
        r.extend_from_slice(&[0; 8]); // this disk, the directory's disk
        r.extend_from_slice(&count.to_le_bytes());
        r.extend_from_slice(&count.to_le_bytes());
        r.extend_from_slice(&size.to_le_bytes());
        r.extend_from_slice(&at.to_le_bytes());
        r.extend_from_slice(&END64_LOCATOR.to_le_bytes());
        r.extend_from_slice(&0u32.to_le_bytes());
        r.extend_from_slice(&end64_at.to_le_bytes());
        r.extend_from_slice(&1u32.to_le_bytes());
    }
    let short = if zip64 { 0xffff } else { count as u16 };
    r.extend_from_slice(&END.to_le_bytes());
    r.extend_from_slice(&[0; 4]);
    r.extend_from_slice(&short.to_le_bytes());
    r.extend_from_slice(&short.to_le_bytes());
    r.extend_from_slice(&(size.min(0xffff_ffff) as u32).to_le_bytes());
    r.extend_from_slice(&(if zip64 { 0xffff_ffff } else { at as u32 }).to_le_bytes());
    r.extend_from_slice(&0u16.to_le_bytes());
    r
}

/// Writes a ZIP archive of stored members into `out`, one member at a time.
pub struct Writer<W: Write> {
    out: W,
    at: u64,
    /// The members so far, their names owned, with their CRCs.
    members: Vec<(String, u64, u64, u32)>,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Self {
        Writer {
            out,
            at: 0,
            members: Vec::new(),
        }
    }

    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.out.write_all(b)?;
        self.at += b.len() as u64;
        Ok(())
    }

    /// Adds the member `name` of `size` bytes, which `fill` writes (in any number of writes,
    /// exactly `size` bytes). Its CRC follows the data in a data descriptor.
    pub fn member(
        &mut self,
        name: &str,
        size: u64,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let framed = Framed::new(name, size, self.at);
        self.put(&framed.local())?;
        let mut counting = Counting {
            out: &mut self.out,
            crc: flate2::Crc::new(),
            written: 0,
        };
        fill(&mut counting)?;
        let (crc, written) = (counting.crc.sum(), counting.written);
        self.at += written;
        if written != size {
            return Err(std::io::Error::other(format!(
                "member {name}: {written} bytes written where {size} were announced"
            )));
        }
        self.put(&framed.descriptor(crc))?;
        debug_assert_eq!(self.at, framed.end());
        self.members
            .push((name.to_string(), size, framed.offset, crc));
        Ok(())
    }

    /// Writes the central directory and the end records; returns the output.
    pub fn finish(mut self) -> std::io::Result<W> {
        let members = std::mem::take(&mut self.members);
        let framed: Vec<(Framed<'_>, u32)> = members
            .iter()
            .map(|(name, size, offset, crc)| (Framed::new(name, *size, *offset), *crc))
            .collect();
        let tail = directory(&framed, self.at);
        self.put(&tail)?;
        Ok(self.out)
    }
}

/// A writer that passes bytes on, counting them and their CRC.
struct Counting<'w, W: Write> {
    out: &'w mut W,
    crc: flate2::Crc,
    written: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(b)?;
        if n <= 1 << 23 {
            self.crc.update(&b[..n]);
        } else {
            self.crc.combine(&crc_of(&b[..n]));
        }
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = Writer::new(Vec::new());
        for (name, data) in members {
            w.member(name, data.len() as u64, |o| o.write_all(data))
                .unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn stored_members_read_back() {
        let z = archive(&[("a.npy", b"hello"), ("b.npy", b""), ("c.npy", &[7; 1000])]);
        let m = members(&z).unwrap();
        let names: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a.npy", "b.npy", "c.npy"]);
        assert_eq!(&*read(&z, &m[0]).unwrap(), b"hello");
        assert!(read(&z, &m[1]).unwrap().is_empty());
        assert_eq!(&*read(&z, &m[2]).unwrap(), &[7; 1000][..]);
        let mut crc = flate2::Crc::new();
        crc.update(b"hello");
        assert_eq!(m[0].crc, crc.sum());
    }

    #[test]
    fn a_member_of_the_wrong_size_is_an_error() {
        let mut w = Writer::new(Vec::new());
        let e = w.member("a", 3, |o| o.write_all(b"ab")).unwrap_err();
        assert!(e.to_string().contains("2 bytes written where 3"), "{e}");
    }

    #[test]
    fn damaged_archives_are_errors_not_panics() {
        let z = archive(&[("a.npy", b"hello world"), ("b.npy", b"x")]);
        assert!(members(b"no zip here").unwrap_err().contains("not a ZIP"));
        for cut in 0..z.len() {
            if let Ok(ms) = members(&z[..cut]) {
                for m in &ms {
                    let _ = read(&z[..cut], m);
                }
            }
        }
        for i in 0..z.len() {
            let mut bad = z.clone();
            bad[i] ^= 0xff;
            if let Ok(ms) = members(&bad) {
                for m in &ms {
                    let _ = read(&bad, m);
                }
            }
        }
    }
}
