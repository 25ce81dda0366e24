//! SDK for streamd WebAssembly plugins, host ABI v1 (`docs/abi.md`).
//!
//! A plugin author writes a function from a record to records; the SDK owns
//! the input buffer, decodes each request batch into zero-copy [`Record`]
//! views, calls the plugin once per record and encodes the result batch
//! into one reusable output buffer that it hands to the host.
//!
//! ```ignore
//! use streamd::{Emitter, Error, Record, Transform};
//!
//! #[derive(Default)]
//! struct Upper;
//!
//! impl Transform for Upper {
//!     fn transform(&mut self, rec: &Record, out: &mut Emitter) -> Result<(), Error> {
//!         let v = rec.value.ok_or("null value")?.to_ascii_uppercase();
//!         out.begin(rec.timestamp_ms, rec.key, Some(&v)).headers_from(rec);
//!         Ok(())
//!     }
//! }
//!
//! streamd::export_transform!("upper", "1.0.0", Upper);
//! ```
//!
//! Build for `wasm32-wasi` (`wasm32-wasip1` on newer toolchains) as a
//! `cdylib`. [`export_transform!`], [`export_codec!`] and [`export_sink!`]
//! define the ABI exports (and `_initialize`) in the plugin crate. The plugin
//! type must implement `Default`; one value of it lives per Wasm instance.
//!
//! [`json`] reads and writes JSON, for the plugin's config and for values.
//!
//! The SDK supports Rust 1.63 and later and has no dependencies.

#![forbid(unsafe_op_in_unsafe_fn)]

pub mod json;
mod wire;

pub use wire::{decode_request, Headers, Record, Request, WireError};

/// The ABI version this SDK speaks.
pub const ABI_VERSION: u32 = 1;

/// Call statuses (`docs/abi.md` section 4).
pub mod status {
    /// The reply is the answer.
    pub const OK: i32 = 0;
    /// The whole call failed; the reply is the reason.
    pub const ERR_BATCH: i32 = 2;
    /// The request's op is not one this plugin serves.
    pub const ERR_UNSUPPORTED: i32 = 3;
    /// `streamd_init` refused the config; the reply is the reason.
    pub const ERR_CONFIG: i32 = 4;
    /// Anything else; the reply is the reason.
    pub const ERR_INTERNAL: i32 = 5;
}

/// Request ops (`docs/abi.md` section 7).
pub mod op {
    /// Records to transform (transform plugins).
    pub const TRANSFORM: u32 = 1;
    /// Payloads to encode (codec plugins).
    pub const ENCODE: u32 = 2;
    /// Payloads to decode (codec plugins).
    pub const DECODE: u32 = 3;
    /// Records to write durably (sink plugins).
    pub const WRITE: u32 = 4;
}

/// The kind of a plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Records to records.
    Transform,
    /// Payloads to payloads, both ways.
    Codec,
    /// Records to durable storage.
    Sink,
}

impl Kind {
    /// The kind's name in the manifest.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Transform => "transform",
            Kind::Codec => "codec",
            Kind::Sink => "sink",
        }
    }
}

/// Why a record (or, with [`Error::batch`], the whole batch) failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    msg: String,
    batch: bool,
}

impl Error {
    /// A per-record error: the record is rejected with this reason.
    pub fn record(msg: impl Into<String>) -> Error {
        Error {
            msg: msg.into(),
            batch: false,
        }
    }

    /// A batch error: the whole call fails with this reason and the host
    /// retries the records one at a time.
    pub fn batch(msg: impl Into<String>) -> Error {
        Error {
            msg: msg.into(),
            batch: true,
        }
    }

    /// The reason.
    pub fn message(&self) -> &str {
        &self.msg
    }

    /// Whether the error fails the whole batch.
    pub fn is_batch(&self) -> bool {
        self.batch
    }
}

impl From<&str> for Error {
    fn from(msg: &str) -> Error {
        Error::record(msg)
    }
}

impl From<String> for Error {
    fn from(msg: String) -> Error {
        Error::record(msg)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}

/// A transform plugin: turns each record into zero or more records.
pub trait Transform {
    /// Receives the plugin's config (a JSON object) once, before the first
    /// record. An error refuses the config.
    fn init(&mut self, config: &[u8]) -> Result<(), String> {
        let _ = config;
        Ok(())
    }

    /// Transforms one record, emitting its output to `out`: any number of
    /// records (none drops the input), or [`Emitter::keep`].
    fn transform(&mut self, rec: &Record<'_>, out: &mut Emitter<'_>) -> Result<(), Error>;
}

/// A codec plugin: encodes and decodes payloads. It is not called for a
/// null payload (a tombstone), which stays null.
pub trait Codec {
    /// See [`Transform::init`].
    fn init(&mut self, config: &[u8]) -> Result<(), String> {
        let _ = config;
        Ok(())
    }

    /// Appends the encoding of `rec.value` to `out` (empty when called).
    fn encode(&mut self, rec: &Record<'_>, out: &mut Vec<u8>) -> Result<(), Error>;

    /// Appends the decoding of `rec.value` to `out` (empty when called).
    fn decode(&mut self, rec: &Record<'_>, out: &mut Vec<u8>) -> Result<(), Error>;
}

/// A sink plugin: writes records durably.
pub trait Sink {
    /// See [`Transform::init`].
    fn init(&mut self, config: &[u8]) -> Result<(), String> {
        let _ = config;
        Ok(())
    }

    /// Writes one record; `Ok` means it is durably written.
    fn write(&mut self, rec: &Record<'_>) -> Result<(), Error>;
}

/// Receives a transform's output for one input record.
pub struct Emitter<'o> {
    buf: &'o mut Vec<u8>,
    count: u32,
    kept: bool,
    misuse: Option<&'static str>,
}

impl<'o> Emitter<'o> {
    fn new(buf: &'o mut Vec<u8>) -> Emitter<'o> {
        Emitter {
            buf,
            count: 0,
            kept: false,
            misuse: None,
        }
    }

    /// Answers with the input record unchanged (KEEP). It must be the only
    /// output for the record.
    pub fn keep(&mut self) {
        if self.count > 0 {
            self.misuse = Some("Emitter::keep after a record was emitted");
        }
        self.kept = true;
    }

    /// Emits a copy of `rec` (its offset and partition are not sent).
    pub fn emit(&mut self, rec: &Record<'_>) {
        let mut w = self.begin(rec.timestamp_ms, rec.key, rec.value);
        w.headers_from(rec);
    }

    /// Starts an output record; add headers to the returned writer. The
    /// record is finished when the writer is dropped.
    pub fn begin(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> RecordWriter<'_, 'o> {
        let vlen = value.map_or(0, |v| v.len());
        let start = self.head(timestamp_ms, key, vlen);
        wire::put_nbytes(self.buf, value);
        self.headers(start)
    }

    /// Like [`Emitter::begin`], but `value` writes the record's value: it
    /// appends it to the buffer it is given (and must not change what is
    /// there), so that a value need not be built elsewhere and copied.
    /// `max_len` is what it may append at most, for one reservation of the
    /// buffer (a larger value is still written whole). The value is never
    /// null.
    pub fn begin_with(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        max_len: usize,
        value: impl FnOnce(&mut Vec<u8>),
    ) -> RecordWriter<'_, 'o> {
        let start = self.head(timestamp_ms, key, max_len);
        let at = self.buf.len();
        wire::put_u32(self.buf, 0); // the value's length, patched below
        value(self.buf);
        if self.buf.len() < at + 4 || self.buf[at..at + 4] != [0; 4] {
            self.misuse = Some("Emitter::begin_with's value changed the buffer");
            self.buf.truncate(at);
            self.buf.resize(at + 4, 0);
        }
        let n = (self.buf.len() - at - 4) as u32;
        self.buf[at..at + 4].copy_from_slice(&n.to_le_bytes());
        self.headers(start)
    }

    /// Writes an output record's head up to its key, reserving room for a
    /// value of vlen bytes and a few headers; returns where it starts.
    fn head(&mut self, timestamp_ms: i64, key: Option<&[u8]>, vlen: usize) -> usize {
        if self.kept {
            self.misuse = Some("Emitter::begin after Emitter::keep");
        }
        let klen = key.map_or(0, |k| k.len());
        self.buf.reserve(24 + 4 + klen + 4 + vlen + 4 + 64);
        let start = self.buf.len();
        // size (patched on drop), offset -1, timestamp, partition -1
        let mut h = [0xffu8; 24];
        h[..4].copy_from_slice(&[0; 4]);
        h[12..20].copy_from_slice(&timestamp_ms.to_le_bytes());
        self.buf.extend_from_slice(&h);
        wire::put_nbytes(self.buf, key);
        start
    }

    fn headers(&mut self, start: usize) -> RecordWriter<'_, 'o> {
        let hcount = self.buf.len();
        wire::put_u32(self.buf, 0);
        RecordWriter {
            e: self,
            start,
            hcount,
            n: 0,
        }
    }

    /// How many records were emitted so far.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// Whether no record was emitted so far.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Writes the headers of one output record; see [`Emitter::begin`].
pub struct RecordWriter<'e, 'o> {
    e: &'e mut Emitter<'o>,
    start: usize,
    hcount: usize,
    n: u32,
}

impl RecordWriter<'_, '_> {
    /// Appends a header (`None` is a null value).
    pub fn header(&mut self, name: &[u8], value: Option<&[u8]>) -> &mut Self {
        wire::put_u32(self.e.buf, name.len() as u32);
        self.e.buf.extend_from_slice(name);
        wire::put_nbytes(self.e.buf, value);
        self.n += 1;
        self
    }

    /// Appends every header of `rec`, in order.
    pub fn headers_from(&mut self, rec: &Record<'_>) -> &mut Self {
        for (name, value) in rec.headers() {
            self.header(name, value);
        }
        self
    }
}

impl Drop for RecordWriter<'_, '_> {
    fn drop(&mut self) {
        let buf = &mut *self.e.buf;
        let size = (buf.len() - self.start - 4) as u32;
        buf[self.start..self.start + 4].copy_from_slice(&size.to_le_bytes());
        buf[self.hcount..self.hcount + 4].copy_from_slice(&self.n.to_le_bytes());
        self.e.count += 1;
    }
}

/// What an [`Instance`] serves: one of the three kinds. [`export_transform!`]
/// and friends wrap the plugin type in the right variant.
pub enum Plugin<T, C, S> {
    /// A transform plugin.
    Transform(T),
    /// A codec plugin.
    Codec(C),
    /// A sink plugin.
    Sink(S),
}

/// A placeholder for the unused variants of [`Plugin`].
pub enum Never {}

impl Transform for Never {
    fn transform(&mut self, _: &Record<'_>, _: &mut Emitter<'_>) -> Result<(), Error> {
        match *self {}
    }
}

impl Codec for Never {
    fn encode(&mut self, _: &Record<'_>, _: &mut Vec<u8>) -> Result<(), Error> {
        match *self {}
    }
    fn decode(&mut self, _: &Record<'_>, _: &mut Vec<u8>) -> Result<(), Error> {
        match *self {}
    }
}

impl Sink for Never {
    fn write(&mut self, _: &Record<'_>) -> Result<(), Error> {
        match *self {}
    }
}

/// One plugin instance: its buffers and the plugin value. The export macros
/// keep one per Wasm instance; tests drive one directly.
pub struct Instance<T, C, S> {
    name: &'static str,
    version: &'static str,
    plugin: Plugin<T, C, S>,
    input: Vec<u8>,
    output: Vec<u8>,
    payload: Vec<u8>,
}

impl<T: Transform, C: Codec, S: Sink> Instance<T, C, S> {
    /// Makes an instance serving `plugin` under `name` and `version`.
    pub fn new(name: &'static str, version: &'static str, plugin: Plugin<T, C, S>) -> Self {
        Instance {
            name,
            version,
            plugin,
            input: Vec::new(),
            output: Vec::new(),
            payload: Vec::new(),
        }
    }

    /// The plugin's kind.
    pub fn kind(&self) -> Kind {
        match self.plugin {
            Plugin::Transform(_) => Kind::Transform,
            Plugin::Codec(_) => Kind::Codec,
            Plugin::Sink(_) => Kind::Sink,
        }
    }

    /// `streamd_buffer`: the input buffer, at least `size` bytes long, or
    /// `None` when `size` is negative or memory runs out.
    pub fn buffer(&mut self, size: i32) -> Option<&mut [u8]> {
        if size < 0 {
            return None;
        }
        let size = size as usize;
        if size > self.input.len() || self.input.is_empty() {
            let mut cap = 64 * 1024;
            while cap < size {
                cap *= 2;
            }
            // The old contents need not be kept: free them first.
            self.input = Vec::new();
            let mut v = Vec::new();
            if v.try_reserve_exact(cap).is_err() {
                return None;
            }
            v.resize(cap, 0);
            self.input = v;
        }
        Some(&mut self.input[..])
    }

    /// `streamd_manifest`: the status and the reply.
    pub fn manifest(&mut self) -> (i32, &[u8]) {
        let kind = self.kind().name();
        let out = &mut self.output;
        out.clear();
        out.extend_from_slice(b"{\"name\":");
        wire::put_json_string(out, self.name.as_bytes());
        out.extend_from_slice(b",\"kind\":\"");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\",\"version\":");
        wire::put_json_string(out, self.version.as_bytes());
        out.extend_from_slice(b",\"abi\":1}");
        (status::OK, &self.output[..])
    }

    fn text(&mut self, st: i32, msg: &str) -> (i32, &[u8]) {
        text(&mut self.output, st, msg)
    }

    /// `streamd_init`: the input buffer holds `len` bytes of config JSON.
    pub fn init(&mut self, len: i32) -> (i32, &[u8]) {
        if len < 0 || len as usize > self.input.len() {
            return self.text(
                status::ERR_INTERNAL,
                "streamd_init: config length is past the input buffer",
            );
        }
        let config = &self.input[..len as usize];
        let r = match &mut self.plugin {
            Plugin::Transform(p) => p.init(config),
            Plugin::Codec(p) => p.init(config),
            Plugin::Sink(p) => p.init(config),
        };
        match r {
            Ok(()) => (status::OK, &[]),
            Err(msg) => self.text(
                status::ERR_CONFIG,
                if msg.is_empty() {
                    "config refused"
                } else {
                    &msg
                },
            ),
        }
    }

    /// `streamd_process`: the input buffer holds a `len`-byte request batch.
    pub fn process(&mut self, len: i32) -> (i32, &[u8]) {
        if len < 0 || len as usize > self.input.len() {
            return self.text(
                status::ERR_INTERNAL,
                "streamd_process: request length is past the input buffer",
            );
        }
        let kind = self.kind();
        let name = self.name;
        let Instance {
            plugin,
            input,
            output,
            payload,
            ..
        } = self;
        let req = match wire::decode_request(&input[..len as usize]) {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("streamd_process: malformed request: {}", e);
                return text(output, status::ERR_INTERNAL, &msg);
            }
        };
        let served = matches!(
            (req.op(), &*plugin),
            (op::TRANSFORM, Plugin::Transform(_))
                | (op::ENCODE, Plugin::Codec(_))
                | (op::DECODE, Plugin::Codec(_))
                | (op::WRITE, Plugin::Sink(_))
        );
        if !served {
            let msg = format!(
                "op {} is not served by {} plugin {}",
                req.op(),
                kind.name(),
                name
            );
            return text(output, status::ERR_UNSUPPORTED, &msg);
        }
        output.clear();
        wire::put_u32(output, req.count());
        let op = req.op();
        for rec in req.records() {
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    let msg = format!("streamd_process: malformed request: {}", e);
                    return text(output, status::ERR_INTERNAL, &msg);
                }
            };
            let entry = output.len();
            wire::put_u32(output, 0); // status OK
            wire::put_u32(output, 0); // out_count, patched below
            let r = match plugin {
                Plugin::Transform(p) => {
                    let mut e = Emitter::new(output);
                    let r = p.transform(&rec, &mut e);
                    if let Some(why) = e.misuse {
                        let msg = format!("plugin {}: {}", name, why);
                        return text(output, status::ERR_INTERNAL, &msg);
                    }
                    let (count, kept) = (e.count, e.kept);
                    if r.is_ok() {
                        let n = if kept { u32::MAX } else { count };
                        if kept {
                            output.truncate(entry + 8);
                        }
                        output[entry + 4..entry + 8].copy_from_slice(&n.to_le_bytes());
                    }
                    r
                }
                Plugin::Codec(_) if rec.value.is_none() => {
                    // A null payload (a tombstone) stays null: KEEP.
                    output[entry + 4..entry + 8].copy_from_slice(&u32::MAX.to_le_bytes());
                    Ok(())
                }
                Plugin::Codec(p) => {
                    payload.clear();
                    let r = if op == op::ENCODE {
                        p.encode(&rec, payload)
                    } else {
                        p.decode(&rec, payload)
                    };
                    if r.is_ok() {
                        let mut e = Emitter::new(output);
                        drop(e.begin(rec.timestamp_ms, None, Some(&payload[..])));
                        output[entry + 4..entry + 8].copy_from_slice(&1u32.to_le_bytes());
                    }
                    r
                }
                Plugin::Sink(p) => p.write(&rec),
            };
            if let Err(err) = r {
                if err.batch {
                    return text(output, status::ERR_BATCH, &err.msg);
                }
                output.truncate(entry);
                wire::put_u32(output, 1);
                wire::put_nbytes(output, Some(err.msg.as_bytes()));
            }
        }
        (status::OK, &output[..])
    }
}

fn text<'a>(out: &'a mut Vec<u8>, st: i32, msg: &str) -> (i32, &'a [u8]) {
    out.clear();
    out.extend_from_slice(msg.as_bytes());
    (st, &out[..])
}

/// Sends a UTF-8 message to streamd's log: level 0 debug, 1 info, 2 warn,
/// 3 error. Outside Wasm it prints to standard error.
pub fn log(level: i32, msg: &str) {
    host::log(level, msg.as_bytes());
}

/// Runtime support for the export macros; not part of the API.
#[doc(hidden)]
pub mod __rt {
    pub use crate::host::reply;
}

mod host {
    #[cfg(target_arch = "wasm32")]
    #[link(wasm_import_module = "streamd")]
    extern "C" {
        #[link_name = "reply"]
        fn host_reply(ptr: *const u8, len: usize);
        #[link_name = "log"]
        fn host_log(level: i32, ptr: *const u8, len: usize);
    }

    /// Hands the host the reply of the current call.
    #[cfg(target_arch = "wasm32")]
    pub fn reply(b: &[u8]) {
        // SAFETY: the host copies len bytes at ptr before returning.
        unsafe { host_reply(b.as_ptr(), b.len()) }
    }

    #[cfg(target_arch = "wasm32")]
    pub fn log(level: i32, b: &[u8]) {
        // SAFETY: the host copies len bytes at ptr before returning.
        unsafe { host_log(level, b.as_ptr(), b.len()) }
    }

    #[cfg(not(target_arch = "wasm32"))]
    pub fn reply(_: &[u8]) {}

    #[cfg(not(target_arch = "wasm32"))]
    pub fn log(level: i32, b: &[u8]) {
        eprintln!("streamd log {}: {}", level, String::from_utf8_lossy(b));
    }
}

/// Defines the ABI exports for a plugin instance made by `$make`
/// (an expression of type `Instance<T, C, S>`). Use [`export_transform!`],
/// [`export_codec!`] or [`export_sink!`] instead.
#[doc(hidden)]
#[macro_export]
macro_rules! __export {
    ($ty:ty, $make:expr) => {
        #[cfg(target_arch = "wasm32")]
        mod __streamd_exports {
            #[allow(unused_imports)]
            use super::*;
            use std::cell::RefCell;

            thread_local! {
                static INSTANCE: RefCell<$ty> = RefCell::new($make);
            }

            fn with<R>(f: impl FnOnce(&mut $ty) -> R) -> R {
                INSTANCE.with(|i| f(&mut i.borrow_mut()))
            }

            fn reply(r: (i32, &[u8])) -> i32 {
                $crate::__rt::reply(r.1);
                r.0
            }

            #[no_mangle]
            pub extern "C" fn streamd_abi_v1() {}

            #[no_mangle]
            pub extern "C" fn streamd_buffer(size: i32) -> *mut u8 {
                with(|i| match i.buffer(size) {
                    Some(b) => b.as_mut_ptr(),
                    None => std::ptr::null_mut(),
                })
            }

            #[no_mangle]
            pub extern "C" fn streamd_manifest() -> i32 {
                with(|i| reply(i.manifest()))
            }

            #[no_mangle]
            pub extern "C" fn streamd_init(len: i32) -> i32 {
                with(|i| reply(i.init(len)))
            }

            #[no_mangle]
            pub extern "C" fn streamd_process(len: i32) -> i32 {
                with(|i| reply(i.process(len)))
            }

            extern "C" {
                fn __wasm_call_ctors();
            }

            /// Makes the module a WASI reactor: the host calls this once,
            /// and the exports are not wrapped as command entry points.
            #[no_mangle]
            pub extern "C" fn _initialize() {
                // SAFETY: called once by the host before any other export.
                unsafe { __wasm_call_ctors() }
            }
        }
    };
}

/// Exports a transform plugin: `export_transform!("name", "1.0.0", Type)`;
/// `Type: Transform + Default`.
#[macro_export]
macro_rules! export_transform {
    ($name:expr, $version:expr, $t:ty) => {
        $crate::__export!(
            $crate::Instance<$t, $crate::Never, $crate::Never>,
            $crate::Instance::new($name, $version, $crate::Plugin::Transform(<$t>::default()))
        );
    };
}

/// Exports a codec plugin: `export_codec!("name", "1.0.0", Type)`;
/// `Type: Codec + Default`.
#[macro_export]
macro_rules! export_codec {
    ($name:expr, $version:expr, $t:ty) => {
        $crate::__export!(
            $crate::Instance<$crate::Never, $t, $crate::Never>,
            $crate::Instance::new($name, $version, $crate::Plugin::Codec(<$t>::default()))
        );
    };
}

/// Exports a sink plugin: `export_sink!("name", "1.0.0", Type)`;
/// `Type: Sink + Default`.
#[macro_export]
macro_rules! export_sink {
    ($name:expr, $version:expr, $t:ty) => {
        $crate::__export!(
            $crate::Instance<$crate::Never, $crate::Never, $t>,
            $crate::Instance::new($name, $version, $crate::Plugin::Sink(<$t>::default()))
        );
    };
}

#[cfg(test)]
mod tests;
