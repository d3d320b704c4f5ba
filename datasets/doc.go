// Package datasets generates, reads, writes and caches the request datasets
// xrun benchmarks with.
//
// The synthetic generators (token-norm-dist, token-unif-dist) reproduce
// TensorRT-LLM's benchmarks/cpp/prepare_dataset.py byte for byte from the
// seed alone: numpy's legacy MT19937 normal and its SeedSequence/PCG64
// bounded integers for the lengths, CPython's random module for the token
// ids. The random number generators are reimplemented here from the
// published algorithms and checked against values numpy and CPython print.
//
// Files use trtllm-bench's line format (one compact JSON object per request);
// the older {"metadata": ..., "samples": [...]} file is read too. Cache keeps
// generated datasets content addressed under a directory the runner chooses.
// Generation honours a context (WriteContext, Cache.EnsureContext): an
// interrupt stops even a dataset of millions of requests within
// milliseconds, and the cache keeps no part of it.
//
// The package knows nothing about models, engines or the runner: callers
// pass the vocabulary size and EOS id they resolved.
package datasets
