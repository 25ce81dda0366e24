//go:build !(amd64 || arm64)

package abi

import (
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

func scan(buf []byte, n int) (nrec, nhdr int, ok bool) { return scanPortable(buf, n) }

func fill(buf []byte, in []record.Record, results []plugins.Result, reject func(string) error, nrec, nhdr int) {
	fillPortable(buf, in, results, reject, nrec, nhdr)
}
