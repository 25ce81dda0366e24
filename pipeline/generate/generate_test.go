package generate

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestGenerateSource(t *testing.T) {
	g := NewSource(0, 300, 10)
	var n int
	for {
		msgs, err := g.Fetch(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(msgs)
	}
	if n != 300 {
		t.Fatalf("generated %d, want 300", n)
	}
	k, v := Order(12, 10)
	if string(k) != "c-2" || !strings.HasPrefix(string(v), `{"order_id":"o-12","customer":{"id":"c-2"`) {
		t.Fatalf("order %s %s", k, v)
	}
}
