//go:build !linux

package abi

import (
	"bytes"
	"testing"
)

// atPageEnd calls f with a plain copy of b where no guard page can be
// placed.
func atPageEnd(_ testing.TB, b []byte, f func([]byte)) { f(bytes.Clone(b)) }
