package admin

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// Role is what a bearer token may do.
type Role int

const (
	// RoleNone is no role: the request is refused.
	RoleNone Role = iota
	// RoleRead may read: status, metrics, journal reads, fluid GETs.
	RoleRead
	// RoleWrite may read and change state: journal append, delete and
	// purge, fluid DELETE, pprof.
	RoleWrite
)

// String returns "read", "write" or "none".
func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	}
	return "none"
}

// MinTokenLength is the shortest token a tokens file may hold: 16
// characters, so that a token cannot be guessed in the time a server runs.
const MinTokenLength = 16

// tokensCheckInterval is how often at most the tokens file is read again
// to see whether it changed (by a request, or by the watch of open
// streams).
const tokensCheckInterval = 250 * time.Millisecond

type tokenEntry struct {
	name string
	role Role
	hash [sha256.Size]byte
}

// Tokens are the bearer tokens of a tokens file. The file has one token a
// line, as three fields separated by spaces or tabs:
//
//	ROLE NAME TOKEN
//
// ROLE is read or write, NAME says whose token it is (it is logged; the
// token never is), TOKEN is at least MinTokenLength characters without
// spaces. Blank lines and lines starting with # are ignored. The file is
// read again when its content changes (it is read and hashed at most
// every tokensCheckInterval: a change that keeps the size and the
// modification time, as a restore or cp -p makes, counts), so tokens can
// be rotated and revoked without a restart. At load every line must
// parse and there must be a token; on a reload, the lines that parse are
// the tokens (a bad line is logged and gives no access, so a typo never
// keeps a revoked token alive). While the file is missing or cannot be
// read, every token is refused (fail closed: deleting the file revokes
// them all), logged once; when it can be read again, its tokens count.
type Tokens struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	entries []tokenEntry
	sum     [sha256.Size]byte // of the content entries were read from
	checked time.Time
	failed  string // the error while the file cannot be read, logged once
}

// LoadTokens reads the tokens file at path; log receives reload errors
// (nil: discarded). The error names the file and line of a bad line,
// never a token.
func LoadTokens(path string, log *slog.Logger) (*Tokens, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Tokens{path: path, log: log}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("admin tokens file: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("admin tokens file: %w", err)
	}
	entries, err := parseTokens(path, b)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: no tokens in it (want lines ROLE NAME TOKEN)", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn("admin tokens file can be read by other users; chmod 600 it", "file", path, "mode", fi.Mode().Perm().String())
	}
	t.entries, t.sum, t.checked = entries, sha256.Sum256(b), time.Now()
	return t, nil
}

// Len returns how many tokens are in force (none while the file cannot
// be read).
func (t *Tokens) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// Lookup returns the name and role of token, or RoleNone. It compares
// hashes in constant time against every entry.
func (t *Tokens) Lookup(token string) (name string, role Role) {
	return t.lookupHash(sha256.Sum256([]byte(token)))
}

// lookupHash is Lookup of a token's SHA-256.
func (t *Tokens) lookupHash(h [sha256.Size]byte) (name string, role Role) {
	t.reload()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 && role == RoleNone {
			name, role = e.name, e.role
		}
	}
	return name, role
}

// unavailable reports whether the file could not be read at the last
// look (every token is refused).
func (t *Tokens) unavailable() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed != ""
}

// reload reads the file again, at most every tokensCheckInterval, and
// takes its tokens if its content changed.
func (t *Tokens) reload() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if now.Sub(t.checked) < tokensCheckInterval {
		return
	}
	t.checked = now
	b, err := os.ReadFile(t.path)
	if err != nil {
		if msg := err.Error(); msg != t.failed {
			t.failed = msg
			t.log.Error("admin tokens file cannot be read: every token is refused until it can be read again", "file", t.path, "err", err)
		}
		t.entries, t.sum = nil, [sha256.Size]byte{}
		return
	}
	sum := sha256.Sum256(b)
	if sum == t.sum && t.failed == "" {
		return
	}
	entries, perr := parseTokens(t.path, b)
	t.failed = ""
	t.entries, t.sum = entries, sum
	if perr != nil {
		t.log.Error("admin tokens file reloaded with errors: the lines named give no access", "err", perr, "tokens", len(entries))
		return
	}
	t.log.Info("admin tokens file reloaded", "file", t.path, "tokens", len(entries))
}

// parseTokens parses a tokens file: the entries of the lines that parse,
// and an error naming each line that does not. Its errors name lines and
// never quote a field: a line written in the wrong order would otherwise
// put its token in the log.
func parseTokens(path string, b []byte) ([]tokenEntry, error) {
	var entries []tokenEntry
	var errs []error
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s:%d: %s", path, ln, fmt.Sprintf(format, args...)))
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			bad("want ROLE NAME TOKEN (3 fields separated by spaces), not %d fields", len(f))
			continue
		}
		var role Role
		switch f[0] {
		case "read":
			role = RoleRead
		case "write":
			role = RoleWrite
		default:
			bad("the role (first field) must be read or write")
			continue
		}
		if len(f[2]) < MinTokenLength {
			bad("the token (third field) is %d characters; use at least %d (e.g. openssl rand -hex 32)", len(f[2]), MinTokenLength)
			continue
		}
		h := sha256.Sum256([]byte(f[2]))
		if prev, ok := seen[h]; ok {
			bad("the token is the token of line %d too: give each its own", prev)
			continue
		}
		seen[h] = ln
		entries = append(entries, tokenEntry{name: f[1], role: role, hash: h})
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", path, err))
	}
	return entries, errors.Join(errs...)
}
