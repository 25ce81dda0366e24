// Package sqlstore is the journal's relational replication store, on
// SQLite (modernc.org/sqlite, pure Go, WAL) or PostgreSQL (pgx), with the
// same tables: journal_meta (metajournal, one row per journal, numbered by
// jid), journal_event (one row per event, keyed by jid and seq_nr; the view
// journal shows it with each journal's topic and id, as the original's
// journal table), journal_pointer (pointer2) and journal_setting (schema
// version). Schema creation and migration run at Open, one process at a
// time (SQLite: an IMMEDIATE transaction; PostgreSQL: an advisory
// transaction lock).
//
// Events are keyed by the journal's integer jid, not its (topic, id), and
// kept in insertion order (SQLite: a rowid table; PostgreSQL: a heap) with
// a unique index on (jid, seq_nr): a batch then appends its events at the
// end of the table and adds small entries to the index, instead of
// splitting pages all over a B-tree ordered by (topic, id, seq_nr), which
// schema version 1 did (docs/benchmarks.md, "Journal").
//
// A Batch is applied in one transaction, pointer included, so a crash never
// leaves a half-applied batch and redelivered records are skipped by the
// pointer.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/streamd/streamd/journal/internal/action"
	"github.com/streamd/streamd/journal/internal/store"
	"github.com/streamd/streamd/record"
)

// SchemaVersion is the schema this code writes. Version 1 (before
// streamd 0.3) keyed journal_event by (topic, id, seq_nr) and had no jid.
// Version 3 has version 2's tables with one more invariant: a journal's
// seq_nr is at or above every stored event's (version 2's rules let an
// Append below the journal's seqNr move seq_nr back). Open migrates both.
const SchemaVersion = 3

type dialect int

const (
	sqlite dialect = iota
	postgres
)

// Store is a relational journal store.
type Store struct {
	stmts map[stmtKey]*sql.Stmt // batch statements prepared at open
	// Snapshot statements prepared on the read pool: meta, pointer,
	// pointers, events.
	rMeta, rPointer, rPointers, rEvents *sql.Stmt

	d     dialect
	name  string // "sqlite:PATH" or "postgres HOST/DB", for errors
	write *sql.DB
	read  *sql.DB
	now   func() time.Time
	q     queries
	log   *slog.Logger
}

// Option configures OpenSQLite and OpenPostgres.
type Option func(*Store)

// WithLogger sets where schema migrations are reported (default: nowhere).
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

type queries struct {
	meta, delEvents, setPointer, pointer, pointers, events, expired string
	insertEventsHead, insertEventsTail                              string
}

// OpenSQLite opens (creating if needed) the SQLite database at path,
// creating its directory if that is missing.
func OpenSQLite(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite store: empty path")
	}
	if err := CheckSQLitePath(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("sqlite store %s: creating its directory %s: %w", path, dir, err)
		}
	}
	// synchronous=FULL in WAL mode: each commit fsyncs the WAL, so a batch
	// the replicator reports durable (and whose Kafka offsets are then
	// committed) survives an OS crash or power loss, not only a process
	// crash as with NORMAL; NORMAL measured -5% to +9% against it in
	// BenchmarkReplicate (docs/benchmarks.md, "Journal").
	base := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(30000)&_pragma=foreign_keys(OFF)&_pragma=temp_store(MEMORY)&_pragma=cache_size(-65536)"
	w, err := sql.Open("sqlite", base+"&_txlock=immediate&_pragma=wal_autocheckpoint("+strconv.Itoa(autockpt)+")")
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", base)
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8) // kept open: each Append and read takes a snapshot
	s := newStore(sqlite, w, r, opts)
	s.name = "sqlite:" + path
	err = s.migrateSQLite(ctx)
	if err == nil {
		err = s.prepare(ctx)
	}
	if err != nil {
		_ = s.Close(ctx)
		if sqliteCode(err) == sqliteCantOpen {
			return nil, fmt.Errorf("sqlite store %s: cannot open the database file (check that it and its directory %s are readable and writable): %w", path, filepath.Dir(path), err)
		}
		return nil, fmt.Errorf("sqlite store %s: %w", path, s.diskFull(err))
	}
	return s, nil
}

// CheckSQLitePath reports, without creating or changing anything, whether
// OpenSQLite could use path: nil if the file or its directory exists, an
// error wrapping fs.ErrNotExist if the directory is missing but could be
// created (OpenSQLite creates it), another error if it cannot be (a
// parent is a file, say) or path is a directory.
func CheckSQLitePath(path string) error {
	if path == "" {
		return errors.New("sqlite store: empty path")
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("sqlite store %s: is a directory, not a database file", path)
		}
		return nil
	}
	dir := filepath.Dir(path)
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		switch {
		case err == nil && !fi.IsDir():
			return fmt.Errorf("sqlite store %s: %s is not a directory", path, d)
		case err == nil && d == dir:
			return nil
		case err == nil:
			return fmt.Errorf("sqlite store %s: directory %s does not exist (it is created at start): %w", path, dir, fs.ErrNotExist)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("sqlite store %s: %w", path, err)
		}
		if filepath.Dir(d) == d {
			return fmt.Errorf("sqlite store %s: directory %s does not exist: %w", path, dir, fs.ErrNotExist)
		}
	}
}

// SQLite result codes (the low byte of an extended code).
const (
	sqliteFull     = 13
	sqliteCantOpen = 14
)

func sqliteCode(err error) int {
	var se interface{ Code() int }
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// ErrDiskFull is wrapped by the errors of a store whose disk (or
// database quota) is full: SQLite's SQLITE_FULL, PostgreSQL's disk_full
// (53100). Nothing of the failed batch is applied; it can be retried once
// there is room.
var ErrDiskFull = errors.New("disk full")

// diskFull wraps err with ErrDiskFull if it is a full disk (callers name
// the store).
func (s *Store) diskFull(err error) error {
	if err == nil {
		return nil
	}
	var pe interface{ SQLState() string }
	if sqliteCode(err) == sqliteFull || errors.As(err, &pe) && pe.SQLState() == "53100" {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

// migrateSQLite is migrate, retried while the database is locked: when
// several processes open a new database at once, SQLite can answer
// SQLITE_BUSY at once (without the busy timeout) to the ones that find
// another turning it into WAL mode.
func (s *Store) migrateSQLite(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.migrate(ctx)
		var se interface{ Code() int }
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != 5 /* SQLITE_BUSY */ || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

// autockpt is the writer's wal_autocheckpoint, in pages (4 KiB): the
// WAL is copied into the database once it holds this many. SQLite's
// default, 1000, checkpoints every few batches: each checkpoint costs
// fsyncs and copies pages that the next batches rewrite anyway (journal
// rows, the last page of each journal). The WAL file stays at up to
// ~40 MiB.
const autockpt = 10000

// OpenPostgres opens the PostgreSQL database named by dsn
// ("postgres://user@host:port/db?...").
func OpenPostgres(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	db.SetMaxOpenConns(8)
	s := newStore(postgres, db, db, opts)
	s.name = "postgres " + pgName(dsn)
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if err := s.prepare(ctx); err != nil {
		_ = s.Close(ctx)
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	return s, nil
}

// pgName is host:port/database of a PostgreSQL URL, without credentials.
func pgName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Host + u.Path
}

func newStore(d dialect, w, r *sql.DB, opts []Option) *Store {
	s := &Store{d: d, write: w, read: r, now: time.Now, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	s.q = queries{
		meta:       `SELECT kafka_partition, kafka_offset, seq_nr, delete_to, expire_after_ms, expire_on, origin, created, updated FROM journal_meta WHERE topic = ? AND id = ?`,
		delEvents:  `DELETE FROM journal_event WHERE jid = ? AND seq_nr <= ?`,
		setPointer: `INSERT INTO journal_pointer (topic, kafka_partition, kafka_offset, created, updated) VALUES (?, ?, ?, ?, ?) ON CONFLICT (topic, kafka_partition) DO UPDATE SET kafka_offset = CASE WHEN excluded.kafka_offset > journal_pointer.kafka_offset THEN excluded.kafka_offset ELSE journal_pointer.kafka_offset END, updated = excluded.updated`,
		pointer:    `SELECT kafka_offset FROM journal_pointer WHERE topic = ? AND kafka_partition = ?`,
		pointers:   `SELECT kafka_partition, kafka_offset FROM journal_pointer WHERE topic = ?`,
		events:     `SELECT seq_nr, kafka_partition, kafka_offset, ts, origin, version, tags, metadata, headers, payload_type, payload FROM journal_event WHERE jid = (SELECT jid FROM journal_meta WHERE topic = ? AND id = ?) AND seq_nr >= ? ORDER BY seq_nr`,
		expired:    `SELECT topic, id FROM journal_meta WHERE expire_on IS NOT NULL AND expire_on <= ? ORDER BY expire_on LIMIT ?`,

		insertEventsHead: `INSERT INTO journal_event (jid, seq_nr, kafka_partition, kafka_offset, ts, origin, version, tags, metadata, headers, payload_type, payload) VALUES `,
		// A stored event is never overwritten: the rules never write a seqNr
		// twice, so a conflict here is a fault, reported, not applied.
		insertEventsTail: ` ON CONFLICT (jid, seq_nr) DO NOTHING`,
	}
	if d == postgres {
		for _, p := range []*string{&s.q.meta, &s.q.delEvents, &s.q.setPointer, &s.q.pointer, &s.q.pointers, &s.q.events, &s.q.expired} {
			*p = rebind(*p, 1)
		}
	}
	return s
}

// rebind turns ? placeholders into $n, numbering from n.
func rebind(q string, n int) string {
	var b strings.Builder
	for _, c := range q {
		if c == '?' {
			b.WriteString("$" + strconv.Itoa(n))
			n++
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (s *Store) blob() string {
	if s.d == postgres {
		return "BYTEA"
	}
	return "BLOB"
}

// jidColumn is journal_meta's integer key: SQLite's rowid (a new row gets
// the highest + 1), PostgreSQL's identity column.
func (s *Store) jidColumn() string {
	if s.d == postgres {
		return "jid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
	}
	return "jid INTEGER PRIMARY KEY"
}

// tablesV2 is the DDL of schema version 2 with the journal tables named
// meta and event (migrate creates them under temporary names first).
func (s *Store) tablesV2(meta, event string) []string {
	return []string{
		`CREATE TABLE ` + meta + ` (` + s.jidColumn() + `, topic TEXT NOT NULL, id TEXT NOT NULL, kafka_partition INTEGER NOT NULL, kafka_offset BIGINT NOT NULL, seq_nr BIGINT NOT NULL, delete_to BIGINT NOT NULL, expire_after_ms BIGINT, expire_on BIGINT, origin TEXT, created BIGINT NOT NULL, updated BIGINT NOT NULL, UNIQUE (topic, id))`,
		`CREATE TABLE ` + event + ` (jid BIGINT NOT NULL, seq_nr BIGINT NOT NULL, kafka_partition INTEGER NOT NULL, kafka_offset BIGINT NOT NULL, ts BIGINT NOT NULL, origin TEXT, version TEXT, tags TEXT, metadata TEXT, headers TEXT, payload_type SMALLINT NOT NULL, payload ` + s.blob() + `, PRIMARY KEY (jid, seq_nr))`,
	}
}

// indexesV2 are created once the version 2 tables have their final names.
var indexesV2 = []string{
	`CREATE INDEX journal_meta_expire_on ON journal_meta (expire_on)`,
	// The original's journal table: one row per event with its journal's
	// topic and id, for people and tools reading the store with SQL.
	`CREATE VIEW journal AS SELECT m.topic, m.id, e.seq_nr, e.kafka_partition, e.kafka_offset, e.ts, e.origin, e.version, e.tags, e.metadata, e.headers, e.payload_type, e.payload FROM journal_event e JOIN journal_meta m ON m.jid = e.jid`,
}

// migrate creates the schema or brings it to SchemaVersion, in one
// transaction.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin schema transaction: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if s.d == postgres {
		// One process at a time applies DDL.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7263540151)`); err != nil {
			return fmt.Errorf("schema lock: %w", err)
		}
	}
	exec := func(qs ...string) error {
		for _, q := range qs {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("schema: %s: %w", q, err)
			}
		}
		return nil
	}
	if err := exec(`CREATE TABLE IF NOT EXISTS journal_setting (name TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
		return err
	}
	var version string
	from := 0
	err = tx.QueryRowContext(ctx, s.bind(`SELECT value FROM journal_setting WHERE name = ?`), "schema_version").Scan(&version)
	switch {
	case err == nil:
		v, perr := strconv.Atoi(version)
		if perr != nil {
			return fmt.Errorf("journal_setting schema_version %q is not a number", version)
		}
		if v > SchemaVersion {
			return fmt.Errorf("database schema version %d is newer than this streamd's %d", v, SchemaVersion)
		}
		if v == SchemaVersion {
			return tx.Commit()
		}
		from = v
	case errors.Is(err, sql.ErrNoRows):
	default:
		return fmt.Errorf("read schema version: %w", err)
	}
	if err := exec(`CREATE TABLE IF NOT EXISTS journal_pointer (topic TEXT NOT NULL, kafka_partition INTEGER NOT NULL, kafka_offset BIGINT NOT NULL, created BIGINT NOT NULL, updated BIGINT NOT NULL, PRIMARY KEY (topic, kafka_partition))`); err != nil {
		return err
	}
	done := func() {} // reports a migration once committed
	switch from {
	case 0:
		if err := exec(append(s.tablesV2("journal_meta", "journal_event"), indexesV2...)...); err != nil {
			return err
		}
	case 1:
		// Copy into new tables, numbering the journals, then swap them in.
		start := time.Now()
		s.log.Info("journal store: migrating the schema from version 1 to 2; it copies every event in one transaction and the store is unavailable until it is done")
		if err := exec(s.tablesV2("journal_meta_v2", "journal_event_v2")...); err != nil {
			return err
		}
		var copied [2]int64
		for i, q := range []string{
			`INSERT INTO journal_meta_v2 (topic, id, kafka_partition, kafka_offset, seq_nr, delete_to, expire_after_ms, expire_on, origin, created, updated) SELECT topic, id, kafka_partition, kafka_offset, seq_nr, delete_to, expire_after_ms, expire_on, origin, created, updated FROM journal_meta ORDER BY topic, id`,
			// Events of no journal row cannot be read; version 1 never kept any.
			`INSERT INTO journal_event_v2 (jid, seq_nr, kafka_partition, kafka_offset, ts, origin, version, tags, metadata, headers, payload_type, payload) SELECT m.jid, e.seq_nr, e.kafka_partition, e.kafka_offset, e.ts, e.origin, e.version, e.tags, e.metadata, e.headers, e.payload_type, e.payload FROM journal_event e JOIN journal_meta_v2 m ON m.topic = e.topic AND m.id = e.id ORDER BY m.jid, e.seq_nr`,
		} {
			res, err := tx.ExecContext(ctx, q)
			if err != nil {
				return fmt.Errorf("migrate schema 1 to 2: %s: %w", q, err)
			}
			copied[i], _ = res.RowsAffected()
		}
		if err := exec(
			`DROP TABLE journal_event`,
			`DROP TABLE journal_meta`,
			`ALTER TABLE journal_meta_v2 RENAME TO journal_meta`,
			`ALTER TABLE journal_event_v2 RENAME TO journal_event`,
		); err != nil {
			return fmt.Errorf("migrate schema 1 to 2: %w", err)
		}
		if err := exec(indexesV2...); err != nil {
			return err
		}
		done = func() {
			s.log.Info("journal store: schema migrated from version 1 to 2", "journals", copied[0], "events", copied[1], "took", time.Since(start).Round(time.Millisecond))
		}
	}
	if from == 1 || from == 2 {
		// Stores written by the old rules: bring seq_nr up to the highest
		// stored event, so that no new Append is accepted at a seqNr that is
		// already stored.
		res, err := tx.ExecContext(ctx, `UPDATE journal_meta SET seq_nr = (SELECT MAX(e.seq_nr) FROM journal_event e WHERE e.jid = journal_meta.jid) WHERE seq_nr < (SELECT MAX(e.seq_nr) FROM journal_event e WHERE e.jid = journal_meta.jid)`)
		if err != nil {
			return fmt.Errorf("migrate schema %d to 3: raise seq_nr to the stored events: %w", from, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			prev := done
			done = func() {
				prev()
				s.log.Warn("journal store: journals whose seq_nr was below their stored events (written under the old rules, which accepted appends at or below a journal's seqNr) now have seq_nr = their highest stored event", "journals", n)
			}
		}
	}
	up := `INSERT INTO journal_setting (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`
	if _, err := tx.ExecContext(ctx, s.bind(up), "schema_version", strconv.Itoa(SchemaVersion)); err != nil {
		return fmt.Errorf("write schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	done()
	return nil
}

func (s *Store) bind(q string) string {
	if s.d == postgres {
		return rebind(q, 1)
	}
	return q
}

// Close closes the database (database/sql closes without a context: ctx
// is not used).
func (s *Store) Close(context.Context) error {
	for _, st := range s.stmts {
		_ = st.Close()
	}
	for _, st := range []*sql.Stmt{s.rMeta, s.rPointer, s.rPointers, s.rEvents} {
		if st != nil {
			_ = st.Close()
		}
	}
	err := s.write.Close()
	if s.read != s.write {
		err = errors.Join(err, s.read.Close())
	}
	return err
}

// Apply implements store.Store: one transaction per batch.
func (s *Store) Apply(ctx context.Context, b *store.Batch) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("journal store %s: begin: %w", s.name, s.diskFull(err))
	}
	defer func() { _ = tx.Rollback() }()
	if err := store.ApplyTx(ctx, &sqlTx{s: s, tx: tx, jids: make(map[string]int64, len(b.Keys))}, b, s.now()); err != nil {
		return fmt.Errorf("journal store %s: apply %s/%d: %w", s.name, b.Topic, b.Partition, s.diskFull(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("journal store %s: commit %s/%d: %w", s.name, b.Topic, b.Partition, s.diskFull(err))
	}
	return nil
}

// Pointer implements store.Store.
func (s *Store) Pointer(ctx context.Context, topic string, partition int32) (int64, bool, error) {
	return pointer(ctx, queryRow(s.read, s.q.pointer), topic, partition)
}

// rowFunc runs a one-row query with args.
type rowFunc func(ctx context.Context, args ...any) *sql.Row

// queryRow is a rowFunc of q on db.
func queryRow(db *sql.DB, q string) rowFunc {
	return func(ctx context.Context, args ...any) *sql.Row { return db.QueryRowContext(ctx, q, args...) }
}

func pointer(ctx context.Context, row rowFunc, topic string, partition int32) (int64, bool, error) {
	var off int64
	err := row(ctx, topic, partition).Scan(&off)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("journal store: pointer %s/%d: %w", topic, partition, err)
	}
	return off, true, nil
}

// Expired implements store.Store.
func (s *Store) Expired(ctx context.Context, now time.Time, limit int) ([]store.Key, error) {
	rows, err := s.read.QueryContext(ctx, s.q.expired, now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("journal store: expired: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []store.Key
	for rows.Next() {
		var k store.Key
		if err := rows.Scan(&k.Topic, &k.ID); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// Snapshot implements store.Store: a read-only transaction (SQLite WAL
// snapshot; PostgreSQL REPEATABLE READ).
func (s *Store) Snapshot(ctx context.Context) (store.Snapshot, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if s.d == postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := s.read.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("journal store: begin read: %w", err)
	}
	return &snapshot{s: s, tx: tx}, nil
}

type snapshot struct {
	s  *Store
	tx *sql.Tx
}

func (r *snapshot) Pointer(ctx context.Context, topic string, partition int32) (int64, bool, error) {
	return pointer(ctx, r.tx.StmtContext(ctx, r.s.rPointer).QueryRowContext, topic, partition)
}

func (r *snapshot) Pointers(ctx context.Context, topic string) (map[int32]int64, error) {
	rows, err := r.tx.StmtContext(ctx, r.s.rPointers).QueryContext(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("journal store: pointers %s: %w", topic, err)
	}
	defer func() { _ = rows.Close() }()
	out := map[int32]int64{}
	for rows.Next() {
		var (
			p   int32
			off int64
		)
		if err := rows.Scan(&p, &off); err != nil {
			return nil, fmt.Errorf("journal store: pointers %s: %w", topic, err)
		}
		out[p] = off
	}
	return out, rows.Err()
}

func (r *snapshot) Meta(ctx context.Context, key store.Key) (store.Meta, bool, error) {
	return meta(ctx, r.tx.StmtContext(ctx, r.s.rMeta).QueryRowContext, key)
}

func (r *snapshot) Events(ctx context.Context, key store.Key, from int64, fn func(store.Event) error) error {
	rows, err := r.tx.StmtContext(ctx, r.s.rEvents).QueryContext(ctx, key.Topic, key.ID, from)
	if err != nil {
		return fmt.Errorf("journal store: events %s/%s: %w", key.Topic, key.ID, err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var (
			e                                  store.Event
			ts                                 int64
			origin, version, tags, md, headers sql.NullString
			kind                               int16
			payload                            []byte
		)
		if err := rows.Scan(&e.SeqNr, &e.Partition, &e.Offset, &ts, &origin, &version, &tags, &md, &headers, &kind, &payload); err != nil {
			return fmt.Errorf("journal store: events %s/%s: %w", key.Topic, key.ID, err)
		}
		e.Timestamp = time.UnixMilli(ts)
		e.Origin, e.Version = origin.String, version.String
		e.Kind = action.PayloadKind(kind)
		if e.Kind != action.PayloadNone {
			e.Payload = payload
			if e.Payload == nil {
				e.Payload = []byte{}
			}
		}
		if tags.Valid && tags.String != "" {
			if e.Tags, err = decodeTags(tags.String); err != nil {
				return fmt.Errorf("journal store: event %s/%s/%d: tags: %w", key.Topic, key.ID, e.SeqNr, err)
			}
		}
		if md.Valid {
			e.Metadata = json.RawMessage(md.String)
		}
		if headers.Valid && headers.String != "" {
			if err := json.Unmarshal([]byte(headers.String), &e.Headers); err != nil {
				return fmt.Errorf("journal store: event %s/%s/%d: headers: %w", key.Topic, key.ID, e.SeqNr, err)
			}
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (r *snapshot) Close() error { return r.tx.Rollback() }

// decodeTags decodes the tags column, a JSON array of strings as
// insertEvents writes it. Arrays of plain ASCII strings without escapes,
// which is what tags nearly always are, are split here; anything else
// goes to encoding/json (a fifth of a 1,000-event read went to it).
func decodeTags(s string) ([]string, error) {
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		body := s[1 : len(s)-1]
		if body == "" {
			return []string{}, nil
		}
		n := strings.Count(body, ",") + 1
		out := make([]string, 0, n)
		for i := 0; i < len(body); {
			if body[i] != '"' {
				return decodeTagsJSON(s)
			}
			j := i + 1
			for j < len(body) && body[j] != '"' {
				if c := body[j]; c < 0x20 || c >= 0x7f || c == '\\' {
					return decodeTagsJSON(s)
				}
				j++
			}
			if j == len(body) {
				return decodeTagsJSON(s)
			}
			out = append(out, body[i+1:j])
			i = j + 1
			if i < len(body) {
				if body[i] != ',' || i+1 == len(body) {
					return decodeTagsJSON(s)
				}
				i++
			}
		}
		return out, nil
	}
	return decodeTagsJSON(s)
}

func decodeTagsJSON(s string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	return out, nil
}

func meta(ctx context.Context, row rowFunc, key store.Key) (store.Meta, bool, error) {
	m, err := scanMeta(row(ctx, key.Topic, key.ID).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Meta{}, false, nil
	}
	if err != nil {
		return store.Meta{}, false, fmt.Errorf("journal store: meta %s/%s: %w", key.Topic, key.ID, err)
	}
	return m, true, nil
}

// scanMeta scans the meta columns, after any leading destinations.
func scanMeta(scan func(...any) error, lead ...any) (store.Meta, error) {
	var (
		m                store.Meta
		expAfter, expOn  sql.NullInt64
		origin           sql.NullString
		created, updated int64
	)
	dest := append(lead, &m.Partition, &m.Offset, &m.SeqNr, &m.DeleteTo, &expAfter, &expOn, &origin, &created, &updated)
	if err := scan(dest...); err != nil {
		return m, err
	}
	if expAfter.Valid {
		m.ExpireAfter = time.Duration(expAfter.Int64) * time.Millisecond
	}
	if expOn.Valid {
		m.ExpireOn = time.UnixMilli(expOn.Int64)
	}
	m.Origin = origin.String
	m.Created, m.Updated = time.UnixMilli(created), time.UnixMilli(updated)
	return m, nil
}

type sqlTx struct {
	s    *Store
	tx   *sql.Tx
	args []any // reused between statements
	// jids are the journal rows' numbers, by id: from Metas, then from
	// PutMetas (a new row's is known once it is written).
	jids map[string]int64
}

// stmtKey names a batch statement: which one, for how many rows.
type stmtKey struct {
	kind stmtKind
	n    int
}

type stmtKind int

const (
	stmtMetas stmtKind = iota
	stmtPutMetas
	stmtInsertEvents
)

// chunkSizes are the row counts of the multi-row statements: n rows go
// as a sum of these, so a handful of prepared statements serve any n.
var chunkSizes = []int{256, 64, 16, 4, 1}

// chunks splits n into chunkSizes, largest first.
func chunks(n int) []int {
	var out []int
	for _, c := range chunkSizes {
		for n >= c {
			out = append(out, c)
			n -= c
		}
	}
	return out
}

func (t *sqlTx) query(ctx context.Context, k stmtKey, args []any) (*sql.Rows, error) {
	return t.tx.StmtContext(ctx, t.s.stmts[k]).QueryContext(ctx, args...)
}

// prepare prepares the batch statements of every chunk size on the write
// pool (outside any transaction: SQLite's pool has one connection).
func (s *Store) prepare(ctx context.Context) error {
	for _, x := range []struct {
		st **sql.Stmt
		q  string
	}{{&s.rMeta, s.q.meta}, {&s.rPointer, s.q.pointer}, {&s.rPointers, s.q.pointers}, {&s.rEvents, s.q.events}} {
		st, err := s.read.PrepareContext(ctx, x.q)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*x.st = st
	}
	s.stmts = map[stmtKey]*sql.Stmt{}
	for _, n := range chunkSizes {
		for k, q := range map[stmtKind]string{stmtMetas: s.metasQuery(n), stmtPutMetas: s.putMetasQuery(n), stmtInsertEvents: s.insertEventsQuery(n)} {
			st, err := s.write.PrepareContext(ctx, q)
			if err != nil {
				return fmt.Errorf("prepare: %w", err)
			}
			s.stmts[stmtKey{k, n}] = st
		}
	}
	return nil
}

// argBuf returns the reusable argument slice, empty, with room for n.
func (t *sqlTx) argBuf(n int) []any {
	clear(t.args)
	if cap(t.args) < n {
		t.args = make([]any, 0, n)
	}
	return t.args[:0]
}

// rows builds "head (?,..),(?,..) tail" for n rows of cols columns.
func (s *Store) rows(head string, n, cols int, tail string) string {
	var b strings.Builder
	b.WriteString(head)
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	return s.bind(b.String())
}

func (s *Store) metasQuery(n int) string {
	return s.bind(`SELECT jid, id, kafka_partition, kafka_offset, seq_nr, delete_to, expire_after_ms, expire_on, origin, created, updated FROM journal_meta WHERE topic = ? AND id IN (` +
		strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `)`)
}

func (s *Store) putMetasQuery(n int) string {
	return s.rows(`INSERT INTO journal_meta (topic, id, kafka_partition, kafka_offset, seq_nr, delete_to, expire_after_ms, expire_on, origin, created, updated) VALUES `, n, 11,
		` ON CONFLICT (topic, id) DO UPDATE SET kafka_partition = excluded.kafka_partition, kafka_offset = excluded.kafka_offset, seq_nr = excluded.seq_nr, delete_to = excluded.delete_to, expire_after_ms = excluded.expire_after_ms, expire_on = excluded.expire_on, origin = excluded.origin, updated = excluded.updated RETURNING id, jid`)
}

func (s *Store) insertEventsQuery(n int) string {
	return s.rows(s.q.insertEventsHead, n, 12, s.q.insertEventsTail)
}

func (t *sqlTx) Metas(ctx context.Context, topic string, ids []string) (map[string]store.Meta, error) {
	out := make(map[string]store.Meta, len(ids))
	for _, n := range chunks(len(ids)) {
		args := t.argBuf(n + 1)
		args = append(args, topic)
		for _, id := range ids[:n] {
			args = append(args, id)
		}
		t.args = args
		rows, err := t.query(ctx, stmtKey{stmtMetas, n}, args)
		if err != nil {
			return nil, fmt.Errorf("read metas: %w", err)
		}
		for rows.Next() {
			var (
				id  string
				jid int64
			)
			m, err := scanMeta(rows.Scan, &jid, &id)
			if err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("read metas: %w", err)
			}
			out[id] = m
			t.jids[id] = jid
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		ids = ids[n:]
	}
	return out, nil
}

func nullInt(v int64, ok bool) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: ok} }

func nullStr(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func (t *sqlTx) PutMetas(ctx context.Context, topic string, metas map[string]store.Meta) error {
	ids := slices.Sorted(maps.Keys(metas))
	for _, n := range chunks(len(ids)) {
		args := t.argBuf(11 * n)
		for _, id := range ids[:n] {
			m := metas[id]
			args = append(args, topic, id, m.Partition, m.Offset, m.SeqNr, m.DeleteTo,
				nullInt(m.ExpireAfter.Milliseconds(), m.ExpireAfter > 0), nullInt(m.ExpireOn.UnixMilli(), !m.ExpireOn.IsZero()),
				nullStr(m.Origin), m.Created.UnixMilli(), m.Updated.UnixMilli())
		}
		t.args = args
		rows, err := t.query(ctx, stmtKey{stmtPutMetas, n}, args)
		if err != nil {
			return fmt.Errorf("put metas: %w", err)
		}
		for rows.Next() {
			var (
				id  string
				jid int64
			)
			if err := rows.Scan(&id, &jid); err != nil {
				_ = rows.Close()
				return fmt.Errorf("put metas: %w", err)
			}
			t.jids[id] = jid
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("put metas: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

func (t *sqlTx) DeleteMetas(ctx context.Context, topic string, ids []string) error {
	for len(ids) > 0 {
		n := min(len(ids), 500)
		q := `DELETE FROM journal_meta WHERE topic = ? AND id IN (` + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `)`
		args := []any{topic}
		for _, id := range ids[:n] {
			args = append(args, id)
		}
		if _, err := t.tx.ExecContext(ctx, t.s.bind(q), args...); err != nil {
			return fmt.Errorf("delete metas: %w", err)
		}
		for _, id := range ids[:n] {
			delete(t.jids, id)
		}
		ids = ids[n:]
	}
	return nil
}

func (t *sqlTx) PutEvents(ctx context.Context, topic string, events []store.KeyEvent) error {
	for _, n := range chunks(len(events)) {
		if err := t.insertEvents(ctx, topic, events[:n]); err != nil {
			return err
		}
		events = events[n:]
	}
	return nil
}

func (t *sqlTx) insertEvents(ctx context.Context, topic string, events []store.KeyEvent) error {
	args := t.argBuf(12 * len(events))
	for _, e := range events {
		jid, ok := t.jids[e.ID]
		if !ok {
			return fmt.Errorf("put events: journal %s/%s has no row", topic, e.ID)
		}
		var tags, headers sql.NullString
		if len(e.Tags) > 0 {
			j := []byte{'['}
			for i, t := range e.Tags {
				if i > 0 {
					j = append(j, ',')
				}
				j = record.AppendJSONString(j, t)
			}
			tags = sql.NullString{String: string(append(j, ']')), Valid: true}
		}
		if len(e.Headers) > 0 {
			j, _ := json.Marshal(e.Headers)
			headers = sql.NullString{String: string(j), Valid: true}
		}
		var md sql.NullString
		if e.Metadata != nil {
			md = sql.NullString{String: string(e.Metadata), Valid: true}
		}
		var payload []byte
		if e.Kind != action.PayloadNone {
			payload = e.Payload
			if payload == nil {
				payload = []byte{}
			}
		}
		args = append(args, jid, e.SeqNr, e.Partition, e.Offset, e.Timestamp.UnixMilli(),
			nullStr(e.Origin), nullStr(e.Version), tags, md, headers, int16(e.Kind), payload)
	}
	t.args = args
	res, err := t.tx.StmtContext(ctx, t.s.stmts[stmtKey{stmtInsertEvents, len(events)}]).ExecContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("put events: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n != int64(len(events)) {
		return fmt.Errorf("put events: %d of %d events of %s (%s/%d..%s/%d) are already stored: refusing to overwrite them",
			int64(len(events))-n, len(events), topic, events[0].ID, events[0].SeqNr, events[len(events)-1].ID, events[len(events)-1].SeqNr)
	}
	return nil
}

func (t *sqlTx) DeleteEvents(ctx context.Context, key store.Key, to int64) error {
	jid, ok := t.jids[key.ID]
	if !ok { // no row, so no events
		return nil
	}
	if _, err := t.tx.ExecContext(ctx, t.s.q.delEvents, jid, to); err != nil {
		return fmt.Errorf("delete events %s: %w", key.ID, err)
	}
	return nil
}

func (t *sqlTx) SetPointer(ctx context.Context, topic string, partition int32, offset int64) error {
	now := t.s.now().UnixMilli()
	if _, err := t.tx.ExecContext(ctx, t.s.q.setPointer, topic, partition, offset, now, now); err != nil {
		return fmt.Errorf("set pointer %s/%d: %w", topic, partition, err)
	}
	return nil
}

// Dump returns every journal's row and stored event seqNrs on topic, for
// tests and the crash check.
func (s *Store) Dump(ctx context.Context, topic string) (map[store.Key]store.Dumped, error) {
	out := map[store.Key]store.Dumped{}
	rows, err := s.read.QueryContext(ctx, s.bind(`SELECT topic, id, seq_nr, delete_to FROM journal_meta WHERE topic = ?`), topic)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k store.Key
		var d store.Dumped
		if err := rows.Scan(&k.Topic, &k.ID, &d.SeqNr, &d.DeleteTo); err != nil {
			_ = rows.Close()
			return nil, err
		}
		out[k] = d
	}
	_ = rows.Close()
	rows, err = s.read.QueryContext(ctx, s.bind(`SELECT topic, id, seq_nr FROM journal WHERE topic = ? ORDER BY topic, id, seq_nr`), topic)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var k store.Key
		var seq int64
		if err := rows.Scan(&k.Topic, &k.ID, &seq); err != nil {
			return nil, err
		}
		d, ok := out[k]
		if !ok {
			return nil, fmt.Errorf("event %s/%s/%d has no journal_meta row", k.Topic, k.ID, seq)
		}
		d.Events = append(d.Events, seq)
		out[k] = d
	}
	return out, rows.Err()
}
