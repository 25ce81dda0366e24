package codecs_test

import (
	"bytes"
	"context"
	"os/exec"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestSnappyBlockFormat pins the wire format of snappy to the plain block
// format: a uvarint length, then elements. 0x05 = 5 bytes decoded; 0x10 = a
// literal of 5 bytes.
func TestSnappyBlockFormat(t *testing.T) {
	c := newCodec(t, "snappy", 0)
	ctx := context.Background()
	vector := []byte{0x05, 0x10, 'h', 'e', 'l', 'l', 'o'}
	dec, err := c.Decode(ctx, [][]byte{vector})
	if err != nil || dec[0].Err != nil {
		t.Fatal(err, dec[0].Err)
	}
	if string(dec[0].Data) != "hello" {
		t.Fatalf("decoded %q", dec[0].Data)
	}
	enc, err := c.Encode(ctx, [][]byte{[]byte("hello")})
	if err != nil || enc[0].Err != nil {
		t.Fatal(err, enc[0].Err)
	}
	if !bytes.Equal(enc[0].Data, vector) {
		t.Fatalf("encoded % x, want % x", enc[0].Data, vector)
	}
	// The snappy framing (stream) format must be refused, not mistaken.
	framed := []byte{0xff, 0x06, 0x00, 0x00, 's', 'N', 'a', 'P', 'p', 'Y'}
	dec, _ = c.Decode(ctx, [][]byte{framed})
	if dec[0].Err == nil {
		t.Fatalf("snappy stream identifier decoded as a block to %q", dec[0].Data)
	}
}

// TestMagic checks that each framed format starts with its magic number.
func TestMagic(t *testing.T) {
	magic := map[string][]byte{
		"gzip": {0x1f, 0x8b},
		"lz4":  {0x04, 0x22, 0x4d, 0x18},
		"zstd": {0x28, 0xb5, 0x2f, 0xfd},
	}
	for name, m := range magic {
		enc, err := newCodec(t, name, 0).Encode(context.Background(), [][]byte{orderJSON(3)})
		if err != nil || enc[0].Err != nil {
			t.Fatal(err, enc[0].Err)
		}
		if !bytes.HasPrefix(enc[0].Data, m) {
			t.Errorf("%s output starts % x, want % x", name, enc[0].Data[:4], m)
		}
	}
}

// TestCLIInterop checks the formats against the reference command-line
// tools: what the codec encodes they decode, and what they encode the codec
// decodes.
func TestCLIInterop(t *testing.T) {
	ctx := context.Background()
	var doc []byte
	for i := range 300 {
		doc = append(doc, orderJSON(i)...)
	}
	tools := []struct{ codec, tool string }{
		{"gzip", "gzip"},
		{"lz4", "lz4"},
		{"zstd", "zstd"},
	}
	for _, tt := range tools {
		t.Run(tt.codec, func(t *testing.T) {
			tool := testenv.Tool(t, tt.tool)
			c := newCodec(t, tt.codec, 0)
			enc, err := c.Encode(ctx, [][]byte{doc})
			if err != nil || enc[0].Err != nil {
				t.Fatal(err, enc[0].Err)
			}
			got := run(t, tool, enc[0].Data, "-d", "-c")
			if !bytes.Equal(got, doc) {
				t.Fatalf("%s -d gave %d bytes, want %d", tt.tool, len(got), len(doc))
			}
			theirs := run(t, tool, doc, "-c")
			dec, err := c.Decode(ctx, [][]byte{theirs})
			if err != nil || dec[0].Err != nil {
				t.Fatal(err, dec[0].Err)
			}
			if !bytes.Equal(dec[0].Data, doc) {
				t.Fatalf("decoding %s's output gave %d bytes, want %d", tt.tool, len(dec[0].Data), len(doc))
			}
		})
	}
}

func run(t *testing.T, tool string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(tool, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", tool, args, err, stderr.String())
	}
	return out
}
