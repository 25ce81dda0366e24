//! The orders-v2 -> orders-v1 downgrade: a strict JSON reader for one order
//! object and a compact, minimally escaped writer for the v1 shape. Plain
//! Rust, so it runs in the Wasm plugin and natively in tests.
//!
//! The rules (examples/wasm/testdata/README.md has them in full): the value
//! is exactly one JSON object (RFC 8259) with order_id (string), customer
//! (object with id string), amount_cents (integer literal that fits int64)
//! and currency (string); other fields are ignored but must be valid JSON.
//! A duplicate key in the top-level object or in customer, invalid UTF-8, an
//! unpaired surrogate escape, nesting deeper than 64 (the top-level object
//! is level 1) or a null value is an error.
//!
//! Speed (docs/benchmarks.md, issue 17): strings are scanned 16 bytes at a
//! time ([`plain_run`]: Wasm SIMD in the plugin, SSE2 natively, one load and
//! one bounds check per 16 bytes under wazero); a string without a
//! backslash is not copied (keys are compared and kept strings written
//! straight from the input); only escaped strings are decoded, into
//! scratch buffers that are reused, so a record allocates nothing.

use std::collections::HashSet;

/// The deepest nesting accepted; the top-level object is level 1.
pub const MAX_DEPTH: usize = 64;

/// The header that carries the Fluid schema version.
pub const SCHEMA_HEADER: &[u8] = b"fluid-schema-version";

/// Reusable buffers for [`parse`] and [`value`]; keep one to avoid
/// allocating per record.
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
    parse(input, scratch)?.write(dst);
    Ok(())
}

/// Reads one orders-v2 JSON value; [`Order::write`] writes its v1 JSON.
pub fn parse<'a>(input: &'a [u8], scratch: &'a mut Scratch) -> Result<Order<'a>, String> {
    let Scratch { s, top, customer } = scratch;
    s.clear();
    let mut p = Parser {
        b: input,
        i: 0,
        s,
        top,
        customer,
        o: Fields::default(),
    };
    p.top()?;
    let o = p.o;
    let s: &'a [u8] = &scratch.s[..];
    let text = |sp: Span| -> &'a [u8] {
        if sp.decoded {
            &s[sp.a..sp.b]
        } else {
            &input[sp.a..sp.b]
        }
    };
    Ok(Order {
        order_id: text(o.order_id),
        customer_id: text(o.customer_id),
        currency: text(o.currency),
        amount: o.amount,
    })
}

/// A parsed order: the v1 fields, decoded (views of the input where it had
/// no escapes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Order<'a> {
    /// order_id.
    pub order_id: &'a [u8],
    /// customer.id.
    pub customer_id: &'a [u8],
    /// currency.
    pub currency: &'a [u8],
    /// amount_cents.
    pub amount: i64,
}

impl Order<'_> {
    /// The most bytes [`Order::write`] appends.
    pub fn max_len(&self) -> usize {
        // 58 bytes of names and punctuation, 20 of the integer, each string
        // byte at most 6 (\u00xx).
        80 + 6 * (self.order_id.len() + self.customer_id.len() + self.currency.len())
    }

    /// Appends the v1 JSON.
    pub fn write(&self, dst: &mut Vec<u8>) {
        dst.reserve(self.max_len());
        dst.extend_from_slice(b"{\"order_id\":");
        append_string(dst, self.order_id);
        dst.extend_from_slice(b",\"customer_id\":");
        append_string(dst, self.customer_id);
        dst.extend_from_slice(b",\"amount_cents\":");
        append_int(dst, self.amount);
        dst.extend_from_slice(b",\"currency\":");
        append_string(dst, self.currency);
        dst.push(b'}');
    }
}

fn append_int(dst: &mut Vec<u8>, v: i64) {
    let mut d = [0u8; 20];
    let mut n = 20;
    let mut u = v.unsigned_abs();
    loop {
        n -= 1;
        d[n] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        dst.push(b'-');
    }
    dst.extend_from_slice(&d[n..]);
}

/// The mask of the bytes of b[i..i+16] (bit k for b[i+k]) that end a plain
/// run of a JSON string: '"', '\\', below 0x20 or from 0x80 on. One Wasm
/// SIMD (or SSE2) compare per class: a signed byte below 0x20 is either a
/// control byte or one from 0x80 on. Only this step differs per target.
#[inline(always)]
fn special16(b: &[u8], i: usize) -> u32 {
    let c = &b[i..i + 16];
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use core::arch::wasm32::*;
        // SAFETY: c is 16 readable bytes; v128_load has no alignment need.
        let v = unsafe { v128_load(c.as_ptr() as *const v128) };
        let m = v128_or(
            v128_or(
                i8x16_eq(v, i8x16_splat(b'"' as i8)),
                i8x16_eq(v, i8x16_splat(b'\\' as i8)),
            ),
            i8x16_lt(v, i8x16_splat(0x20)),
        );
        i8x16_bitmask(m) as u32
    }
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        // SAFETY: c is 16 readable bytes (an unaligned load); SSE2 is part
        // of x86_64.
        unsafe {
            let v = _mm_loadu_si128(c.as_ptr() as *const __m128i);
            let m = _mm_or_si128(
                _mm_or_si128(
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8)),
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)),
                ),
                _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
            );
            _mm_movemask_epi8(m) as u32 & 0xffff
        }
    }
    #[cfg(not(any(
        all(target_arch = "wasm32", target_feature = "simd128"),
        target_arch = "x86_64"
    )))]
    {
        let mut m = 0;
        for (k, &x) in c.iter().enumerate() {
            if is_special(x) {
                m |= 1 << k;
            }
        }
        m
    }
}

/// Whether x ends a plain run of a string (see [`special16`]).
#[inline(always)]
fn is_special(x: u8) -> bool {
    !(0x20..0x80).contains(&x) || x == b'"' || x == b'\\'
}

/// The position of the first byte at or after i that ends a plain run of
/// a JSON string ('"', '\\', below 0x20 or from 0x80 on), or b.len().
#[inline]
pub fn plain_run(b: &[u8], mut i: usize) -> usize {
    let n = b.len();
    while i + 16 <= n {
        let m = special16(b, i);
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 16;
    }
    if i >= n {
        return n;
    }
    if n >= 16 {
        // The last 16 bytes, without those before i.
        let base = n - 16;
        let m = special16(b, base) >> (i - base);
        return if m != 0 {
            i + m.trailing_zeros() as usize
        } else {
            n
        };
    }
    while i < n && !is_special(b[i]) {
        i += 1;
    }
    i
}

/// Appends `s` (valid UTF-8) as a JSON string with minimal escaping: '"',
/// '\\', \b \f \n \r \t, other bytes below 0x20 as \u00xx (lowercase hex),
/// every other byte raw.
pub fn append_string(dst: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    dst.reserve(s.len() + 2);
    dst.push(b'"');
    let mut start = 0;
    let mut i = 0;
    loop {
        i = plain_run(s, i);
        if i == s.len() {
            break;
        }
        let c = s[i];
        if c >= 0x80 {
            // Raw UTF-8: part of the run.
            i += 1;
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
        i += 1;
        start = i;
    }
    dst.extend_from_slice(&s[start..]);
    dst.push(b'"');
}

/// A string's text: input[a..b], or the decoded bytes at a..b of its
/// buffer (the kept strings, or the object's key arena) when it had escapes.
#[derive(Clone, Copy, Default)]
struct Span {
    a: usize,
    b: usize,
    decoded: bool,
}

/// The wanted fields.
#[derive(Clone, Copy, Default)]
struct Fields {
    order_id: Span,
    customer_id: Span,
    currency: Span,
    amount: i64,
    seen: u8,
}

const SEEN_ORDER_ID: u8 = 1;
const SEEN_CUSTOMER: u8 = 2;
const SEEN_AMOUNT: u8 = 4;
const SEEN_CURRENCY: u8 = 8;
const SEEN_CUSTOMER_ID: u8 = 16;

/// Reads 8 bytes at i as a little-endian word.
#[inline(always)]
fn word(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

/// Reads 4 bytes at i as a little-endian word.
#[inline(always)]
fn word4(b: &[u8], i: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[i..i + 4]);
    u32::from_le_bytes(w)
}

/// a == b, a word at a time (no call: memcmp is a byte loop in wasi-libc).
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            if word(a, i) != word(b, i) {
                return false;
            }
            i += 8;
        }
        return word(a, n - 8) == word(b, n - 8);
    }
    if n >= 4 {
        return word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4);
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// The keys of one object (top level or customer), to find duplicates: the
/// keys' spans (views of the input, or of `arena` for keys with escapes);
/// past 8 keys, a hash set of copies. Its buffers are reused, so it
/// allocates only for objects with many keys.
#[derive(Default)]
struct KeySet {
    arena: Vec<u8>,
    small: Vec<Span>,
    big: Option<HashSet<Vec<u8>>>,
}

impl KeySet {
    fn clear(&mut self) {
        self.arena.clear();
        self.small.clear();
        self.big = None;
    }

    fn text<'k>(&'k self, input: &'k [u8], k: Span) -> &'k [u8] {
        if k.decoded {
            &self.arena[k.a..k.b]
        } else {
            &input[k.a..k.b]
        }
    }

    /// Adds key k; false if it was there already.
    fn add(&mut self, input: &[u8], k: Span) -> bool {
        if let Some(big) = &self.big {
            let key = self.text(input, k);
            if big.contains(key) {
                return false;
            }
            let key = key.to_vec();
            self.big.as_mut().map(|b| b.insert(key));
            return true;
        }
        let key = self.text(input, k);
        if self.small.iter().any(|&o| same(self.text(input, o), key)) {
            return false;
        }
        if self.small.len() < 8 {
            self.small.push(k);
            return true;
        }
        let big: HashSet<Vec<u8>> = self
            .small
            .iter()
            .map(|&o| self.text(input, o).to_vec())
            .chain(std::iter::once(key.to_vec()))
            .collect();
        self.big = Some(big);
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
    const ORDER_ID: u64 = u64::from_le_bytes(*b"order_id");
    const CUSTOMER: u64 = u64::from_le_bytes(*b"customer");
    const CURRENCY: u64 = u64::from_le_bytes(*b"currency");
    const AMOUNT_CE: u64 = u64::from_le_bytes(*b"amount_c");
    const NTS: u32 = u32::from_le_bytes(*b"ents");
    match (kind, key.len()) {
        (Obj::Top, 8) => match word(key, 0) {
            ORDER_ID => Field::OrderId,
            CUSTOMER => Field::Customer,
            CURRENCY => Field::Currency,
            _ => Field::Other,
        },
        (Obj::Top, 12) if word(key, 0) == AMOUNT_CE && word4(key, 8) == NTS => Field::Amount,
        (Obj::Customer, 2) if key[0] == b'i' && key[1] == b'd' => Field::Id,
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
    o: Fields,
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

/// Where a string with escapes is decoded to.
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

    #[inline(always)]
    fn ws(&mut self) {
        let b = self.b;
        while self.i < b.len() {
            let c = b[self.i];
            if c > b' ' || !(c == b' ' || c == b'\t' || c == b'\n' || c == b'\r') {
                return;
            }
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
                    let k = self.string(if kind == Obj::Top {
                        Dst::TopKey
                    } else {
                        Dst::CustomerKey
                    })?;
                    let input = self.b;
                    let ks: &mut KeySet = if kind == Obj::Top {
                        self.top
                    } else {
                        self.customer
                    };
                    let field = classify(kind, ks.text(input, k));
                    if !ks.add(input, k) {
                        let key = ks.text(input, k);
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

    /// Reads a string value that is kept.
    fn kept_string(&mut self, field: &str) -> Result<Span, String> {
        self.ws();
        if self.peek() != Some(b'"') {
            self.value(2)?;
            return Err(format!("{} is not a string", field));
        }
        self.string(Dst::Kept)
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
            b'"' => self.string(Dst::None).map(|_| ()),
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
    /// escapes. Without escapes its text is the input between the quotes;
    /// with escapes it is decoded into dst's buffer.
    #[inline]
    fn string(&mut self, dst: Dst) -> Result<Span, String> {
        let b = self.b;
        self.i += 1;
        let start = self.i;
        loop {
            self.i = plain_run(b, self.i);
            let c = match self.peek() {
                None => return Err(self.err_at("unterminated string")),
                Some(c) => c,
            };
            if c == b'"' {
                self.i += 1;
                return Ok(Span {
                    a: start,
                    b: self.i - 1,
                    decoded: false,
                });
            }
            if c == b'\\' {
                return self.escaped_string(start, dst);
            }
            self.utf8_or_control()?;
        }
    }

    /// At a byte below 0x20 (an error) or from 0x80 on in a string: steps
    /// over a valid UTF-8 sequence.
    fn utf8_or_control(&mut self) -> Result<(), String> {
        if self.b[self.i] < 0x20 {
            return Err(self.err_at("control character in string"));
        }
        let n = utf8_len(&self.b[self.i..]);
        if n == 0 {
            return Err(self.err_at("invalid UTF-8 in string"));
        }
        self.i += n;
        Ok(())
    }

    /// The rest of string() from its first backslash (at self.i); the
    /// string's text starts at start.
    #[inline(never)]
    fn escaped_string(&mut self, start: usize, dst: Dst) -> Result<Span, String> {
        let b = self.b;
        let first = self.i;
        let a = match self.out(dst) {
            Some(o) => {
                let a = o.len();
                o.extend_from_slice(&b[start..first]);
                a
            }
            None => 0,
        };
        loop {
            let run = self.i;
            self.i = plain_run(b, self.i);
            let end = self.i;
            if let Some(o) = self.out(dst) {
                o.extend_from_slice(&b[run..end]);
            }
            let c = match self.peek() {
                None => return Err(self.err_at("unterminated string")),
                Some(c) => c,
            };
            if c == b'"' {
                self.i += 1;
                let end = self.out(dst).map_or(0, |o| o.len());
                return Ok(Span {
                    a,
                    b: end,
                    decoded: true,
                });
            }
            if c != b'\\' {
                let at = self.i;
                self.utf8_or_control()?;
                let end = self.i;
                if let Some(o) = self.out(dst) {
                    o.extend_from_slice(&b[at..end]);
                }
                continue;
            }
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

#[cfg(test)]
#[path = "oracle_test.rs"]
mod oracle;

#[cfg(test)]
mod tests {
    use super::*;

    /// The downgrade before session 6: output or error text.
    fn oracle_run(input: Option<&[u8]>) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        oracle::value(&mut out, input, &mut oracle::Scratch::default()).map(|_| out)
    }

    /// plain_run against its definition, for every byte value at every
    /// position of buffers of 0-40 bytes (so across and at the 16-byte
    /// boundaries of the scan and of its last, overlapping load), from every
    /// start.
    #[test]
    fn plain_run_every_position() {
        let special = |x: u8| x == b'"' || x == b'\\' || x < 0x20 || x >= 0x80;
        for n in 0..=40usize {
            for at in 0..n {
                for v in 0..=255u8 {
                    let mut b = vec![b'a'; n];
                    b[at] = v;
                    for i in 0..=n {
                        let want = (i..n).find(|&k| special(b[k])).unwrap_or(n);
                        assert_eq!(
                            plain_run(&b, i),
                            want,
                            "byte {:#x} at {} of {}, from {}",
                            v,
                            at,
                            n,
                            i
                        );
                    }
                }
            }
        }
        // Two stops: the first counts.
        for n in 2..=40usize {
            for at in 0..n - 1 {
                let mut b = vec![b'z'; n];
                b[at] = b'"';
                b[n - 1] = 0xff;
                assert_eq!(plain_run(&b, 0), at);
                assert_eq!(plain_run(&b, at + 1), n - 1);
            }
        }
    }

    /// Each kind of byte (plain, escapes of every kind, raw UTF-8 of 2-4
    /// bytes, and the invalid ones: a control byte, bad UTF-8, a truncated
    /// sequence, a bad escape) at every position of 0-40-byte strings, in
    /// each kept field, a top-level and a customer key, and an ignored
    /// value; the value ends 0-2 bytes after the string. Output and error
    /// text must be the oracle's.
    #[test]
    fn oracle_every_position() {
        let pieces: [&[u8]; 17] = [
            b"\\\"",
            b"\\\\",
            b"\\/",
            b"\\n",
            b"\\u0001",
            b"\\u00e9",
            b"\\ud83d\\ude00",
            b"\\ud800x",
            b"\\q",
            "\u{e9}".as_bytes(),
            "\u{65e5}".as_bytes(),
            "\u{1F600}".as_bytes(),
            b"\x01",
            b"\x1f",
            b"\x7f",
            b"\xff",
            b"\xe2\x82",
        ];
        let shapes: [(&[u8], &[u8]); 7] = [
            (b"{\"order_id\":\"", b"\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"c\"}"),
            (b"{\"order_id\":\"o\",\"customer\":{\"id\":\"", b"\"},\"amount_cents\":1,\"currency\":\"c\"}"),
            (b"{\"order_id\":\"o\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"", b"\"}"),
            (b"{\"order_id\":\"o\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"", b"\""),
            (b"{\"order_id\":\"o\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"c\",\"", b"\":1,\"order_id\":\"x\"}"),
            (b"{\"order_id\":\"o\",\"customer\":{\"", b"\":1,\"id\":\"c\",\"id\":\"d\"},\"amount_cents\":1,\"currency\":\"c\"}"),
            (b"{\"order_id\":\"o\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"c\",\"t\":[\"", b"\"]}"),
        ];
        let mut n = 0;
        for (pre, post) in shapes {
            for len in 0..=40usize {
                for piece in pieces {
                    for at in 0..=len {
                        let mut v = pre.to_vec();
                        v.extend((0..at).map(|k| b'a' + (k % 26) as u8));
                        v.extend_from_slice(piece);
                        v.extend((at..len).map(|k| b'A' + (k % 26) as u8));
                        v.extend_from_slice(post);
                        assert_eq!(
                            run(Some(&v)),
                            oracle_run(Some(&v)),
                            "{:?}",
                            String::from_utf8_lossy(&v)
                        );
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 50_000);
    }

    fn run(input: Option<&[u8]>) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        value(&mut out, input, &mut Scratch::default()).map(|_| out)
    }

    fn nested(levels: usize) -> Vec<u8> {
        let mut s =
            br#"{"order_id":"a","customer":{"id":"b"},"amount_cents":1,"currency":"c","t":"#
                .to_vec();
        s.extend(std::iter::repeat(b'[').take(levels - 1));
        s.extend(std::iter::repeat(b']').take(levels - 1));
        s.push(b'}');
        s
    }

    #[test]
    fn valid() {
        let cases: Vec<(&[u8], &[u8])> = vec![
            (
                br#"{"order_id":"o-1","customer":{"id":"c-1","name":"Ann"},"amount_cents":1299,"currency":"EUR","tags":["a",1,true,null,{"x":[]}]}"#,
                br#"{"order_id":"o-1","customer_id":"c-1","amount_cents":1299,"currency":"EUR"}"#,
            ),
            (
                b" {\"order_id\" : \"\\u00e9\\/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001F\\ud83d\\ude00\\u007f\\u2028\",\"customer\":{\"id\":\"\"},\"amount_cents\":-0,\"currency\":\"x\"}\n",
                "{\"order_id\":\"\u{e9}/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{1F600}\u{7f}\u{2028}\",\"customer_id\":\"\",\"amount_cents\":0,\"currency\":\"x\"}".as_bytes(),
            ),
            (
                br#"{"order_id":"a","customer":{"id":"b"},"amount_cents":-9223372036854775808,"currency":"c"}"#,
                br#"{"order_id":"a","customer_id":"b","amount_cents":-9223372036854775808,"currency":"c"}"#,
            ),
            (
                br#"{"order_\u0069d":"a","customer":{"\u0069d":"b"},"amount_cents":9223372036854775807,"currency":"c"}"#,
                br#"{"order_id":"a","customer_id":"b","amount_cents":9223372036854775807,"currency":"c"}"#,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                run(Some(input)).map_err(|e| e + " for " + &String::from_utf8_lossy(input)),
                Ok(want.to_vec())
            );
        }
        assert!(run(Some(&nested(64))).is_ok());
    }

    #[test]
    fn invalid() {
        let many_keys: String = (0..20)
            .map(|i| format!("\"k{}\":{},", i, i))
            .collect::<String>()
            + "\"k3\":0}";
        let many_keys = "{".to_string() + &many_keys;
        let deep = nested(65);
        let cases: Vec<(Option<&[u8]>, &str)> = vec![
            (None, "null value"),
            (Some(b""), "empty value"),
            (Some(b"[]"), "not a JSON object"),
            (Some(br#"{"order_id":"a","customer":{"id":"b"},"amount_cents":9223372036854775808,"currency":"c"}"#), "does not fit int64"),
            (Some(br#"{"order_id":"a","customer":{"id":"b"},"amount_cents":1.0,"currency":"c"}"#), "not an integer"),
            (Some(br#"{"order_id":"a","customer":{"id":"b"},"amount_cents":"1","currency":"c"}"#), "not a number"),
            (Some(br#"{"order_id":"a","customer":{"id":"b","\u0069d":"c"},"amount_cents":1,"currency":"c"}"#), "duplicate key \"id\" in customer"),
            (Some(br#"{"x":1,"order_id":"a","x":2}"#), "duplicate key \"x\""),
            (Some(many_keys.as_bytes()), "duplicate key \"k3\""),
            (Some(br#"{"order_id":"a","customer":{"id":"b"},"amount_cents":1,"currency":"c"} {}"#), "data after the JSON object"),
            (Some(br#"{"order_id":"\ud800"}"#), "unpaired surrogate"),
            (Some(br#"{"order_id":"\udc00"}"#), "unpaired surrogate"),
            (Some(b"{\"order_id\":\"\xed\xa0\x80\"}"), "invalid UTF-8"),
            (Some(b"{\"order_id\":\"\xc0\xaf\"}"), "invalid UTF-8"),
            (Some(b"{\"order_id\":\"a\x01\"}"), "control character"),
            (Some(br#"{"order_id":"a","customer":{"id":7}}"#), "customer.id is not a string"),
            (Some(br#"{"order_id":"a","customer":[]}"#), "customer is not an object"),
            (Some(br#"{"order_id":"a","customer":{},"amount_cents":1,"currency":"c"}"#), "missing customer.id"),
            (Some(br#"{"customer":{"id":"b"},"amount_cents":1,"currency":"c"}"#), "missing order_id"),
            (Some(br#"{"order_id":"a","customer":{"id":"b"},"amount_cents":1,"currency":"c","t":tru}"#), "invalid literal"),
            (Some(br#"{"order_id":"a","customer":{"id":"b"},"amount_cents":1,"currency":"c","t":01}"#), "expected ',' or '}'"),
            (Some(&deep), "nesting deeper than 64"),
        ];
        for (input, want) in cases {
            match run(input) {
                Ok(v) => panic!(
                    "{:?}: got {:?}, want an error containing {:?}",
                    input,
                    String::from_utf8_lossy(&v),
                    want
                ),
                Err(e) => assert!(
                    e.contains(want),
                    "{:?}: error {:?} does not contain {:?}",
                    input,
                    e,
                    want
                ),
            }
        }
    }

    /// Mutates seed orders at random: the downgrade never panics, what it
    /// accepts comes out in the v1 shape, and output and error text are the
    /// oracle's. STREAMD_FUZZ_RUNS sets the
    /// number of runs (default 50000). The byte-for-byte comparison with the
    /// Go reference is FuzzDowngrade in ../conformance.
    #[test]
    fn fuzz_no_panic() {
        let runs: u64 = std::env::var("STREAMD_FUZZ_RUNS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(50_000);
        let seeds: [&[u8]; 3] = [
            br#"{"order_id":"o-1","customer":{"id":"c-1","name":"Ann"},"amount_cents":1299,"currency":"EUR","tags":["a",1,true,null,{"x":[]}]}"#,
            b" {\"order_id\" : \"\\u00e9\\/\\\"\\ud83d\\ude00\",\"customer\":{\"id\":\"\",\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9},\"amount_cents\":-0,\"currency\":\"x\",\"n\":-1.5e+3}\n",
            "{\"order_id\":\"\u{e9}\u{20ac}\u{1F600}\",\"customer\":{\"id\":\"b\"},\"amount_cents\":-9223372036854775808,\"currency\":\"c\",\"t\":[[[[]]]]}".as_bytes(),
        ];
        let snippets: [&[u8]; 16] = [
            b"\"",
            b"\\",
            b"\\u",
            b"\\ud800",
            b"\\udc00",
            b"{",
            b"}",
            b"[",
            b"]",
            b",",
            b":",
            b"-",
            b"1e",
            b"\xff",
            b"\xe2\x82",
            b"\"id\"",
        ];
        let mut x: u64 = 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut scratch = Scratch::default();
        let mut out = Vec::new();
        for _ in 0..runs {
            let mut v = seeds[(next() % 3) as usize].to_vec();
            for _ in 0..next() % 4 {
                if v.is_empty() {
                    break;
                }
                let at = (next() % v.len() as u64) as usize;
                match next() % 4 {
                    0 => {
                        let s = snippets[(next() % 16) as usize];
                        v.splice(at..at, s.iter().copied());
                    }
                    1 => {
                        let end = (at + 1 + (next() % 8) as usize).min(v.len());
                        v.drain(at..end);
                    }
                    2 => v[at] = next() as u8,
                    _ => v.truncate(at),
                }
            }
            out.clear();
            let got = value(&mut out, Some(&v), &mut scratch).map(|_| out.clone());
            match &got {
                Ok(out) => assert!(
                    out.starts_with(b"{\"order_id\":\"") && out.ends_with(b"}"),
                    "{:?}",
                    out
                ),
                Err(e) => assert!(!e.is_empty()),
            }
            assert_eq!(
                got,
                oracle_run(Some(&v)),
                "{:?}",
                String::from_utf8_lossy(&v)
            );
        }
    }
}
