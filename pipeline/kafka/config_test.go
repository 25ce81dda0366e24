package kafka

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestCompression: levels are checked and lz4's are mapped to
// pierrec/lz4's (franz-go passes the level on raw, and lz4 wants
// Level1 = 1<<9 ...; a raw 1..9 silently meant "fast", and a gzip level
// of 42 silently meant the default).
func TestCompression(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level int
		want  int    // franz-go's level
		err   string // "" if accepted
	}{
		{"none", 0, 0, ""}, {"", 0, 0, ""}, {"gzip", 0, 0, ""}, {"gzip", 9, 9, ""}, {"GZIP", 1, 1, ""},
		{"lz4", 1, 1 << 9, ""}, {"lz4", 9, 1 << 17, ""}, {"zstd", 4, 4, ""}, {"snappy", 0, 0, ""},
		{"gzip", 42, 0, "gzip level 42: want 1 to 9"}, {"gzip", -1, 0, "want 1 to 9"}, {"zstd", 5, 0, "want 1 to 4"},
		{"lz4", 10, 0, "want 1 to 9"}, {"snappy", 3, 0, "snappy has no levels"}, {"none", 1, 0, "no levels"},
		{"brotli", 0, 0, `unknown compression "brotli"`},
	} {
		c, err := Compression(tc.name, tc.level)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Compression(%q, %d) = %v, want an error with %q", tc.name, tc.level, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("Compression(%q, %d): %v", tc.name, tc.level, err)
		case tc.err == "" && tc.level != 0:
			if got := int(reflect.ValueOf(c).FieldByName("level").Int()); got != tc.want {
				t.Errorf("Compression(%q, %d): franz-go level %d, want %d", tc.name, tc.level, got, tc.want)
			}
		}
	}
}

// TestConfigZeroAndNegative: 0 means the default in the source's and
// sink's settings, and negative values are refused naming the setting.
func TestConfigZeroAndNegative(t *testing.T) {
	s, err := NewSink(SinkConfig{Topic: "t", Seeds: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.partitions != DefaultPartitions || s.maxBytes != DefaultMaxRecordBytes {
		t.Fatalf("zero sink config: partitions %d, max bytes %d", s.partitions, s.maxBytes)
	}
	s.cl.Close()
	src, err := NewSource(SourceConfig{Topics: []string{"t"}, Group: "g", Seeds: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if src.partitions != DefaultPartitions || src.lagInterval != DefaultLagInterval {
		t.Fatalf("zero source config: partitions %d, lag interval %s", src.partitions, src.lagInterval)
	}
	testenv.Close(t, context.Background(), src)
	for _, tc := range []struct {
		name string
		new  func() error
		want string
	}{
		{"sink partitions", func() error { _, err := NewSink(SinkConfig{Topic: "t", Partitions: -1}); return err }, "partitions -1"},
		{"source partitions", func() error {
			_, err := NewSource(SourceConfig{Topics: []string{"t"}, Group: "g", Partitions: -2})
			return err
		}, "partitions -2"},
		{"session timeout", func() error {
			_, err := NewSource(SourceConfig{Topics: []string{"t"}, Group: "g", SessionTimeout: -time.Second})
			return err
		}, "session timeout -1s"},
		{"lag interval", func() error {
			_, err := NewSource(SourceConfig{Topics: []string{"t"}, Group: "g", LagInterval: -time.Second})
			return err
		}, "lag interval -1s"},
	} {
		if err := tc.new(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to name %q", tc.name, err, tc.want)
		}
	}
}
