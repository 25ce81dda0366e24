package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultRevokeTimeout is how long a revoke waits for the in-flight records
// of the revoked partitions (SourceConfig.RevokeTimeout).
const DefaultRevokeTimeout = 10 * time.Second

// GroupStatus is a Source's view of its consumer group membership, for
// /v1/status.
type GroupStatus struct {
	Group string `json:"group"`
	// MemberID is the member's ID in the group ("" before it joined).
	MemberID string `json:"member_id,omitempty"`
	// InstanceID is the static instance ID, if the member is static.
	InstanceID string `json:"instance_id,omitempty"`
	// Generation is the group generation (classic protocol) or the
	// member epoch (KIP-848) the member last joined with; -1 before it
	// joined. It changes on every rebalance that changes the member's
	// assignment, and (classic) on every rebalance of the group.
	Generation int32 `json:"generation"`
	// Assigned is the member's partitions, by topic, sorted.
	Assigned map[string][]int32 `json:"assigned"`
	// Assignments and Revokes count the assignment changes this member
	// went through (callbacks with partitions); Lost counts partitions
	// lost with the group session.
	Assignments int64 `json:"assignments"`
	Revokes     int64 `json:"revokes"`
	Lost        int64 `json:"lost"`
	// Changed is when the assignment last changed.
	Changed time.Time `json:"changed,omitzero"`
	// Paused is true while fetching is paused (PauseFetch).
	Paused bool `json:"paused"`
}

// groupState is what Group reports, kept under Source.mu.
type groupState struct {
	generation  int32
	assignments int64
	revokes     int64
	lost        int64
	changed     time.Time
	revoking    int // revokes waiting in drainRevoked
}

// Group returns the source's consumer group membership now.
func (s *Source) Group() GroupStatus {
	g := GroupStatus{Group: s.group, InstanceID: s.InstanceID(), Generation: -1, Assigned: map[string][]int32{}}
	if cl := s.client(); cl != nil {
		// GroupMetadata reads atomics: safe whatever franz-go holds.
		g.MemberID, g.Generation = cl.GroupMetadata()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, st := range s.parts {
		if !st.revoking {
			g.Assigned[k.topic] = append(g.Assigned[k.topic], k.partition)
		}
	}
	for _, ps := range g.Assigned {
		slices.Sort(ps)
	}
	g.Assignments, g.Revokes, g.Lost, g.Changed, g.Paused = s.grp.assignments, s.grp.revokes, s.grp.lost, s.grp.changed, s.paused
	return g
}

// noteAssigned notes the generation of an assignment by cl's group and
// counts it if it has partitions (a cooperative rebalance can assign a
// member nothing new, in a new generation); s.mu is held.
func (s *Source) noteAssigned(cl *kgo.Client, m map[string][]int32) {
	_, s.grp.generation = cl.GroupMetadata()
	if len(m) == 0 {
		return
	}
	s.grp.assignments++
	s.grp.changed = time.Now()
}

// noteRevoked counts a revoke, or a loss; s.mu is held.
func (s *Source) noteRevoked(m map[string][]int32, lost bool) {
	if len(m) == 0 {
		return
	}
	if lost {
		s.grp.lost++
	} else {
		s.grp.revokes++
	}
	s.grp.changed = time.Now()
}

// drainRevoked marks the partitions of m as being revoked (FetchUpTo
// drops their records from now on) and waits, at most the revoke timeout,
// until every record fetched from them was acknowledged. It returns how
// long it waited and how many records are still in flight.
func (s *Source) drainRevoked(ctx context.Context, m map[string][]int32) (time.Duration, int64) {
	start := time.Now()
	inFlight := func() int64 {
		var n int64
		for t, ps := range m {
			for _, p := range ps {
				if st := s.parts[tp{t, p}]; st != nil && st.fetched > st.acked+1 {
					n += st.fetched - (st.acked + 1)
				}
			}
		}
		return n
	}
	s.mu.Lock()
	for t, ps := range m {
		for _, p := range ps {
			if st := s.parts[tp{t, p}]; st != nil {
				st.revoking = true
			}
		}
	}
	left := inFlight()
	// A transactional source does not wait: the revoke aborts the open
	// transaction, so what is in flight would be written for nothing.
	if left == 0 || s.revokeTimeout < 0 || s.closing || s.txn != nil {
		s.mu.Unlock()
		return 0, left
	}
	s.grp.revoking++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.grp.revoking--
		s.mu.Unlock()
	}()
	timer := time.NewTimer(s.revokeTimeout)
	defer timer.Stop()
	for {
		select {
		case <-s.acked:
		case <-timer.C:
		case <-ctx.Done():
		}
		s.mu.Lock()
		left = inFlight()
		s.mu.Unlock()
		if left == 0 || time.Since(start) >= s.revokeTimeout || ctx.Err() != nil {
			return time.Since(start), left
		}
	}
}

// PauseFetch implements pipeline.Pauser: the client stops fetching the
// source's topics (records it buffered are fetched again on resume, none
// skipped) and keeps its group membership and assignment, so no
// rebalance happens.
func (s *Source) PauseFetch() {
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
	if cl := s.client(); cl != nil {
		s.applyPause(cl)
	}
}

// ResumeFetch implements pipeline.Pauser.
func (s *Source) ResumeFetch() {
	s.mu.Lock()
	s.paused = false
	topics := s.pauseTopics()
	s.mu.Unlock()
	if cl := s.client(); cl != nil {
		cl.ResumeFetchTopics(topics...)
	}
}

// applyPause pauses cl's topics if the source is paused.
func (s *Source) applyPause(cl *kgo.Client) {
	s.mu.Lock()
	paused, topics := s.paused, s.pauseTopics()
	s.mu.Unlock()
	if paused {
		cl.PauseFetchTopics(topics...)
	}
}

// pauseTopics is the configured and the assigned topics; s.mu is held.
func (s *Source) pauseTopics() []string {
	set := map[string]bool{}
	for _, t := range s.topics {
		set[t] = true
	}
	for k := range s.parts {
		set[k.topic] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func topicsOf(m map[string][]int32) []string { return slices.Sorted(maps.Keys(m)) }

// leave848 removes the static member instanceID (memberID) from a group of
// the consumer protocol (KIP-848) for good: a heartbeat with member epoch
// -1, so that its partitions move to the other members at once.
// franz-go's own leave (v1.22.3) sends epoch -2 (a temporary leave, after
// which the partitions wait for the session timeout) without the
// instance ID, and the broker refuses it: INVALID_REQUEST "InstanceId
// can't be null".
func leave848(ctx context.Context, cl *kgo.Client, group, memberID, instanceID string) error {
	if memberID == "" {
		return nil // never joined
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = group
	req.MemberID = memberID
	req.MemberEpoch = -1
	req.InstanceID = &instanceID
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	err = kerr.ErrorForCode(resp.ErrorCode)
	if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.GroupIDNotFound) {
		return nil // already gone
	}
	if err != nil && resp.ErrorMessage != nil {
		err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
	}
	return err
}
