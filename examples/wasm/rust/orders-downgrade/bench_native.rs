//! bench_native: the Rust orders-downgrade plugin and the Rust SDK compiled
//! for the host (the same code as plugin.wasm: src/lib.rs and sdk/rust),
//! driven exactly as the Wasm host drives the plugin: the same request batch
//! of 256 orders as runtime.BenchmarkPlugins (runtime/helpers_test.go
//! benchRecords) is copied into the instance's input buffer
//! (`streamd_buffer`), `streamd_process` is called and the reply is copied
//! out (the host's `reply` import). Prints CPU nanoseconds per record in go
//! test's benchmark format, so that benchstat reads it beside the Wasm
//! figures (docs/benchmarks.md, issue 17); the C twin is
//! examples/wasm/c/orders-downgrade/bench_native.c.
//!
//!   examples/wasm/rust/build-plugin.sh --native-bench examples/wasm/rust/orders-downgrade bench
//!   ./bench [SECONDS]

use streamd::{Instance, Never, Plugin};

const BATCH: usize = 256;

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, t: *mut Timespec) -> i32;
}

/// CLOCK_PROCESS_CPUTIME_ID on Linux.
const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;

fn cpu_seconds() -> f64 {
    let mut t = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: t is a valid timespec for the call to fill.
    let rc = unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime failed");
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(b: &mut Vec<u8>, s: &[u8]) {
    put32(b, s.len() as u32);
    b.extend_from_slice(s);
}

/// The request of runtime.BenchmarkPlugins: op TRANSFORM, 256 orders.
fn request() -> Vec<u8> {
    let mut req = Vec::new();
    put32(&mut req, streamd::op::TRANSFORM);
    put32(&mut req, BATCH as u32);
    for i in 0..BATCH {
        let key = format!("key-{:012}", i);
        let value = format!(
            "{{\"order_id\":\"o-{:08}\",\"customer\":{{\"id\":\"c-{:06}\",\"name\":\"Ann Example\"}},\"amount_cents\":{},\"currency\":\"EUR\",\"tags\":[\"a\",\"b\",\"c\"],\"note\":\"0123456789abcdef0123456789\"}}",
            i,
            i % 1000,
            i * 7
        );
        let size_at = req.len();
        put32(&mut req, 0);
        req.extend_from_slice(&(i as u64).to_le_bytes()); // offset
        req.extend_from_slice(&(1767225600000u64 + i as u64).to_le_bytes()); // timestamp_ms
        put32(&mut req, 0); // partition
        put_bytes(&mut req, key.as_bytes());
        put_bytes(&mut req, value.as_bytes());
        put32(&mut req, 1);
        put_bytes(&mut req, b"trace-id");
        put_bytes(&mut req, b"0123456789abcdef");
        let size = (req.len() - size_at - 4) as u32;
        req[size_at..size_at + 4].copy_from_slice(&size.to_le_bytes());
    }
    req
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SECONDS"))
        .unwrap_or(1.0);
    let req = request();
    let mut inst: Instance<orders_downgrade::OrdersDowngrade, Never, Never> = Instance::new(
        "orders-downgrade",
        "1.0.0",
        Plugin::Transform(Default::default()),
    );
    if inst.manifest().0 != 0 {
        eprintln!("manifest failed");
        std::process::exit(1);
    }
    inst.buffer(2).expect("buffer")[..2].copy_from_slice(b"{}");
    if inst.init(2).0 != 0 {
        eprintln!("init failed");
        std::process::exit(1);
    }
    // The host's copy of the reply (runtime copies it out of guest memory).
    let mut reply: Vec<u8> = Vec::new();
    let mut n: u64 = 0;
    let start = cpu_seconds();
    let mut now = start;
    while now - start < seconds {
        for _ in 0..100 {
            let buf = inst.buffer(req.len() as i32).expect("buffer");
            buf[..req.len()].copy_from_slice(&req);
            let (st, r) = inst.process(req.len() as i32);
            if st != 0 {
                eprintln!("process failed: {}", String::from_utf8_lossy(r));
                std::process::exit(1);
            }
            reply.clear();
            reply.extend_from_slice(r);
            n += 1;
        }
        now = cpu_seconds();
    }
    let word =
        |at: usize| u32::from_le_bytes([reply[at], reply[at + 1], reply[at + 2], reply[at + 3]]);
    if reply.len() < 12 || word(0) != BATCH as u32 || word(4) != 0 || word(8) != 1 {
        eprintln!("reply: want {} results, the first OK with 1 record", BATCH);
        std::process::exit(1);
    }
    let ns = (now - start) * 1e9 / (n as f64 * BATCH as f64);
    println!(
        "BenchmarkPlugins/rust-native \t{}\t{:.0} ns/op\t{:.1} cpu-ns/record\t{:.1} ns/record",
        n,
        ns * BATCH as f64,
        ns,
        ns
    );
}
