package runner

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/xrun-dev/xrun/results/layout"
)

// parseTiny parses tinyStudy, named name and written in file.
func parseTiny(t *testing.T, file, name string) *Spec {
	t.Helper()
	spec, err := ParseSpec(file, []byte(strings.Replace(tinyStudy, "name: tiny", "name: "+name, 1)), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestRunRefusesAnotherStudy: a directory holding another study's results
// is refused, with --resume as without, naming the study there and how to
// proceed, and left as it was; --fresh discards them.
func TestRunRefusesAnotherStudy(t *testing.T) {
	spec := parseTiny(t, "tiny.yaml", "tiny")
	for _, tc := range []struct {
		name  string
		files map[string]string // relative to the directory
		found string            // the file the error names
		spec  string            // the other study's spec file it names
	}{
		{"results.json", map[string]string{
			layout.JSONFile: `{"schema_version": 1, "name": "other", "spec": {"name": "other"}, "cells": []}`,
			filepath.Join(layout.StateDir, layout.PlanFile): `{"version": 1, "name": "other", "spec": "studies/other.yaml"}`,
		}, layout.JSONFile, "studies/other.yaml"},
		{"plan only", map[string]string{
			filepath.Join(layout.CellsDir, "c1", layout.CellFile): `{}`,
			filepath.Join(layout.StateDir, layout.PlanFile):       `{"version": 1, "name": "other", "spec": "other.yaml"}`,
		}, filepath.Join(layout.StateDir, layout.PlanFile), "other.yaml"},
	} {
		for _, resume := range []bool{true, false} {
			dir := t.TempDir()
			for name, text := range tc.files {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshotDir(t, dir)
			_, err := Run(context.Background(), spec, Options{Out: dir, Resume: resume, CacheDir: t.TempDir(), Log: zerolog.Nop()})
			var oe *OtherStudyError
			if !errors.As(err, &oe) || !oe.BadInput() {
				t.Fatalf("%s, resume %t: %v, want an OtherStudyError", tc.name, resume, err)
			}
			for _, want := range []string{`"other"`, `not of "tiny" (tiny.yaml)`, filepath.Join(dir, tc.found), "run from " + tc.spec, "--out", "--fresh"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s, resume %t: %q does not say %q", tc.name, resume, err, want)
				}
			}
			if after := snapshotDir(t, dir); !maps.Equal(before, after) {
				t.Errorf("%s, resume %t: the refused run changed the directory: %v -> %v", tc.name, resume, before, after)
			}
		}
	}

	// The same study, or nothing that names one, is not refused as another.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, layout.JSONFile), []byte(`{"name": "tiny", "spec": {}}`), 0o644)
	s := &study{spec: spec, dir: dir, o: Options{Resume: true}}
	if err := s.checkHeld(); err != nil {
		t.Errorf("--resume into the same study's directory: %v", err)
	}
	os.WriteFile(filepath.Join(dir, layout.JSONFile), []byte(`not json`), 0o644)
	if err := s.checkHeld(); err != nil {
		t.Errorf("--resume over an unreadable results.json: %v", err)
	}
	s.o = Options{}
	var ee *ExistingResultsError
	if err := s.checkHeld(); !errors.As(err, &ee) {
		t.Errorf("without --resume: %v, want an ExistingResultsError", err)
	}
	os.WriteFile(filepath.Join(dir, layout.JSONFile), []byte(`{"name": "other"}`), 0o644)
	s.o = Options{Fresh: true}
	if err := s.checkHeld(); err != nil {
		t.Errorf("--fresh over another study: %v", err)
	}
}

// snapshotDir maps every file under dir to its contents, but for the lock
// file, which every run takes first (and keeps: its contents are history).
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && rel != filepath.Join(layout.StateDir, layout.LockFile) {
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

// TestRunOutDirErrors: a results directory that cannot be created is bad
// input naming --out or the spec's out: line and the path, and leaves
// nothing behind.
func TestRunOutDirErrors(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	spec := parseTiny(t, "tiny.yaml", "tiny")
	outSpec, err := ParseSpec("s.yaml", []byte(strings.Replace(tinyStudy, "name: tiny\n", "name: tiny\nout: /dev/null/x\n", 1)), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec *Spec
		out  string
		want []string
	}{
		{"a file", spec, file, []string{"--out " + file, "a file is in the way", "choose another --out"}},
		{"under a file", spec, filepath.Join(file, "x", "y"), []string{"--out " + filepath.Join(file, "x", "y"), "a file is in the way"}},
		{"/dev/null/x", spec, "/dev/null/x", []string{"--out /dev/null/x", "not a directory"}},
		{"the spec's out", outSpec, "", []string{"s.yaml:3:6: out: /dev/null/x", "a file is in the way", "change out: there, or give --out"}},
	} {
		_, err := Run(context.Background(), tc.spec, Options{Out: tc.out, CacheDir: filepath.Join(tmp, "cache"), Log: zerolog.Nop()})
		var oe *OutDirError
		if !errors.As(err, &oe) || !oe.BadInput() {
			t.Errorf("%s: %v, want a bad-input OutDirError", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 1 {
		t.Errorf("refused runs left %d entries in %s, want the file alone", len(entries), tmp)
	}

	// A directory that cannot be written, once locked (root writes
	// anywhere: then only the message is checked).
	ro := filepath.Join(tmp, "ro")
	os.MkdirAll(filepath.Join(ro, layout.StateDir), 0o755)
	os.Chmod(ro, 0o555)
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	if os.Geteuid() != 0 {
		_, err := Run(context.Background(), spec, Options{Out: ro, CacheDir: filepath.Join(tmp, "cache"), Log: zerolog.Nop()})
		var oe *OutDirError
		if !errors.As(err, &oe) || !oe.BadInput() || !strings.Contains(err.Error(), "no permission to write there") {
			t.Errorf("a read-only directory: %v", err)
		}
	}

	for _, tc := range []struct {
		err      error
		from     string
		badInput bool
		want     string
	}{
		{syscall.EROFS, "--out", true, "--out d: cannot use it as the results directory (the filesystem is read-only): mkdir d: read-only file system; choose another --out"},
		{syscall.EACCES, "", true, "d (the default results directory, results/<name>): cannot use it as the results directory (no permission to write there): mkdir d: permission denied; give --out"},
		{syscall.ENOSPC, "--set out=d", false, "--set out=d: cannot use it as the results directory (the disk is full): mkdir d: no space left on device; set another out, or give --out"},
		{syscall.EIO, "--out", false, "--out d: cannot use it as the results directory: mkdir d: input/output error; choose another --out"},
	} {
		e := &OutDirError{Dir: "d", From: tc.from, Err: &fs.PathError{Op: "mkdir", Path: "d", Err: tc.err}}
		if e.BadInput() != tc.badInput || e.Error() != tc.want || !errors.Is(e, tc.err) {
			t.Errorf("%v: bad input %t, %q; want %t, %q", tc.err, e.BadInput(), e, tc.badInput, tc.want)
		}
	}
}

// TestRunLeavesNothingOnBadInput: a bad dataset file, found before the
// plan is committed, leaves neither the results directory nor the parents
// it created, and costs no generation: the cache is not even created.
func TestRunLeavesNothingOnBadInput(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"task_id":0,"input_ids":[5,512],"output_tokens":2}`+"\n"), 0o644)
	spec, err := ParseSpec("mix.yaml", []byte(`schema_version: 1
name: mix
params: {engine: cpu, model: tiny-llama, dataset: {num_requests: 4, input_mean: 8, output_mean: 2}}
matrix:
  dataset.generator: [token-norm-dist, `+bad+`]
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "a", "b", "out")
	cache := filepath.Join(tmp, "cache")
	_, err = Run(context.Background(), spec, Options{Out: out, CacheDir: cache, Log: zerolog.Nop()})
	var bi interface{ BadInput() bool }
	if !errors.As(err, &bi) || !bi.BadInput() || !strings.Contains(err.Error(), "bad.jsonl:1") {
		t.Fatalf("%v, want bad input naming bad.jsonl:1", err)
	}
	for _, p := range []string{filepath.Join(tmp, "a"), cache} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a refused run left %s behind", p)
		}
	}

	// Into an existing directory: only what the run created goes.
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644)
	if _, err := Run(context.Background(), spec, Options{Out: out, CacheDir: cache, Log: zerolog.Nop()}); !errors.As(err, &bi) {
		t.Fatalf("%v, want bad input", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 || entries[0].Name() != "notes.txt" {
		t.Errorf("the directory holds %v after a refused run, want notes.txt alone", entries)
	}
}

// cancelCountdown is a context cancelled by its own n-th call to Err: an
// interrupt at a point that does not depend on timing.
type cancelCountdown struct {
	context.Context
	cancel context.CancelFunc
	n      atomic.Int64
}

func (c *cancelCountdown) Err() error {
	if c.n.Add(-1) <= 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// TestRunInterruptedGenerating: an interrupt during a large dataset's
// generation is honoured there, not at its end: the run returns
// ErrInterrupted (exit status 130) and leaves no part of the dataset, no
// cache directory and no results directory.
func TestRunInterruptedGenerating(t *testing.T) {
	spec, err := ParseSpec("huge.yaml", []byte(`schema_version: 1
name: huge
params:
  engine: cpu
  model: tiny-llama
  dataset: {num_requests: 3000000, input_mean: 128, input_stdev: 0, output_mean: 4, output_stdev: 0}
`), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Far fewer looks than the generation makes (one per 64K token ids,
	// some 6000 for this dataset), more than Run makes before it.
	cd := &cancelCountdown{Context: ctx, cancel: cancel}
	cd.n.Store(40)
	_, err = Run(cd, spec, Options{Out: filepath.Join(tmp, "out"), CacheDir: filepath.Join(tmp, "cache"), Log: zerolog.Nop()})
	if !errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), "generation stopped") {
		t.Fatalf("%v, want ErrInterrupted from the generation", err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("an interrupted generation left %s behind", entries[0].Name())
	}
}
