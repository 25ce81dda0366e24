// upper: a streamd Wasm transform in C++, written from docs/abi.md alone
// (no SDK): it upper-cases the ASCII letters of each record's value and
// rejects a record whose value is null. It uses libc++ (std::vector,
// std::string_view) from Debian's libc++-dev-wasm32 on wasi-libc.
//
// Build: ./build.sh (docs/plugins.md, "A language without an SDK", says
// why each flag is there).
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

// The host's reply import (docs/abi.md section 3): the host copies len bytes
// at ptr before it returns.
__attribute__((import_module("streamd"), import_name("reply"))) extern "C" void
streamd_reply(const void *ptr, uint32_t len);

namespace {

constexpr std::string_view manifest =
    R"({"name":"upper-cpp","kind":"transform","version":"1.0.0","abi":1})";

// Call statuses (section 4) and entry statuses (section 8).
constexpr uint32_t ok = 0, err_internal = 5, err_record = 1;

std::vector<uint8_t> input;  // the input buffer the host writes to
std::vector<uint8_t> out;    // the reply being built, reused

uint32_t get32(size_t p) {
  uint32_t v;
  std::memcpy(&v, input.data() + p, 4);  // Wasm is little-endian, as the ABI
  return v;
}

void put32(uint32_t v) {
  uint8_t b[4];
  std::memcpy(b, &v, 4);
  out.insert(out.end(), b, b + 4);
}

uint32_t fail(std::string_view msg) {
  streamd_reply(msg.data(), msg.size());
  return err_internal;
}

}  // namespace

extern "C" {

// The version marker (section 1): the host reads the export's name and never
// calls it.
__attribute__((export_name("streamd_abi_v1"))) void streamd_abi_v1() {}

__attribute__((export_name("streamd_buffer"))) uint8_t *streamd_buffer(uint32_t n) {
  if (n > input.size()) input.resize(n);  // no exceptions: aborts (a trap) when out of memory
  return input.data();
}

__attribute__((export_name("streamd_manifest"))) uint32_t streamd_manifest() {
  streamd_reply(manifest.data(), manifest.size());
  return ok;
}

// No config: any JSON object is accepted.
__attribute__((export_name("streamd_init"))) uint32_t streamd_init(uint32_t) { return ok; }

// streamd_process: the input buffer holds a request batch (section 7); the
// reply is a result batch (section 8) with one entry per record. A record
// with a value becomes one output record: the input's bytes with its value
// upper-cased and its offset and partition -1 (ignored by the host); one with
// a null value is rejected (ERR_RECORD).
__attribute__((export_name("streamd_process"))) uint32_t streamd_process(uint32_t len) {
  if (len < 8 || len > input.size()) return fail("short request");
  const uint32_t count = get32(4);
  out.clear();
  out.reserve(len + 4 + size_t(count) * 18);
  put32(count);
  size_t p = 8;
  for (uint32_t i = 0; i < count; i++) {
    if (p + 4 > len) return fail("short request");
    const size_t size = get32(p), body = p + 4;
    if (size < 28 || body + size > len) return fail("bad record size");
    const uint32_t key_len = get32(body + 20);
    const size_t vl_at = body + 24 + (key_len == UINT32_MAX ? 0 : key_len);
    if (vl_at + 4 > body + size) return fail("bad key length");
    const uint32_t value_len = get32(vl_at);
    if (value_len == UINT32_MAX) {
      constexpr std::string_view msg = "null value";
      put32(err_record);
      put32(msg.size());
      out.insert(out.end(), msg.begin(), msg.end());
    } else {
      if (vl_at + 4 + value_len > body + size) return fail("bad value length");
      put32(ok);
      put32(1);  // one output record
      const size_t rec = out.size();
      out.insert(out.end(), input.begin() + p, input.begin() + body + size);
      std::memset(&out[rec + 4], 0xFF, 8);   // offset -1
      std::memset(&out[rec + 20], 0xFF, 4);  // partition -1
      for (size_t v = rec + (vl_at + 4 - p), end = v + value_len; v < end; v++)
        if (out[v] >= 'a' && out[v] <= 'z') out[v] -= 'a' - 'A';
    }
    p = body + size;
  }
  streamd_reply(out.data(), out.size());
  return ok;
}

}  // extern "C"
