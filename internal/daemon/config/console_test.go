package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/daemon/defaults"
)

func TestConsoleConfig(t *testing.T) {
	c := mustParse(t, pipe("", "", "", ""))
	want := Console{Enabled: true, TapMaxRate: defaults.TapRate, TapMaxValueBytes: defaults.TapValueBytes, TapMaxOpen: defaults.TapOpen,
		ReplayMaxRecords: defaults.ReplayMaxRecords}
	if c.Console != want {
		t.Fatalf("defaults %+v, want %+v", c.Console, want)
	}
	c = mustParse(t, pipe("", "", "", "[console]\nenabled = false\ntap_max_rate = 1000\ntap_max_value_bytes = 16\ntap_max_open = 64\nreplay_max_records = 10"))
	want = Console{Enabled: false, TapMaxRate: 1000, TapMaxValueBytes: 16, TapMaxOpen: 64, ReplayMaxRecords: 10}
	if c.Console != want {
		t.Fatalf("set %+v, want %+v", c.Console, want)
	}
	for _, tc := range []struct{ tail, at, want string }{
		{"[console]\ntap_max_rate = 0", "tap_max_rate", "console.tap_max_rate: 0 is out of range (allowed: 1 to 1000)"},
		{"[console]\ntap_max_value_bytes = 8", "tap_max_value_bytes", "console.tap_max_value_bytes: 8 is out of range (allowed: 16 to 1048576)"},
		{"[console]\ntap_max_open = 65", "tap_max_open", "console.tap_max_open: 65 is out of range (allowed: 1 to 64)"},
		{"[console]\nreplay_max_records = 0", "replay_max_records", "console.replay_max_records: 0 is out of range (allowed: 1 to 1099511627776)"},
	} {
		src := pipe("", "", "", tc.tail)
		_, err := Parse("c.toml", []byte(src), env(nil))
		if err == nil {
			t.Errorf("%s: accepted", tc.tail)
			continue
		}
		got := colRE.ReplaceAllString(err.Error(), "$1: ")
		want := "c.toml:" + strconv.Itoa(lineOf(t, src, tc.at)) + ": " + tc.want
		if !strings.HasPrefix(got, want) {
			t.Errorf("got %s\nwant %s...", got, want)
		}
	}
}
