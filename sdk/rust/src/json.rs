//! A small JSON reader and writer (RFC 8259), for a plugin's config and for
//! record values, with no dependencies.
//!
//! ```ignore
//! use streamd::json::{self, Value};
//!
//! fn init(&mut self, config: &[u8]) -> Result<(), String> {
//!     let cfg = json::parse(config).map_err(|e| e.to_string())?;
//!     cfg.only_keys(&["field", "limit"])?; // a misspelt key refuses the config
//!     self.field = cfg.get("field").and_then(Value::as_str).unwrap_or("name").to_string();
//!     self.limit = cfg.get("limit").and_then(Value::as_i64).unwrap_or(10);
//!     Ok(())
//! }
//! ```
//!
//! [`parse`] reads a whole document into a [`Value`] (objects keep their
//! members in order, duplicates included; numbers keep their text, so an
//! integer reads back exactly); [`Value::write`] and [`write_string`] write
//! compact JSON.

use std::fmt;

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// A number, as written (validated): see [`Value::as_i64`], [`Value::as_f64`].
    Number(String),
    String(String),
    Array(Vec<Value>),
    /// Members in document order.
    Object(Vec<(String, Value)>),
}

/// Why a document is not JSON, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// Byte offset of the problem.
    pub at: usize,
    pub msg: &'static str,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON at byte {}: {}", self.at, self.msg)
    }
}

impl std::error::Error for JsonError {}

/// Nesting deeper than this is an error.
pub const MAX_DEPTH: usize = 64;

/// Parses one JSON document (whitespace around it allowed, nothing else).
pub fn parse(b: &[u8]) -> Result<Value, JsonError> {
    let mut p = Parser { b, i: 0 };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != b.len() {
        return Err(p.err("data after the JSON document"));
    }
    Ok(v)
}

impl Value {
    /// The member `key` of an object (the last one, if repeated).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number as an i64, if it is an integer literal that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// The number as an f64.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Whether this is null.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Checks that this is an object whose keys are all in `allowed`, so
    /// that a misspelt config key is refused: `Err("unknown key \"x\"
    /// (allowed: a, b)")` otherwise.
    pub fn only_keys(&self, allowed: &[&str]) -> Result<(), String> {
        match self {
            Value::Object(m) => {
                for (k, _) in m {
                    if !allowed.contains(&k.as_str()) {
                        return Err(format!(
                            "unknown key {:?} (allowed: {})",
                            k,
                            allowed.join(", ")
                        ));
                    }
                }
                Ok(())
            }
            _ => Err("want a JSON object".to_string()),
        }
    }

    /// Appends the value as compact JSON to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(true) => out.extend_from_slice(b"true"),
            Value::Bool(false) => out.extend_from_slice(b"false"),
            Value::Number(n) => out.extend_from_slice(n.as_bytes()),
            Value::String(s) => write_string(out, s),
            Value::Array(a) => {
                out.push(b'[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    v.write(out);
                }
                out.push(b']');
            }
            Value::Object(m) => {
                out.push(b'{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_string(out, k);
                    out.push(b':');
                    v.write(out);
                }
                out.push(b'}');
            }
        }
    }

    /// The value as compact JSON.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }
}

/// Appends `s` as a JSON string: `"` and `\` escaped, control characters as
/// `\n`, `\r`, `\t`, `\b`, `\f` or `\u00xx`, everything else as it is.
pub fn write_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for &c in s.as_bytes() {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ]),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, msg: &'static str) -> JsonError {
        JsonError { at: self.i, msg }
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn lit(&mut self, word: &[u8], v: Value) -> Result<Value, JsonError> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.err("unexpected character"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        if self.i >= self.b.len() {
            return Err(self.err("unexpected end"));
        }
        match self.b[self.i] {
            b'{' | b'[' if depth >= MAX_DEPTH => Err(self.err("nesting deeper than 64")),
            b'{' => {
                self.i += 1;
                let mut m = Vec::new();
                self.ws();
                if self.i < self.b.len() && self.b[self.i] == b'}' {
                    self.i += 1;
                    return Ok(Value::Object(m));
                }
                loop {
                    self.ws();
                    if self.i >= self.b.len() || self.b[self.i] != b'"' {
                        return Err(self.err("expected a string key"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.i >= self.b.len() || self.b[self.i] != b':' {
                        return Err(self.err("expected ':'"));
                    }
                    self.i += 1;
                    self.ws();
                    let v = self.value(depth + 1)?;
                    m.push((k, v));
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Object(m));
                        }
                        _ => return Err(self.err("expected ',' or '}'")),
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut a = Vec::new();
                self.ws();
                if self.i < self.b.len() && self.b[self.i] == b']' {
                    self.i += 1;
                    return Ok(Value::Array(a));
                }
                loop {
                    self.ws();
                    a.push(self.value(depth + 1)?);
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Array(a));
                        }
                        _ => return Err(self.err("expected ',' or ']'")),
                    }
                }
            }
            b'"' => Ok(Value::String(self.string()?)),
            b't' => self.lit(b"true", Value::Bool(true)),
            b'f' => self.lit(b"false", Value::Bool(false)),
            b'n' => self.lit(b"null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.err("unexpected character")),
        }
    }

    fn digits(&mut self) -> usize {
        let s = self.i;
        while self.i < self.b.len() && self.b[self.i].is_ascii_digit() {
            self.i += 1;
        }
        self.i - s
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let s = self.i;
        if self.b[self.i] == b'-' {
            self.i += 1;
        }
        let int = self.i;
        let n = self.digits();
        if n == 0 {
            return Err(self.err("expected a digit"));
        }
        if n > 1 && self.b[int] == b'0' {
            return Err(JsonError {
                at: int,
                msg: "leading zero",
            });
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.err("expected a digit"));
            }
        }
        if matches!(self.b.get(self.i), Some(b'e') | Some(b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+') | Some(b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("expected a digit"));
            }
        }
        // ASCII only, so this cannot fail.
        Ok(Value::Number(
            String::from_utf8_lossy(&self.b[s..self.i]).into_owned(),
        ))
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        if self.i + 4 > self.b.len() {
            return Err(self.err("short \\u escape"));
        }
        let mut v = 0u32;
        for k in 0..4 {
            let d = match self.b[self.i + k] {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => return Err(self.err("bad \\u escape")),
            };
            v = v * 16 + u32::from(d);
        }
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.i += 1; // the opening quote
        let mut out: Vec<u8> = Vec::new();
        loop {
            let start = self.i;
            while self.i < self.b.len()
                && self.b[self.i] != b'"'
                && self.b[self.i] != b'\\'
                && self.b[self.i] >= 0x20
            {
                self.i += 1;
            }
            out.extend_from_slice(&self.b[start..self.i]);
            match self.b.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).map_err(|e| JsonError {
                        at: start + e.utf8_error().valid_up_to(),
                        msg: "invalid UTF-8 in string",
                    });
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = match self.b.get(self.i) {
                        Some(c) => *c,
                        None => return Err(self.err("unterminated string")),
                    };
                    self.i += 1;
                    match c {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp) {
                                if !self.b[self.i..].starts_with(b"\\u") {
                                    return Err(self.err("unpaired surrogate escape"));
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err("unpaired surrogate escape"));
                                }
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                            } else if (0xDC00..0xE000).contains(&cp) {
                                return Err(self.err("unpaired surrogate escape"));
                            }
                            let ch = char::from_u32(cp).ok_or(JsonError {
                                at: self.i,
                                msg: "bad \\u escape",
                            })?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            return Err(JsonError {
                                at: self.i - 1,
                                msg: "bad escape",
                            })
                        }
                    }
                }
                Some(_) => return Err(self.err("control character in string")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_write() {
        let v = parse(b" {\"a\":\"x\\u00e9\\ud83d\\ude00\\n\",\"n\":-12,\"f\":1.5e3,\"b\":true,\"z\":null,\"l\":[1,{}],\"a\":\"last\"} ").unwrap();
        assert_eq!(v.get("a").and_then(Value::as_str), Some("last"));
        assert_eq!(v.get("n").and_then(Value::as_i64), Some(-12));
        assert_eq!(v.get("f").and_then(Value::as_f64), Some(1500.0));
        assert_eq!(v.get("f").and_then(Value::as_i64), None);
        assert_eq!(v.get("b").and_then(Value::as_bool), Some(true));
        assert!(v.get("z").map(Value::is_null).unwrap_or(false));
        assert_eq!(
            v.get("l").and_then(Value::as_array).map(|a| a.len()),
            Some(2)
        );
        assert_eq!(v.get("missing"), None);
        let out = v.to_json();
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "{\"a\":\"x\u{e9}\u{1f600}\\n\",\"n\":-12,\"f\":1.5e3,\"b\":true,\"z\":null,\"l\":[1,{}],\"a\":\"last\"}"
        );
        assert_eq!(parse(&out).unwrap(), v);
    }

    #[test]
    fn errors() {
        for (doc, at, msg) in [
            ("", 0, "unexpected end"),
            ("{\"a\":1,}", 7, "expected a string key"),
            ("[1 2]", 3, "expected ',' or ']'"),
            ("01", 0, "leading zero"),
            ("1.", 2, "expected a digit"),
            ("\"\\ud800\"", 7, "unpaired surrogate escape"),
            ("\"\\x\"", 2, "bad escape"),
            ("\"a\nb\"", 2, "control character in string"),
            ("{} x", 3, "data after the JSON document"),
            ("tru", 0, "unexpected character"),
        ] {
            assert_eq!(
                parse(doc.as_bytes()),
                Err(JsonError { at, msg }),
                "{:?}",
                doc
            );
        }
        assert_eq!(
            parse(b"\"\xff\"").unwrap_err().msg,
            "invalid UTF-8 in string"
        );
        let deep = "[".repeat(65) + &"]".repeat(65);
        assert_eq!(
            parse(deep.as_bytes()).unwrap_err().msg,
            "nesting deeper than 64"
        );
        let ok = "[".repeat(64) + &"]".repeat(64);
        assert!(parse(ok.as_bytes()).is_ok());
    }

    #[test]
    fn only_keys() {
        let v = parse(b"{\"field\":1,\"feild\":2}").unwrap();
        assert_eq!(
            v.only_keys(&["field", "limit"]),
            Err("unknown key \"feild\" (allowed: field, limit)".to_string())
        );
        assert_eq!(
            parse(b"{\"field\":1}").unwrap().only_keys(&["field"]),
            Ok(())
        );
        assert!(parse(b"[]").unwrap().only_keys(&[]).is_err());
    }

    #[test]
    fn strings() {
        let mut out = Vec::new();
        write_string(&mut out, "\"\\\u{1}\u{8}\u{c}\t/é");
        assert_eq!(out, b"\"\\\"\\\\\\u0001\\b\\f\\t/\xc3\xa9\"".to_vec());
    }
}
