;; Test module for the fuel instrumentation (TestHostile): guests that never
;; return unless stopped, and fuel that must be counted exactly across calls
;; (wat2wasm --enable-tail-call). Function entries are checked only in
;; functions that call; loop heads always.
(module
  (type $v (func))
  (type $i (func (param i32)))
  (table 3 funcref)
  (elem (i32.const 0) $leaf $looper3)
  (global $g (mut i32) (i32.const 0))

  ;; leaf calls nothing and has no loop: no check at all.
  (func $leaf (global.set $g (i32.add (global.get $g) (i32.const 1))))
  ;; looper(n>0) loops n times: n checks.
  (func $looper (param $n i32)
    (loop $l (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1))))))
  ;; looper3 loops 3 times: 3 checks.
  (func $looper3 (local $n i32)
    (local.set $n (i32.const 3))
    (loop $l (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1))))))
  ;; exit_br_table(n>0), exit_br_if(n>0), exit_return(n>0) loop n times and
  ;; leave from inside the loop: by a br_table, a br_if to the function's
  ;; label, a return: n checks each.
  (func $exit_br_table (param $n i32)
    (loop $l
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_table 0 1 (i32.eqz (local.get $n)))))
  (func $exit_br_if (param $n i32)
    (loop $l
      (br_if 1 (i32.eqz (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
      (br $l)))
  (func $exit_return (param $n i32)
    (loop $l
      (if (i32.eqz (local.tee $n (i32.sub (local.get $n) (i32.const 1)))) (then (return)))
      (br $l)))

  ;; Never return:
  (func (export "spin_calls_leaf") (loop $l (call $leaf) (br $l)))
  (func (export "spin_calls_looper") (loop $l (call $looper (i32.const 3)) (br $l)))
  (func (export "spin_calls_indirect") (loop $l (call_indirect (type $v) (i32.const 1)) (br $l)))
  (func (export "spin_br_table") (block $out (loop $l (br_table $l $out (i32.const 0)))))
  (func $mutual_a (export "mutual") (call $mutual_b))
  (func $mutual_b (call $mutual_a))
  (func $tail (export "tail") (return_call $tail))
  (func $tail_a (export "tail_mutual") (return_call $tail_b))
  (func $tail_b (return_call_indirect (type $v) (i32.const 2)))
  (elem (i32.const 2) $tail_a)

  ;; calls(k, n): 1 entry check + k times (1 loop head + 4n + 3) checks,
  ;; all but 1 + k of them in the functions it calls. (With n large, fuel
  ;; a callee used but did not give back shows as fewer refills.)
  (func (export "calls") (param $k i32) (param $n i32)
    (loop $l
      (call $exit_br_table (local.get $n))
      (call $exit_br_if (local.get $n))
      (call $exit_return (local.get $n))
      (call $looper (local.get $n))
      (call_indirect (type $v) (i32.const 1))
      (br_if $l (local.tee $k (i32.sub (local.get $k) (i32.const 1))))))
  ;; tail_count(n): n+1 entries, each checked (it calls).
  (func $tail_count (export "tail_count") (param $n i32)
    (if (local.get $n) (then (return_call $tail_count (i32.sub (local.get $n) (i32.const 1))))))
  ;; calls_tail(k): 1 + k times (1 + 10) checks.
  (func (export "calls_tail") (param $k i32)
    (loop $l
      (call $tail_count (i32.const 9))
      (br_if $l (local.tee $k (i32.sub (local.get $k) (i32.const 1))))))
  ;; trap_after(n>0): n checks, then a trap.
  (func (export "trap_after") (param $n i32)
    (loop $l (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
    (unreachable)))
