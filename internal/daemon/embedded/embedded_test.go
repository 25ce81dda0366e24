package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/tests/testenv"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStorageErrorOnFullDisk: with the data directory's file system full
// (a tmpfs), a produce fails with UNKNOWN_SERVER_ERROR, all kfake says;
// the broker's StorageError says what the file system said, and the
// broker's logger gets it (the regression: a full disk was reported
// as UNKNOWN_SERVER_ERROR, never as a full disk).
func TestStorageErrorOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8388608,mode=0755"); err != nil {
		testenv.Missing(t, fmt.Sprintf("a tmpfs mount (needs root or CAP_SYS_ADMIN): %v", err))
	}
	testenv.Cleanup(t, func() error { return syscall.Unmount(dir, syscall.MNT_DETACH) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	var log syncBuffer
	b, err := Start(Config{Listen: addr, DataDir: filepath.Join(dir, "broker"), Partitions: 1,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation(),
		kgo.RecordRetries(1), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("produce before the disk is full: %v", err)
	}
	if b.StorageError() != nil {
		t.Fatalf("storage error before the disk is full: %v", b.StorageError())
	}
	// Fill the file system.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 1<<16); ; {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	var perr error
	for i := 0; i < 50 && perr == nil; i++ {
		perr = cl.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte("x"), 4096)}).FirstErr()
	}
	if !errors.Is(perr, kerr.UnknownServerError) {
		t.Fatalf("produce on the full disk: %v, want UNKNOWN_SERVER_ERROR (if kfake says more now, Explain can use it)", perr)
	}
	serr := b.StorageError()
	if serr == nil || !errors.Is(serr, syscall.ENOSPC) || !strings.Contains(serr.Error(), "no space left on device") {
		t.Fatalf("StorageError = %v, want the file system's ENOSPC", serr)
	}
	t.Logf("produce: %v; StorageError: %v", perr, serr)
	if !strings.Contains(log.String(), "embedded broker cannot write its data") || !strings.Contains(log.String(), "no space left on device") {
		t.Fatalf("log:\n%s", log.String())
	}
	// Room again: the error ages out after StorageErrorTTL.
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the disk has room: %v", err)
	}
	if err := b.storage.recent(time.Now().Add(StorageErrorTTL + time.Second)); err != nil {
		t.Fatalf("storage error %v still reported after its TTL", err)
	}
}
