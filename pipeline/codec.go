package pipeline

import (
	"context"
	"fmt"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// HeaderContentEncoding names the codec a record's value is encoded with.
const HeaderContentEncoding = "content-encoding"

// EncodeStage adapts a payload codec to a transform stage that encodes
// every value and sets content-encoding: name.
func EncodeStage(c plugins.Codec, name string) plugins.Transformer {
	return &codecStage{c: c, name: name, encode: true}
}

// DecodeStage adapts a payload codec to a transform stage that decodes the
// values whose content-encoding is name and removes the header; records
// without the header pass unchanged; a record encoded with another codec
// is an error naming both.
func DecodeStage(c plugins.Codec, name string) plugins.Transformer {
	return &codecStage{c: c, name: name}
}

type codecStage struct {
	c      plugins.Codec
	name   string
	encode bool
}

func (s *codecStage) Transform(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	payloads := make([][]byte, 0, len(batch))
	idx := make([]int, 0, len(batch))
	for i := range batch {
		r := &batch[i]
		if !s.encode {
			enc, ok := r.Header(HeaderContentEncoding)
			if !ok {
				out[i].Records = []record.Record{*r}
				continue
			}
			if string(enc) != s.name {
				out[i].Err = fmt.Errorf("record is encoded with %q, this stage decodes %q", enc, s.name)
				continue
			}
		}
		payloads = append(payloads, r.Value)
		idx = append(idx, i)
	}
	if len(payloads) == 0 {
		return out, nil
	}
	var res []plugins.Payload
	var err error
	if s.encode {
		res, err = s.c.Encode(ctx, payloads)
	} else {
		res, err = s.c.Decode(ctx, payloads)
	}
	if err != nil {
		return nil, err
	}
	if len(res) != len(payloads) {
		return nil, fmt.Errorf("codec %s returned %d payloads for %d", s.name, len(res), len(payloads))
	}
	for j, i := range idx {
		if res[j].Err != nil {
			out[i].Err = res[j].Err
			continue
		}
		r := batch[i]
		r.Value = res[j].Data
		r.Headers = append([]record.Header(nil), r.Headers...)
		if s.encode {
			r.SetHeader(HeaderContentEncoding, []byte(s.name))
		} else {
			r.DelHeader(HeaderContentEncoding)
		}
		out[i].Records = []record.Record{r}
	}
	return out, nil
}
