//go:build !(amd64 || arm64)

package abi

import (
	"github.com/streamd/streamd/record"
	wire "github.com/streamd/streamd/sdk/go/streamd/abi"
)

func encode(dst []byte, op wire.Op, recs []record.Record) (n int, ok bool) {
	return encodePortable(dst, op, recs)
}
