// Package datasets owns the requests a cell serves: the token-norm-dist and
// token-unif-dist generators (byte-identical to TensorRT-LLM's
// prepare_dataset.py, including numpy's and CPython's random number
// generators), reading and writing the trtllm-bench JSONL format, and the
// content-addressed dataset cache. It knows nothing of specs, engines or
// results.
package datasets
