;; Test module for the fuel instrumentation: loops, recursion, calls
;; through a table, an exported start-less function set, and a name
;; section (wat2wasm --debug-names).
(module
  (import "env" "add" (func $add (param i32 i32) (result i32)))
  (table 2 funcref)
  (elem (i32.const 0) $count $fib)
  (global $g (mut i32) (i32.const 0))
  (global $fref funcref (ref.func $fib))
  (type $t (func (param i32) (result i32)))
  ;; count(n) loops n times and returns n via the imported add.
  (func $count (export "count") (param $n i32) (result i32)
    (local $i i32)
    (block $done
      (loop $again
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $i (call $add (local.get $i) (i32.const 1)))
        (br $again)))
    (local.get $i))
  ;; fib(n) is naive recursion: no loop at all.
  (func $fib (export "fib") (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add
        (call $fib (i32.sub (local.get $n) (i32.const 1)))
        (call $fib (i32.sub (local.get $n) (i32.const 2)))))))
  ;; indirect(i, n) calls table entry i with n.
  (func (export "indirect") (param $i i32) (param $n i32) (result i32)
    (call_indirect (type $t) (local.get $n) (local.get $i)))
  ;; spin never returns.
  (func (export "spin") (loop $l (global.set $g (i32.add (global.get $g) (i32.const 1))) (br $l)))
  ;; bump returns the global after adding one (shows the module's own
  ;; global keeps its index).
  (func (export "bump") (result i32)
    (global.set $g (i32.add (global.get $g) (i32.const 1)))
    (global.get $g)))
