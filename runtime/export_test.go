package runtime

// SetRewrite makes h instrument modules with f instead of fuel.Instrument,
// so that a test can give it a module the instrumentation cannot read.
func SetRewrite(h *Host, f func(bin []byte, module, name string, fuel uint32) ([]byte, error)) {
	h.rewrite = f
}
