;; A plugin for a future ABI v2, which this host must refuse by name.
(module
  (memory (export "memory") 1)
  (func (export "streamd_abi_v2"))
  (func (export "streamd_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "streamd_manifest") (result i32) (i32.const 0))
  (func (export "streamd_init") (param i32) (result i32) (i32.const 0))
  (func (export "streamd_process") (param i32) (result i32) (i32.const 0)))
