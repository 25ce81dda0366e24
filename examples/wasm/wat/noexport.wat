;; Not a whole plugin: it has the ABI marker but no streamd_process.
(module
  (memory (export "memory") 1)
  (func (export "streamd_abi_v1"))
  (func (export "streamd_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "streamd_manifest") (result i32) (i32.const 0))
  (func (export "streamd_init") (param i32) (result i32) (i32.const 0)))
