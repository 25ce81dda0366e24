package codecs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/codecs"
)

// levels lists the levels each codec is tested at: the default, the ends of
// its range and one in between.
var levels = map[string][]int{
	"gzip":   {0, 1, 5, 9},
	"lz4":    {0, 1, 5, 9},
	"snappy": {0, 1, 2, 3},
	"zstd":   {0, 1, 3, 7, 22},
}

// orderJSON returns a record-like JSON document of about 200 bytes.
func orderJSON(i int) []byte {
	return fmt.Appendf(nil, `{"order_id":"ord-%08d","customer":{"id":%d,"name":"customer %d"},"items":[{"sku":"sku-%d","qty":%d}],"total":%d.%02d,"currency":"EUR","ts":"2026-11-30T10:%02d:%02dZ"}`,
		i, i%9973, i%9973, i%503, i%7+1, i%1000, i%100, i%60, i%60)
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testPayloads() [][]byte {
	return [][]byte{
		orderJSON(1),
		nil, // a null value
		{},  // empty, non-nil
		[]byte("x"),
		bytes.Repeat([]byte("abcdefgh"), 200_000), // 1.6 MB, compressible
		randomBytes(300_000, 1),                   // incompressible
		orderJSON(2),
	}
}

func newCodec(t testing.TB, name string, level int, opts ...codecs.Option) plugins.Codec {
	t.Helper()
	c, err := codecs.New(name, level, opts...)
	if err != nil {
		t.Fatalf("New(%q, %d): %v", name, level, err)
	}
	t.Cleanup(func() {
		if err := c.(plugins.Plugin).Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func TestNames(t *testing.T) {
	got := strings.Join(codecs.Names(), ",")
	if got != "gzip,lz4,snappy,zstd" {
		t.Fatalf("Names() = %s", got)
	}
	for _, name := range codecs.Names() {
		if _, ok := levels[name]; !ok {
			t.Errorf("codec %s has no levels in this test", name)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	in := testPayloads()
	for name, lv := range levels {
		for _, level := range lv {
			t.Run(fmt.Sprintf("%s/%d", name, level), func(t *testing.T) {
				c := newCodec(t, name, level)
				enc, err := c.Encode(ctx, in)
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				if len(enc) != len(in) {
					t.Fatalf("Encode gave %d payloads for %d", len(enc), len(in))
				}
				encoded := make([][]byte, len(enc))
				for i, p := range enc {
					if p.Err != nil {
						t.Fatalf("Encode payload %d: %v", i, p.Err)
					}
					if (p.Data == nil) != (in[i] == nil) {
						t.Fatalf("payload %d: nil in=%v, nil out=%v", i, in[i] == nil, p.Data == nil)
					}
					if in[i] != nil && len(p.Data) == 0 {
						t.Fatalf("payload %d encoded to nothing", i)
					}
					encoded[i] = p.Data
				}
				// The compressible payload must shrink.
				if len(encoded[4]) >= len(in[4])/10 {
					t.Errorf("1.6 MB of repeats encoded to %d bytes", len(encoded[4]))
				}
				dec, err := c.Decode(ctx, encoded)
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				for i, p := range dec {
					if p.Err != nil {
						t.Fatalf("Decode payload %d: %v", i, p.Err)
					}
					if !bytes.Equal(p.Data, in[i]) || (p.Data == nil) != (in[i] == nil) {
						t.Fatalf("payload %d: round trip changed it (%d bytes in, %d out)", i, len(in[i]), len(p.Data))
					}
				}
				// Outputs are independent: appending to one never
				// overwrites the next.
				first := dec[0].Data
				_ = append(first, "trailing garbage"...)
				if !bytes.Equal(dec[3].Data, in[3]) {
					t.Fatal("appending to an output payload overwrote another")
				}
			})
		}
	}
}

// TestLevelsDiffer checks that a level reaches the compressor: the highest
// level must compress a JSON document better than the default one. (LZ4 HC
// levels 1..9 give the same size on this data; HC against fast still differs.)
func TestLevelsDiffer(t *testing.T) {
	ctx := context.Background()
	var doc []byte
	for i := range 500 {
		doc = append(doc, orderJSON(i)...)
	}
	for name, lv := range levels {
		sizes := map[int]int{}
		for _, level := range lv {
			res, err := newCodec(t, name, level).Encode(ctx, [][]byte{doc})
			if err != nil || res[0].Err != nil {
				t.Fatalf("%s/%d: %v %v", name, level, err, res[0].Err)
			}
			sizes[level] = len(res[0].Data)
		}
		lo, hi := lv[0], lv[len(lv)-1]
		if sizes[hi] > sizes[lo] {
			t.Errorf("%s: level %d gave %d bytes, more than level %d's %d", name, hi, sizes[hi], lo, sizes[lo])
		}
		if sizes[hi] == sizes[lo] {
			t.Errorf("%s: levels %d and %d both gave %d bytes: is the level ignored?", name, lo, hi, sizes[lo])
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		level int
		opts  []codecs.Option
		want  []string
	}{
		{"brotli", 0, nil, []string{`unknown codec "brotli"`, "gzip, lz4, snappy, zstd"}},
		{"GZIP", 0, nil, []string{`unknown codec "GZIP"`}},
		{"", 0, nil, []string{`unknown codec ""`}},
		{"gzip", 10, nil, []string{"gzip level 10 out of range 1..9"}},
		{"gzip", -1, nil, []string{"gzip level -1 out of range 1..9"}},
		{"lz4", 10, nil, []string{"lz4 level 10 out of range 1..9"}},
		{"snappy", 4, nil, []string{"snappy level 4 out of range 1..3"}},
		{"zstd", 23, nil, []string{"zstd level 23 out of range 1..22"}},
		{"zstd", -5, nil, []string{"zstd level -5 out of range 1..22"}},
		{"zstd", 0, []codecs.Option{codecs.WithMaxDecodedSize(0)}, []string{"zstd", "max decoded size must be at least 1 byte, got 0"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.name, tt.level), func(t *testing.T) {
			c, err := codecs.New(tt.name, tt.level, tt.opts...)
			if err == nil {
				t.Fatalf("New(%q, %d) = %v, want an error", tt.name, tt.level, c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestCorrupt checks that a payload that does not decode fails alone, with
// an error naming the codec and its index, for several kinds of damage.
func TestCorrupt(t *testing.T) {
	ctx := context.Background()
	good := orderJSON(7)
	for _, name := range codecs.Names() {
		t.Run(name, func(t *testing.T) {
			c := newCodec(t, name, 0)
			res, err := c.Encode(ctx, [][]byte{good})
			if err != nil || res[0].Err != nil {
				t.Fatal(err, res[0].Err)
			}
			enc := res[0].Data
			flipped := bytes.Clone(enc)
			flipped[len(flipped)/2] ^= 0x55
			flipped[len(flipped)-1] ^= 0x55 // the checksum or last bytes
			bad := map[string][]byte{
				"empty":     {},
				"text":      []byte("this is not compressed at all, just text"),
				"truncated": enc[:len(enc)/2],
				"flipped":   flipped,
				"trailing":  append(bytes.Clone(enc), 0xde, 0xad, 0xbe, 0xef, 0x01),
			}
			for what, p := range bad {
				t.Run(what, func(t *testing.T) {
					out, err := c.Decode(ctx, [][]byte{enc, p, enc})
					if err != nil {
						t.Fatalf("whole batch failed: %v", err)
					}
					for _, i := range []int{0, 2} {
						if out[i].Err != nil || !bytes.Equal(out[i].Data, good) {
							t.Fatalf("good payload %d: err %v", i, out[i].Err)
						}
					}
					if out[1].Err == nil {
						// Some damage is undetectable (snappy has no
						// checksum), but it must not give back the original.
						if bytes.Equal(out[1].Data, good) {
							t.Fatalf("%s input decoded to the original payload", what)
						}
						if name == "snappy" && what == "flipped" {
							return
						}
						t.Fatalf("%s input decoded without error to %q", what, out[1].Data)
					}
					msg := out[1].Err.Error()
					for _, w := range []string{name, "decode payload 1"} {
						if !strings.Contains(msg, w) {
							t.Errorf("error %q does not name %q", msg, w)
						}
					}
					if out[1].Data != nil {
						t.Errorf("failed payload has data too")
					}
				})
			}
		})
	}
}

// TestDecompressionBomb checks the decoded-size limit: 16 MiB of zeros,
// decoded with a 1 MiB limit, is refused with ErrTooLarge; a payload just
// under the limit passes.
func TestDecompressionBomb(t *testing.T) {
	ctx := context.Background()
	const limit = 1 << 20
	bomb := make([]byte, 16<<20)
	under := make([]byte, limit)
	for _, name := range codecs.Names() {
		t.Run(name, func(t *testing.T) {
			enc, err := newCodec(t, name, 0).Encode(ctx, [][]byte{bomb, under})
			if err != nil {
				t.Fatal(err)
			}
			if len(enc[0].Data) > 1<<20 {
				t.Fatalf("16 MiB of zeros encoded to %d bytes", len(enc[0].Data))
			}
			c := newCodec(t, name, 0, codecs.WithMaxDecodedSize(limit))
			dec, err := c.Decode(ctx, [][]byte{enc[0].Data, enc[1].Data})
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(dec[0].Err, codecs.ErrTooLarge) {
				t.Fatalf("bomb: err = %v, want ErrTooLarge", dec[0].Err)
			}
			if !strings.Contains(dec[0].Err.Error(), "1048576") {
				t.Errorf("error %q does not say the limit", dec[0].Err)
			}
			if dec[1].Err != nil || len(dec[1].Data) != limit {
				t.Fatalf("payload at the limit: %d bytes, err %v", len(dec[1].Data), dec[1].Err)
			}
		})
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, name := range codecs.Names() {
		c := newCodec(t, name, 0)
		if _, err := c.Encode(ctx, [][]byte{[]byte("a")}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s Encode: err = %v, want context.Canceled", name, err)
		}
		if _, err := c.Decode(ctx, [][]byte{[]byte("a")}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s Decode: err = %v, want context.Canceled", name, err)
		}
	}
}

func TestManifest(t *testing.T) {
	for _, name := range codecs.Names() {
		m := newCodec(t, name, 0).(plugins.Plugin).Manifest()
		if m.Name != name || m.Kind != plugins.KindCodec {
			t.Errorf("%s: manifest %+v", name, m)
		}
	}
}

// TestConcurrent uses one codec from several goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	for _, name := range codecs.Names() {
		c := newCodec(t, name, 0)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 20 {
					batch := make([][]byte, 32)
					for i := range batch {
						batch[i] = orderJSON(g*10000 + round*100 + i)
					}
					enc, err := c.Encode(ctx, batch)
					if err != nil {
						t.Error(err)
						return
					}
					in := make([][]byte, len(enc))
					for i, p := range enc {
						in[i] = p.Data
					}
					dec, err := c.Decode(ctx, in)
					if err != nil {
						t.Error(err)
						return
					}
					for i, p := range dec {
						if p.Err != nil || !bytes.Equal(p.Data, batch[i]) {
							t.Errorf("%s: goroutine %d payload %d: %v", name, g, i, p.Err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
	}
}
