// Command pg-sink is a native streamd sink that writes records to a
// PostgreSQL table. Build it with ./build.sh and name it in a pipeline:
//
//	[[pipeline.sink]]
//	plugin = "native:examples/native/go/pg-sink/plugin"
//	config = { dsn = "postgres://user@127.0.0.1:5432/db", table = "orders_v1" }
//
// The table is created if missing:
//
//	partition int, "offset" bigint, key bytea, value bytea,
//	headers jsonb, ts timestamptz, PRIMARY KEY (partition, "offset")
//
// With id = "key" instead of the default "position", the primary key is the
// record key (and partition and offset are plain columns).
//
// Each Write is one transaction, committed before the plugin answers, and
// every row is an upsert on the primary key: when streamd retries a batch
// (after a crash of this process, say), rows already written are written
// again with the same content, so each record is in the table exactly once.
// headers is a JSON array of {"name":N,"value":TEXT}, {"name":N,"value_b64":B64}
// for a value that is not UTF-8, or {"name":N} for a null value.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/sdk/go/native"
)

type config struct {
	DSN   string `json:"dsn"`
	Table string `json:"table"`
	// ID is "position" (primary key partition+offset, the default) or "key".
	ID string `json:"id"`
}

var tableRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

type sink struct {
	cfg    config
	pool   *pgxpool.Pool
	upsert string
}

func (s *sink) init(ctx context.Context, raw json.RawMessage) error {
	if err := json.Unmarshal(raw, &s.cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if s.cfg.DSN == "" {
		return errors.New("config: dsn is required")
	}
	if !tableRE.MatchString(s.cfg.Table) {
		return fmt.Errorf("config: table %q is not a plain [schema.]name", s.cfg.Table)
	}
	pk := `partition, "offset"`
	switch s.cfg.ID {
	case "", "position":
		s.cfg.ID = "position"
	case "key":
		pk = "key"
	default:
		return fmt.Errorf(`config: id %q is not "position" or "key"`, s.cfg.ID)
	}
	pool, err := pgxpool.New(ctx, s.cfg.DSN)
	if err != nil {
		return fmt.Errorf("config: dsn: %w", err)
	}
	ddl := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
		partition int NOT NULL, "offset" bigint NOT NULL, key bytea, value bytea,
		headers jsonb NOT NULL, ts timestamptz, PRIMARY KEY (%s))`, s.cfg.Table, pk)
	if _, err := pool.Exec(ctx, ddl); err != nil {
		pool.Close()
		return fmt.Errorf("create table %s: %w", s.cfg.Table, err)
	}
	s.pool = pool
	s.upsert = fmt.Sprintf(`INSERT INTO %s (partition, "offset", key, value, headers, ts)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (%s) DO UPDATE SET partition = EXCLUDED.partition, "offset" = EXCLUDED."offset",
		key = EXCLUDED.key, value = EXCLUDED.value, headers = EXCLUDED.headers, ts = EXCLUDED.ts`, s.cfg.Table, pk)
	return nil
}

type header struct {
	Name     string  `json:"name"`
	Value    *string `json:"value,omitempty"`
	ValueB64 *string `json:"value_b64,omitempty"`
}

func headersJSON(hs []record.Header) ([]byte, error) {
	out := make([]header, len(hs))
	for i, h := range hs {
		out[i].Name = h.Key
		switch {
		case h.Value == nil:
		case utf8.Valid(h.Value):
			v := string(h.Value)
			out[i].Value = &v
		default:
			v := base64.StdEncoding.EncodeToString(h.Value)
			out[i].ValueB64 = &v
		}
	}
	return json.Marshal(out)
}

// Write upserts the batch in one transaction. A record the table cannot
// hold (no source position, or a null key with id = "key") is rejected alone.
func (s *sink) Write(ctx context.Context, batch []record.Record) ([]error, error) {
	errs := make([]error, len(batch))
	b := &pgx.Batch{}
	for i, r := range batch {
		switch {
		case s.cfg.ID == "position" && (r.Offset < 0 || r.Partition < 0):
			errs[i] = fmt.Errorf("record has no source position (partition %d, offset %d); use id = \"key\"", r.Partition, r.Offset)
			continue
		case s.cfg.ID == "key" && r.Key == nil:
			errs[i] = errors.New("record has a null key, the table's primary key")
			continue
		}
		hj, err := headersJSON(r.Headers)
		if err != nil {
			errs[i] = err
			continue
		}
		var ts any
		if !r.Timestamp.IsZero() {
			ts = r.Timestamp
		}
		b.Queue(s.upsert, r.Partition, r.Offset, r.Key, r.Value, hj, ts)
	}
	if b.Len() == 0 {
		return errs, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("write %d records to %s: %w", b.Len(), s.cfg.Table, err)
	}
	return errs, nil
}

func (s *sink) close(context.Context) error {
	if s.pool != nil {
		s.pool.Close()
	}
	return nil
}

func main() {
	s := &sink{}
	native.Serve(native.Plugin{
		Name:    "pg-sink",
		Version: "1.0.0",
		Sink:    s,
		Init:    s.init,
		Close:   s.close,
	})
}
