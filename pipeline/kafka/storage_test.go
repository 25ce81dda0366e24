package kafka

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestExplainStorageError: a produce answered UNKNOWN_SERVER_ERROR or
// KAFKA_STORAGE_ERROR says what the broker's storage said when the cluster
// knows it (the embedded broker: Cluster.StorageErr), and what the code
// means otherwise; with no storage error known, UNKNOWN_SERVER_ERROR stays
// as the broker said it (the regression: a full disk showed as
// UNKNOWN_SERVER_ERROR only).
func TestExplainStorageError(t *testing.T) {
	full := fmt.Errorf("persist batch t-0: write /d/broker/partitions/t-0/0.dat: %w", syscall.ENOSPC)
	var storage error
	c := &Cluster{Seeds: []string{"127.0.0.1:9092"}, StorageErr: func() error { return storage }}
	for _, tc := range []struct {
		name    string
		storage error
		err     error
		want    string
	}{
		{"unknown-full", full, kerr.UnknownServerError, "the broker cannot write its data: persist batch t-0: write /d/broker/partitions/t-0/0.dat: no space left on device"},
		{"storage-full", full, kerr.KafkaStorageError, "the broker cannot write its data: persist batch t-0"},
		{"unknown-none", nil, kerr.UnknownServerError, "produce to topic t: wrapped: UNKNOWN_SERVER_ERROR"},
		{"storage-none", nil, kerr.KafkaStorageError, "cannot write to its log directory (a full or failing disk on the broker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storage = tc.storage
			err := c.Explain(fmt.Errorf("wrapped: %w", tc.err), "", "produce to topic t")
			if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.err) {
				t.Fatalf("Explain: %v\nwant it to contain %q and wrap %v", err, tc.want, tc.err)
			}
			t.Log(err)
		})
	}
}
