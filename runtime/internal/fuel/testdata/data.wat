;; Data segments for the merge in Instrument: unsorted, adjacent, with small
;; and large gaps, at a negative-looking (high) offset.
(module
  (memory (export "memory") 2)
  (data (i32.const 100) "abc")
  (data (i32.const 10) "xy")
  (data (i32.const 13) "z")
  (data (i32.const 200) "far")
  (data (i32.const 0) "\ff")
  (data (i32.const 131066) "\01\02\03\04\05\06")
  (func (export "f") (result i32) (i32.const 0)))
