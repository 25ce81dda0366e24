package downgrade_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
)

func TestValue(t *testing.T) {
	const ok = `{"order_id":"o","customer_id":"c","amount_cents":1,"currency":"E"}`
	order := func(extra string) string {
		return `{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E"` + extra + `}`
	}
	tests := []struct {
		name, in, want, err string
	}{
		{"plain", order(""), ok, ""},
		{"whitespace", " \t\r\n" + order("") + "\n ", ok, ""},
		{"escapes out", `{"order_id":"\"\\\/\b\f\n\r\t\u0001\u001F\u007f","customer":{"id":"c"},"amount_cents":1,"currency":"E"}`,
			`{"order_id":"\"\\/\b\f\n\r\t\u0001\u001f` + "\x7f" + `","customer_id":"c","amount_cents":1,"currency":"E"}`, ""},
		{"surrogate pair", `{"order_id":"\ud83d\ude00","customer":{"id":"c"},"amount_cents":1,"currency":"E"}`,
			`{"order_id":"😀","customer_id":"c","amount_cents":1,"currency":"E"}`, ""},
		{"minus zero", `{"order_id":"o","customer":{"id":"c"},"amount_cents":-0,"currency":"E"}`,
			`{"order_id":"o","customer_id":"c","amount_cents":0,"currency":"E"}`, ""},
		{"min int64", `{"order_id":"o","customer":{"id":"c"},"amount_cents":-9223372036854775808,"currency":"E"}`,
			`{"order_id":"o","customer_id":"c","amount_cents":-9223372036854775808,"currency":"E"}`, ""},
		{"escaped key duplicate", order(`,"curr\u0065ncy":"F"`), "", `duplicate key "currency"`},
		{"many keys", order(`,"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"a2":[]`), ok, ""},
		{"many keys dup", order(`,"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"h":0`), "", `duplicate key "h"`},
		{"depth 64", order(`,"t":` + strings.Repeat("[", 63) + strings.Repeat("]", 63)), ok, ""},
		{"depth 65", order(`,"t":` + strings.Repeat("[", 64) + strings.Repeat("]", 64)), "", "nesting deeper than 64"},
		{"depth 65 objects", order(`,"t":` + strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64)), "", "nesting deeper than 64"},
		{"max int64 + 1", `{"order_id":"o","customer":{"id":"c"},"amount_cents":9223372036854775808,"currency":"E"}`, "", "does not fit int64"},
		{"min int64 - 1", `{"order_id":"o","customer":{"id":"c"},"amount_cents":-9223372036854775809,"currency":"E"}`, "", "does not fit int64"},
		{"huge", `{"order_id":"o","customer":{"id":"c"},"amount_cents":99999999999999999999999,"currency":"E"}`, "", "does not fit int64"},
		{"lone high at end", `{"order_id":"\ud800","customer":{"id":"c"},"amount_cents":1,"currency":"E"}`, "", "unpaired surrogate"},
		{"high then non-low", `{"order_id":"\ud800\u0041","customer":{"id":"c"},"amount_cents":1,"currency":"E"}`, "", "unpaired surrogate"},
		{"bad escape", `{"order_id":"\x","customer":{"id":"c"},"amount_cents":1,"currency":"E"}`, "", "invalid escape"},
		{"overlong utf8", "{\"order_id\":\"\xc0\xaf\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"E\"}", "", "invalid UTF-8"},
		{"encoded surrogate utf8", "{\"order_id\":\"\xed\xa0\x80\",\"customer\":{\"id\":\"c\"},\"amount_cents\":1,\"currency\":\"E\"}", "", "invalid UTF-8"},
		{"truncated", order("")[:20], "", "at byte"},
		{"bad literal", order(`,"x":tru`), "", "invalid literal"},
		{"number dot", order(`,"x":1.`), "", "invalid number"},
		{"number exp", order(`,"x":1e`), "", "invalid number"},
		{"customer dup id", `{"order_id":"o","customer":{"id":"c","id":"c"},"amount_cents":1,"currency":"E"}`, "", `duplicate key "id" in customer`},
		{"dup customer", order(`,"customer":{"id":"d"}`), "", `duplicate key "customer"`},
		{"empty", "", "", "empty value"},
		{"only ws", "  ", "", "empty value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := downgrade.Value(nil, []byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q (output %s)", err, tt.err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	if _, err := downgrade.Value(nil, nil); err != downgrade.ErrNull {
		t.Fatalf("null value: %v", err)
	}
}

// FuzzValue checks the downgrade against encoding/json: whatever it
// accepts is valid JSON with the same four fields, and its output is valid
// JSON that says the same.
func FuzzValue(f *testing.F) {
	f.Add(`{"order_id":"o-1","customer":{"id":"c-1","name":"Ann"},"amount_cents":1999,"currency":"EUR"}`)
	f.Add(`{"order_id":"\u00e9\ud83d\ude00\n","customer":{"id":"c"},"amount_cents":-0,"currency":"E","tags":[1,2.5e3,{"a":null}]}`)
	f.Add(`{"order_id":"x","customer":{"id":"c"},"amount_cents":9223372036854775807,"currency":""}`)
	f.Fuzz(func(t *testing.T, in string) {
		out, err := downgrade.Value(nil, []byte(in))
		if err != nil {
			return
		}
		if !json.Valid([]byte(in)) || !utf8.ValidString(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		type v2 struct {
			OrderID  string `json:"order_id"`
			Customer struct {
				ID string `json:"id"`
			} `json:"customer"`
			Amount   int64  `json:"amount_cents"`
			Currency string `json:"currency"`
		}
		type v1 struct {
			OrderID    string `json:"order_id"`
			CustomerID string `json:"customer_id"`
			Amount     int64  `json:"amount_cents"`
			Currency   string `json:"currency"`
		}
		var a v2
		if err := json.Unmarshal([]byte(in), &a); err != nil {
			t.Fatalf("encoding/json rejects accepted input %q: %v", in, err)
		}
		var b v1
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("output %q is not JSON: %v", out, err)
		}
		if a.OrderID != b.OrderID || a.Customer.ID != b.CustomerID || a.Amount != b.Amount || a.Currency != b.Currency {
			t.Fatalf("input %q\n => %q\n encoding/json read %+v", in, out, a)
		}
	})
}

// BenchmarkValue is the downgrade of one ~200-byte order, the shape
// runtime's BenchmarkPlugins feeds the plugin: the plugin's own code
// compiled natively, without the SDK and host around it.
func BenchmarkValue(b *testing.B) {
	in := []byte(`{"order_id":"o-00000042","customer":{"id":"c-000042","name":"Ann Example"},"amount_cents":294,"currency":"EUR","tags":["a","b","c"],"note":"0123456789abcdef0123456789"}`)
	var dst []byte
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		var err error
		if dst, err = downgrade.Value(dst[:0], in); err != nil {
			b.Fatal(err)
		}
	}
}
