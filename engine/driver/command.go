package driver

import (
	"strings"
)

// Stages of the commands a cell runs.
const (
	StageVersion = "version" // asks the tool its version, once per worker
	StageConvert = "convert" // checkpoint conversion before a build
	StageBuild   = "build"   // an engine build (cached across cells)
	StageBench   = "bench"   // a timed pass
	StageProfile = "profile" // the profiled pass, under the profiler
	StageStats   = "stats"   // the profiler's report turned into tables
)

// Command is one command line a cell runs.
type Command struct {
	Stage string   `json:"stage"`
	Argv  []string `json:"argv"`
	// Env are the variables set for it on top of the worker's environment
	// (KEY=VALUE).
	Env []string `json:"env,omitempty"`
	// Dir is its working directory; "" is the worker's.
	Dir string `json:"dir,omitempty"`
}

// String writes the command as a POSIX shell line a user can paste:
// variables first, every word quoted where the shell would split or
// expand it.
func (c Command) String() string {
	var b strings.Builder
	if c.Dir != "" {
		b.WriteString("cd ")
		b.WriteString(ShellQuote(c.Dir))
		b.WriteString(" && ")
	}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(ShellQuote(v))
		b.WriteByte(' ')
	}
	for i, a := range c.Argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ShellQuote(a))
	}
	return b.String()
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
