// Package openai is xrun on both sides of an OpenAI-compatible HTTP API:
// the server `xrun serve` puts in front of the built-in engine (Server),
// and the engine driver that makes xrun a load generator against any
// such server (engine: openai): vLLM, SGLang, trtllm-serve, Dynamo, TGI or
// xrun serve itself.
//
// The server speaks a documented subset: POST /v1/completions with a
// prompt of token ids (the engine has no tokenizer, so text prompts are
// refused, saying so), POST /v1/chat/completions whose messages' content
// is token ids (an array of integers, or a string of space-separated
// decimal ids, as the server writes its own output), concatenated in
// order without a chat template, GET /v1/models and GET /health.
// Generation is greedy and always exactly max_tokens tokens (EOS ignored,
// as in the benchmarks); other sampling fields are accepted and ignored.
// Output text is each token id in decimal after a space; token_ids carries
// them as numbers. stream: true sends a server-sent event per token and,
// with stream_options.include_usage, a last chunk with the usage (without
// it, the usage rides on the chunk that finishes). Requests go to one
// engine instance as they come (engine.Server: the scheduler's online
// mode); a shutdown stops taking requests (health answers 503) and drains
// those in flight.
//
// The driver sends a cell's dataset at the arrival times of its load
// (request_rate, burstiness, concurrency: engine.Load), prompts as token
// ids to /v1/completions (or as the token-id chat messages above), with
// max_tokens = min_tokens = the request's output_tokens and ignore_eos,
// streamed; it times every chunk on its own clock: the send, each chunk
// (its token times; a chunk may carry several tokens), the end. Requests
// in flight are bounded (concurrency, or openai.max_in_flight). Under a
// request_rate (without concurrency) a request's latencies count from
// its scheduled arrival, not its send, as a user's would and as the
// built-in engine's queue counts them: a server that cannot keep up
// fills max_in_flight, and the requests it holds back wait in the
// client, a wait that timing from the send would leave out (coordinated
// omission). max_in_flight only bounds the connections; each record
// keeps its send (sent_ns), the achieved request rate is of the sends,
// and a pass that held requests back says how many, for how long at
// most, and the bound (engine.HeldRequestsKey), which results.md notes
// under the cell. Under concurrency (a closed loop) and in the warm-up,
// a request's clock starts at its send. The
// server is given by URL or started for each cell from an argv template
// ({port} a free port xrun picks, {xrun} the running xrun, for xrun
// serve, parameters by path), with a readiness probe and its output kept
// in the cell's tool/server.log. A refused
// connection, an error status, a stream cut short, a request past
// openai.request_timeout or a server that exits fail the pass with the
// server's own message; a request that fails without an answer waits a
// moment (ExitWait) for a dying server's exit, so that the pass reports
// its exit status and last error line rather than a bare EOF. The records are checked against the dataset
// (driver.CheckRecords) and every metric is computed by xrun.
package openai
