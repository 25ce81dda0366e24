package downgrade_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
)

// sameAsOracle fails unless downgrade.Value and the frozen pre-session-5
// implementation give the same output and the same error text for in.
func sameAsOracle(t *testing.T, in []byte) {
	t.Helper()
	got, err := downgrade.Value(nil, in)
	want, werr := oracleValue(nil, in)
	if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("input %q: error %v, the oracle's %v", in, err, werr)
	}
	if string(got) != string(want) {
		t.Fatalf("input %q:\n got %q\nwant %q", in, got, want)
	}
}

// oracleSeeds are the conformance fixture's values and edge cases of the
// word-at-a-time scan: a special byte at each position of a word, strings
// of 0-17 bytes, escapes and non-ASCII around word boundaries.
func oracleSeeds(t testing.TB) []string {
	var seeds []string
	f, err := os.Open("../../../testdata/orders-v2.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Value *string `json:"value"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line.Value != nil {
			seeds = append(seeds, *line.Value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	order := func(id string) string {
		return `{"order_id":"` + id + `","customer":{"id":"c"},"amount_cents":1,"currency":"E"}`
	}
	for n := 0; n <= 17; n++ {
		plain := strings.Repeat("a", n)
		seeds = append(seeds, order(plain))
		for _, c := range []string{`"`, `\\`, `\n`, `\u00e9`, "\x01", "\x1f", "\x7f", "é", "\x80", "\xff", "😀", `\ud83d\ude00`} {
			seeds = append(seeds, order(plain[:n/2]+c+plain[n/2:]))
			seeds = append(seeds, order(plain+c))
		}
	}
	seeds = append(seeds, ` {"order_id" : "x" , "customer" : { "id" : "c" } , "amount_cents" : 1 , "currency" : "E" } `,
		`{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","k\u0065y":1,"key":2}`,
		`{"order_id":"0123456789abcdef0123`, `{"a\"b":1}`, `{"ab`)
	return seeds
}

func TestOracle(t *testing.T) {
	for _, s := range oracleSeeds(t) {
		sameAsOracle(t, []byte(s))
		for i := range len(s) { // every prefix: an end of input inside each word
			sameAsOracle(t, []byte(s[:i]))
		}
	}
	sameAsOracle(t, nil)
}

// FuzzOracle is the differential fuzz test: the downgrade must keep the
// exact behaviour (output and error messages) of the implementation the
// other languages' plugins were checked against.
func FuzzOracle(f *testing.F) {
	for _, s := range oracleSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) { sameAsOracle(t, []byte(in)) })
}

// BenchmarkOracle is BenchmarkValue's order through the frozen
// implementation, to compare the two in one run.
func BenchmarkOracle(b *testing.B) {
	in := []byte(`{"order_id":"o-00000042","customer":{"id":"c-000042","name":"Ann Example"},"amount_cents":294,"currency":"EUR","tags":["a","b","c"],"note":"0123456789abcdef0123456789"}`)
	var dst []byte
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		var err error
		if dst, err = oracleValue(dst[:0], in); err != nil {
			b.Fatal(err)
		}
	}
}
