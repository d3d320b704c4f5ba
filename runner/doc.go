// Package runner owns a study from its YAML file to its finished cells:
// decoding and validating the spec (schema version 1), expanding the matrix
// into cells with stable ids, the plan, and executing cells in isolated
// worker processes with repeats, resume, progress and the environment
// fingerprint. It is the only package that knows about YAML; it hands
// datasets to package datasets, cells to package engine and measurements to
// package results.
package runner
