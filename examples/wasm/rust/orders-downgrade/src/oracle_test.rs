//! The downgrade as it was before issue 17's session 6 (main 9e16acd), kept
//! byte for byte as the tests' oracle: the faster downgrade.rs must give the
//! same output and the same error text for every input
//! (downgrade.rs tests `oracle_every_position`, `fuzz_no_panic`).
#![allow(dead_code)]

use std::collections::HashSet;

/// The deepest nesting accepted; the top-level object is level 1.
pub const MAX_DEPTH: usize = 64;

/// The header that carries the Fluid schema version.
pub const SCHEMA_HEADER: &[u8] = b"fluid-schema-version";

/// Reusable buffers for [`value`]; keep one to avoid allocating per record.
#[derive(Default)]
pub struct Scratch {
    s: Vec<u8>,
    top: KeySet,
    customer: KeySet,
}

/// Downgrades one orders-v2 JSON value, appending the v1 JSON to `dst`.
/// `None` is a null value. The error is a short reason.
pub fn value(dst: &mut Vec<u8>, input: Option<&[u8]>, scratch: &mut Scratch) -> Result<(), String> {
    let input = input.ok_or_else(|| "null value".to_string())?;
    let Scratch { s, top, customer } = scratch;
    s.clear();
    let mut p = Parser {
        b: input,
        i: 0,
        s,
        top,
        customer,
        o: Order::default(),
    };
    p.top()?;
    let o = p.o;
    let s = &p.s[..];
    dst.extend_from_slice(b"{\"order_id\":");
    append_string(dst, &s[o.order_id.0..o.order_id.1]);
    dst.extend_from_slice(b",\"customer_id\":");
    append_string(dst, &s[o.customer_id.0..o.customer_id.1]);
    dst.extend_from_slice(b",\"amount_cents\":");
    append_int(dst, o.amount);
    dst.extend_from_slice(b",\"currency\":");
    append_string(dst, &s[o.currency.0..o.currency.1]);
    dst.push(b'}');
    Ok(())
}

fn append_int(dst: &mut Vec<u8>, v: i64) {
    let mut d = [0u8; 20];
    let mut n = 0;
    let mut u = v.unsigned_abs();
    loop {
        d[n] = b'0' + (u % 10) as u8;
        n += 1;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        dst.push(b'-');
    }
    dst.extend(d[..n].iter().rev());
}

/// Appends `s` (valid UTF-8) as a JSON string with minimal escaping: '"',
/// '\\', \b \f \n \r \t, other bytes below 0x20 as \u00xx (lowercase hex),
/// every other byte raw.
pub fn append_string(dst: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    dst.reserve(s.len() + 2);
    dst.push(b'"');
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        if c >= 0x20 && c != b'"' && c != b'\\' {
            continue;
        }
        dst.extend_from_slice(&s[start..i]);
        match c {
            b'"' => dst.extend_from_slice(b"\\\""),
            b'\\' => dst.extend_from_slice(b"\\\\"),
            0x08 => dst.extend_from_slice(b"\\b"),
            0x0c => dst.extend_from_slice(b"\\f"),
            b'\n' => dst.extend_from_slice(b"\\n"),
            b'\r' => dst.extend_from_slice(b"\\r"),
            b'\t' => dst.extend_from_slice(b"\\t"),
            _ => dst.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ]),
        }
        start = i + 1;
    }
    dst.extend_from_slice(&s[start..]);
    dst.push(b'"');
}

/// The wanted fields, as ranges into the decoded strings.
#[derive(Clone, Copy, Default)]
struct Order {
    order_id: (usize, usize),
    customer_id: (usize, usize),
    currency: (usize, usize),
    amount: i64,
    seen: u8,
}

const SEEN_ORDER_ID: u8 = 1;
const SEEN_CUSTOMER: u8 = 2;
const SEEN_AMOUNT: u8 = 4;
const SEEN_CURRENCY: u8 = 8;
const SEEN_CUSTOMER_ID: u8 = 16;

/// The decoded keys of one object, to find duplicates; it allocates only for
/// objects with many keys (after its buffers have grown once).
#[derive(Default)]
struct KeySet {
    arena: Vec<u8>,
    small: Vec<(usize, usize)>,
    big: Option<HashSet<Vec<u8>>>,
}

impl KeySet {
    fn clear(&mut self) {
        self.arena.clear();
        self.small.clear();
        self.big = None;
    }

    /// Adds the key at arena[start..]; false if it was there already (the
    /// key is then left at arena[start..] for the error message).
    fn add(&mut self, start: usize) -> bool {
        let end = self.arena.len();
        if let Some(big) = &mut self.big {
            if big.contains(&self.arena[start..end]) {
                return false;
            }
            big.insert(self.arena[start..end].to_vec());
            self.arena.truncate(start);
            return true;
        }
        let key = &self.arena[start..end];
        if self.small.iter().any(|&(a, b)| &self.arena[a..b] == key) {
            return false;
        }
        if self.small.len() < 8 {
            self.small.push((start, end));
            return true;
        }
        let big: HashSet<Vec<u8>> = self
            .small
            .iter()
            .map(|&(a, b)| self.arena[a..b].to_vec())
            .chain(std::iter::once(key.to_vec()))
            .collect();
        self.big = Some(big);
        self.arena.clear();
        self.small.clear();
        true
    }
}

/// The members the downgrade reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    OrderId,
    Customer,
    Amount,
    Currency,
    Id,
    Other,
}

fn classify(kind: Obj, key: &[u8]) -> Field {
    match (kind, key) {
        (Obj::Top, b"order_id") => Field::OrderId,
        (Obj::Top, b"customer") => Field::Customer,
        (Obj::Top, b"amount_cents") => Field::Amount,
        (Obj::Top, b"currency") => Field::Currency,
        (Obj::Customer, b"id") => Field::Id,
        _ => Field::Other,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Obj {
    Plain,
    Top,
    Customer,
}

struct Parser<'a, 's> {
    b: &'a [u8],
    i: usize,
    s: &'s mut Vec<u8>,
    top: &'s mut KeySet,
    customer: &'s mut KeySet,
    o: Order,
}

fn hexval(c: u8) -> Option<u32> {
    match c {
        b'0'..=b'9' => Some((c - b'0') as u32),
        b'a'..=b'f' => Some((c - b'a' + 10) as u32),
        b'A'..=b'F' => Some((c - b'A' + 10) as u32),
        _ => None,
    }
}

/// The length of the valid UTF-8 sequence at the start of b, or 0.
fn utf8_len(b: &[u8]) -> usize {
    let c = b[0];
    let (len, lo, hi) = match c {
        0xC2..=0xDF => (2, 0x80, 0xBF),
        0xE0 => (3, 0xA0, 0xBF),
        0xE1..=0xEC | 0xEE..=0xEF => (3, 0x80, 0xBF),
        0xED => (3, 0x80, 0x9F),
        0xF0 => (4, 0x90, 0xBF),
        0xF1..=0xF3 => (4, 0x80, 0xBF),
        0xF4 => (4, 0x80, 0x8F),
        _ => return 0,
    };
    if b.len() < len || b[1] < lo || b[1] > hi {
        return 0;
    }
    if b[2..len].iter().any(|&x| !(0x80..=0xBF).contains(&x)) {
        return 0;
    }
    len
}

fn push_rune(dst: &mut Vec<u8>, r: u32) {
    // r is a scalar value: surrogates were rejected or combined.
    let c = char::from_u32(r).unwrap_or('\u{FFFD}');
    let mut tmp = [0u8; 4];
    dst.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
}

/// Where a decoded string goes.
#[derive(Clone, Copy)]
enum Dst {
    None,
    Kept,
    TopKey,
    CustomerKey,
}

impl<'a, 's> Parser<'a, 's> {
    fn err_at(&self, what: &str) -> String {
        format!("at byte {}: {}", self.i, what)
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn top(&mut self) -> Result<(), String> {
        self.ws();
        match self.peek() {
            None => return Err(self.err_at("empty value")),
            Some(b'{') => {}
            Some(_) => return Err(self.err_at("value is not a JSON object")),
        }
        self.top.clear();
        self.object(1, Obj::Top)?;
        self.ws();
        if self.i != self.b.len() {
            return Err(self.err_at("data after the JSON object"));
        }
        let seen = self.o.seen;
        if seen & SEEN_ORDER_ID == 0 {
            return Err("missing order_id".into());
        }
        if seen & SEEN_CUSTOMER == 0 {
            return Err("missing customer".into());
        }
        if seen & SEEN_AMOUNT == 0 {
            return Err("missing amount_cents".into());
        }
        if seen & SEEN_CURRENCY == 0 {
            return Err("missing currency".into());
        }
        Ok(())
    }

    fn customer(&mut self) -> Result<(), String> {
        self.ws();
        if self.peek() != Some(b'{') {
            return Err(self.err_at("customer is not an object"));
        }
        self.customer.clear();
        self.object(2, Obj::Customer)?;
        if self.o.seen & SEEN_CUSTOMER_ID == 0 {
            return Err("missing customer.id".into());
        }
        Ok(())
    }

    /// Reads an object at self.i (which is '{') at nesting level depth.
    fn object(&mut self, depth: usize, kind: Obj) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(self.err_at("nesting deeper than 64"));
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err_at("expected a string key"));
            }
            match kind {
                Obj::Plain => {
                    self.string(Dst::None)?;
                    self.colon()?;
                    self.value(depth + 1)?;
                }
                Obj::Top | Obj::Customer => {
                    let start = self.keys(kind).arena.len();
                    self.string(if kind == Obj::Top {
                        Dst::TopKey
                    } else {
                        Dst::CustomerKey
                    })?;
                    let ks = self.keys(kind);
                    let field = classify(kind, &ks.arena[start..]);
                    if !ks.add(start) {
                        let key = &ks.arena[start..];
                        let mut msg = b"duplicate key ".to_vec();
                        append_string(&mut msg, &key[..key.len().min(64)]);
                        if kind == Obj::Customer {
                            msg.extend_from_slice(b" in customer");
                        }
                        return Err(String::from_utf8_lossy(&msg).into_owned());
                    }
                    self.colon()?;
                    self.member(field, depth)?;
                }
            }
            self.ws();
            match self.peek() {
                None => return Err(self.err_at("unterminated object")),
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                Some(_) => return Err(self.err_at("expected ',' or '}'")),
            }
        }
    }

    fn colon(&mut self) -> Result<(), String> {
        self.ws();
        if self.peek() != Some(b':') {
            return Err(self.err_at("expected ':'"));
        }
        self.i += 1;
        Ok(())
    }

    fn keys(&mut self, kind: Obj) -> &mut KeySet {
        if kind == Obj::Top {
            self.top
        } else {
            self.customer
        }
    }

    fn member(&mut self, field: Field, depth: usize) -> Result<(), String> {
        match field {
            Field::OrderId => {
                self.o.seen |= SEEN_ORDER_ID;
                self.o.order_id = self.kept_string("order_id")?;
            }
            Field::Currency => {
                self.o.seen |= SEEN_CURRENCY;
                self.o.currency = self.kept_string("currency")?;
            }
            Field::Amount => {
                self.o.seen |= SEEN_AMOUNT;
                self.o.amount = self.integer()?;
            }
            Field::Customer => {
                self.o.seen |= SEEN_CUSTOMER;
                self.customer()?;
            }
            Field::Id => {
                self.o.seen |= SEEN_CUSTOMER_ID;
                self.o.customer_id = self.kept_string("customer.id")?;
            }
            Field::Other => self.value(depth + 1)?,
        }
        Ok(())
    }

    /// Reads a string value into the kept strings and returns its range.
    fn kept_string(&mut self, field: &str) -> Result<(usize, usize), String> {
        self.ws();
        if self.peek() != Some(b'"') {
            self.value(2)?;
            return Err(format!("{} is not a string", field));
        }
        let start = self.s.len();
        self.string(Dst::Kept)?;
        Ok((start, self.s.len()))
    }

    /// Reads an integer literal that fits int64.
    fn integer(&mut self) -> Result<i64, String> {
        self.ws();
        let start = self.i;
        match self.peek() {
            Some(b'-') | Some(b'0'..=b'9') => {}
            _ => {
                self.value(2)?;
                return Err("amount_cents is not a number".into());
            }
        }
        if !self.number()? {
            return Err("amount_cents is not an integer".into());
        }
        let mut lit = &self.b[start..self.i];
        let neg = lit[0] == b'-';
        if neg {
            lit = &lit[1..];
        }
        let mut u: u64 = 0;
        for &c in lit {
            u = u
                .checked_mul(10)
                .and_then(|u| u.checked_add((c - b'0') as u64))
                .ok_or_else(|| "amount_cents does not fit int64".to_string())?;
        }
        if neg && u <= 1 << 63 {
            return Ok((u as i64).wrapping_neg());
        }
        if !neg && u < 1 << 63 {
            return Ok(u as i64);
        }
        Err("amount_cents does not fit int64".into())
    }

    /// Reads and validates any JSON value; depth is the level an object or
    /// array here would have.
    fn value(&mut self, depth: usize) -> Result<(), String> {
        self.ws();
        let c = match self.peek() {
            None => return Err(self.err_at("unexpected end of value")),
            Some(c) => c,
        };
        match c {
            b'{' => self.object(depth, Obj::Plain),
            b'[' => {
                if depth > MAX_DEPTH {
                    return Err(self.err_at("nesting deeper than 64"));
                }
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        None => return Err(self.err_at("unterminated array")),
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        Some(_) => return Err(self.err_at("expected ',' or ']'")),
                    }
                }
            }
            b'"' => self.string(Dst::None),
            b't' => self.lit(b"true"),
            b'f' => self.lit(b"false"),
            b'n' => self.lit(b"null"),
            b'-' | b'0'..=b'9' => self.number().map(|_| ()),
            _ => Err(self.err_at("unexpected character")),
        }
    }

    fn lit(&mut self, s: &[u8]) -> Result<(), String> {
        if !self.b[self.i..].starts_with(s) {
            return Err(self.err_at("invalid literal"));
        }
        self.i += s.len();
        Ok(())
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
    }

    /// Reads a JSON number; true when it has neither fraction nor exponent.
    fn number(&mut self) -> Result<bool, String> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err_at("invalid number")),
        }
        let mut is_int = true;
        if self.peek() == Some(b'.') {
            is_int = false;
            self.i += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err_at("invalid number"));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e') | Some(b'E')) {
            is_int = false;
            self.i += 1;
            if matches!(self.peek(), Some(b'+') | Some(b'-')) {
                self.i += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err_at("invalid number"));
            }
            self.digits();
        }
        Ok(is_int)
    }

    fn out(&mut self, dst: Dst) -> Option<&mut Vec<u8>> {
        match dst {
            Dst::None => None,
            Dst::Kept => Some(&mut *self.s),
            Dst::TopKey => Some(&mut self.top.arena),
            Dst::CustomerKey => Some(&mut self.customer.arena),
        }
    }

    /// Reads a string at self.i (which is '"'), validating UTF-8 and
    /// escapes, appending the decoded bytes to dst.
    fn string(&mut self, dst: Dst) -> Result<(), String> {
        let b = self.b;
        self.i += 1;
        loop {
            let start = self.i;
            while self.i < b.len() {
                let c = b[self.i];
                if !(0x20..0x80).contains(&c) || c == b'"' || c == b'\\' {
                    break;
                }
                self.i += 1;
            }
            let end = self.i;
            if let Some(o) = self.out(dst) {
                o.extend_from_slice(&b[start..end]);
            }
            let c = match self.peek() {
                None => return Err(self.err_at("unterminated string")),
                Some(c) => c,
            };
            if c == b'"' {
                self.i += 1;
                return Ok(());
            }
            if c < 0x20 {
                return Err(self.err_at("control character in string"));
            }
            if c >= 0x80 {
                let n = utf8_len(&b[self.i..]);
                if n == 0 {
                    return Err(self.err_at("invalid UTF-8 in string"));
                }
                let at = self.i;
                if let Some(o) = self.out(dst) {
                    o.extend_from_slice(&b[at..at + n]);
                }
                self.i += n;
                continue;
            }
            // backslash
            let e = match b.get(self.i + 1) {
                None => return Err(self.err_at("unterminated string")),
                Some(&e) => e,
            };
            let ch = match e {
                b'"' | b'\\' | b'/' => e,
                b'b' => 0x08,
                b'f' => 0x0c,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => {
                    let r = self.unicode_escape()?;
                    if let Some(o) = self.out(dst) {
                        push_rune(o, r);
                    }
                    continue;
                }
                _ => {
                    self.i += 1;
                    return Err(self.err_at("invalid escape"));
                }
            };
            if let Some(o) = self.out(dst) {
                o.push(ch);
            }
            self.i += 2;
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let h = self.b.get(at..at + 4)?;
        let mut r = 0;
        for &c in h {
            r = r << 4 | hexval(c)?;
        }
        Some(r)
    }

    /// Reads \uXXXX (and a following low surrogate escape) at self.i.
    fn unicode_escape(&mut self) -> Result<u32, String> {
        let r = match self.hex4(self.i + 2) {
            None => return Err(self.err_at("invalid \\u escape")),
            Some(r) => r,
        };
        match r {
            0xDC00..=0xDFFF => Err(self.err_at("unpaired surrogate escape")),
            0xD800..=0xDBFF => {
                let b = self.b;
                if b.len() < self.i + 12 || b[self.i + 6] != b'\\' || b[self.i + 7] != b'u' {
                    return Err(self.err_at("unpaired surrogate escape"));
                }
                match self.hex4(self.i + 8) {
                    Some(lo) if (0xDC00..=0xDFFF).contains(&lo) => {
                        self.i += 12;
                        Ok(0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00))
                    }
                    _ => Err(self.err_at("unpaired surrogate escape")),
                }
            }
            _ => {
                self.i += 6;
                Ok(r)
            }
        }
    }
}
