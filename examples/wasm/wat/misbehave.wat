;; A transform that misbehaves in the way its config asks, for the host's
;; failure tests. The config must be {"mode":"X..."}: the host passes
;; json.Marshal of the config table, so byte 9 of the input is X:
;;   t  trap (unreachable) in streamd_process
;;   l  loop forever in streamd_process (cut by the call timeout)
;;   m  grow memory one page at a time until it fails, then trap
;;   h  grow memory by 1000 pages (62.5 MiB) at once; if that fails, trap
;;   e  return OK without calling reply
;;   p  write a Rust-style panic message to stderr, then trap
;;   g  reply a malformed result batch (count 7, nothing else)
;;   s  reply a result whose record lengths run past the end
;;   b  return ERR_BATCH with a message
;;   i  return ERR_INTERNAL with a message
;;   u  return ERR_UNSUPPORTED
;;   r  refuse the config in streamd_init (ERR_CONFIG)
;;   k  behave: answer KEEP for every record
;; Any other config (or none) behaves like k.
(module
  (import "streamd" "reply" (func $reply (param i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (global $mode (mut i32) (i32.const 107)) ;; 'k'
  (func (export "streamd_abi_v1"))
  (func (export "streamd_buffer") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536))
      (then
        (if (i32.eq (memory.grow (i32.div_u (i32.add (local.get $n) (i32.const 65535)) (i32.const 65536))) (i32.const -1))
          (then (return (i32.const 0))))))
    (i32.const 65536))
  (data (i32.const 0) "{\"name\":\"misbehave\",\"kind\":\"transform\",\"version\":\"1.0.0\",\"abi\":1}")
  (data (i32.const 100) "bad config: mode r")
  (data (i32.const 130) "whole batch failed")
  (data (i32.const 160) "\07\00\00\00")
  (data (i32.const 170) "\01\00\00\00\00\00\00\00\01\00\00\00\ff\ff\00\00")
  ;; iovec {ptr 300, len 101} at 200, then the message at 300
  (data (i32.const 200) "\2c\01\00\00\65\00\00\00")
  (data (i32.const 300) "thread '<unnamed>' panicked at 'boom: no order_id', src/lib.rs:5:9\nnote: run with `RUST_BACKTRACE=1`\n")
  (func (export "streamd_manifest") (result i32)
    (call $reply (i32.const 0) (i32.const 65)) (i32.const 0))
  (func (export "streamd_init") (param $len i32) (result i32)
    (if (i32.gt_u (local.get $len) (i32.const 9))
      (then (global.set $mode (i32.load8_u offset=9 (i32.const 65536)))))
    (if (i32.eq (global.get $mode) (i32.const 114)) ;; 'r'
      (then
        (call $reply (i32.const 100) (i32.const 18))
        (return (i32.const 4))))
    (i32.const 0))
  (func (export "streamd_process") (param $len i32) (result i32)
    (local $count i32) (local $i i32) (local $p i32) (local $m i32)
    (local.set $m (global.get $mode))
    (if (i32.eq (local.get $m) (i32.const 116)) (then unreachable)) ;; 't'
    (if (i32.eq (local.get $m) (i32.const 108)) ;; 'l'
      (then (loop $forever (br $forever))))
    (if (i32.eq (local.get $m) (i32.const 109)) ;; 'm'
      (then
        (block $full (loop $grow
          (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
          (br $grow)))
        unreachable))
    (if (i32.eq (local.get $m) (i32.const 104)) ;; 'h'
      (then
        (if (i32.eq (memory.grow (i32.const 1000)) (i32.const -1)) (then unreachable))))
    (if (i32.eq (local.get $m) (i32.const 101)) ;; 'e'
      (then (return (i32.const 0))))
    (if (i32.eq (local.get $m) (i32.const 112)) ;; 'p'
      (then
        (drop (call $fd_write (i32.const 2) (i32.const 200) (i32.const 1) (i32.const 208)))
        unreachable))
    (if (i32.eq (local.get $m) (i32.const 103)) ;; 'g'
      (then
        (call $reply (i32.const 160) (i32.const 4))
        (return (i32.const 0))))
    (if (i32.eq (local.get $m) (i32.const 115)) ;; 's': count 1, status 0, out_count 1, size 0xffff
      (then
        (call $reply (i32.const 170) (i32.const 16))
        (return (i32.const 0))))
    (if (i32.eq (local.get $m) (i32.const 98)) ;; 'b'
      (then
        (call $reply (i32.const 130) (i32.const 18))
        (return (i32.const 2))))
    (if (i32.eq (local.get $m) (i32.const 105)) ;; 'i'
      (then
        (call $reply (i32.const 130) (i32.const 18))
        (return (i32.const 5))))
    (if (i32.eq (local.get $m) (i32.const 117)) ;; 'u'
      (then (return (i32.const 3))))
    (local.set $count (i32.load offset=4 (i32.const 65536)))
    (i32.store (i32.const 1024) (local.get $count))
    (local.set $p (i32.const 1028))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
      (i32.store (local.get $p) (i32.const 0))
      (i32.store offset=4 (local.get $p) (i32.const -1))
      (local.set $p (i32.add (local.get $p) (i32.const 8)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $reply (i32.const 1024) (i32.sub (local.get $p) (i32.const 1024)))
    (i32.const 0)))
