;; @NAME@: a streamd Wasm sink in WebAssembly text that "writes" each record
;; by logging its value (replace that with the durable write of your
;; destination) and refuses a record with a null value. Build it with
;; build.sh; test it with `streamd plugin test` (README.md). The whole
;; contract is docs/abi.md.
(module
  (import "streamd" "reply" (func $reply (param i32 i32)))
  (import "streamd" "log" (func $log (param i32 i32 i32)))
@COMMON@
  (data (i32.const 512) "null value: nothing to write")

  (func (export "streamd_process") (param $len i32) (result i32)
    (local $out i32) (local $o i32) (local $p i32) (local $count i32) (local $i i32)
    (local $size i32) (local $v i32) (local $vlen i32)
    (if (i32.ne (i32.load (i32.const 65536)) (i32.const 4)) ;; WRITE only
      (then (return (i32.const 3))))
    (local.set $out (i32.add (i32.const 65536) (global.get $cap)))
    (local.set $count (i32.load offset=4 (i32.const 65536)))
    (i32.store (local.get $out) (local.get $count))
    (local.set $o (i32.add (local.get $out) (i32.const 4)))
    (local.set $p (i32.const 65544))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
      (local.set $size (i32.load (local.get $p)))
      (local.set $v (call $value_at (i32.add (local.get $p) (i32.const 4))))
      (local.set $vlen (i32.load (local.get $v)))
      (if (i32.lt_s (local.get $vlen) (i32.const 0))
        (then ;; status 1 (ERR_RECORD): not written
          (i32.store (local.get $o) (i32.const 1))
          (i32.store offset=4 (local.get $o) (i32.const 28))
          (memory.copy (i32.add (local.get $o) (i32.const 8)) (i32.const 512) (i32.const 28))
          (local.set $o (i32.add (local.get $o) (i32.const 36))))
        (else ;; the durable write goes here; then status 0, no records: written
          (call $log (i32.const 0) (i32.add (local.get $v) (i32.const 4)) (local.get $vlen))
          (i32.store (local.get $o) (i32.const 0))
          (i32.store offset=4 (local.get $o) (i32.const 0))
          (local.set $o (i32.add (local.get $o) (i32.const 8)))))
      (local.set $p (i32.add (i32.add (local.get $p) (i32.const 4)) (local.get $size)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $reply (local.get $out) (i32.sub (local.get $o) (local.get $out)))
    (i32.const 0)))
