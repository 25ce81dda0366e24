package plugincli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// Error kinds, the "kind" of an error line: how a record failed, as a
// pipeline's dead letter says it (streamd-error-kind; pipeline.ErrorKind).
const (
	// KindRejected: the plugin rejected the record (ERR_RECORD, a
	// Result.Err, a codec's or sink's per-record error), or the record is
	// over a limit the pipeline's sink enforces (--max-record-bytes).
	KindRejected = pipeline.KindRejected
	// KindTrap: the call with the record alone crashed (plugins.ErrTrap).
	KindTrap = pipeline.KindTrap
	// KindTimeout: the call with the record alone ran past --timeout
	// (plugins.ErrTimeout).
	KindTimeout = pipeline.KindTimeout
	// KindMemory: the call with the record alone needed more memory than
	// --max-memory-pages (plugins.ErrMemoryLimit).
	KindMemory = pipeline.KindMemory
	// KindFailed: the call with the record alone failed otherwise: the
	// plugin answered ERR_BATCH or ERR_INTERNAL, or a reply that does not
	// parse.
	KindFailed = pipeline.KindFailed
)

var kinds = pipeline.Kinds

// jsonLine is one line of run output: a record, an error result or a sink's
// written result. In an expected file, an error line's Kind is
// KindRejected when not given, and HasOffset says whether input_offset was.
type jsonLine struct {
	Rec record.Record
	// Given says which of a record line's topic, partition and offset the
	// line has (an expected line compares only those).
	Given       fields
	IsErr       bool
	Err         string
	Kind        string
	Written     bool
	InputOffset int64
	HasOffset   bool
}

type resultLine struct {
	Error       *string `json:"error"`
	Kind        *string `json:"kind"`
	Written     *bool   `json:"written"`
	InputOffset *int64  `json:"input_offset"`
}

// fields are the position fields a record line gives.
type fields struct{ topic, partition, offset bool }

// members returns the member names of a JSON object line (nil if it is not
// one).
func members(line []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	return m
}

// isResultLine reports whether a JSON object line is a result line (it has
// an "error", "kind" or "written" member) rather than a record.
func isResultLine(line []byte) bool {
	m := members(line)
	_, e := m["error"]
	_, k := m["kind"]
	_, w := m["written"]
	return e || k || w
}

// decodeLine decodes one line of run output, or of an expected file.
func decodeLine(line []byte) (jsonLine, error) {
	if !isResultLine(line) {
		r, err := record.DecodeJSON(line)
		if err != nil {
			return jsonLine{}, err
		}
		m := members(line)
		_, t := m["topic"]
		_, p := m["partition"]
		_, o := m["offset"]
		return jsonLine{Rec: r, Given: fields{t, p, o}}, nil
	}
	var e resultLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return jsonLine{}, fmt.Errorf("a result line is {\"error\":MSG,\"kind\":KIND,\"input_offset\":N} or {\"written\":true,\"input_offset\":N}: %w", err)
	}
	l := jsonLine{}
	if e.InputOffset != nil {
		l.InputOffset, l.HasOffset = *e.InputOffset, true
	}
	switch {
	case e.Written != nil:
		if !*e.Written || e.Error != nil || e.Kind != nil {
			return jsonLine{}, errors.New(`a written line is {"written":true,"input_offset":N}, without "error" or "kind"`)
		}
		l.Written = true
		return l, nil
	}
	l.IsErr, l.Kind = true, KindRejected
	if e.Error != nil {
		l.Err = *e.Error
	}
	if e.Kind != nil {
		l.Kind = *e.Kind
		ok := false
		for _, k := range kinds {
			ok = ok || k == l.Kind
		}
		if !ok {
			return jsonLine{}, fmt.Errorf("kind %q: want one of %v", l.Kind, kinds)
		}
	}
	return l, nil
}

// appendError appends an error result line (without the newline).
func appendError(dst []byte, msg, kind string, inputOffset int64) []byte {
	dst = append(dst, `{"error":`...)
	dst = record.AppendJSONString(dst, []byte(msg))
	dst = append(dst, `,"kind":"`...)
	dst = append(dst, kind...)
	dst = append(dst, `","input_offset":`...)
	dst = strconv.AppendInt(dst, inputOffset, 10)
	return append(dst, '}')
}
