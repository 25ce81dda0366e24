;; Test module for the entry checks (TestEntryChecks): which functions that
;; call go without a check at their entry (Version 5 of the rewrite).
(module
  (import "env" "add" (func $add (param i32 i32) (result i32)))
  (global $g (mut i32) (i32.const 0))

  ;; leaf calls nothing: no check.
  (func $leaf (global.set $g (i32.add (global.get $g) (i32.const 1))))
  ;; chain -> mid -> leaf: no loop, no cycle, small: no check anywhere, so
  ;; calling chain costs no fuel.
  (func $mid (call $leaf) (call $leaf))
  (func (export "chain") (call $mid) (call $leaf))
  ;; host calls the import: checked at entry.
  (func (export "host") (global.set $g (call $add (global.get $g) (i32.const 1))))
  ;; cycle_a -> cycle_b -> cycle_c -> cycle_a, no loop: never returns, and
  ;; one of the three must be checked.
  (func $cycle_a (export "cycle") (call $cycle_b))
  (func $cycle_b (call $cycle_c))
  (func $cycle_c (call $leaf) (call $cycle_a))
  ;; double0 calls double1 twice, ..., double39 calls leaf twice: no loop
  ;; and no cycle, but 2^40 calls (hours): the entry checks must still come
  ;; often enough for a refill to stop it.
  (func $double0 (export "double") (call $double1) (call $double1))
  (func $double1 (call $double2) (call $double2))
  (func $double2 (call $double3) (call $double3))
  (func $double3 (call $double4) (call $double4))
  (func $double4 (call $double5) (call $double5))
  (func $double5 (call $double6) (call $double6))
  (func $double6 (call $double7) (call $double7))
  (func $double7 (call $double8) (call $double8))
  (func $double8 (call $double9) (call $double9))
  (func $double9 (call $double10) (call $double10))
  (func $double10 (call $double11) (call $double11))
  (func $double11 (call $double12) (call $double12))
  (func $double12 (call $double13) (call $double13))
  (func $double13 (call $double14) (call $double14))
  (func $double14 (call $double15) (call $double15))
  (func $double15 (call $double16) (call $double16))
  (func $double16 (call $double17) (call $double17))
  (func $double17 (call $double18) (call $double18))
  (func $double18 (call $double19) (call $double19))
  (func $double19 (call $double20) (call $double20))
  (func $double20 (call $double21) (call $double21))
  (func $double21 (call $double22) (call $double22))
  (func $double22 (call $double23) (call $double23))
  (func $double23 (call $double24) (call $double24))
  (func $double24 (call $double25) (call $double25))
  (func $double25 (call $double26) (call $double26))
  (func $double26 (call $double27) (call $double27))
  (func $double27 (call $double28) (call $double28))
  (func $double28 (call $double29) (call $double29))
  (func $double29 (call $double30) (call $double30))
  (func $double30 (call $double31) (call $double31))
  (func $double31 (call $double32) (call $double32))
  (func $double32 (call $double33) (call $double33))
  (func $double33 (call $double34) (call $double34))
  (func $double34 (call $double35) (call $double35))
  (func $double35 (call $double36) (call $double36))
  (func $double36 (call $double37) (call $double37))
  (func $double37 (call $double38) (call $double38))
  (func $double38 (call $double39) (call $double39))
  (func $double39 (call $leaf) (call $leaf))
)
