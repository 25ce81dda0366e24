;; A passive segment and memory.init: segments are named by index, so the
;; data section must be left as it is.
(module
  (memory (export "memory") 1)
  (data (i32.const 10) "ab")
  (data "cd")
  (data (i32.const 20) "ef")
  (func (export "f") (memory.init 1 (i32.const 30) (i32.const 0) (i32.const 2))))
