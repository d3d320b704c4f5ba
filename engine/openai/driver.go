package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/results/layout"
)

// Name is the engine's name in a spec.
const Name = "openai"

// APIs the driver speaks.
const (
	APICompletions = "completions"
	APIChat        = "chat"
)

// Defaults of Options' zero values.
const (
	DefaultRequestTimeout = 10 * time.Minute
	// DefaultMaxInFlight bounds an open loop's connections far above
	// servers' batch sizes: a server that has fallen behind keeps the
	// queue itself, as it would with real users, instead of the client
	// holding it back (the bound once was 256, a common batch size, and
	// at 558 req/s in front of xrun serve at batch 256 it held 2,100-2,300
	// requests a repeat back from the server).
	DefaultMaxInFlight  = 4096
	DefaultReadyTimeout = 10 * time.Minute
	DefaultReady        = "/health"
)

// StageServer is the stage of the server's command in commands.jsonl.
const StageServer = "server"

// Options are the spec's openai block.
type Options struct {
	// URL is the server's address, with or without /v1; it may use
	// {port}. Empty with a Server: http://127.0.0.1:{port}.
	URL string `json:"url,omitempty"`
	// Model is the model name requests carry; empty: the cell's model's
	// Hugging Face name, else its model parameter.
	Model string `json:"model,omitempty"`
	// APIKeyEnv names the environment variable holding the API key
	// (sent as a bearer token).
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// API is APICompletions (the default: token ids as the prompt) or
	// APIChat.
	API string `json:"api,omitempty"`
	// RequestTimeout bounds each request, from its send to its stream's
	// end; MaxInFlight the requests in flight at once, the connections
	// (a closed loop's users bound them instead). Under a request_rate a
	// request it holds back still counts from its scheduled arrival, and
	// the pass's metrics say how many were held (engine.HeldRequestsKey).
	RequestTimeout time.Duration `json:"request_timeout_ns,omitempty"`
	MaxInFlight    int           `json:"max_in_flight,omitempty"`
	// Server, when set, is started for each cell.
	Server *ServerCommand `json:"server,omitempty"`
}

// ServerCommand starts a server for a cell.
type ServerCommand struct {
	Argv []driver.Template `json:"argv"`
	Env  []EnvVar          `json:"env,omitempty"`
	// Dir is the working directory (absolute).
	Dir string `json:"dir,omitempty"`
	// Ready is the path probed until it answers 200 (default /health),
	// for at most ReadyTimeout.
	Ready        string        `json:"ready,omitempty"`
	ReadyTimeout time.Duration `json:"ready_timeout_ns,omitempty"`
}

// EnvVar is one environment variable of the server.
type EnvVar struct {
	Name  string          `json:"name"`
	Value driver.Template `json:"value"`
}

// Specials are the placeholders xrun fills in the server's templates and
// the URL besides the parameters.
var Specials = map[string]string{
	"port":          "a free TCP port on this host, picked for the cell's server",
	"cell_dir":      "the cell's directory",
	"gpus":          "how many GPUs the cell holds",
	"hf_model":      "the model's Hugging Face name (a zoo model) or its directory",
	"max_input_len": "the longest prompt of the cell's dataset, in tokens",
	"max_seq_len":   "the longest prompt plus output of the cell's dataset, in tokens (for a server's --max-seq-len or --max-model-len)",
	"xrun":          "this xrun's own executable, to start xrun serve",
}

// always are the parameters an openai cell uses whatever its templates
// say: xrun generates the dataset and paces its requests.
var always = []string{"engine", "model", "gpus_per_cell", "timeout", "warmup", "request_rate", "burstiness", "concurrency"}

// WithDefaults fills in the defaults.
func (o Options) WithDefaults() Options {
	if o.API == "" {
		o.API = APICompletions
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Server != nil {
		s := *o.Server
		if s.Ready == "" {
			s.Ready = DefaultReady
		}
		if s.ReadyTimeout <= 0 {
			s.ReadyTimeout = DefaultReadyTimeout
		}
		o.Server = &s
		if o.URL == "" {
			o.URL = "http://127.0.0.1:{port}"
		}
	}
	return o
}

// uses reports whether the server's templates or the URL use name.
func (o *Options) uses(name string) bool {
	if t, err := o.urlTemplate(); err == nil && slices.Contains(t.Names(), name) {
		return true
	}
	if o.Server == nil {
		return false
	}
	for _, t := range o.Server.Argv {
		if slices.Contains(t.Names(), name) {
			return true
		}
	}
	for _, e := range o.Server.Env {
		if slices.Contains(e.Value.Names(), name) {
			return true
		}
	}
	return false
}

func (o *Options) urlTemplate() (driver.Template, error) {
	return driver.ParseTemplate(o.URL, func(string) bool { return true }, nil)
}

// Planner answers the plan for openai cells.
type Planner struct{ Opt Options }

func (Planner) Name() string { return Name }

// Ignored lists the parameters that cannot matter: with a URL, all but
// the dataset and the load; with a server command, those its templates
// do not use.
func (pl Planner) Ignored(p driver.Params, _ *engine.ModelConfig) map[string]string {
	o := pl.Opt.WithDefaults()
	out := map[string]string{}
	for k := range p {
		if slices.Contains(always, k) || strings.HasPrefix(k, "dataset.") || o.uses(k) {
			continue
		}
		if o.Server == nil {
			out[k] = fmt.Sprintf("%s has no effect on engine openai with a URL: the server is configured outside xrun", k)
		} else {
			out[k] = fmt.Sprintf("%s has no effect on engine openai: the openai block's server argv, env and url do not use {%s}", k, k)
		}
	}
	return out
}

func (Planner) Check(driver.Params, *engine.ModelConfig) *driver.Problem { return nil }

// Commands lists the server's command, if xrun starts one; the requests
// are sent by the worker itself.
func (pl Planner) Commands(c *driver.Cell) ([]driver.Command, error) {
	o := pl.Opt.WithDefaults()
	if o.Server == nil {
		return nil, nil
	}
	e := &Engine{opt: o, cell: c}
	return []driver.Command{e.serverCommand("<port>")}, nil
}

// Engine runs one cell's passes against a server.
type Engine struct {
	*driver.Session
	opt    Options
	cell   *driver.Cell
	client *Client
	proc   *driver.Process
	base   string // the URL, expanded, without /v1
	tool   driver.Tool
}

func (e *Engine) vars(port string) map[string]string {
	v := make(map[string]string, len(e.cell.Params)+len(Specials))
	for k, x := range e.cell.Params {
		v[k] = driver.FormatValue(x)
	}
	hf := e.cell.ModelName
	if hf == "" {
		hf = e.cell.Engine.Model
	}
	v["port"] = port
	v["cell_dir"] = e.cell.Dir
	v["gpus"] = strconv.Itoa(e.cell.GPUs)
	v["hf_model"] = hf
	v["max_input_len"] = strconv.Itoa(e.cell.MaxInputLen)
	v["max_seq_len"] = strconv.Itoa(e.cell.MaxSeqLen)
	v["xrun"] = xrunExe()
	return v
}

func (e *Engine) serverCommand(port string) driver.Command {
	vars := e.vars(port)
	s := e.opt.Server
	cmd := driver.Command{Stage: StageServer, Dir: s.Dir}
	for _, t := range s.Argv {
		cmd.Argv = append(cmd.Argv, t.Expand(vars))
	}
	for _, ev := range s.Env {
		cmd.Env = append(cmd.Env, ev.Name+"="+ev.Value.Expand(vars))
	}
	return cmd
}

// ServerLog is the server's output, in the cell's tool directory.
const ServerLog = "server.log"

// Open prepares a cell's passes: the server started and ready, when xrun
// starts it, and the client.
func Open(ctx context.Context, opt Options, c *driver.Cell) (*Engine, error) {
	o := opt.WithDefaults()
	if o.URL == "" {
		return nil, errors.New("engine openai: the openai block has neither a url nor a server")
	}
	s, err := driver.NewSession(c)
	if err != nil {
		return nil, err
	}
	e := &Engine{Session: s, opt: o, cell: c}
	port := ""
	if o.uses("port") {
		if port, err = freePort(); err != nil {
			return nil, fmt.Errorf("engine openai: picking a port for the server: %w", err)
		}
	}
	ut, err := o.urlTemplate()
	if err != nil {
		return nil, fmt.Errorf("engine openai: url: %w", err)
	}
	raw := ut.Expand(e.vars(port))
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("engine openai: url %q: expected http://HOST:PORT[/v1]", raw)
	}
	e.base = strings.TrimSuffix(strings.TrimRight(raw, "/"), "/v1")
	key := ""
	if o.APIKeyEnv != "" {
		for _, kv := range c.Env {
			if v, ok := strings.CutPrefix(kv, o.APIKeyEnv+"="); ok {
				key = v
			}
		}
		if key == "" {
			return nil, fmt.Errorf("engine openai: openai.api_key_env: $%s is not set (or empty) in the worker's environment", o.APIKeyEnv)
		}
	}
	model := o.Model
	if model == "" {
		model = cmpOr(c.ModelName, c.Engine.Model)
	}
	inflight := o.MaxInFlight
	if users := c.Engine.Load.Concurrency; users > 0 {
		inflight = users
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = inflight
	tr.MaxConnsPerHost = 0
	e.client = &Client{BaseURL: e.base + "/v1", Model: model, APIKey: key, Chat: o.API == APIChat, HTTP: &http.Client{Transport: tr}}
	e.tool = driver.Tool{Name: Name, Path: e.base}
	if o.Server != nil {
		e.tool.Path = o.Server.Argv[0].Raw
		if err := e.startServer(ctx, port); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// xrunExe is the running xrun's executable ({xrun}), so that a study can
// load xrun serve without xrun on PATH.
func xrunExe() string {
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return "xrun"
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// freePort asks the system for a free TCP port on the loopback.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// startServer starts the cell's server and waits until it is ready.
func (e *Engine) startServer(ctx context.Context, port string) error {
	cmd := e.serverCommand(port)
	e.Remember(cmd)
	logPath := filepath.Join(e.cell.Dir, layout.ToolDir, ServerLog)
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	p, err := driver.Start(cmd, driver.ExecOptions{Env: e.cell.Env, Log: logf, LogPath: logPath, Audit: e.Audit, Pass: -1})
	if err != nil {
		logf.Close()
		return fmt.Errorf("starting the server: %w", err)
	}
	e.proc = p
	go func() {
		<-p.Done()
		logf.Close()
	}()
	s := e.opt.Server
	probe := e.base + s.Ready
	deadline := time.Now().Add(s.ReadyTimeout)
	hc := &http.Client{Timeout: 5 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, probe, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ex := p.Exited(); ex != nil {
			return fmt.Errorf("the server exited before it was ready: %w", ex)
		}
		if time.Now().After(deadline) {
			last := "no answer"
			if err != nil {
				last = transportError(err)
			} else {
				last = "status " + resp.Status
			}
			p.Stop(ctx)
			return fmt.Errorf("the server was not ready within %v (GET %s: %s; openai.server.ready_timeout); its output: %s", s.ReadyTimeout, probe, last, logPath)
		}
		select {
		case <-ctx.Done():
			p.Stop(context.Background())
			return ctx.Err()
		case <-p.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Run runs one pass: the warm-up requests, then the dataset at its load's
// arrival times.
func (e *Engine) Run(ctx context.Context, reqs []datasets.Request, opts engine.RunOptions) (*engine.Result, error) {
	if opts.Profile {
		return nil, errors.New("engine openai has no profiler: profile the server with its own tools")
	}
	pass, err := e.NextPass(false)
	if err != nil {
		return nil, err
	}
	if n := min(e.cell.Engine.Warmup, len(reqs)); n > 0 {
		if _, _, err := e.send(ctx, reqs[:n], engine.Load{}); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	raws, held, err := e.send(ctx, reqs, e.cell.Engine.Load)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(pass.Dir, "records.jsonl")
	if err := writeRaw(file, raws); err != nil {
		return nil, err
	}
	recs, err := driver.CheckRecords(file, raws, reqs, false)
	if err != nil {
		return nil, err
	}
	res := &engine.Result{Backend: e.Backend(), MaxInFlight: e.cell.Engine.BatchSize, Requests: recs.Requests}
	res.Metrics = recs.Metrics(max(1, e.cell.Engine.NumGPUs))
	if n, longest := heldBack(recs.Requests, held); n > 0 {
		res.Metrics[engine.HeldRequestsKey] = float64(n)
		res.Metrics[engine.HeldMaxMsKey] = float64(longest) / float64(time.Millisecond)
		res.Metrics[engine.HeldBoundKey] = float64(e.opt.MaxInFlight)
	}
	return res, nil
}

// heldBack counts the requests send held back for a free in-flight slot
// and finds the longest of their waits, from their records' scheduled
// arrival (Start) to their send.
func heldBack(recs []engine.RequestRecord, held []bool) (n int, longest time.Duration) {
	for i, h := range held {
		if h {
			n++
			longest = max(longest, recs[i].Sent-recs[i].Start)
		}
	}
	return n, longest
}

// writeRaw keeps what the client measured in the pass's directory.
func writeRaw(path string, raws []driver.RawRecord) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, r := range raws {
		line := map[string]any{"task_id": r.TaskID, "start_ns": r.Start, "first_token_ns": r.FirstToken, "end_ns": r.End,
			"input_tokens": r.InputTokens, "output_tokens": r.OutputTokens, "token_times_ns": r.TokenTimes}
		if r.Sent != nil {
			line["sent_ns"] = r.Sent
		}
		if err := enc.Encode(line); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// send sends reqs at load's arrival times, at most the in-flight bound
// at once, and returns what the client measured, times from its start,
// and which requests it held back past their arrival for a free slot of
// openai.max_in_flight. The first failure stops the pass.
//
// Under a request_rate (an open loop) a request's Start is its scheduled
// arrival and Sent when it left: a user's clock starts when the request
// arrives, so a wait for a free slot (a server that cannot keep up) or
// for this loop counts in its latency, as it does in the built-in
// engine's queue. Timed from the send, a saturated server's queue moves
// into the client and out of the numbers (coordinated omission). A
// closed loop's users wait for their own previous request by design, and
// the warm-up has no schedule: there Start is the send.
func (e *Engine) send(ctx context.Context, reqs []datasets.Request, load engine.Load) ([]driver.RawRecord, []bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	arrive := load.Arrivals(len(reqs))
	scheduled := arrive != nil && load.Concurrency == 0
	limit := e.opt.MaxInFlight
	if load.Concurrency > 0 {
		limit = load.Concurrency
	}
	slots := make(chan struct{}, limit)
	raws := make([]driver.RawRecord, len(reqs))
	held := make([]bool, len(reqs))
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	var died <-chan struct{}
	if e.proc != nil {
		died = e.proc.Done()
	}
	t0 := time.Now()
loop:
	for i := range reqs {
		if arrive != nil {
			if err := sleepUntil(ctx, died, t0.Add(arrive[i])); err != nil {
				break
			}
		}
		select {
		case slots <- struct{}{}:
		default:
			held[i] = scheduled
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				break loop
			case <-died:
				break loop
			}
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-slots }()
			q := &reqs[i]
			rctx, rcancel := context.WithTimeout(ctx, e.opt.RequestTimeout)
			defer rcancel()
			t, err := e.client.Do(rctx, q.InputIDs, q.OutputTokens)
			if err != nil {
				if rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
					err = fmt.Errorf("no complete response within %v (openai.request_timeout)", e.opt.RequestTimeout)
				}
				fail(fmt.Errorf("request %d (task_id %d): %w", i, q.TaskID, err))
				return
			}
			ns := func(at time.Time) int64 { return int64(at.Sub(t0)) }
			r := driver.RawRecord{Index: i, TaskID: &q.TaskID}
			start, end := ns(t.Start), ns(t.End)
			if scheduled {
				sent := start
				start = int64(arrive[i])
				r.Sent = &sent
			}
			in, out := len(q.InputIDs), t.OutputTokens
			r.Start, r.End, r.InputTokens, r.OutputTokens = &start, &end, &in, &out
			if len(t.Chunks) > 0 {
				first := ns(t.Chunks[0])
				r.FirstToken = &first
				for _, c := range t.Chunks {
					r.TokenTimes = append(r.TokenTimes, ns(c))
				}
			}
			raws[i] = r
		}(i)
	}
	wg.Wait()
	if ex := e.waitExit(firstErr); ex != nil {
		return nil, nil, fmt.Errorf("the server exited during the pass: %w", ex)
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return raws, held, nil
}

// ExitWait is how long a pass whose request failed without an HTTP
// answer waits for the server xrun started to exit: a dying server cuts
// its connections (the client reads a bare EOF) a moment before the
// system reports its exit, and the exit status and its log's last error
// line say far more than the EOF.
var ExitWait = 5 * time.Second

// waitExit is how the server xrun started ended, if it did: at once when
// the pass went well or the server answered, after up to ExitWait when a
// request failed below HTTP.
func (e *Engine) waitExit(failed error) error {
	if e.proc == nil {
		return nil
	}
	var re *RequestError
	if failed != nil && errors.As(failed, &re) && re.Status == 0 {
		select {
		case <-e.proc.Done():
		case <-time.After(ExitWait):
		}
	}
	return e.proc.Exited()
}

// sleepUntil waits for t, ctx's end or died closing.
func sleepUntil(ctx context.Context, died <-chan struct{}, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-died:
		return errors.New("the server exited")
	}
}

// Backend names the server: "openai/<host:port>", or the program xrun
// starts.
func (e *Engine) Backend() string {
	if e.opt.Server != nil {
		argv := e.opt.Server.Argv
		name := filepath.Base(argv[0].Raw)
		if argv[0].Raw == "{xrun}" {
			name = "xrun"
		}
		if len(argv) > 1 && (strings.HasPrefix(name, "python") || name == "xrun" || name == "vllm" || name == "trtllm-serve") {
			// The program's own command says which server: xrun serve,
			// vllm serve, python3 -m sglang.launch_server.
			name += " " + filepath.Base(argv[1].Raw)
		}
		return Name + "/" + name
	}
	if u, err := url.Parse(e.base); err == nil {
		return Name + "/" + u.Host
	}
	return Name
}

func (e *Engine) Model() engine.ModelConfig { return e.cell.Model }
func (e *Engine) Tool() driver.Tool         { return e.tool }
func (e *Engine) Build() map[string]string  { return nil }

// Close stops the server xrun started.
func (e *Engine) Close() error {
	if e.proc != nil {
		e.proc.Stop(context.Background())
	}
	return nil
}
