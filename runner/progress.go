package runner

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/xrun-dev/xrun/results"
)

// Progress follows a run cell by cell. Run calls it from one goroutine;
// an implementation may redraw from its own.
type Progress interface {
	// Start is called once: total cells in the plan, done already
	// (complete from an earlier run, or left out by --only), todo to run
	// now, and how many run at once.
	Start(total, done, todo, parallel int)
	CellStarted(id string)
	CellFinished(id string, status results.Status, elapsed time.Duration)
	// Stop is called once at the end; the display must be gone after it.
	Stop()
}

// Predictor is a Progress that also takes how long queued cells are
// predicted to take, from the repeats earlier runs recorded (--resume),
// for its estimate of the time left. Run calls Predicted once, after
// Start, with the cells it can predict.
type Predictor interface {
	Predicted(rest map[string]time.Duration)
}

type noProgress struct{}

func (noProgress) Start(int, int, int, int)                           {}
func (noProgress) CellStarted(string)                                 {}
func (noProgress) CellFinished(string, results.Status, time.Duration) {}
func (noProgress) Stop()                                              {}

// StatusLine is the progress display on a terminal: one line at the bottom,
// redrawn in place every second, with the cells done out of the total, the
// cell running, the time elapsed and an estimate of the time left from the
// cells measured so far. It is also the io.Writer the logger writes to, so
// a log line never mixes with it: the status line is cleared, the log line
// written, and the status line drawn again below it.
type StatusLine struct {
	mu    sync.Mutex
	out   io.Writer
	width int
	now   func() time.Time

	shown, active bool
	stop          chan struct{}
	done          chan struct{}

	total, finished, failed, todo, parallel int
	running                                 []runningCell
	measured                                time.Duration // sum of the finished cells' times
	measuredN                               int
	start                                   time.Time
	// pred are the predictions of the cells not started yet (Predictor).
	pred map[string]time.Duration
}

type runningCell struct {
	id    string
	since time.Time
	pred  time.Duration // 0: none
}

// NewStatusLine draws on out, a terminal width columns wide (lines longer
// than that would wrap and could not be redrawn in place).
func NewStatusLine(out io.Writer, width int) *StatusLine {
	if width < 20 {
		width = 80
	}
	return &StatusLine{out: out, width: width, now: time.Now}
}

// Write writes a log line above the status line.
func (s *StatusLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	n, err := s.out.Write(p)
	s.drawLocked()
	return n, err
}

func (s *StatusLine) Start(total, done, todo, parallel int) {
	s.mu.Lock()
	s.total, s.finished, s.todo, s.parallel = total, done, todo, max(parallel, 1)
	s.start = s.now()
	s.active = true
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	s.drawLocked()
	s.mu.Unlock()
	go s.tick(s.stop, s.done)
}

func (s *StatusLine) tick(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.mu.Lock()
			s.drawLocked()
			s.mu.Unlock()
		}
	}
}

// Predicted implements Predictor.
func (s *StatusLine) Predicted(rest map[string]time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pred = map[string]time.Duration{}
	for id, d := range rest {
		if d > 0 {
			s.pred[id] = d
		}
	}
	s.drawLocked()
}

func (s *StatusLine) CellStarted(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = append(s.running, runningCell{id, s.now(), s.pred[id]})
	delete(s.pred, id)
	s.drawLocked()
}

func (s *StatusLine) CellFinished(id string, status results.Status, elapsed time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.running {
		if r.id == id {
			s.running = append(s.running[:i], s.running[i+1:]...)
			break
		}
	}
	delete(s.pred, id) // never started: held at the time limit
	s.finished++
	s.todo--
	if status == results.StatusFailed {
		s.failed++
	}
	if status != results.StatusSkipped {
		s.measured += elapsed
		s.measuredN++
	}
	s.drawLocked()
}

func (s *StatusLine) Stop() {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.active = false
	s.clearLocked()
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (s *StatusLine) clearLocked() {
	if s.shown {
		io.WriteString(s.out, "\r\x1b[K")
		s.shown = false
	}
}

func (s *StatusLine) drawLocked() {
	if !s.active {
		return
	}
	line := s.render(s.now())
	io.WriteString(s.out, "\r\x1b[K"+line)
	s.shown = true
}

// render is the status line's text at time now.
func (s *StatusLine) render(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%d/%d cells", s.finished, s.total)
	if s.failed > 0 {
		fmt.Fprintf(&b, ", %d failed", s.failed)
	}
	b.WriteString("]")
	if len(s.running) > 0 {
		r := s.running[0]
		fmt.Fprintf(&b, " running %s (%s)", r.id, clock(now.Sub(r.since)))
		if len(s.running) > 1 {
			fmt.Fprintf(&b, " +%d more", len(s.running)-1)
		}
	}
	fmt.Fprintf(&b, " · elapsed %s", clock(now.Sub(s.start)))
	if eta, ok := s.eta(now); ok {
		fmt.Fprintf(&b, " · ETA %s", clock(eta))
	}
	line := []rune(b.String())
	if len(line) > s.width-1 {
		line = append(line[:s.width-2], '…')
	}
	return string(line)
}

// eta estimates the time left: every cell not finished is taken to cost
// its prediction (Predictor) or else the mean of the cells measured so
// far, running ones minus their time spent, spread over the cells that run
// at once. Without a measured cell, only a run whose every cell is
// predicted has an estimate.
func (s *StatusLine) eta(now time.Time) (time.Duration, bool) {
	var mean time.Duration
	if s.measuredN > 0 {
		mean = s.measured / time.Duration(s.measuredN)
	}
	queued := max(s.todo-len(s.running)-len(s.pred), 0) // not started, unpredicted
	left := time.Duration(queued) * mean
	for _, d := range s.pred {
		left += d
	}
	unknown := queued
	for _, r := range s.running {
		d := r.pred
		if d == 0 {
			d = mean
			unknown++
		}
		left += max(d-now.Sub(r.since), 0)
	}
	if unknown > 0 && s.measuredN == 0 {
		return 0, false
	}
	return left / time.Duration(s.parallel), true
}

// clock formats a duration as h:mm:ss or m:ss.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, sec := int(d/time.Hour), int(d/time.Minute)%60, int(d/time.Second)%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

// fmtDur formats a duration for logs: "1.234s", which people read and Go's
// time.ParseDuration reads back.
func fmtDur(d time.Duration) string { return d.Round(time.Millisecond).String() }
