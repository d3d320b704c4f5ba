package runner

import (
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/engine/openai"
	"github.com/xrun-dev/xrun/results"
)

// The spec's serving blocks: openai (engine: openai, a server to load),
// slo (the latency targets goodput counts against) and search (the SLO
// search over request_rate or concurrency).

var openaiKeys = []string{"url", "model", "api", "api_key_env", "request_timeout", "max_in_flight", "server"}
var openaiServerKeys = []string{"argv", "env", "dir", "ready", "ready_timeout"}

// duration reads a positive duration such as 90s.
func (d *decoder) duration(n *yaml.Node, field string) (time.Duration, error) {
	s, ok := scalarString(n)
	if ok {
		if v, err := time.ParseDuration(s); err == nil && v > 0 {
			return v, nil
		}
	}
	return 0, d.errAt(resolve(n), field, `expected a positive duration such as "90s" or "10m", got %s`, describe(n))
}

// serverTemplate decodes one word of the server's command or its URL:
// parameters and openai.Specials ({port}).
func (d *decoder) serverTemplate(n *yaml.Node, field string) (driver.Template, error) {
	n = resolve(n)
	s, ok := scalarString(n)
	if !ok {
		if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
			s = n.Value
		} else {
			return driver.Template{}, d.errAt(n, field, "expected a string, got %s", describe(n))
		}
	}
	names := paramPaths(false)
	for k := range openai.Specials {
		names = append(names, k)
	}
	slices.Sort(names)
	t, err := driver.ParseTemplate(s,
		func(name string) bool { _, ok := slices.BinarySearch(names, name); return ok },
		func(name string) string { return suggestOrList(name, names) })
	if err != nil {
		return t, d.errAt(n, field, "%v", err)
	}
	return t, nil
}

// openaiBlock decodes the openai block.
func (d *decoder) openaiBlock(kn, n *yaml.Node) error {
	kvs, err := d.mapping(n, "openai", "a mapping with url or server, and optionally model, api, api_key_env, request_timeout, max_in_flight")
	if err != nil {
		return err
	}
	o := &openai.Options{}
	var urlNode *yaml.Node
	var urlT driver.Template
	for _, kv := range kvs {
		f := "openai." + kv.key
		switch kv.key {
		case "url":
			urlNode = resolve(kv.vn)
			t, err := d.serverTemplate(kv.vn, f)
			if err != nil {
				return err
			}
			u, perr := url.Parse(t.Expand(map[string]string{"port": "1"}))
			if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return d.errAt(urlNode, f, "expected http://HOST:PORT or http://HOST:PORT/v1 (may use {port}), got %s", describe(kv.vn))
			}
			o.URL, urlT = t.Raw, t
		case "model", "api_key_env":
			s, ok := scalarString(kv.vn)
			if !ok || s == "" {
				return d.errAt(resolve(kv.vn), f, "expected a name, got %s", describe(kv.vn))
			}
			if kv.key == "model" {
				o.Model = s
			} else {
				if !envNameRE.MatchString(s) {
					return d.errAt(resolve(kv.vn), f, "expected an environment variable name, got %q", s)
				}
				o.APIKeyEnv = s
			}
		case "api":
			s, _ := scalarString(kv.vn)
			if s != openai.APICompletions && s != openai.APIChat {
				return d.errAt(resolve(kv.vn), f, "expected completions (token ids as the prompt of /v1/completions) or chat (/v1/chat/completions), got %s", describe(kv.vn))
			}
			o.API = s
		case "request_timeout":
			if o.RequestTimeout, err = d.duration(kv.vn, f); err != nil {
				return err
			}
		case "max_in_flight":
			v, ok := scalarInt(kv.vn)
			if !ok || v < 1 || v > 1<<20 {
				return d.errAt(resolve(kv.vn), f, "expected the most requests in flight at once, an integer >= 1, got %s", describe(kv.vn))
			}
			o.MaxInFlight = int(v)
		case "server":
			if o.Server, err = d.openaiServer(kv.vn, f); err != nil {
				return err
			}
		default:
			return d.errAt(kv.kn, f, "unknown key%s", suggestOrList(kv.key, openaiKeys))
		}
	}
	if o.URL == "" && o.Server == nil {
		return d.errAt(kn, "openai", "needs url (a running server: http://HOST:PORT/v1) or server (a command xrun starts per cell, with {port})")
	}
	// {port} is the port xrun picks for the server it starts: without
	// one, nothing listens there and every cell would fail to connect.
	urlPort := slices.Contains(urlT.Names(), "port")
	if o.Server == nil && urlPort {
		return d.errAt(urlNode, "openai.url", "{port} is the port of the server xrun starts (openai.server); for a running server give its port")
	}
	if o.Server != nil && urlNode != nil && !urlPort && !slices.ContainsFunc(o.Server.Argv, func(t driver.Template) bool { return slices.Contains(t.Names(), "port") }) {
		return d.errAt(urlNode, "openai.url", "with a server, the url and the server's argv should agree on the port: use {port} in both (xrun picks a free one per cell)")
	}
	d.spec.OpenAI = o
	return nil
}

func (d *decoder) openaiServer(n *yaml.Node, field string) (*openai.ServerCommand, error) {
	kvs, err := d.mapping(n, field, "a mapping with argv, and optionally env, dir, ready, ready_timeout")
	if err != nil {
		return nil, err
	}
	s := &openai.ServerCommand{Dir: d.resolvePath(".")}
	var argvNode *yaml.Node
	for _, kv := range kvs {
		f := join(field, kv.key)
		switch kv.key {
		case "argv":
			argvNode = kv.kn
			items, err := d.sequence(kv.vn, f, "a list of words, the server program first")
			if err != nil {
				return nil, err
			}
			if len(items) == 0 {
				return nil, d.errAt(resolve(kv.vn), f, "expected the server's command, got an empty list")
			}
			for i, it := range items {
				t, err := d.serverTemplate(it, index(f, i))
				if err != nil {
					return nil, err
				}
				s.Argv = append(s.Argv, t)
			}
		case "env":
			ekvs, err := d.envMapping(kv.vn, f)
			if err != nil {
				return nil, err
			}
			for _, e := range ekvs {
				t, err := d.serverTemplate(e.vn, join(f, e.key))
				if err != nil {
					return nil, err
				}
				s.Env = append(s.Env, openai.EnvVar{Name: e.key, Value: t})
			}
		case "dir":
			v, ok := scalarString(kv.vn)
			if !ok || v == "" {
				return nil, d.errAt(resolve(kv.vn), f, "expected a directory (relative to the spec's), got %s", describe(kv.vn))
			}
			s.Dir = d.resolvePath(cleanPath(v))
		case "ready":
			v, ok := scalarString(kv.vn)
			if !ok || !strings.HasPrefix(v, "/") {
				return nil, d.errAt(resolve(kv.vn), f, "expected a path probed until it answers 200, such as /health or /v1/models, got %s", describe(kv.vn))
			}
			s.Ready = v
		case "ready_timeout":
			if s.ReadyTimeout, err = d.duration(kv.vn, f); err != nil {
				return nil, err
			}
		default:
			return nil, d.errAt(kv.kn, f, "unknown key%s", suggestOrList(kv.key, openaiServerKeys))
		}
	}
	if argvNode == nil {
		return nil, d.errAt(resolve(n), join(field, "argv"), `required: the server's command, e.g. argv: [vllm, serve, "{hf_model}", --port, "{port}"]`)
	}
	if abs, err := filepath.Abs(s.Dir); err == nil {
		s.Dir = abs
	}
	return s, nil
}

var sloKeys = []string{"ttft_ms", "tpot_ms", "percentile"}

// sloBlock decodes slo: {ttft_ms, tpot_ms, percentile}.
func (d *decoder) sloBlock(kn, n *yaml.Node) error {
	kvs, err := d.mapping(n, "slo", "a mapping with ttft_ms and/or tpot_ms, and percentile")
	if err != nil {
		return err
	}
	s := &results.SLO{Percentile: 99}
	for _, kv := range kvs {
		f := "slo." + kv.key
		v, ok := scalarFloat(kv.vn)
		switch kv.key {
		case "ttft_ms", "tpot_ms":
			if !ok || v <= 0 {
				return d.errAt(resolve(kv.vn), f, "expected a latency target in milliseconds > 0, got %s", describe(kv.vn))
			}
			if kv.key == "ttft_ms" {
				s.TTFTms = v
			} else {
				s.TPOTms = v
			}
		case "percentile":
			if !ok || v <= 0 || v > 100 {
				return d.errAt(resolve(kv.vn), f, "expected a percentile in (0, 100], such as 99, got %s", describe(kv.vn))
			}
			s.Percentile = v
		default:
			return d.errAt(kv.kn, f, "unknown key%s", suggestOrList(kv.key, sloKeys))
		}
	}
	if s.TTFTms == 0 && s.TPOTms == 0 {
		return d.errAt(kn, "slo", "needs a target: ttft_ms, tpot_ms or both (e.g. slo: {ttft_ms: 200, tpot_ms: 50, percentile: 99})")
	}
	d.spec.SLO = s
	d.sloKey = kn
	return nil
}

var searchKeys = []string{"axis", "low", "high", "metric", "tolerance", "max_points"}

// searchBlock decodes search: {axis, low, high, metric, tolerance,
// max_points}; checkSearch checks it against the matrix and the slo.
func (d *decoder) searchBlock(kn, n *yaml.Node) error {
	kvs, err := d.mapping(n, "search", "a mapping with axis (request_rate or concurrency), low, high, and optionally metric, tolerance, max_points")
	if err != nil {
		return err
	}
	s := &results.Search{Metric: results.SearchGoodput, Tolerance: 0.1}
	var lowN, highN *yaml.Node
	for _, kv := range kvs {
		f := "search." + kv.key
		switch kv.key {
		case "axis":
			v, _ := scalarString(kv.vn)
			if v != "request_rate" && v != "concurrency" {
				return d.errAt(resolve(kv.vn), f, "expected request_rate or concurrency, got %s", describe(kv.vn))
			}
			s.Axis = v
		case "low", "high":
			v, ok := scalarFloat(kv.vn)
			if !ok || v <= 0 {
				return d.errAt(resolve(kv.vn), f, "expected a number > 0, got %s", describe(kv.vn))
			}
			if kv.key == "low" {
				s.Low, lowN = v, resolve(kv.vn)
			} else {
				s.High, highN = v, resolve(kv.vn)
			}
		case "metric":
			v, _ := scalarString(kv.vn)
			if v != results.SearchGoodput && v != results.SearchPercentile {
				return d.errAt(resolve(kv.vn), f, "expected goodput (a point meets the SLO when percentile %% of its requests meet it) or slo_percentile (its TTFT and TPOT at the percentile are within the targets), got %s", describe(kv.vn))
			}
			s.Metric = v
		case "tolerance":
			v, ok := scalarFloat(kv.vn)
			if !ok || v < 0 || v >= 1 {
				return d.errAt(resolve(kv.vn), f, "expected a relative tolerance in [0, 1), such as 0.1, got %s", describe(kv.vn))
			}
			s.Tolerance = v
		case "max_points":
			v, ok := scalarInt(kv.vn)
			if !ok || v < 2 || v > 100 {
				return d.errAt(resolve(kv.vn), f, "expected an integer in [2, 100] (low, high and the bisections), got %s", describe(kv.vn))
			}
			s.MaxPoints = int(v)
		default:
			return d.errAt(kv.kn, f, "unknown key%s", suggestOrList(kv.key, searchKeys))
		}
	}
	switch {
	case s.Axis == "":
		return d.errAt(kn, "search.axis", "required: request_rate or concurrency")
	case lowN == nil || highN == nil:
		return d.errAt(kn, "search", "needs low and high: the range bisected, e.g. {axis: request_rate, low: 1, high: 64}")
	case s.High <= s.Low:
		return d.errAt(highN, "search.high", "%s must be above low %s", formatValue(s.High), formatValue(s.Low))
	case s.Axis == "concurrency" && (s.Low != float64(int(s.Low)) || s.High != float64(int(s.High))):
		return d.errAt(lowN, "search", "concurrency is a number of users: low and high must be integers")
	}
	d.spec.Search = s
	d.searchKey = kn
	return nil
}

// checkSearch checks the search against the rest of the spec, once it is
// decoded: it needs an slo, and its axis must be a plain matrix axis (its
// values are the first points; the search adds the rest as include
// entries).
func (d *decoder) checkSearch() error {
	s := d.spec.Search
	if s == nil {
		return nil
	}
	if d.spec.SLO == nil {
		return d.errAt(d.searchKey, "search", "needs an slo block: the targets a load point must meet (e.g. slo: {ttft_ms: 200, tpot_ms: 50, percentile: 99})")
	}
	// slo_percentile reads the cells' measured percentiles: any other
	// percentile would judge every point on a metric that does not exist.
	if p := d.spec.SLO.Percentile; s.Metric == results.SearchPercentile && !slices.Contains([]float64{50, 90, 95, 99}, p) {
		return d.errAt(d.searchKey, "search.metric", "slo_percentile judges a point by its measured TTFT and TPOT percentiles, p50, p90, p95 and p99: slo.percentile must be 50, 90, 95 or 99, got %s (or use metric goodput, which takes any percentile)", formatValue(p))
	}
	pi := paramIndex[s.Axis]
	ai, ok := d.axisAt[pi]
	if !ok {
		return d.errAt(d.searchKey, "search.axis", "%s must be a matrix axis: its values are the sweep's points and the search's first (e.g. matrix: {%s: [%s, %s]})", s.Axis, s.Axis, formatValue(s.Low), formatValue(s.High))
	}
	if len(d.axes[ai].keys) != 1 {
		return d.errAt(d.axisKeys[ai], "search.axis", "%s is in a zip; the searched axis must be a plain axis", s.Axis)
	}
	return nil
}
