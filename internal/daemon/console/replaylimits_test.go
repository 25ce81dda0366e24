package console_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// replayPost starts a replay of orders' dead letters with body; it returns
// the status and the answer.
func (s *replaySetup) replayPost(t *testing.T, body string) (int, map[string]any) {
	t.Helper()
	res, err := http.Post(s.d.Base+"/ui/api/dlq/orders/replay", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if out == nil {
		out = map[string]any{"body": string(b)}
	}
	return res.StatusCode, out
}

// replayWait waits until replay id is done and returns it.
func (s *replaySetup) replayWait(t *testing.T, id string) map[string]any {
	t.Helper()
	var job map[string]any
	waitFor(t, 120*time.Second, "replay "+id+" done", func() (bool, string) {
		job = nil
		getJSON(t, s.d.Base+"/ui/api/replays/"+id, &job)
		return job["done"] == true, fmt.Sprint(job)
	})
	return job
}

// TestReplayDoesNotMultiply: a dead letter replayed and rejected again is
// not dead-lettered again (its dead letter is still there: a replay
// changes nothing in the dead-letter topic), through the pipeline or
// back to its source, however many times; with force it is, and the new
// dead letter says how many times it was replayed.
func TestReplayDoesNotMultiply(t *testing.T) {
	s := newReplaySetup(t, 1)
	vals := make([]string, 20)
	for i := range vals {
		if i%5 < 2 {
			vals[i] = fmt.Sprintf("reject order %d", i)
		} else {
			vals[i] = fmt.Sprintf(`{"order":%d}`, i)
		}
	}
	produce(t, s.cl, s.in, vals)
	s.waitCounts(t, 60*time.Second, 12, 8)
	before, _ := s.dlqSnapshot(t)

	code, job := s.replayPost(t, `{"to":"pipeline"}`)
	if code != 202 {
		t.Fatalf("replay: %d %v", code, job)
	}
	job = s.replayWait(t, job["id"].(string))
	if job["replayed"] != float64(8) || job["rejected"] != float64(8) {
		t.Fatalf("replay through the pipeline: %v", job)
	}
	for range 5 {
		code, job := s.replayPost(t, `{"to":"source"}`)
		if code != 202 {
			t.Fatalf("replay to the source: %d %v", code, job)
		}
		s.replayWait(t, job["id"].(string))
	}
	// The running pipeline read the 40 replayed records and rejected them.
	waitFor(t, 60*time.Second, "the 40 replayed records rejected again", func() (bool, string) {
		_, _, errs := s.status(t)
		return errs == 8+40, fmt.Sprintf("%d rejected", errs)
	})
	time.Sleep(500 * time.Millisecond)
	after, _ := s.dlqSnapshot(t)
	if len(after) != len(before) {
		t.Fatalf("after 6 replays of 8 dead letters rejected again: %d dead letters, want %d", len(after), len(before))
	}

	// With force, they are dead-lettered again, with their replay count.
	code, job = s.replayPost(t, `{"to":"pipeline","force":true}`)
	if code != 202 {
		t.Fatalf("replay with force: %d %v", code, job)
	}
	s.replayWait(t, job["id"].(string))
	forced, _ := s.dlqSnapshot(t)
	if len(forced) != 16 {
		t.Fatalf("after a forced replay: %d dead letters, want 16", len(forced))
	}
	n := 0
	for pos, v := range forced {
		if _, old := before[pos]; !old {
			n++
			if !strings.Contains(v, "streamd-replay-count=1;") {
				t.Errorf("dead letter %s of a forced replay: %s", pos, v)
			}
		}
	}
	if n != 8 {
		t.Fatalf("%d new dead letters", n)
	}
}

// TestReplayOneAtATime: while a replay of a pipeline runs, another is
// refused with 409 naming it; a replay stops at its bound of records
// (max_records), saying where to resume.
func TestReplayOneAtATime(t *testing.T) {
	s := newReplaySetup(t, 1)
	vals := make([]string, 2000)
	for i := range vals {
		vals[i] = fmt.Sprintf("reject order %d", i)
	}
	produce(t, s.cl, s.in, vals)
	s.waitCounts(t, 60*time.Second, 0, 2000)

	code, first := s.replayPost(t, `{"to":"source","batch":1,"topic":"`+s.out+`"}`)
	if code != 202 {
		t.Fatalf("first replay: %d %v", code, first)
	}
	code, second := s.replayPost(t, `{"to":"source","topic":"`+s.out+`"}`)
	if code != 409 || !strings.Contains(fmt.Sprint(second["error"]), "replay "+first["id"].(string)) {
		t.Fatalf("a second replay while the first runs: %d %v; want 409 naming replay %s", code, second, first["id"])
	}
	s.replayWait(t, first["id"].(string))

	code, bounded := s.replayPost(t, `{"to":"source","topic":"`+s.out+`","max_records":5}`)
	if code != 202 {
		t.Fatalf("bounded replay: %d %v", code, bounded)
	}
	bounded = s.replayWait(t, bounded["id"].(string))
	if bounded["replayed"] != float64(5) || bounded["error"] != nil || !strings.Contains(fmt.Sprint(bounded["stopped"]), "5 records") {
		t.Fatalf("a replay bounded to 5 records: %v", bounded)
	}
}
