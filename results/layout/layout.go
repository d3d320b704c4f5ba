// Package layout owns the layout of a results directory: the name of
// every file and directory xrun writes there, and where a cell's files
// live. The runner writes them, engine/profile, the engine drivers and
// the results package read them, and cmd/xrun points users at them; all
// of them take the names from here, so that one change moves them all.
//
//	DIR/results.json, results.md     the study (rewritten after every cell)
//	DIR/report.html                  the study as charts (package htmlreport)
//	DIR/cells/<id>/cell.json         the cell as its worker measured it
//	DIR/cells/<id>/repeats/          each timed repeat, recorded as it finishes,
//	                                 until cell.json holds them
//	DIR/cells/<id>/requests.jsonl    per-request records of every pass
//	DIR/cells/<id>/iterations.csv    per-iteration records of every pass
//	DIR/cells/<id>/expert_load.csv   a MoE cell's expert loads
//	DIR/cells/<id>/telemetry.csv     GPU telemetry over the cell
//	DIR/cells/<id>/kernels.csv       the profile window's kernel summary
//	DIR/cells/<id>/trace.json        its timeline (Chrome trace format)
//	DIR/cells/<id>/profile.nsys-rep  an external engine's Nsight Systems report
//	DIR/cells/<id>/commands.jsonl    every command an external engine ran
//	DIR/cells/<id>/tool/             what an external engine's tools wrote, per pass
//	DIR/cells/<id>/log.jsonl         the worker's own log
//	DIR/cells/<id>/stderr.log        whatever the worker process printed
//	DIR/.xrun/lock                   held (flock) for the whole run
//	DIR/.xrun/plan.json              the cells as the workers read them
//
// It has no dependencies and knows nothing of what the files hold.
package layout

import "path/filepath"

// The study's own files, at the top of DIR.
const (
	JSONFile     = "results.json"
	MarkdownFile = "results.md"
	HTMLFile     = "report.html"
	CellsDir     = "cells"
	StateDir     = ".xrun"
	LockFile     = "lock"
	PlanFile     = "plan.json"
)

// A cell's files, inside DIR/cells/<id>/.
const (
	CellFile       = "cell.json"
	RepeatsDir     = "repeats"
	RequestsFile   = "requests.jsonl"
	IterationsFile = "iterations.csv"
	ExpertLoadFile = "expert_load.csv"
	TelemetryFile  = "telemetry.csv"
	KernelsFile    = "kernels.csv"
	TraceFile      = "trace.json"
	NsysReportFile = "profile.nsys-rep"
	CommandsFile   = "commands.jsonl"
	ToolDir        = "tool"
	LogFile        = "log.jsonl"
	StderrFile     = "stderr.log"
	ProfileFile    = "profile.json"
)

// CellDir is where cell id of the study in dir keeps its files.
func CellDir(dir, id string) string { return filepath.Join(dir, CellsDir, id) }

// CellArtifact is a cell's file as results.json lists it: relative to the
// results directory, with forward slashes.
func CellArtifact(id, name string) string { return CellsDir + "/" + id + "/" + name }
