//go:build !(amd64 || arm64)

package abi

import "github.com/streamd/streamd/record"

func encode(dst []byte, op Op, recs []record.Record) (n int, ok bool) {
	return encodePortable(dst, op, recs)
}
