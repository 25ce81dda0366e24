package embedded

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Stats are the embedded broker's figures, as of its last retention check.
type Stats struct {
	// At is when they were taken.
	At      time.Time `json:"at"`
	DataDir string    `json:"data_dir"`
	// DiskBytes is the size of every file under DataDir.
	DiskBytes int64 `json:"disk_bytes"`
	// DiskBudget is the budget (-1: none).
	DiskBudget int64 `json:"disk_budget_bytes"`
	// FreeBytes is what the file system of DataDir has left for
	// unprivileged users.
	FreeBytes int64 `json:"filesystem_free_bytes"`
	// Segments counts the segment files.
	Segments int `json:"segments"`
	// IndexBytes estimates the memory of the broker's index of the
	// retained batches: an entry of IndexEntryBytes per batch.
	IndexBytes int64 `json:"index_memory_bytes"`
	// RetentionMs, RetentionBytes and SegmentBytes are the broker's
	// defaults (-1: no bound); CheckMs the check interval.
	RetentionMs    int64 `json:"retention_ms"`
	RetentionBytes int64 `json:"retention_bytes"`
	SegmentBytes   int64 `json:"segment_bytes"`
	CheckMs        int64 `json:"check_interval_ms"`
	// Topics are the topics, by name.
	Topics []TopicStats `json:"topics"`
	// LastError is the last check's error ("" if it worked).
	LastError string `json:"last_error,omitempty"`
}

// TopicStats are one topic's retained range and retention.
type TopicStats struct {
	Topic string `json:"topic"`
	// RetentionMs and RetentionBytes are the topic's (its own, else the
	// broker's; -1: no bound); Compacted is true for a cleanup.policy of
	// compact alone, which retention leaves alone.
	RetentionMs    int64 `json:"retention_ms"`
	RetentionBytes int64 `json:"retention_bytes"`
	Compacted      bool  `json:"compacted,omitempty"`
	// Records and Bytes are what its partitions retain.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// OldestMs is the timestamp of the first retained record of the
	// partition whose first record is oldest, NewestMs the largest
	// timestamp retained (Unix ms; 0: none).
	OldestMs int64 `json:"oldest_timestamp_ms,omitempty"`
	NewestMs int64 `json:"newest_timestamp_ms,omitempty"`
	// Deleted counts the records retention deleted since the broker
	// started, by reason (time, size, disk_budget); Skipped those of
	// them a consumer group had not read, by group.
	Deleted    map[string]int64 `json:"deleted_records"`
	Skipped    map[string]int64 `json:"skipped_records"`
	Partitions []PartitionStats `json:"partitions"`
}

// PartitionStats are one partition's retained range: offsets LogStart up
// to LogEnd.
type PartitionStats struct {
	Partition int32 `json:"partition"`
	LogStart  int64 `json:"log_start_offset"`
	LogEnd    int64 `json:"log_end_offset"`
	Bytes     int64 `json:"bytes"`
}

// Stats returns the broker's figures as of its last retention check.
func (b *Broker) Stats() Stats {
	if b == nil || b.ret == nil {
		return Stats{}
	}
	return b.ret.snapshot()
}

func (r *retainer) snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Topics = make([]TopicStats, len(r.stats.Topics))
	for i, t := range r.stats.Topics {
		t.Partitions = append([]PartitionStats(nil), t.Partitions...)
		t.Deleted, t.Skipped = map[string]int64{}, map[string]int64{}
		for k, n := range r.deleted {
			if k[0] == t.Topic {
				t.Deleted[k[1]] = n
			}
		}
		for k, n := range r.skipped {
			if k[0] == t.Topic {
				t.Skipped[k[1]] = n
			}
		}
		s.Topics[i] = t
	}
	return s
}

// The broker's index of a retained batch: kfake keeps a batchMeta of
// IndexEntryBytes in memory for each batch and writes an entry of
// indexFileEntry bytes to the segment's .idx file, so the .idx files
// count the batches in memory (those of the retained segments, the ones
// below the log start in the oldest segment included: kfake frees them
// with the segment). The figures are those of the kfake version in
// go.mod; TestIndexEstimate checks them.
const (
	IndexEntryBytes = 72
	indexFileEntry  = 15
)

// tp is a topic partition.
type tp struct {
	topic string
	p     int32
}

// diskUse is what the data directory holds.
type diskUse struct {
	bytes    int64 // every file
	idxBytes int64 // the segments' index files
	segments int
	free     int64
}

// disk measures the data directory.
func (r *retainer) disk() diskUse {
	var d diskUse
	_ = filepath.WalkDir(r.cfg.DataDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil // gone meanwhile, or a directory
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		d.bytes += fi.Size()
		switch {
		case strings.HasSuffix(path, ".idx"):
			d.idxBytes += fi.Size()
		case strings.HasSuffix(path, ".dat"):
			d.segments++
		}
		return nil
	})
	var st syscall.Statfs_t
	if syscall.Statfs(r.cfg.DataDir, &st) == nil {
		d.free = int64(st.Bavail) * int64(st.Bsize) // Bsize is an int32 on 386
	}
	return d
}

// takeStats records the figures of a check.
func (r *retainer) takeStats(ctx context.Context, parts []*part, d diskUse, now time.Time) error {
	oldest, err := r.oldest(ctx, parts)
	if err != nil {
		return err
	}
	s := Stats{At: now, DataDir: r.cfg.DataDir, DiskBytes: d.bytes, DiskBudget: max(-1, r.cfg.DiskBudget), FreeBytes: d.free,
		Segments: d.segments, IndexBytes: d.idxBytes / indexFileEntry * IndexEntryBytes,
		RetentionMs: retentionMs(r.cfg.Retention), RetentionBytes: max(-1, r.cfg.RetentionBytes), SegmentBytes: r.cfg.SegmentBytes,
		CheckMs: r.cfg.RetentionCheck.Milliseconds(), Topics: []TopicStats{}}
	for _, p := range parts {
		if n := len(s.Topics); n == 0 || s.Topics[n-1].Topic != p.topic {
			s.Topics = append(s.Topics, TopicStats{Topic: p.topic, RetentionMs: p.retMs, RetentionBytes: p.retBytes, Compacted: p.compacted})
		}
		t := &s.Topics[len(s.Topics)-1]
		t.Records += p.end - p.start
		t.Bytes += p.bytes
		if p.end > p.start {
			t.NewestMs = max(t.NewestMs, p.maxTS)
			if o, ok := oldest[tp{p.topic, p.p}]; ok && (t.OldestMs == 0 || o < t.OldestMs) {
				t.OldestMs = o
			}
		}
		t.Partitions = append(t.Partitions, PartitionStats{Partition: p.p, LogStart: p.start, LogEnd: p.end, Bytes: p.bytes})
	}
	r.mu.Lock()
	s.LastError = r.stats.LastError
	r.stats = s
	r.mu.Unlock()
	return nil
}

// oldest asks the broker for the timestamp of each partition's first
// retained record: ListOffsets for time 0 answers the first record at or
// after it, with its timestamp.
func (r *retainer) oldest(ctx context.Context, parts []*part) (map[tp]int64, error) {
	found, err := r.listOffsets(ctx, parts, func(p *part) (int64, bool) { return 0, p.end > p.start })
	if err != nil {
		return nil, fmt.Errorf("list offsets for the oldest records: %w", err)
	}
	out := map[tp]int64{}
	for k, rp := range found {
		if rp.Timestamp > 0 {
			out[k] = rp.Timestamp
		}
	}
	return out, nil
}
