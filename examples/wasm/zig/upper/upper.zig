//! upper: a streamd Wasm transform in Zig, written from docs/abi.md alone
//! (no SDK): it upper-cases the ASCII letters of each record's value and
//! rejects a record whose value is null. It uses no Zig standard library
//! and imports nothing from WASI: only streamd's `reply`.
//!
//! Build: ./build.sh (docs/plugins.md, "A language without an SDK", says
//! why each flag is there).

// The host's reply import (docs/abi.md section 3): the host copies len
// bytes at ptr before it returns.
extern "streamd" fn reply(ptr: [*]const u8, len: usize) void;

// The version marker (section 1): the host reads the export's name, and
// never calls it.
export fn streamd_abi_v1() void {}

const manifest: []const u8 = "{\"name\":\"upper-zig\",\"kind\":\"transform\",\"version\":\"1.0.0\",\"abi\":1}";

// Call statuses (section 4) and entry statuses (section 8).
const ok: u32 = 0;
const err_internal: u32 = 5;
const err_record: u32 = 1;

// Two buffers of guest memory, each grown by taking fresh pages at the end
// of memory (memory.grow) when asked for more than it has: the input buffer
// the host writes to (streamd_buffer), and the reply being built.
const Buf = struct {
    ptr: [*]u8 = undefined,
    cap: usize = 0,

    fn reserve(b: *Buf, n: usize) bool {
        if (n <= b.cap) return true;
        const want = @max(n, 2 * b.cap, 65536);
        const pages = (want + 65535) / 65536;
        const prev = @wasmMemoryGrow(0, pages);
        if (prev < 0) return false;
        b.ptr = @ptrFromInt(@as(usize, @intCast(prev)) * 65536);
        b.cap = pages * 65536;
        return true;
    }
};

var input: Buf = .{};
var out: Buf = .{};

export fn streamd_buffer(n: usize) usize {
    if (!input.reserve(n)) return 0; // the host fails the call (status 5)
    return @intFromPtr(input.ptr);
}

export fn streamd_manifest() u32 {
    reply(manifest.ptr, manifest.len);
    return ok;
}

// No config: any JSON object is accepted.
export fn streamd_init(len: usize) u32 {
    _ = len;
    return ok;
}

fn get32(p: usize) u32 {
    const b = input.ptr;
    return @as(u32, b[p]) | @as(u32, b[p + 1]) << 8 | @as(u32, b[p + 2]) << 16 | @as(u32, b[p + 3]) << 24;
}

fn put32(p: usize, v: u32) void {
    out.ptr[p] = @truncate(v);
    out.ptr[p + 1] = @truncate(v >> 8);
    out.ptr[p + 2] = @truncate(v >> 16);
    out.ptr[p + 3] = @truncate(v >> 24);
}

fn fail(msg: []const u8) u32 {
    reply(msg.ptr, msg.len);
    return err_internal;
}

// streamd_process: the input buffer holds a request batch (section 7); the
// reply is a result batch (section 8) with one entry per record. A record
// with a value becomes one output record: the input's bytes with its value
// upper-cased and its offset and partition -1 (ignored by the host); one
// with a null value is rejected (ERR_RECORD).
export fn streamd_process(len: usize) u32 {
    if (len < 8) return fail("short request");
    const count = get32(4);
    // The reply is at most the request plus, per record, an entry header
    // (status, out_count: 8 bytes) or a rejection (status, length and
    // "null value": 18 bytes).
    if (!out.reserve(len + 4 + @as(usize, count) * 18)) return fail("out of memory");
    put32(0, count);
    var w: usize = 4;
    var p: usize = 8;
    var i: u32 = 0;
    while (i < count) : (i += 1) {
        if (p + 4 > len) return fail("short request");
        const size: usize = get32(p);
        const body = p + 4;
        if (size < 28 or body + size > len) return fail("bad record size");
        const key_len = get32(body + 20);
        const k: usize = if (key_len == 0xFFFFFFFF) 0 else key_len;
        const vl_at = body + 24 + k;
        if (vl_at + 4 > body + size) return fail("bad key length");
        const value_len = get32(vl_at);
        if (value_len == 0xFFFFFFFF) {
            const msg = "null value";
            put32(w, err_record);
            put32(w + 4, msg.len);
            @memcpy(out.ptr[w + 8 .. w + 8 + msg.len], msg);
            w += 8 + msg.len;
        } else {
            if (vl_at + 4 + value_len > body + size) return fail("bad value length");
            put32(w, ok);
            put32(w + 4, 1); // one output record
            w += 8;
            const rec = w;
            @memcpy(out.ptr[rec .. rec + 4 + size], input.ptr[p .. p + 4 + size]);
            @memset(out.ptr[rec + 4 .. rec + 12], 0xFF); // offset -1
            @memset(out.ptr[rec + 20 .. rec + 24], 0xFF); // partition -1
            const v = rec + (vl_at + 4 - p);
            for (out.ptr[v .. v + value_len]) |*c| {
                if (c.* >= 'a' and c.* <= 'z') c.* -= 'a' - 'A';
            }
            w += 4 + size;
        }
        p = body + size;
    }
    reply(out.ptr, w);
    return ok;
}
