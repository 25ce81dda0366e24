;; A transform that keeps every record (KEEP) but traps on a record whose
;; value starts with "poison", and never returns for one whose value starts
;; with "hang" (the call timeout stops it): the host's failure-isolation
;; test guest.
;; It also logs "init" through streamd.log at init and rejects a record whose
;; value starts with "reject" (ERR_RECORD "rejected by poison.wat").
(module
  (import "streamd" "reply" (func $reply (param i32 i32)))
  (import "streamd" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (func (export "streamd_abi_v1"))
  (func (export "streamd_buffer") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536))
      (then
        (if (i32.eq (memory.grow (i32.div_u (i32.add (local.get $n) (i32.const 65535)) (i32.const 65536))) (i32.const -1))
          (then (return (i32.const 0))))))
    (i32.const 65536))
  (data (i32.const 0) "{\"name\":\"poison\",\"kind\":\"transform\",\"version\":\"1.0.0\",\"abi\":1}")
  (data (i32.const 100) "init")
  (data (i32.const 120) "rejected by poison.wat")
  (func (export "streamd_manifest") (result i32)
    (call $reply (i32.const 0) (i32.const 62)) (i32.const 0))
  (func (export "streamd_init") (param i32) (result i32)
    (call $log (i32.const 1) (i32.const 100) (i32.const 4))
    (i32.const 0))
  ;; $value returns the address of value_len in the record body at $b.
  (func $value (param $b i32) (result i32) ;; address of value_len
    (local $kl i32)
    (local.set $kl (i32.load offset=20 (local.get $b)))
    (if (i32.lt_s (local.get $kl) (i32.const 0)) (then (local.set $kl (i32.const 0))))
    (i32.add (i32.add (local.get $b) (i32.const 24)) (local.get $kl)))
  (func (export "streamd_process") (param $len i32) (result i32)
    (local $count i32) (local $i i32) (local $p i32) (local $r i32) (local $v i32) (local $w i32)
    (local.set $count (i32.load offset=4 (i32.const 65536)))
    (local.set $r (i32.const 65544))
    (i32.store (i32.const 1024) (local.get $count))
    (local.set $p (i32.const 1028))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
      (local.set $v (call $value (i32.add (local.get $r) (i32.const 4))))
      (local.set $w (i32.const 0))
      (if (i32.ge_s (i32.load (local.get $v)) (i32.const 4))
        (then (local.set $w (i32.load offset=4 (local.get $v)))))
      ;; "pois" = 0x73696f70
      (if (i32.eq (local.get $w) (i32.const 0x73696f70)) (then unreachable))
      ;; "hang" = 0x676e6168
      (if (i32.eq (local.get $w) (i32.const 0x676e6168)) (then (loop $forever (br $forever))))
      ;; "reje" = 0x656a6572
      (if (i32.eq (local.get $w) (i32.const 0x656a6572))
        (then
          (i32.store (local.get $p) (i32.const 1))
          (i32.store offset=4 (local.get $p) (i32.const 22))
          (memory.copy (i32.add (local.get $p) (i32.const 8)) (i32.const 120) (i32.const 22))
          (local.set $p (i32.add (local.get $p) (i32.const 30))))
        (else
          (i32.store (local.get $p) (i32.const 0))
          (i32.store offset=4 (local.get $p) (i32.const -1))
          (local.set $p (i32.add (local.get $p) (i32.const 8)))))
      (local.set $r (i32.add (i32.add (local.get $r) (i32.const 4)) (i32.load (local.get $r))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $reply (i32.const 1024) (i32.sub (local.get $p) (i32.const 1024)))
    (i32.const 0)))
