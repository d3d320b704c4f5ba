package main

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// newLogger builds the zerolog logger: human-readable on a terminal, JSON
// lines otherwise (cron, CI, pipes) or when asked. Logs always go to stderr
// so stdout carries only tables and plans.
func newLogger(gs *globalState, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("--log-level: %q is not a level; expected trace, debug, info, warn or error", level)
	}
	var console bool
	switch format {
	case "auto":
		console = gs.StderrIsTerminal
	case "console":
		console = true
	case "json":
		console = false
	default:
		return zerolog.Nop(), fmt.Errorf("--log-format: %q is not a format; expected auto, console or json", format)
	}
	if console {
		w := zerolog.ConsoleWriter{Out: gs.Stderr, TimeFormat: time.TimeOnly, NoColor: !gs.StderrIsTerminal}
		return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
	}
	return zerolog.New(gs.Stderr).Level(lvl).With().Timestamp().Logger(), nil
}
