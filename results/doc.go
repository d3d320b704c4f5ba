// Package results owns what a study leaves behind: the versioned
// results.json schema, its deterministic writer and strict reader, the
// throughput tables (terminal, Markdown, CSV), comparisons with significance
// (golang.org/x/perf/benchmath), `xrun diff` and `xrun report`. It never
// runs anything.
package results
