;; Test module without a name section (built without --debug-names): a
;; trap in an unexported function called by an exported one.
(module
  (func $inner unreachable)
  (func (export "outer") (call $inner)))
