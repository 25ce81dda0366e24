package codecs_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/codecs"
)

// FuzzDecode feeds arbitrary bytes to every codec's Decode. Whatever the
// input, Decode must not panic or fail the batch, must respect the size
// limit, and anything it accepts must survive an encode/decode round trip.
func FuzzDecode(f *testing.F) {
	const limit = 1 << 20
	ctx := context.Background()
	var cs []plugins.Codec
	for _, name := range codecs.Names() {
		c, err := codecs.New(name, 0, codecs.WithMaxDecodedSize(limit))
		if err != nil {
			f.Fatal(err)
		}
		cs = append(cs, c)
		// Seeds: valid payloads of every codec, and damaged ones.
		for _, p := range [][]byte{orderJSON(1), {}, make([]byte, 5000), []byte("hello hello hello")} {
			enc, err := c.Encode(ctx, [][]byte{p})
			if err != nil || enc[0].Err != nil {
				f.Fatal(err, enc[0].Err)
			}
			e := enc[0].Data
			f.Add(e)
			f.Add(e[:len(e)/2])
			f.Add(append(bytes.Clone(e), e...))
		}
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		for i, c := range cs {
			name := codecs.Names()[i]
			out, err := c.Decode(ctx, [][]byte{data})
			if err != nil {
				t.Fatalf("%s: batch error: %v", name, err)
			}
			if len(out) != 1 {
				t.Fatalf("%s: %d results for 1 payload", name, len(out))
			}
			if out[0].Err != nil {
				if out[0].Data != nil {
					t.Fatalf("%s: both data and error", name)
				}
				if !strings.Contains(out[0].Err.Error(), "codecs: "+name+": decode payload 0") {
					t.Fatalf("%s: error does not name codec and payload: %v", name, out[0].Err)
				}
				continue
			}
			if len(out[0].Data) > limit {
				t.Fatalf("%s: decoded %d bytes past the %d limit", name, len(out[0].Data), limit)
			}
			again, err := c.Encode(ctx, [][]byte{out[0].Data})
			if err != nil || again[0].Err != nil {
				t.Fatalf("%s: re-encode: %v %v", name, err, again[0].Err)
			}
			back, err := c.Decode(ctx, [][]byte{again[0].Data})
			if err != nil || back[0].Err != nil {
				t.Fatalf("%s: re-decode: %v %v", name, err, back[0].Err)
			}
			if !bytes.Equal(back[0].Data, out[0].Data) {
				t.Fatalf("%s: round trip of decoded payload changed it", name)
			}
		}
	})
}
