//go:build !(amd64 || arm64)

package abi

import (
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

func scan(buf []byte, p, n int) (nrec, nhdr int, ok bool) { return scanPortable(buf, p, n) }

func fill(buf []byte, p int, in []record.Record, results []plugins.Result, reject func(string) error, recs []record.Record, nhdr int) {
	fillPortable(buf, p, in, results, reject, recs, nhdr)
}

// fillUniform decodes no entry here: see decode_unaligned.go.
func fillUniform(_ []byte, _ []record.Record, _ []plugins.Result) (entries, p int) { return 0, 4 }
