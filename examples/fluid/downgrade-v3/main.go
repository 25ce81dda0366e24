// Command downgrade-v3 is the Fluid downgrade of the demo's orders topic
// from v3 to v2, a Wasm transform plugin written with the Go SDK:
//
//	v3 {"order_id","customer":{...},"total":{"amount_cents","currency"},"status"}
//	v2 {"order_id","customer":{...},"amount_cents","currency"}
//
// It sets fluid-schema-version: 2. Build it with build.sh (GOOS=wasip1).
package main

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/streamd/streamd/sdk/go/streamd"
)

type v3 struct {
	OrderID  string          `json:"order_id"`
	Customer json.RawMessage `json:"customer"`
	Total    *struct {
		AmountCents json.Number `json:"amount_cents"`
		Currency    string      `json:"currency"`
	} `json:"total"`
	Status string `json:"status"`
}

type v2 struct {
	OrderID     string          `json:"order_id"`
	Customer    json.RawMessage `json:"customer"`
	AmountCents json.Number     `json:"amount_cents"`
	Currency    string          `json:"currency"`
}

func main() {}

func init() {
	streamd.Transform(streamd.Manifest{Name: "orders-downgrade-v3-v2", Version: "1.0.0"},
		func(r *streamd.Record) ([]streamd.Record, error) {
			d := json.NewDecoder(bytes.NewReader(r.Value))
			d.UseNumber()
			var in v3
			if err := d.Decode(&in); err != nil {
				return nil, err
			}
			if in.Total == nil || in.Customer == nil {
				return nil, errors.New("orders v3: total and customer are required")
			}
			v, err := json.Marshal(v2{OrderID: in.OrderID, Customer: in.Customer, AmountCents: in.Total.AmountCents, Currency: in.Total.Currency})
			if err != nil {
				return nil, err
			}
			out := *r
			out.Value = v
			out.SetHeader("fluid-schema-version", []byte("2"))
			return []streamd.Record{out}, nil
		})
}
