package fluid

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// How a downgrade topic serves a group that arrives at any time.
//
// A downgrade partition is written in segments. Segment 0 starts where
// republishing first began (the lowest position of the groups then on the
// version); every record carries its source offset, the position from
// which it is the source partition's first record (HeaderSourceFrom) and
// its segment (HeaderSegment). Within a segment the records follow the
// source partition one by one, so a reader at main-topic position pos
// finds the record covering pos (from <= pos <= source offset) before any
// record past it.
//
// A reader switches partition p to the downgrade topic at its first
// incompatible record f, asking GET /fluid/downgrade-offset where to read
// position f from. When f is below where the newest segment began (the
// downgrade topic never held it), or the reader reports that the newest
// segment skips its position (records deleted by retention), the bridge
// starts a new segment at that position: republishing of the partition
// restarts there, writing after the partition's current end. Readers
// already further on drop the records they have by source offset until the
// new segment reaches them, so nobody sees a record twice; the new reader
// finds its position in the new segment, so nobody misses one. The new
// segment's start is in the state topic and every record names its
// segment, so a restarted (or SIGKILLed) bridge knows whether the segment
// began and where to resume it.

var (
	errGroupNotOn  = errors.New("group is not registered for this version")
	errNoPartition = errors.New("no such partition")
	errNoRepublish = errors.New("no group is on this version")
)

// downgradeOffset returns the segment of partition p of the downgrade topic
// of (topic, c) from which group reads main-topic position pos, starting a
// new one when no segment holds it: when pos is below the newest
// segment's start, or when the reader found that segment missing (its id
// is missing; -1: not reported). The answer's Offset is a downgrade-topic
// offset at or before the segment's first record.
func (b *Bridge) downgradeOffset(ctx context.Context, topic, group string, c int, p int32, pos, missing int64) (segment, string, error) {
	dtopic, n, err := b.ensureDowngradeTopic(ctx, topic, c)
	if err != nil {
		return segment{}, "", err
	}
	if p < 0 || int(p) >= n {
		return segment{}, "", fmt.Errorf("%w: %s has %d partitions", errNoPartition, topic, n)
	}
	b.triggerMu.Lock()
	defer b.triggerMu.Unlock()
	tv := topicVersion{topic, c}
	gv, registered := 0, false
	b.state.read(func(vw *view) { gv, registered = vw.groups[topic][group] })
	if !registered || gv != c {
		return segment{}, "", fmt.Errorf("%w: group %q (ask GET /fluid/downgrade-topic first)", errGroupNotOn, group)
	}
	ok, err := b.triggerLocked(ctx, topic, 0, c)
	if err != nil {
		return segment{}, "", err
	}
	if !ok {
		return segment{}, "", errNoRepublish
	}
	var newest segment
	b.state.read(func(vw *view) { newest = vw.newest(tv, p) })
	if pos >= newest.From && missing < newest.ID {
		return newest, dtopic, nil
	}
	ends, err := b.endOffsets(ctx, dtopic, p)
	if err != nil {
		return segment{}, "", err
	}
	// Ids grow: larger than the newest, and (so that they keep growing even
	// if the state topic were lost) not below the clock in milliseconds.
	sg := segment{ID: max(newest.ID+1, time.Now().UnixMilli()), From: pos, Offset: ends[p], Group: group}
	why := "below where the downgrade topic's newest segment began"
	if missing >= newest.ID {
		why = "missing from the downgrade topic's newest segment (deleted?)"
	}
	b.log.Warn("fluid: a group needs a main-topic position the downgrade topic does not hold; republishing the partition again from there",
		"topic", topic, "version", c, "partition", p, "position", pos, "group", group, "reason", why,
		"segment", sg.ID, "previous_segment", newest.ID, "previous_from", newest.From, "after_offset", sg.Offset)
	if err := b.state.put(ctx, segmentKey(tv, p, sg.ID), sg); err != nil {
		return segment{}, "", err
	}
	return sg, dtopic, nil
}

// DowngradeOffset is the answer of GET /fluid/downgrade-offset.
type DowngradeOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset: read the downgrade partition from here to find the record
	// covering the position asked for.
	Offset int64 `json:"offset"`
	// Segment is the id of the segment that holds (or will hold) it; From
	// where that segment starts in the main topic.
	Segment int64 `json:"segment"`
	From    int64 `json:"from"`
}

func (b *Bridge) handleDowngradeOffset(w http.ResponseWriter, r *http.Request) {
	q, ok := b.groupQuery(w, r, "partition", "source-offset", "missing-segment")
	if !ok {
		return
	}
	topic, group, v := q.topic, q.group, q.version
	num := func(name string, required bool, bits int) (int64, bool) {
		s := q.Get(name)
		if s == "" {
			if required {
				writeErr(w, http.StatusBadRequest, name, "parameter %s is required", name)
				return 0, false
			}
			return -1, true
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil || n < 0 {
			writeErr(w, http.StatusBadRequest, name, "parameter %s: %q is not a non-negative integer", name, s)
			return 0, false
		}
		return n, true
	}
	p, ok := num("partition", true, 32)
	if !ok {
		return
	}
	pos, ok := num("source-offset", true, 64)
	if !ok {
		return
	}
	missing, ok := num("missing-segment", false, 64)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	sg, dtopic, err := b.downgradeOffset(ctx, topic, group, v, int32(p), pos, missing)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, DowngradeOffset{Topic: dtopic, Partition: int32(p), Offset: sg.Offset, Segment: sg.ID, From: sg.From})
	case errors.Is(err, errNoTopic):
		writeErr(w, http.StatusNotFound, "topic", "topic %q does not exist in Kafka", topic)
	case errors.Is(err, errNoPartition):
		writeErr(w, http.StatusBadRequest, "partition", "%v", err)
	case errors.Is(err, errGroupNotOn):
		writeErr(w, http.StatusConflict, "group", "%v", err)
	default:
		writeErr(w, http.StatusBadGateway, "", "%v", err)
	}
}
