package runner

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/results"
)

func TestStatusLine(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	s := NewStatusLine(&out, 120)
	s.now = func() time.Time { return now }
	s.Start(6, 1, 5, 1)
	if got := s.render(now); got != "[1/6 cells] · elapsed 0:00" {
		t.Errorf("at start: %q", got)
	}
	s.CellStarted("bs1-a")
	now = now.Add(10 * time.Second)
	s.CellFinished("bs1-a", results.StatusOK, 10*time.Second)
	s.CellStarted("bs1-b")
	now = now.Add(4 * time.Second)
	// Four cells to go at 10 s each, one of them 4 s under way: 36 s.
	if got, want := s.render(now), "[2/6 cells] running bs1-b (0:04) · elapsed 0:14 · ETA 0:36"; got != want {
		t.Errorf("running:\n got %q\nwant %q", got, want)
	}
	s.CellFinished("bs1-b", results.StatusFailed, 4*time.Second)
	if got := s.render(now); !strings.HasPrefix(got, "[3/6 cells, 1 failed] · elapsed 0:14 · ETA ") {
		t.Errorf("after a failure: %q", got)
	}

	// A log line clears the status line, is written whole, and the status
	// line comes back under it.
	out.Reset()
	s.Write([]byte("12:00:00 INF cell ok\n"))
	if got := out.String(); !strings.HasPrefix(got, "\r\x1b[K12:00:00 INF cell ok\n\r\x1b[K[3/6 cells") {
		t.Errorf("log line under a status line: %q", got)
	}
	out.Reset()
	s.Stop()
	if got := out.String(); got != "\r\x1b[K" {
		t.Errorf("Stop left %q; want the line cleared", got)
	}
	out.Reset()
	s.Write([]byte("after\n"))
	if out.String() != "after\n" {
		t.Errorf("after Stop: %q", out.String())
	}
}

func TestStatusLineFitsTheTerminal(t *testing.T) {
	s := NewStatusLine(&bytes.Buffer{}, 40)
	now := time.Now()
	s.start = now
	s.total = 3
	s.running = []runningCell{{id: strings.Repeat("x", 80), since: now}, {id: "y", since: now}}
	got := []rune(s.render(now))
	if len(got) != 39 || got[38] != '…' {
		t.Errorf("%q (%d runes), want 39 ending in …", string(got), len(got))
	}
}

func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0:00", 59 * time.Second: "0:59", 61 * time.Second: "1:01", 3723 * time.Second: "1:02:03", 1500 * time.Millisecond: "0:02",
	} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestStatusLinePredicted: cells predicted from the repeats an earlier run
// recorded count their prediction, the others the mean of the cells
// measured; with every cell predicted there is an estimate from the start.
func TestStatusLinePredicted(t *testing.T) {
	now := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	s := NewStatusLine(&bytes.Buffer{}, 120)
	s.now = func() time.Time { return now }
	s.Start(3, 0, 3, 1)
	s.Predicted(map[string]time.Duration{"a": 20 * time.Minute, "b": 10 * time.Second, "c": 0})
	if _, ok := s.eta(now); ok {
		t.Error("cell c unpredicted and nothing measured: an estimate anyway")
	}
	s.CellStarted("a")
	now = now.Add(5 * time.Minute)
	// a: 15 minutes left of 20; b: 10 s; c: nothing to go by yet.
	if _, ok := s.eta(now); ok {
		t.Error("cell c still unpredicted: an estimate anyway")
	}
	now = now.Add(15 * time.Minute)
	s.CellFinished("a", results.StatusOK, 20*time.Minute)
	// b 10 s as predicted, c the mean of what was measured (20 min).
	if eta, ok := s.eta(now); !ok || eta != 20*time.Minute+10*time.Second {
		t.Errorf("eta %v, %v; want 20m10s", eta, ok)
	}
	s.CellStarted("b")
	now = now.Add(4 * time.Second)
	if eta, _ := s.eta(now); eta != 20*time.Minute+6*time.Second {
		t.Errorf("b under way: eta %v, want 20m6s", eta)
	}

	all := NewStatusLine(&bytes.Buffer{}, 120)
	all.now = func() time.Time { return now }
	all.Start(2, 0, 2, 2)
	all.Predicted(map[string]time.Duration{"a": time.Minute, "b": 3 * time.Minute})
	if eta, ok := all.eta(now); !ok || eta != 2*time.Minute {
		t.Errorf("every cell predicted, 2 at once: eta %v, %v; want 2m", eta, ok)
	}
}
