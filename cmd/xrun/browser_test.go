package main

// The browser harness: pages xrun writes (report.html, diff and trend
// pages) are opened in a real headless Chromium, with the network cut off,
// and fail on a JavaScript error, a chart that is missing or not drawn, or
// a request to the network. Only test files import chromedp, so xrun
// itself never depends on it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color/palette"
	"image/draw"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/xrun-dev/xrun/results/golden"
	"github.com/xrun-dev/xrun/results/layout"
)

const (
	// chromiumEnv names the browser binary when it is not on PATH.
	chromiumEnv = "XRUN_CHROMIUM"
	// noChromiumEnv is set by .ci/run to why it could not install
	// Chromium; the browser tests then skip with that reason.
	noChromiumEnv = "XRUN_NO_CHROMIUM"
	// screenshotsEnv names a directory to keep the screenshots in (CI
	// can archive it); without it they go to the test's temporary
	// directory.
	screenshotsEnv = "XRUN_SCREENSHOTS"
)

// chromiumNames are the names Chromium and Chrome go by on PATH.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// chromiumPath finds the browser, or skips the test saying why. Where CI
// is set the test fails instead, unless .ci/run said why it could not
// install one: a browser test that silently never runs proves nothing.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(chromiumEnv); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("%s=%s: %v", chromiumEnv, p, err)
		}
		return found
	}
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if why := os.Getenv(noChromiumEnv); why != "" {
		t.Skipf("no Chromium to render the page in: %s", why)
	}
	msg := fmt.Sprintf("no Chromium to render the page in: none of %s is on PATH and %s is not set (Debian: apt-get install chromium)",
		strings.Join(chromiumNames, ", "), chromiumEnv)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI is set, and .ci/run installs Chromium or sets %s to why it cannot", msg, noChromiumEnv)
	}
	t.Skip(msg)
	return ""
}

// newBrowser starts a headless Chromium for the test and returns its
// context; the browser ends with the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := chromiumPath(t)
	// Generous: the browser lives through the test, a study run (under
	// -race, a minute) included, and a cold start on a loaded 2-core CI
	// machine takes seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		// The pages are our own local files, and containers often lack
		// the namespaces Chromium's sandbox needs.
		chromedp.NoSandbox,
		// Nothing may leave the machine even if a request slipped past
		// the interception in checkPage (WebSockets do): no host name
		// resolves, and everything else goes to a proxy that is not
		// there, loopback included.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"),
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("disable-gpu", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancel()
	})
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return browserCtx
}

// pageWant is what a page must have.
type pageWant struct {
	// Charts are the data-chart names (path.Match patterns, each must
	// match at least one chart) that must be there and drawn.
	Charts []string
	// Sections are the ids of <section> elements that must be there.
	Sections []string
	// Text are strings the page's text must contain (folded parts too).
	Text []string
	// Width is the viewport width in CSS pixels (default 1200).
	Width int64
}

// chartBox is one data-chart element as the browser laid it out.
type chartBox struct {
	Name    string  `json:"name"`
	IsChart bool    `json:"isChart"` // has class "chart"
	Width   float64 `json:"w"`
	Height  float64 `json:"h"`
	SVGs    int     `json:"svgs"`
	SVGW    float64 `json:"svgW"` // the first svg's rendered size
	SVGH    float64 `json:"svgH"`
	Shapes  int     `json:"shapes"` // elements inside the svgs
	Error   string  `json:"error"`  // the text of an element of class "error" in it
}

// pageCheck is what checkPage saw of one page.
type pageCheck struct {
	// Problems are why the page fails: JavaScript errors, requests to the
	// network or to files beside the page, charts missing or not drawn.
	Problems []string
	// Blocked counts the requests that were stopped before they left.
	Blocked int
	Charts  []chartBox
	// Sections are the ids of the page's sections, in order.
	Sections []string
	PNG      []byte // full-page screenshot
}

// pageEvents collects, from the tab's event loop, what goes wrong while a
// page loads.
type pageEvents struct {
	mu       sync.Mutex
	page     string // the page's own file:// URL
	problems []string
	blocked  int
	// pending counts answers to paused requests still in flight; once
	// closed, no more are sent (the tab is about to go), so that every
	// pending.Add happens before finish's Wait.
	pending sync.WaitGroup
	closed  bool
}

// finish waits for the answers in flight and returns what was seen.
func (e *pageEvents) finish() (problems []string, blocked int) {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.pending.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.problems), e.blocked
}

func (e *pageEvents) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.problems = append(e.problems, fmt.Sprintf(format, args...))
}

// localURL reports whether u never leaves the machine: the page itself,
// embedded data and what the page builds in memory.
func localURL(u string) bool {
	scheme, _, _ := strings.Cut(u, ":")
	switch strings.ToLower(scheme) {
	case "file", "data", "blob", "about":
		return true
	}
	return false
}

// listen runs in the tab's event loop: it must return fast and send no
// command, so answers to paused requests go out from goroutines.
func (e *pageEvents) listen(tab context.Context) func(ev any) {
	return func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			e.add("JavaScript exception: %s", exceptionText(ev.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				e.add("console.%s: %s%s", ev.Type, consoleText(ev.Args), stackPlace(ev.StackTrace))
			}
		case *log.EventEntryAdded:
			// The browser's own errors: resources that failed to load,
			// security policy violations.
			if ev.Entry.Level == log.EntryLevelError {
				e.add("browser log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			u := ev.Request.URL
			switch {
			case !localURL(u):
				e.add("request to the network: %s %s", ev.Request.Method, u)
			case strings.HasPrefix(u, "file:") && u != e.page:
				e.add("loads %s from disk: the page must be self-contained", u)
			}
		case *network.EventWebSocketCreated:
			e.add("WebSocket to %s", ev.URL)
		case *fetch.EventRequestPaused:
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.closed {
				return
			}
			e.pending.Add(1)
			go func() {
				defer e.pending.Done()
				var err error
				if localURL(ev.Request.URL) {
					_, err = chromedp.Call(tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
				} else {
					e.mu.Lock()
					e.blocked++
					e.mu.Unlock()
					_, err = chromedp.Call(tab, fetch.FailRequest, fetch.FailRequestParams{
						RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient,
					})
				}
				if err != nil && tab.Err() == nil {
					e.add("answering the paused request for %s: %v", ev.Request.URL, err)
				}
			}()
		}
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "(no details)"
	}
	s := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		// The description's first line is the error; the rest is the
		// stack, of which the place below is the top.
		first, _, _ := strings.Cut(d.Exception.Description, "\n")
		s += " " + first
	}
	return fmt.Sprintf("%s (%s:%d:%d)", s, d.URL, d.LineNumber+1, d.ColumnNumber+1)
}

func consoleText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		switch {
		case a.Type == runtime.RemoteObjectTypeString:
			var s string
			if err := json.Unmarshal(a.Value, &s); err == nil {
				parts = append(parts, s)
				continue
			}
			parts = append(parts, string(a.Value))
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		default:
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}

func stackPlace(st *runtime.StackTrace) string {
	if st == nil || len(st.CallFrames) == 0 {
		return ""
	}
	f := st.CallFrames[0]
	return fmt.Sprintf(" (%s:%d:%d)", f.URL, f.LineNumber+1, f.ColumnNumber+1)
}

// pageInventory is what the page reports of itself once loaded.
type pageInventory struct {
	Charts   []chartBox `json:"charts"`
	Unnamed  int        `json:"unnamed"`  // class "chart" without data-chart
	Broken   []string   `json:"broken"`   // images that did not load
	Sections []string   `json:"sections"` // ids of <section> elements
	Text     string     `json:"text"`     // the body's textContent
}

// inventoryJS lays out every chart, image and section. Run after the load
// event and two animation frames, so scripts that draw have drawn. Charts
// in closed <details> are measured open, then closed again for the
// screenshot.
const inventoryJS = `new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => {
	const closed = [...document.querySelectorAll("details:not([open])")];
	closed.forEach(d => d.open = true);
	const charts = [...document.querySelectorAll("[data-chart]")].map(el => {
		const r = el.getBoundingClientRect();
		const svgs = [...el.querySelectorAll("svg")];
		const s = svgs.length ? svgs[0].getBoundingClientRect() : {width: 0, height: 0};
		return {
			name: el.dataset.chart, isChart: el.classList.contains("chart"),
			w: r.width, h: r.height, svgs: svgs.length, svgW: s.width, svgH: s.height,
			shapes: svgs.reduce((n, svg) => n + svg.querySelectorAll("*").length, 0),
			error: [...el.querySelectorAll(".error")].map(e => e.textContent.trim()).join(" "),
		};
	});
	closed.forEach(d => d.open = false);
	done({
		charts,
		unnamed: document.querySelectorAll(".chart:not([data-chart])").length,
		broken: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
		sections: [...document.querySelectorAll("section[id]")].map(s => s.id),
		text: document.body.textContent,
	});
})))`

// checkPage loads the HTML file at file in a new tab of the browser with
// every request that is not local blocked, and reports what is wrong with
// it. The error is for the harness failing (the browser, the protocol),
// never for the page.
func checkPage(browser context.Context, file string, want pageWant) (pageCheck, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return pageCheck{}, err
	}
	pageURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	ev := &pageEvents{page: pageURL}
	var tab context.Context
	tab, cancel := chromedp.NewContext(browser, chromedp.WithListener(func(e any) { ev.listen(tab)(e) }))
	defer func() {
		cancel()
		ev.finish()
	}()
	width := want.Width
	if width == 0 {
		width = 1200
	}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(width, 800)); err != nil {
		return pageCheck{}, fmt.Errorf("opening a tab: %w", err)
	}
	// Every request pauses here first; listen lets the local ones go on.
	if _, err := chromedp.Call(tab, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: "*"}},
	}); err != nil {
		return pageCheck{}, fmt.Errorf("intercepting requests: %w", err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(pageURL)); err != nil {
		return pageCheck{}, fmt.Errorf("loading %s: %w", pageURL, err)
	}
	inv, err := chromedp.Run(tab, chromedp.Evaluate[pageInventory](inventoryJS, chromedp.EvalAwaitPromise))
	if err != nil {
		return pageCheck{}, fmt.Errorf("reading the page's charts: %w", err)
	}
	shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		return pageCheck{}, fmt.Errorf("taking a screenshot: %w", err)
	}

	// The listener saw every event sent before the last reply; answers to
	// paused requests may still be on their way.
	problems, blocked := ev.finish()
	res := pageCheck{Problems: problems, Blocked: blocked, Charts: inv.Charts, Sections: inv.Sections, PNG: shot}
	res.Problems = append(res.Problems, chartProblems(inv, want)...)
	return res, nil
}

// chartProblems checks the laid-out page against want: every wanted chart
// and section there, every chart drawn, every image loaded.
func chartProblems(inv pageInventory, want pageWant) []string {
	var probs []string
	for _, pat := range want.Charts {
		if !slices.ContainsFunc(inv.Charts, func(c chartBox) bool { ok, _ := path.Match(pat, c.Name); return ok }) {
			probs = append(probs, fmt.Sprintf("chart %q: missing", pat))
		}
	}
	for _, c := range inv.Charts {
		switch {
		case !c.IsChart:
			probs = append(probs, fmt.Sprintf("chart %q: lacks class \"chart\"", c.Name))
		case c.SVGs == 0 && c.Error != "":
			probs = append(probs, fmt.Sprintf("chart %q: not drawn: %s", c.Name, c.Error))
		case c.SVGs == 0:
			probs = append(probs, fmt.Sprintf("chart %q: no <svg>", c.Name))
		case c.Width <= 0 || c.Height <= 0:
			probs = append(probs, fmt.Sprintf("chart %q: not drawn (%gx%g px)", c.Name, c.Width, c.Height))
		case c.SVGW <= 0 || c.SVGH <= 0 || c.Shapes == 0:
			probs = append(probs, fmt.Sprintf("chart %q: empty svg (%gx%g px, %d elements)", c.Name, c.SVGW, c.SVGH, c.Shapes))
		}
	}
	if inv.Unnamed > 0 {
		probs = append(probs, fmt.Sprintf("%d chart(s) without a data-chart name", inv.Unnamed))
	}
	for _, src := range inv.Broken {
		probs = append(probs, "image not loaded: "+shorten(src))
	}
	for _, id := range want.Sections {
		if !slices.Contains(inv.Sections, id) {
			probs = append(probs, fmt.Sprintf("section %q: missing", id))
		}
	}
	for _, s := range want.Text {
		if !strings.Contains(inv.Text, s) {
			probs = append(probs, fmt.Sprintf("text %q: missing", s))
		}
	}
	return probs
}

func shorten(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// requirePage checks the page and fails the test on every problem. It
// keeps the screenshot (see screenshotsEnv) and returns it.
func requirePage(t *testing.T, browser context.Context, file string, want pageWant) []byte {
	t.Helper()
	res, err := checkPage(browser, file, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems {
		t.Errorf("%s: %s", file, p)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(res.PNG))
	if err != nil || cfg.Width == 0 || cfg.Height == 0 {
		t.Errorf("%s: screenshot is no image: %v (%d bytes)", file, err, len(res.PNG))
	}
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".png")
	if err := os.WriteFile(shot, res.PNG, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d charts, %dx%d px screenshot %s", file, len(res.Charts), cfg.Width, cfg.Height, shot)
	return res.PNG
}

// The harness itself, on fixture pages with known faults: each fault is
// found, and a good page passes.
func TestBrowserHarness(t *testing.T) {
	browser := newBrowser(t)
	for _, tc := range []struct {
		page    string
		want    pageWant
		blocked int      // requests stopped before they left
		finds   []string // each is in some problem
		clean   []string // in no problem
	}{
		{page: "ok.html", want: pageWant{Charts: []string{"throughput-*", "pareto"}, Sections: []string{"throughput", "pareto"}}},
		{page: "ok.html", want: pageWant{Charts: []string{"throughput-*"}, Text: []string{"Throughput and latency"}}},
		{page: "ok.html", want: pageWant{Charts: []string{"latency-*"}, Sections: []string{"telemetry"}, Text: []string{"REGRESSION"}},
			finds: []string{`chart "latency-*": missing`, `section "telemetry": missing`, `text "REGRESSION": missing`}},
		{page: "jserror.html", want: pageWant{Charts: []string{"c"}},
			finds: []string{"console.error: drawing failed: 42", "nobody handles this", "undefinedFunction is not defined"}},
		{page: "network.html", want: pageWant{Charts: []string{"c"}}, blocked: 4,
			finds: []string{
				"request to the network: GET https://fonts.example.com/css?family=Inter",
				"request to the network: GET https://cdn.example.com/charts.min.js",
				"request to the network: GET http://images.example.com/logo.png",
				"request to the network: GET https://api.example.com/beacon",
			}},
		{page: "charts.html", want: pageWant{Charts: []string{"drawn", "gone"}},
			finds: []string{`chart "gone": missing`, `chart "hidden": not drawn (0x0 px)`, `chart "empty": no <svg>`,
				`chart "flat": empty svg`, `chart "failed": not drawn: plot: no finite values`, `chart "folded-empty": no <svg>`,
				"1 chart(s) without a data-chart name"},
			clean: []string{`chart "drawn"`, `chart "folded"`}},
		{page: "local.html", want: pageWant{Charts: []string{"c"}},
			finds: []string{"ok.css from disk: the page must be self-contained", "no-such-image.png from disk",
				"image not loaded: file://"}},
	} {
		t.Run(tc.page, func(t *testing.T) {
			res, err := checkPage(browser, filepath.Join("testdata", "browser", tc.page), tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.finds) == 0 && len(res.Problems) > 0 {
				t.Errorf("a good page failed:\n%s", strings.Join(res.Problems, "\n"))
			}
			all := strings.Join(res.Problems, "\n")
			for _, f := range tc.finds {
				if !strings.Contains(all, f) {
					t.Errorf("no problem says %q; problems:\n%s", f, all)
				}
			}
			for _, c := range tc.clean {
				if strings.Contains(all, c) {
					t.Errorf("a problem says %q; problems:\n%s", c, all)
				}
			}
			if res.Blocked != tc.blocked {
				t.Errorf("%d requests blocked, want %d; problems:\n%s", res.Blocked, tc.blocked, all)
			}
			if len(res.PNG) == 0 {
				t.Error("no screenshot")
			}
		})
	}
}

// writePage writes a page the CLI printed to a file the browser can open.
func writePage(t *testing.T, name, html string) string {
	t.Helper()
	if !strings.Contains(html, "<html") {
		t.Fatalf("%s: not an HTML page:\n%s", name, shorten(html))
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The quickstart as `make run` runs it (on the CPU backend here): the
// report.html it leaves in its results directory.
func TestBrowserQuickstartReport(t *testing.T) {
	browser := newBrowser(t) // first, so that a missing browser skips before the study runs
	dir := filepath.Join(t.TempDir(), "quickstart")
	r := runStudy(t, studyEnv(t), "run", quickstartSpec, "--out", dir, "--set", "params.engine=cpu")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	requirePage(t, browser, filepath.Join(dir, layout.HTMLFile), pageWant{
		Charts:   []string{"throughput-batch_size", "throughput-latency", "compare-gemm_plugin-*"},
		Sections: studySections,
		// The command that reproduces a cell, with the --set it ran with.
		Text: []string{"--only id=bs32_gemm-disable-", "--set params.engine=cpu"},
	})
}

// Diff pages of committed results: one with regressions, one with kernel
// changes between profiled runs.
func TestBrowserDiffPage(t *testing.T) {
	browser := newBrowser(t)
	for _, tc := range []struct {
		name     string
		old, new string
		code     int
		want     pageWant
	}{
		{"slow", "nightly-base", "nightly-slow", exitRegression, pageWant{
			Charts: []string{"delta-all"}, Sections: []string{"verdict", "deltas", "metrics"},
			Text: []string{"REGRESSION: 5 significant regressions beyond 3%"},
		}},
		{"kernels", "gemm-profiled", "gemm-profiled-new", exitOK, pageWant{
			// Every cell both runs profiled has its kernel changes drawn.
			Charts: []string{"delta-all", "kernels-bs1-auto-*", "kernels-bs1-disable-*", "kernels-bs16-auto-*",
				"kernels-bs16-disable-*", "kernels-bs64-auto-*", "kernels-bs64-disable-*", "kernels-bs256-disable-*"},
			Sections: []string{"verdict", "deltas", "kernels", "metrics"},
			Text:     []string{"OK: no significant regression beyond 3%"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, "diff", fixture(tc.old), fixture(tc.new), "--format", "html")
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.stderr)
			}
			requirePage(t, browser, writePage(t, "diff.html", r.stdout), tc.want)
		})
	}
}

// studySections are the sections of report.html that every study fills.
var studySections = []string{"environment", "reproduce", "summary", "throughput", "latency", "comparisons"}

// gpuReportDir is the GPU study whose report's screenshot the README shows.
const gpuReportDir = "../../bench/results/gemm-plugin-h200"

// The report of a committed GPU study (nine batch sizes on an H200); -update
// keeps its screenshot in the study's directory as documentation.
func TestBrowserGPUReport(t *testing.T) {
	browser := newBrowser(t)
	page := filepath.Join(t.TempDir(), "report.html")
	r := runCLI(t, nil, "report", gpuReportDir, "--format", "html", "--output", page)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	shot := requirePage(t, browser, page, pageWant{
		Charts:   []string{"throughput-batch_size", "throughput-latency", "compare-gemm_plugin-*"},
		Sections: studySections,
		Text:     []string{"NVIDIA H200", "--only id=bs256_gemm-auto-"},
		Width:    docWidth,
	})
	if golden.Update() && !t.Failed() {
		small, err := docPNG(shot)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(gpuReportDir, "report.png")
		if err := os.WriteFile(path, small, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", path, len(small))
	}
}

// docPNG makes a screenshot small enough to keep in the repository: 256
// colours (Plan 9's palette has the greys that anti-aliased text needs)
// take a full page from about 1 MB to about 300 kB.
func docPNG(b []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	pal := image.NewPaletted(img.Bounds(), palette.Plan9)
	draw.Draw(pal, pal.Rect, img, img.Bounds().Min, draw.Src)
	var out bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, pal); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// docWidth is the viewport width of the documentation screenshot: a
// laptop's, so that it reads as the page does there.
const docWidth = 1100

// A trend page over eight nights, batch size 64 10 % slower in the newest
// (the history of TestTrendRegressionExits3).
func TestBrowserTrendPage(t *testing.T) {
	browser := newBrowser(t)
	draws := trendDir(t)
	dirs := nightlies(t, draws, 8, func(run, bs int) float64 { return pick(bs == 64 && run == 7, 1.10, 1) })
	r := runCLI(t, nil, append(append([]string{"trend"}, dirs...), "--format", "html")...)
	if r.code != exitRegression {
		t.Fatalf("exit %d, want 3\n%s", r.code, r.stderr)
	}
	requirePage(t, browser, writePage(t, "trend.html", r.stdout), pageWant{
		// Every cell's series, the regression's among them.
		Charts: []string{"trend-bs64-3195f03b-total_latency_ms", "trend-bs1-8aae56ba-*", "trend-bs16-2af751de-*",
			"trend-bs256-fbe9d714-*"},
		Sections: []string{"verdict", "steps", "series", "runs"},
		Text:     []string{"REGRESSION: the newest run, 2026-03-08 (nightly/2026-03-08), starts 5 regression steps"},
	})
}
