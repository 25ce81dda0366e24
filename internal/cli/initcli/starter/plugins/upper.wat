;; upper: a streamd Wasm transform in WebAssembly text that upper-cases
;; the ASCII letters of each record's value and rejects a record with a null
;; value. Build it with build.sh; test it with `streamd plugin test`
;; (README.md). The whole contract is docs/abi.md.
(module
  (import "streamd" "reply" (func $reply (param i32 i32)))
  ;; Memory: page 0 holds the manifest (at 0) and messages (at 512); the
  ;; input buffer starts at 65536 and holds $cap bytes; the reply is built
  ;; right after it, in up to 2 x $cap + 64 bytes (a result is never more
  ;; than twice its request). docs/abi.md sections 4, 7 and 8.
  (memory (export "memory") 2)
  (global $cap (mut i32) (i32.const 16384))
  (func (export "streamd_abi_v1"))

  ;; streamd_buffer(n): the input buffer, grown so that it holds n bytes and
  ;; the reply area behind it fits; 0 if memory cannot grow that far.
  (func $buffer (export "streamd_buffer") (param $n i32) (result i32)
    (local $need i32) (local $have i32)
    (if (i32.gt_u (local.get $n) (global.get $cap))
      (then
        (if (i32.gt_u (local.get $n) (i32.const 0x10000000)) (then (return (i32.const 0))))
        ;; 65536 + 3n + 64 bytes, in pages
        (local.set $need (i32.shr_u (i32.add (i32.add (i32.const 65536) (i32.mul (local.get $n) (i32.const 3))) (i32.const 65599)) (i32.const 16)))
        (local.set $have (memory.size))
        (if (i32.gt_u (local.get $need) (local.get $have))
          (then
            (if (i32.eq (memory.grow (i32.sub (local.get $need) (local.get $have))) (i32.const -1))
              (then (return (i32.const 0))))))
        (global.set $cap (local.get $n))))
    (i32.const 65536))

  (data (i32.const 0) "{\"name\":\"upper\",\"kind\":\"transform\",\"version\":\"0.1.0\",\"abi\":1}")
  (func (export "streamd_manifest") (result i32)
    (call $reply (i32.const 0) (i32.const 61))
    (i32.const 0))

  ;; The config (JSON, in the input buffer) is accepted whatever it is.
  (func (export "streamd_init") (param $len i32) (result i32)
    (i32.const 0))

  ;; value_at(body): the address of the value_len field of the record body
  ;; at body (offset i64, timestamp i64, partition i32, key_len i32, key).
  (func $value_at (param $body i32) (result i32)
    (local $klen i32)
    (local.set $klen (i32.load offset=20 (local.get $body)))
    (i32.add (i32.add (local.get $body) (i32.const 24))
      (select (local.get $klen) (i32.const 0) (i32.gt_s (local.get $klen) (i32.const 0)))))
  (data (i32.const 512) "null value")

  (func (export "streamd_process") (param $len i32) (result i32)
    (local $out i32) (local $o i32) (local $p i32) (local $count i32) (local $i i32)
    (local $size i32) (local $v i32) (local $vlen i32) (local $c i32) (local $j i32) (local $b i32)
    (if (i32.ne (i32.load (i32.const 65536)) (i32.const 1)) ;; TRANSFORM only
      (then (return (i32.const 3))))
    (local.set $out (i32.add (i32.const 65536) (global.get $cap)))
    (local.set $count (i32.load offset=4 (i32.const 65536)))
    (i32.store (local.get $out) (local.get $count))
    (local.set $o (i32.add (local.get $out) (i32.const 4)))
    (local.set $p (i32.const 65544)) ;; the first record: size, then body
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
      (local.set $size (i32.load (local.get $p)))
      (local.set $v (call $value_at (i32.add (local.get $p) (i32.const 4))))
      (local.set $vlen (i32.load (local.get $v)))
      (if (i32.lt_s (local.get $vlen) (i32.const 0))
        (then ;; status 1 (ERR_RECORD), the reason
          (i32.store (local.get $o) (i32.const 1))
          (i32.store offset=4 (local.get $o) (i32.const 10))
          (memory.copy (i32.add (local.get $o) (i32.const 8)) (i32.const 512) (i32.const 10))
          (local.set $o (i32.add (local.get $o) (i32.const 18))))
        (else ;; status 0, one record: a copy of the input, offset and partition -1, value upper-cased
          (i32.store (local.get $o) (i32.const 0))
          (i32.store offset=4 (local.get $o) (i32.const 1))
          (memory.copy (i32.add (local.get $o) (i32.const 8)) (local.get $p) (i32.add (local.get $size) (i32.const 4)))
          (i64.store offset=12 (local.get $o) (i64.const -1))
          (i32.store offset=28 (local.get $o) (i32.const -1))
          (local.set $c (i32.add (i32.add (local.get $o) (i32.const 12)) (i32.sub (local.get $v) (local.get $p))))
          (local.set $j (i32.const 0))
          (block $up (loop $byte
            (br_if $up (i32.ge_u (local.get $j) (local.get $vlen)))
            (local.set $b (i32.load8_u (i32.add (local.get $c) (local.get $j))))
            (if (i32.and (i32.ge_u (local.get $b) (i32.const 97)) (i32.le_u (local.get $b) (i32.const 122)))
              (then (i32.store8 (i32.add (local.get $c) (local.get $j)) (i32.sub (local.get $b) (i32.const 32)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $byte)))
          (local.set $o (i32.add (i32.add (local.get $o) (i32.const 12)) (local.get $size)))))
      (local.set $p (i32.add (i32.add (local.get $p) (i32.const 4)) (local.get $size)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $reply (local.get $out) (i32.sub (local.get $o) (local.get $out)))
    (i32.const 0)))
