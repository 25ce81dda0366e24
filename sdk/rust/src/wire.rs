//! The request and result encodings of `docs/abi.md` sections 7 and 8.

use std::fmt;

/// A request that does not parse, and the byte position where it failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    /// Byte position in the request.
    pub at: usize,
    /// What was wrong.
    pub what: &'static str,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.at, self.what)
    }
}

impl std::error::Error for WireError {}

/// One record of a request: views into the request bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Where the record was read, or -1.
    pub offset: i64,
    /// Milliseconds since the Unix epoch, or -1.
    pub timestamp_ms: i64,
    /// Where the record was read, or -1.
    pub partition: i32,
    /// The key; `None` is a null key.
    pub key: Option<&'a [u8]>,
    /// The value; `None` is a null value.
    pub value: Option<&'a [u8]>,
    headers: &'a [u8],
    header_count: u32,
}

impl<'a> Record<'a> {
    /// The headers, in order: (name, value) with `None` a null value.
    pub fn headers(&self) -> Headers<'a> {
        Headers {
            b: self.headers,
            left: self.header_count,
        }
    }

    /// How many headers the record has.
    pub fn header_count(&self) -> u32 {
        self.header_count
    }

    /// The value of the last header named `name`.
    pub fn header(&self, name: &[u8]) -> Option<Option<&'a [u8]>> {
        self.headers().filter(|h| h.0 == name).last().map(|h| h.1)
    }
}

/// Iterates over a record's headers; made by [`Record::headers`].
#[derive(Clone, Debug)]
pub struct Headers<'a> {
    b: &'a [u8],
    left: u32,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The headers were checked by decode_record.
        let b = self.b;
        let n = le32(b, 0) as usize;
        let name = &b[4..4 + n];
        let (value, end) = match le32(b, 4 + n) {
            u32::MAX => (None, 8 + n),
            m => (Some(&b[8 + n..8 + n + m as usize]), 8 + n + m as usize),
        };
        self.b = &b[end..];
        Some((name, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// A decoded request head; its records are decoded as they are iterated.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    op: u32,
    count: u32,
    body: &'a [u8],
}

/// Decodes a request's head (op and count).
pub fn decode_request(b: &[u8]) -> Result<Request<'_>, WireError> {
    let mut r = Reader { b, pos: 0 };
    let op = r.u32()?;
    let count = r.u32()?;
    Ok(Request { op, count, body: b })
}

impl<'a> Request<'a> {
    /// The op: what to do with the records.
    pub fn op(&self) -> u32 {
        self.op
    }

    /// How many records the request has.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The records, in order. After the last record, bytes left over are
    /// reported as an error.
    pub fn records(&self) -> Records<'a> {
        Records {
            r: Reader {
                b: self.body,
                pos: 8,
            },
            left: self.count,
            done: false,
        }
    }
}

/// Iterates over a request's records; made by [`Request::records`].
#[derive(Clone, Debug)]
pub struct Records<'a> {
    r: Reader<'a>,
    left: u32,
    done: bool,
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.left == 0 {
            self.done = true;
            if self.r.pos != self.r.b.len() {
                return Some(Err(WireError {
                    at: self.r.pos,
                    what: "bytes after the last record",
                }));
            }
            return None;
        }
        self.left -= 1;
        let at = self.r.pos;
        let res = self.r.u32().and_then(|size| {
            let body = self.r.take(size as usize).map_err(|_| WireError {
                at,
                what: "record runs past the end",
            })?;
            decode_record(body).map_err(|e| WireError {
                at: at + 4 + e.at,
                what: e.what,
            })
        });
        if res.is_err() {
            self.done = true;
        }
        Some(res)
    }
}

fn decode_record(b: &[u8]) -> Result<Record<'_>, WireError> {
    match fast_record(b) {
        Some(r) => Ok(r),
        None => checked_record(b),
    }
}

/// A well-formed record's fields, read with plain bounds checks; None for
/// anything else (checked_record then says what is wrong and where).
#[inline(always)]
pub(crate) fn fast_record(b: &[u8]) -> Option<Record<'_>> {
    // A length (u32, -1 for null when nullable) and its bytes at *p.
    fn nbytes<'a>(b: &'a [u8], p: &mut usize, nullable: bool) -> Option<Option<&'a [u8]>> {
        let n = le32(b.get(*p..*p + 4)?, 0);
        *p += 4;
        if n as i32 >= 0 {
            let s = b.get(*p..*p + n as usize)?;
            *p += n as usize;
            return Some(Some(s));
        }
        if n == u32::MAX && nullable {
            return Some(None);
        }
        None
    }
    let head = b.get(..20)?;
    let offset = (le32(head, 0) as u64 | (le32(head, 4) as u64) << 32) as i64;
    let timestamp_ms = (le32(head, 8) as u64 | (le32(head, 12) as u64) << 32) as i64;
    let partition = le32(head, 16) as i32;
    let mut p = 20;
    let key = nbytes(b, &mut p, true)?;
    let value = nbytes(b, &mut p, true)?;
    let header_count = le32(b.get(p..p + 4)?, 0);
    p += 4;
    let start = p;
    for _ in 0..header_count {
        nbytes(b, &mut p, false)?;
        nbytes(b, &mut p, true)?;
    }
    if p != b.len() {
        return None;
    }
    Some(Record {
        offset,
        timestamp_ms,
        partition,
        key,
        value,
        headers: &b[start..],
        header_count,
    })
}

pub(crate) fn checked_record(b: &[u8]) -> Result<Record<'_>, WireError> {
    let mut r = Reader { b, pos: 0 };
    let offset = r.u64()? as i64;
    let timestamp_ms = r.u64()? as i64;
    let partition = r.u32()? as i32;
    let key = r.nbytes(true)?;
    let value = r.nbytes(true)?;
    let header_count = r.u32()?;
    let start = r.pos;
    for _ in 0..header_count {
        r.nbytes(false)?;
        r.nbytes(true)?;
    }
    if r.pos != b.len() {
        return Err(WireError {
            at: r.pos,
            what: "bytes after the record's headers",
        });
    }
    Ok(Record {
        offset,
        timestamp_ms,
        partition,
        key,
        value,
        headers: &b[start..],
        header_count,
    })
}

#[derive(Clone, Debug)]
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.b.len() - self.pos < n {
            return Err(WireError {
                at: self.pos,
                what: "truncated",
            });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        let lo = self.u32()? as u64;
        Ok(lo | (self.u32()? as u64) << 32)
    }

    /// Reads a length and bytes; length -1 is null when nullable.
    fn nbytes(&mut self, nullable: bool) -> Result<Option<&'a [u8]>, WireError> {
        let at = self.pos;
        let n = self.u32()? as i32;
        if n < 0 {
            if n == -1 && nullable {
                return Ok(None);
            }
            return Err(WireError {
                at,
                what: "invalid length",
            });
        }
        self.take(n as usize).map(Some).map_err(|_| WireError {
            at,
            what: "length runs past the end",
        })
    }
}

/// The little-endian u32 at b[at..at + 4].
#[inline(always)]
fn le32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

pub(crate) fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
pub(crate) fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// Writes a nullable byte string: i32 length (-1 null), then the bytes.
pub(crate) fn put_nbytes(b: &mut Vec<u8>, s: Option<&[u8]>) {
    match s {
        None => put_u32(b, u32::MAX),
        Some(s) => {
            put_u32(b, s.len() as u32);
            b.extend_from_slice(s);
        }
    }
}

/// Writes s as a JSON string (for the manifest).
pub(crate) fn put_json_string(b: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    b.push(b'"');
    for &c in s {
        match c {
            b'"' | b'\\' => b.extend_from_slice(&[b'\\', c]),
            0..=0x1f => b.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ]),
            _ => b.push(c),
        }
    }
    b.push(b'"');
}
