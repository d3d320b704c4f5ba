// Package runner owns a study from its YAML file to its finished cells:
// decoding and validating the spec (schema version 1), expanding the matrix
// into cells with stable ids, the plan and its time estimate, and executing
// cells in isolated worker processes with repeats, resume, progress and the
// environment fingerprint: on this host, one cell per GPU, in random order
// and waiting for GPUs another process uses (both by default), or as a
// Slurm job array; within a time limit when one is set. It is the
// only package that knows about YAML; it hands datasets to package
// datasets, cells to package engine and measurements to package results.
//
// A cell's engine is xrun's own (engine.New) or an external engine's
// driver (engines.go): the spec's command and trtllm blocks are decoded
// here into the drivers' types, the drivers' Planners decide at plan time
// which parameters a cell ignores (collapsed, with the reason) and which
// values it cannot run (spec errors), and the worker opens the driver's
// engine where it would open its own; everything around a pass is the
// same for every engine. The results directory's file names come from
// results/layout.
//
// Serving load (serving.go, spec_serving.go, search.go): request_rate,
// burstiness and concurrency are parameters like any other, becoming the
// cell's engine.Load; the slo block makes every pass add goodput
// (engine.ServingMetrics), and the search block runs the study in rounds
// (SearchRounds), each adding the next load point of every group still
// searching as an include entry and resuming, so that every point is a
// cell.
package runner
