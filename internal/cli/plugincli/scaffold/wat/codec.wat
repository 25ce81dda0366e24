;; @NAME@: a streamd Wasm codec in WebAssembly text: ENCODE and DECODE both
;; reverse the bytes of a payload (replace them with your encoding); a null
;; payload (a tombstone) is answered with KEEP, so it stays null. Build it
;; with build.sh; test it with `streamd plugin test --op encode`
;; (README.md). The whole contract is docs/abi.md.
(module
  (import "streamd" "reply" (func $reply (param i32 i32)))
@COMMON@
  (func (export "streamd_process") (param $len i32) (result i32)
    (local $out i32) (local $o i32) (local $p i32) (local $count i32) (local $i i32)
    (local $size i32) (local $v i32) (local $vlen i32) (local $lo i32) (local $hi i32) (local $b i32)
    ;; op 2 (ENCODE) and 3 (DECODE) only: anything else is ERR_UNSUPPORTED
    (if (i32.or (i32.lt_u (i32.load (i32.const 65536)) (i32.const 2)) (i32.gt_u (i32.load (i32.const 65536)) (i32.const 3)))
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
      (i32.store (local.get $o) (i32.const 0))
      (if (i32.lt_s (local.get $vlen) (i32.const 0))
        (then ;; KEEP
          (i32.store offset=4 (local.get $o) (i32.const -1))
          (local.set $o (i32.add (local.get $o) (i32.const 8))))
        (else ;; one record: a copy of the input with the value reversed
          (i32.store offset=4 (local.get $o) (i32.const 1))
          (memory.copy (i32.add (local.get $o) (i32.const 8)) (local.get $p) (i32.add (local.get $size) (i32.const 4)))
          (local.set $lo (i32.add (i32.add (local.get $o) (i32.const 12)) (i32.sub (local.get $v) (local.get $p))))
          (local.set $hi (i32.sub (i32.add (local.get $lo) (local.get $vlen)) (i32.const 1)))
          (block $rev (loop $swap
            (br_if $rev (i32.ge_s (local.get $lo) (local.get $hi)))
            (local.set $b (i32.load8_u (local.get $lo)))
            (i32.store8 (local.get $lo) (i32.load8_u (local.get $hi)))
            (i32.store8 (local.get $hi) (local.get $b))
            (local.set $lo (i32.add (local.get $lo) (i32.const 1)))
            (local.set $hi (i32.sub (local.get $hi) (i32.const 1)))
            (br $swap)))
          (local.set $o (i32.add (i32.add (local.get $o) (i32.const 12)) (local.get $size)))))
      (local.set $p (i32.add (i32.add (local.get $p) (i32.const 4)) (local.get $size)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $reply (local.get $out) (i32.sub (local.get $o) (local.get $out)))
    (i32.const 0)))
