package kafka

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxInstanceSlots bounds how many processes (or pipelines) of one group
// can claim an instance ID under one directory.
const maxInstanceSlots = 256

// ClaimInstanceID returns a static group instance ID (KIP-345) for group,
// kept under dir so that the next process started with the same dir gets
// the same one back, and with it its partitions at once instead of after
// the session timeout. IDs live in slots, one file each
// (dir/<group>/<slot>.id), and a process holds an exclusive lock (flock)
// on the slot it uses until release is called or it exits (even by
// SIGKILL), so a second live process with the same dir and group takes
// the next slot, and another ID: both are members and share the
// partitions. The ID names the host, the slot and a random part; a slot
// file written on another host (a copied data dir) is given a new ID, so
// two machines never share one.
func ClaimInstanceID(dir, group string) (id string, release func(), err error) {
	gdir := filepath.Join(dir, groupDirName(group))
	if err := os.MkdirAll(gdir, 0o755); err != nil {
		return "", nil, fmt.Errorf("instance id dir: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	host = sanitize(host)
	for slot := 0; slot < maxInstanceSlots; slot++ {
		path := filepath.Join(gdir, strconv.Itoa(slot)+".id")
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return "", nil, fmt.Errorf("instance id slot %s: %w", path, err)
		}
		locked, err := tryLock(f)
		if err != nil {
			_ = f.Close()
			return "", nil, fmt.Errorf("lock instance id slot %s: %w", path, err)
		}
		if !locked {
			_ = f.Close()
			continue // a live process holds it
		}
		b, err := os.ReadFile(path)
		if err != nil {
			_ = f.Close()
			return "", nil, err
		}
		id = strings.TrimSpace(string(b))
		prefix := "streamd-" + host + "-" + strconv.Itoa(slot) + "-"
		if !strings.HasPrefix(id, prefix) || len(id) != len(prefix)+16 {
			var r [8]byte
			rand.Read(r[:])
			id = prefix + hex.EncodeToString(r[:])
			// err (nil here) is the function's: a failed truncate or
			// write must reach the check below (it did not: the ID was
			// then not kept, and the next start claimed another).
			err = f.Truncate(0)
			if err == nil {
				_, err = f.WriteAt([]byte(id+"\n"), 0)
			}
			if err == nil {
				err = f.Sync()
			}
			if err != nil {
				_ = f.Close()
				return "", nil, fmt.Errorf("write instance id slot %s: %w", path, err)
			}
		}
		return id, func() { _ = f.Close() }, nil // closing the file releases the lock
	}
	return "", nil, errors.New("all instance id slots are in use")
}

// groupDirName is a file name for group: its safe characters and a hash.
func groupDirName(group string) string {
	h := sha256.Sum256([]byte(group))
	s := sanitize(group)
	if len(s) > 64 {
		s = s[:64]
	}
	return s + "-" + hex.EncodeToString(h[:4])
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}
