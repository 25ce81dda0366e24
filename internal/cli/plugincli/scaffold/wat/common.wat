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

  (data (i32.const 0) "@MANIFEST@")
  (func (export "streamd_manifest") (result i32)
    (call $reply (i32.const 0) (i32.const @MANIFEST_LEN@))
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
