//! Native tests of the SDK: the request decoder, the result encoder and the
//! export protocol, through `Instance` (run with `cargo test` or
//! `rustc --test src/lib.rs`).

use super::*;

struct R<'a> {
    off: i64,
    ts: i64,
    part: i32,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

fn rec(value: Option<&[u8]>) -> R<'_> {
    R {
        off: 42,
        ts: 1_700_000_000_123,
        part: 7,
        key: Some(b"k"),
        value,
        headers: vec![(b"h1", Some(b"v1")), (b"h1", None), (b"", Some(b""))],
    }
}

fn encode_record(b: &mut Vec<u8>, r: &R<'_>) {
    let mut body = Vec::new();
    wire::put_u64(&mut body, r.off as u64);
    wire::put_u64(&mut body, r.ts as u64);
    wire::put_u32(&mut body, r.part as u32);
    wire::put_nbytes(&mut body, r.key);
    wire::put_nbytes(&mut body, r.value);
    wire::put_u32(&mut body, r.headers.len() as u32);
    for (n, v) in &r.headers {
        wire::put_u32(&mut body, n.len() as u32);
        body.extend_from_slice(n);
        wire::put_nbytes(&mut body, *v);
    }
    wire::put_u32(b, body.len() as u32);
    b.extend_from_slice(&body);
}

fn request(op: u32, recs: &[R<'_>]) -> Vec<u8> {
    let mut b = Vec::new();
    wire::put_u32(&mut b, op);
    wire::put_u32(&mut b, recs.len() as u32);
    for r in recs {
        encode_record(&mut b, r);
    }
    b
}

fn process<T: Transform, C: Codec, S: Sink>(
    i: &mut Instance<T, C, S>,
    req: &[u8],
) -> (i32, Vec<u8>) {
    let buf = i.buffer(req.len() as i32).expect("buffer");
    buf[..req.len()].copy_from_slice(req);
    let (st, reply) = i.process(req.len() as i32);
    (st, reply.to_vec())
}

/// Reads a result batch.
struct Res<'a> {
    b: &'a [u8],
    pos: usize,
}

#[derive(Debug, PartialEq)]
enum Entry {
    Records(Vec<Out>),
    Keep,
    Err(String),
}

#[derive(Debug, PartialEq)]
struct Out {
    off: i64,
    ts: i64,
    part: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl<'a> Res<'a> {
    fn u32(&mut self) -> u32 {
        let s = &self.b[self.pos..self.pos + 4];
        self.pos += 4;
        u32::from_le_bytes([s[0], s[1], s[2], s[3]])
    }
    fn u64(&mut self) -> u64 {
        let lo = self.u32() as u64;
        lo | (self.u32() as u64) << 32
    }
    fn nbytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u32();
        if n == u32::MAX {
            return None;
        }
        let s = self.b[self.pos..self.pos + n as usize].to_vec();
        self.pos += n as usize;
        Some(s)
    }
    fn entries(mut self) -> Vec<Entry> {
        let n = self.u32();
        let mut out = Vec::new();
        for _ in 0..n {
            match self.u32() {
                1 => out.push(Entry::Err(
                    String::from_utf8(self.nbytes().unwrap()).unwrap(),
                )),
                0 => {
                    let c = self.u32();
                    if c == u32::MAX {
                        out.push(Entry::Keep);
                        continue;
                    }
                    let mut recs = Vec::new();
                    for _ in 0..c {
                        let size = self.u32() as usize;
                        let end = self.pos + size;
                        let off = self.u64() as i64;
                        let ts = self.u64() as i64;
                        let part = self.u32() as i32;
                        let key = self.nbytes();
                        let value = self.nbytes();
                        let mut headers = Vec::new();
                        for _ in 0..self.u32() {
                            let name = self.nbytes().unwrap();
                            headers.push((name, self.nbytes()));
                        }
                        assert_eq!(self.pos, end, "record size does not match its body");
                        recs.push(Out {
                            off,
                            ts,
                            part,
                            key,
                            value,
                            headers,
                        });
                    }
                    out.push(Entry::Records(recs));
                }
                s => panic!("status {}", s),
            }
        }
        assert_eq!(self.pos, self.b.len(), "bytes after the last entry");
        out
    }
}

fn entries(b: &[u8]) -> Vec<Entry> {
    Res { b, pos: 0 }.entries()
}

#[derive(Default)]
struct T;

impl Transform for T {
    fn init(&mut self, config: &[u8]) -> Result<(), String> {
        if config == b"{\"bad\":true}" {
            return Err("bad is not allowed".to_string());
        }
        Ok(())
    }

    fn transform(&mut self, rec: &Record<'_>, out: &mut Emitter<'_>) -> Result<(), Error> {
        match rec.value {
            Some(b"keep") => out.keep(),
            Some(b"drop") => {}
            Some(b"err") => {
                out.emit(rec); // discarded by the error
                return Err("bad record".into());
            }
            Some(b"batch") => return Err(Error::batch("whole batch")),
            Some(b"misuse") => {
                out.emit(rec);
                out.keep();
            }
            Some(b"two") => {
                out.begin(5, None, Some(b"first")).header(b"x", None);
                out.emit(rec);
            }
            Some(b"with") => {
                // A value longer than its hint, and one empty.
                out.begin_with(9, Some(b"kw"), 2, |v| {
                    v.extend_from_slice(b"written in place")
                })
                .header(b"h", Some(b"v"));
                out.begin_with(10, None, 0, |_| {});
            }
            Some(b"with-misuse") => {
                out.begin_with(9, None, 8, |v| {
                    v.pop();
                });
            }
            _ => out.emit(rec),
        }
        Ok(())
    }
}

type TI = Instance<T, Never, Never>;

fn transform_instance() -> TI {
    Instance::new("t", "1.0.0", Plugin::Transform(T))
}

fn out_of(r: &R<'_>) -> Out {
    Out {
        off: -1,
        ts: r.ts,
        part: -1,
        key: r.key.map(|k| k.to_vec()),
        value: r.value.map(|v| v.to_vec()),
        headers: r
            .headers
            .iter()
            .map(|(n, v)| (n.to_vec(), v.map(|v| v.to_vec())))
            .collect(),
    }
}

#[test]
fn manifest() {
    let mut i = transform_instance();
    let (st, m) = i.manifest();
    assert_eq!(st, status::OK);
    assert_eq!(
        m,
        &b"{\"name\":\"t\",\"kind\":\"transform\",\"version\":\"1.0.0\",\"abi\":1}"[..]
    );
    let mut c: Instance<Never, Flip, Never> = Instance::new("c", "1\"2", Plugin::Codec(Flip));
    assert_eq!(
        c.manifest().1,
        &b"{\"name\":\"c\",\"kind\":\"codec\",\"version\":\"1\\\"2\",\"abi\":1}"[..]
    );
}

#[test]
fn init() {
    let mut i = transform_instance();
    for (config, want_st, want_reply) in [
        (&b"{}"[..], status::OK, &b""[..]),
        (
            &b"{\"bad\":true}"[..],
            status::ERR_CONFIG,
            &b"bad is not allowed"[..],
        ),
    ] {
        let buf = i.buffer(config.len() as i32).unwrap();
        buf[..config.len()].copy_from_slice(config);
        let (st, reply) = i.init(config.len() as i32);
        assert_eq!((st, reply), (want_st, want_reply), "config {:?}", config);
    }
    assert_eq!(i.init(1 << 30).0, status::ERR_INTERNAL);
}

#[test]
fn transform_batch() {
    let mut i = transform_instance();
    let big = vec![b'b'; 300_000]; // past the first 64 KiB of input buffer
    let values: Vec<Option<&[u8]>> = vec![
        Some(b"keep"),
        Some(b"drop"),
        Some(b"err"),
        Some(b"two"),
        None,
        Some(&big),
        Some(b""),
        Some(b"with"),
    ];
    let recs: Vec<R<'_>> = values.iter().map(|v| rec(*v)).collect();
    let req = request(op::TRANSFORM, &recs);
    for round in 0..2 {
        let (st, reply) = process(&mut i, &req);
        assert_eq!(
            st,
            status::OK,
            "round {}: {:?}",
            round,
            String::from_utf8_lossy(&reply)
        );
        let got = entries(&reply);
        let want = vec![
            Entry::Keep,
            Entry::Records(vec![]),
            Entry::Err("bad record".into()),
            Entry::Records(vec![
                Out {
                    off: -1,
                    ts: 5,
                    part: -1,
                    key: None,
                    value: Some(b"first".to_vec()),
                    headers: vec![(b"x".to_vec(), None)],
                },
                out_of(&recs[3]),
            ]),
            Entry::Records(vec![out_of(&recs[4])]),
            Entry::Records(vec![out_of(&recs[5])]),
            Entry::Records(vec![out_of(&recs[6])]),
            Entry::Records(vec![
                Out {
                    off: -1,
                    ts: 9,
                    part: -1,
                    key: Some(b"kw".to_vec()),
                    value: Some(b"written in place".to_vec()),
                    headers: vec![(b"h".to_vec(), Some(b"v".to_vec()))],
                },
                Out {
                    off: -1,
                    ts: 10,
                    part: -1,
                    key: None,
                    value: Some(vec![]),
                    headers: vec![],
                },
            ]),
        ];
        assert_eq!(got, want, "round {}", round);
    }
}

#[test]
fn transform_failures() {
    let mut i = transform_instance();
    let (st, reply) = process(
        &mut i,
        &request(op::TRANSFORM, &[rec(Some(b"x")), rec(Some(b"batch"))]),
    );
    assert_eq!((st, &reply[..]), (status::ERR_BATCH, &b"whole batch"[..]));
    for (v, why) in [
        (
            &b"misuse"[..],
            "plugin t: Emitter::keep after a record was emitted",
        ),
        (
            b"with-misuse",
            "plugin t: Emitter::begin_with's value changed the buffer",
        ),
    ] {
        let (st, reply) = process(&mut i, &request(op::TRANSFORM, &[rec(Some(v))]));
        assert_eq!(
            (st, &reply[..]),
            (status::ERR_INTERNAL, why.as_bytes()),
            "{}",
            String::from_utf8_lossy(&reply)
        );
    }
    for op in [op::ENCODE, op::DECODE, op::WRITE, 99] {
        let (st, reply) = process(&mut i, &request(op, &[]));
        assert_eq!(st, status::ERR_UNSUPPORTED, "op {}", op);
        assert_eq!(
            reply,
            format!("op {} is not served by transform plugin t", op).as_bytes()
        );
    }
    let (st, reply) = process(&mut i, &request(op::TRANSFORM, &[]));
    assert_eq!((st, &reply[..]), (status::OK, &[0u8, 0, 0, 0][..]));
    assert!(i.buffer(-1).is_none());
}

#[test]
fn malformed_requests() {
    let mut tail = request(op::TRANSFORM, &[rec(Some(b"v"))]);
    tail.push(0);
    let mut short_body = request(op::TRANSFORM, &[rec(Some(b"v"))]);
    short_body.truncate(short_body.len() - 1);
    let mut bad_key = request(op::TRANSFORM, &[rec(Some(b"v"))]);
    bad_key[8 + 4 + 20..8 + 4 + 24].copy_from_slice(&(-2i32).to_le_bytes());
    let mut many_headers = request(op::TRANSFORM, &[rec(None)]);
    let hc = 8 + 4 + 20 + 4 + 1 + 4; // head, size, fixed, key "k", null value
    many_headers[hc..hc + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("short head", vec![1, 0, 0, 0], "at byte 4: truncated"),
        (
            "record past end",
            vec![1, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0],
            "at byte 8: record runs past the end",
        ),
        ("trailing bytes", tail, "bytes after the last record"),
        ("short body", short_body, "record runs past the end"),
        ("key length -2", bad_key, "at byte 32: invalid length"),
        ("header count", many_headers, "truncated"),
    ];
    for (name, req, want) in cases {
        let mut i = transform_instance();
        let (st, reply) = process(&mut i, &req);
        let reply = String::from_utf8(reply).unwrap();
        assert_eq!(st, status::ERR_INTERNAL, "{}: {}", name, reply);
        assert!(
            reply.contains(want),
            "{}: {:?} does not contain {:?}",
            name,
            reply,
            want
        );
    }
}

#[derive(Default)]
struct Flip;

impl Codec for Flip {
    fn encode(&mut self, rec: &Record<'_>, out: &mut Vec<u8>) -> Result<(), Error> {
        let v = rec.value.ok_or("null payload")?;
        if v == b"bad" {
            return Err("cannot encode bad".into());
        }
        out.extend(v.iter().map(|c| c.to_ascii_uppercase()));
        Ok(())
    }
    fn decode(&mut self, rec: &Record<'_>, out: &mut Vec<u8>) -> Result<(), Error> {
        let v = rec.value.ok_or("null payload")?;
        if v == b"bad" {
            return Err("cannot decode bad".into());
        }
        out.extend(v.iter().map(|c| c.to_ascii_lowercase()));
        Ok(())
    }
}

#[test]
fn codec() {
    let mut i: Instance<Never, Flip, Never> = Instance::new("flip", "0.1", Plugin::Codec(Flip));
    for (op, want, msg) in [
        (op::ENCODE, &b"MIXED"[..], "cannot encode bad"),
        (op::DECODE, &b"mixed"[..], "cannot decode bad"),
    ] {
        let (st, reply) = process(
            &mut i,
            &request(
                op,
                &[
                    rec(Some(b"MiXed")),
                    rec(Some(b"bad")),
                    rec(Some(b"")),
                    rec(None),
                ],
            ),
        );
        assert_eq!(st, status::OK);
        let got = entries(&reply);
        let payload = |v: &[u8]| {
            Entry::Records(vec![Out {
                off: -1,
                ts: 1_700_000_000_123,
                part: -1,
                key: None,
                value: Some(v.to_vec()),
                headers: vec![],
            }])
        };
        assert_eq!(
            got,
            // A null payload (a tombstone) is kept null, not encoded.
            vec![
                payload(want),
                Entry::Err(msg.into()),
                payload(b""),
                Entry::Keep
            ]
        );
    }
    for op in [op::TRANSFORM, op::WRITE] {
        assert_eq!(
            process(&mut i, &request(op, &[])).0,
            status::ERR_UNSUPPORTED
        );
    }
}

#[derive(Default)]
struct Count(u32);

impl Sink for Count {
    fn write(&mut self, rec: &Record<'_>) -> Result<(), Error> {
        if rec.value == Some(b"fail") {
            return Err("disk full".into());
        }
        self.0 += 1;
        Ok(())
    }
}

#[test]
fn sink() {
    let mut i: Instance<Never, Never, Count> =
        Instance::new("count", "1", Plugin::Sink(Count::default()));
    let (st, reply) = process(
        &mut i,
        &request(op::WRITE, &[rec(Some(b"fail")), rec(Some(b"ok"))]),
    );
    assert_eq!(st, status::OK);
    assert_eq!(
        entries(&reply),
        vec![Entry::Err("disk full".into()), Entry::Records(vec![])]
    );
    match &i.plugin {
        Plugin::Sink(c) => assert_eq!(c.0, 1),
        _ => unreachable!(),
    }
}

#[test]
fn record_headers() {
    let r = rec(Some(b"v"));
    let req = request(op::TRANSFORM, &[r]);
    let parsed = decode_request(&req).unwrap();
    let got: Vec<Record<'_>> = parsed.records().collect::<Result<_, _>>().unwrap();
    assert_eq!(got.len(), 1);
    let h: Vec<_> = got[0].headers().collect();
    assert_eq!(
        h,
        vec![
            (&b"h1"[..], Some(&b"v1"[..])),
            (&b"h1"[..], None),
            (&b""[..], Some(&b""[..]))
        ]
    );
    assert_eq!(got[0].header(b"h1"), Some(None));
    assert_eq!(got[0].header(b"nope"), None);
    assert_eq!(
        (got[0].offset, got[0].partition, got[0].key),
        (42, 7, Some(&b"k"[..]))
    );
}

/// A deterministic xorshift generator for the fuzz tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Mutates valid requests at random (bit flips, byte sets, truncation,
/// interesting lengths): every call must succeed with a result that parses
/// and has one entry per record, or fail with ERR_INTERNAL and a message. It
/// never panics. STREAMD_FUZZ_RUNS sets the number of runs (default 20000).
#[test]
fn fuzz_requests() {
    let runs: u64 = std::env::var("STREAMD_FUZZ_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let lens = [
        0u32,
        1,
        3,
        4,
        7,
        8,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        0xffff_fffe,
    ];
    let values: [Option<&[u8]>; 6] = [
        Some(b"keep"),
        Some(b"drop"),
        Some(b"err"),
        Some(b"two"),
        None,
        Some(b""),
    ];
    let mut rng = Rng(1);
    let mut i = transform_instance();
    let mut accepted = 0;
    for run in 0..runs {
        let n = (rng.next() % 4) as usize;
        let recs: Vec<R<'_>> = (0..n)
            .map(|_| rec(values[(rng.next() % 6) as usize]))
            .collect();
        let mut req = request(op::TRANSFORM, &recs);
        if rng.next() % 8 != 0 {
            for _ in 0..1 + rng.next() % 4 {
                if req.is_empty() {
                    break;
                }
                let at = (rng.next() % req.len() as u64) as usize;
                match rng.next() % 4 {
                    0 => req[at] ^= 1 << (rng.next() % 8),
                    1 => req[at] = rng.next() as u8,
                    2 => req.truncate(at),
                    _ => {
                        if req.len() - at >= 4 {
                            let v = lens[(rng.next() % lens.len() as u64) as usize];
                            req[at..at + 4].copy_from_slice(&v.to_le_bytes());
                        }
                    }
                }
            }
        }
        let (st, reply) = process(&mut i, &req);
        match st {
            status::OK => {
                let count = u32::from_le_bytes([req[4], req[5], req[6], req[7]]);
                assert_eq!(entries(&reply).len() as u32, count, "run {}", run);
                accepted += 1;
            }
            status::ERR_INTERNAL | status::ERR_UNSUPPORTED | status::ERR_BATCH => {
                assert!(
                    !reply.is_empty(),
                    "run {}: status {} without a message",
                    run,
                    st
                )
            }
            _ => panic!("run {}: status {}", run, st),
        }
    }
    assert!(accepted > 0);
}

/// The decoder's fast path against the checked one: every record body with
/// each byte set to each of a few values, each 4 bytes to each kind of
/// length, and every truncation, decodes to
/// the same record where the fast path accepts it, and the checked decoder
/// refuses exactly what the fast path refuses.
#[test]
fn fast_record_matches_checked() {
    let mut bodies = Vec::new();
    for r in [
        rec(Some(b"v")),
        rec(None),
        R {
            key: None,
            headers: vec![],
            ..rec(Some(b""))
        },
    ] {
        let mut b = Vec::new();
        encode_record(&mut b, &r);
        bodies.push(b[4..].to_vec());
    }
    let mut fast = 0;
    for body in &bodies {
        assert!(wire::fast_record(body).is_some(), "{:?}", body);
        let mut cases = Vec::new();
        for at in 0..body.len() {
            for v in [0u8, 1, 2, 3, 4, 0x7f, 0x80, 0xfe, 0xff] {
                let mut b = body.clone();
                b[at] = v;
                cases.push(b);
            }
            cases.push(body[..at].to_vec());
            // Lengths: null (-1), other negatives, too long, zero.
            for v in [u32::MAX, u32::MAX - 1, 1 << 31, (1 << 31) - 1, 0, 1, 100] {
                if at + 4 <= body.len() {
                    let mut b = body.clone();
                    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    cases.push(b);
                }
            }
        }
        let mut long = body.clone();
        long.push(0);
        cases.push(long);
        for b in &cases {
            match (wire::fast_record(b), wire::checked_record(b)) {
                (Some(f), Ok(c)) => {
                    assert_eq!(f, c, "{:?}", b);
                    assert_eq!(
                        f.headers().collect::<Vec<_>>(),
                        c.headers().collect::<Vec<_>>()
                    );
                    fast += 1;
                }
                (None, Err(_)) => {}
                (f, c) => panic!("{:?}: fast {:?}, checked {:?}", b, f, c),
            }
        }
    }
    assert!(fast > 100);
}
