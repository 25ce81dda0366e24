package plugincli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/streamd/streamd/record"
)

// jsonLine is one line of run output: a record, an error result or a sink's
// written result.
type jsonLine struct {
	Rec         record.Record
	IsErr       bool
	Err         string
	Written     bool
	InputOffset int64
}

type resultLine struct {
	Error       *string `json:"error"`
	Written     *bool   `json:"written"`
	InputOffset *int64  `json:"input_offset"`
}

// decodeLine decodes one line of run output.
func decodeLine(line []byte) (jsonLine, error) {
	if r, err := record.DecodeJSON(line); err == nil {
		return jsonLine{Rec: r}, nil
	} else if !bytes.Contains(line, []byte(`"input_offset"`)) {
		return jsonLine{}, err
	}
	var e resultLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return jsonLine{}, err
	}
	switch {
	case e.InputOffset == nil:
	case e.Error != nil && e.Written == nil:
		return jsonLine{IsErr: true, Err: *e.Error, InputOffset: *e.InputOffset}, nil
	case e.Written != nil && *e.Written && e.Error == nil:
		return jsonLine{Written: true, InputOffset: *e.InputOffset}, nil
	}
	return jsonLine{}, fmt.Errorf("a result line is {\"error\":MSG,\"input_offset\":N} or {\"written\":true,\"input_offset\":N}")
}

// appendError appends an error result line (without the newline).
func appendError(dst []byte, msg string, inputOffset int64) []byte {
	dst = append(dst, `{"error":`...)
	dst = record.AppendJSONString(dst, []byte(msg))
	dst = append(dst, `,"input_offset":`...)
	dst = strconv.AppendInt(dst, inputOffset, 10)
	return append(dst, '}')
}
