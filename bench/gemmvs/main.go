// Command gemmvs says how many of the zoo's GEMM shapes the own GEMM runs
// within a margin of cuBLASLt's time, from engine/cuda's BenchmarkGemm and
// BenchmarkGemmFP8 output: issue 22's bar is `disable` within 15 % of
// cuBLASLt at M >= 64 on every zoo shape.
//
//	go run ./bench/gemmvs -within 15 bench/results/gemm-v51/bench-gemm-ab-main-h200.log
//
// For each benchmark (16-bit: own against cublaslt; fp8: own-fp8 against
// cublaslt-fp8), shape and M from -from (64) up it takes the median of
// -unit (us/gemm) over every sample in the files, prints own / cuBLASLt
// and whether that is within 1 + within/100, then per family and M how
// many shapes are. A shape with fewer than -min samples on either side is
// listed as too few and counted neither way; one without both sides is
// left out.
//
// With -headroom PCT it then lists where another own implementation in the
// files (a forced tile, split or kernel path: own-tma-wg1s, own-fp8-waves1,
// ...; not the -hot ones, whose weights stay in L2) has a median at least
// PCT % under the plan's: where the planner leaves time, and how far the
// faster choice would stand from cuBLASLt.
//
// Where the files hold the plan each own GEMM took (BenchmarkGemm and
// BenchmarkGemmFP8 log "plan TILE" under -test.v), the tables show it: a
// column for the plan's, and in -headroom's the faster implementation's
// (a forced tile's split of K, say).
//
// With -each it lists, at every shape with cuBLASLt's samples, each own
// implementation in the files (the plan, and each forced tile, split or
// kernel path but the -hot ones) with its median over cuBLASLt's and its
// plan: the table a forced sweep is read from, alone where the files hold
// no plan's samples (a sweep of forced tiles only; exit status 0).
//
// With -twins it lists the forced tiles that logged the plan's own tile at
// a shape (the same launch, timed again, before or after the plan in the
// order they first ran) and, over those timed after it, the median of
// twin / plan: how much a later position alone moves a time.
//
// Exit status: 0 when every counted shape is within, 1 when one is not, 2
// on bad flags or input (a file that cannot be read, a malformed benchmark
// line, no results of the unit to compare).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchunit"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// families: a benchmark's own implementation and its cuBLASLt reference.
// (benchfmt drops the names' Benchmark prefix.)
var families = map[string]struct{ label, own, ref string }{
	"Gemm":    {"16-bit", "own", "cublaslt"},
	"GemmFP8": {"fp8", "own-fp8", "cublaslt-fp8"},
}

// gemmName is what a GEMM benchmark's name says: the comparison it belongs
// to (family, shape, rows) and its implementation.
type gemmName struct {
	key
	impl string
}

// parseGemmName splits [Benchmark]Gemm/IMPL/SHAPE/M=m/... (with or
// without GOMAXPROCS's -N) into its parts, the family without the prefix;
// ok is false for any other name.
func parseGemmName(name string) (gemmName, bool) {
	base, rest, _ := strings.Cut(strings.TrimPrefix(name, "Benchmark"), "/")
	if _, known := families[base]; !known {
		return gemmName{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 3 || parts[0] == "" || parts[1] == "" {
		return gemmName{}, false
	}
	mv, found := strings.CutPrefix(parts[2], "M=")
	if !found {
		return gemmName{}, false
	}
	if i := strings.IndexByte(mv, '-'); i >= 0 && len(parts) == 3 {
		mv = mv[:i] // the last part carries GOMAXPROCS
	}
	m, err := strconv.Atoi(mv)
	if err != nil || m < 1 {
		return gemmName{}, false
	}
	return gemmName{key{base, parts[1], m}, parts[0]}, true
}

// key is one comparison: a family's shape at M.
type key struct {
	family, shape string
	m             int
}

// row is one comparison's outcome.
type row struct {
	key
	own, ref   float64
	nOwn, nRef int
	verdict    string // within, OUTSIDE, too few
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gemmvs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	within := fs.Float64("within", 15, "the margin, in per cent of cuBLASLt's time")
	unit := fs.String("unit", "us/gemm", "the benchmark unit to compare: a time per operation")
	minN := fs.Int("min", 3, "the fewest samples a side for a verdict")
	from := fs.Int("from", 64, "the smallest M compared (issue 22's bar: M >= 64; 1 for every M)")
	headroom := fs.Float64("headroom", 0, "also list the shapes where another own implementation ran at least this many per cent under the plan's time (0: none)")
	each := fs.Bool("each", false, "also list every own implementation's median over cuBLASLt's at each shape (the plan, forced tiles, splits, paths)")
	twins := fs.Bool("twins", false, "also list the forced implementations that logged the plan's own tile at a shape (the same launch timed again): how much a later position alone moves a time")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: gemmvs [-within PCT] [-from M] [-unit UNIT] [-min N] [-headroom PCT] [-each] [-twins] FILE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case fs.NArg() == 0:
		fmt.Fprintln(stderr, "gemmvs: no benchmark files given (go test -bench output)")
		return 2
	case !(*within >= 0 && *within < 1000):
		fmt.Fprintf(stderr, "gemmvs: -within %v: a margin in per cent, from 0 to 1000\n", *within)
		return 2
	case *minN < 1:
		fmt.Fprintf(stderr, "gemmvs: -min %d: at least 1\n", *minN)
		return 2
	case *from < 1:
		fmt.Fprintf(stderr, "gemmvs: -from %d: a row count, at least 1\n", *from)
		return 2
	case !(*headroom >= 0 && *headroom < 100):
		fmt.Fprintf(stderr, "gemmvs: -headroom %v: a share of the plan's time in per cent, from 0 (none listed) to under 100\n", *headroom)
		return 2
	case !timeUnit.MatchString(*unit):
		// A verdict reads lower as faster: a rate would turn it around.
		fmt.Fprintf(stderr, "gemmvs: -unit %q: a time per operation (ns, us, ms or sec per something), e.g. us/gemm\n", *unit)
		return 2
	}
	samples := map[key]map[string][]float64{}
	plans := map[key]map[string]string{}
	order := map[key][]string{}
	for _, file := range fs.Args() {
		b, err := os.ReadFile(file)
		if err == nil {
			err = read(file, b, *unit, *from, samples)
		}
		if err == nil {
			err = readPlans(file, b, plans, order)
		}
		if err != nil {
			fmt.Fprintf(stderr, "gemmvs: %v\n", err)
			return 2
		}
	}
	rows := compare(samples, *within, *minN)
	var eRows []eachRow
	if *each {
		eRows = eachRows(samples)
	}
	var tRows []twin
	if *twins {
		tRows = twinRows(samples, plans, order, *minN)
	}
	if len(rows) == 0 && len(eRows) == 0 && len(tRows) == 0 {
		fmt.Fprintf(stderr, "gemmvs: %s: no shape with both the own GEMM's and cuBLASLt's %s\n", strings.Join(fs.Args(), ", "), *unit)
		return 2
	}
	// A sweep without cuBLASLt's or the plan's samples has -each's and
	// -twins's tables alone: no verdicts, nothing counted.
	var outside int
	var err error
	if len(rows) > 0 {
		outside, err = report(stdout, rows, *within, *unit, plans)
	}
	if err == nil && *headroom > 0 {
		err = reportHeadroom(stdout, headroomRows(samples, *headroom, *minN), *headroom, *unit, plans)
	}
	if err == nil && *each {
		err = reportEach(stdout, eRows, *unit, plans)
	}
	if err == nil && *twins {
		err = reportTwins(stdout, tRows, *unit, plans)
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "gemmvs: %v\n", err)
		return 2
	case outside > 0:
		return 1
	}
	return 0
}

// timeUnit is what -unit takes: a time per operation.
var timeUnit = regexp.MustCompile(`^(ns|us|ms|sec)/[A-Za-z0-9_.-]+$`)

// read adds the samples of unit at from rows or more in file's contents b,
// by comparison and implementation.
func read(file string, b []byte, unit string, from int, samples map[key]map[string][]float64) error {
	r := benchfmt.NewReader(bytes.NewReader(b), file)
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.SyntaxError:
			return fmt.Errorf("%w (expected go test -bench output)", rec)
		case *benchfmt.Result:
			n, ok := parseGemmName(rec.Name.String())
			if !ok || n.m < from {
				continue
			}
			v, ok := value(rec, unit)
			if !ok {
				continue
			}
			if !(v > 0) {
				_, line := rec.Pos()
				return fmt.Errorf("%s:%d: %s %v %s: a time must be positive", file, line, rec.Name, v, unit)
			}
			if samples[n.key] == nil {
				samples[n.key] = map[string][]float64{}
			}
			samples[n.key][n.impl] = append(samples[n.key][n.impl], v)
		}
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// planLine is a plan a benchmark logged under -test.v, indented below its
// name ("    gemm_bench_test.go:146: plan wg3/2").
var planLine = regexp.MustCompile(`^\s+\S+:\d+: plan (\S.*?)\s*$`)

// readPlans adds the plans logged in file's contents b by comparison and
// implementation: a plan line belongs to the benchmark named last above it
// (go test prints a benchmark's logs after its name, its result, or
// "--- BENCH: " and its name). One implementation's plans that differ across samples read
// "varies". order gets each comparison's implementations in the order
// they first ran (the first file's where several timed them).
func readPlans(file string, b []byte, plans map[key]map[string]string, order map[key][]string) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cur gemmName
	have := false
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "--- BENCH: ")
		if strings.HasPrefix(line, "Benchmark") {
			name, _, _ := strings.Cut(line, "\t")
			name, _, _ = strings.Cut(strings.TrimSpace(name), " ")
			cur, have = parseGemmName(name)
			if have && !slices.Contains(order[cur.key], cur.impl) {
				order[cur.key] = append(order[cur.key], cur.impl)
			}
			continue
		}
		m := planLine.FindStringSubmatch(line)
		if m == nil || !have {
			continue
		}
		if plans[cur.key] == nil {
			plans[cur.key] = map[string]string{}
		}
		if p, ok := plans[cur.key][cur.impl]; ok && p != m[1] {
			plans[cur.key][cur.impl] = "varies"
		} else {
			plans[cur.key][cur.impl] = m[1]
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// planOf is impl's logged plan at k, or "-".
func planOf(plans map[key]map[string]string, k key, impl string) string {
	if p, ok := plans[k][impl]; ok {
		return p
	}
	return "-"
}

// value is rec's measurement in unit, which benchfmt may have stored tidied
// (ns/op as sec/op).
func value(rec *benchfmt.Result, unit string) (float64, bool) {
	if v, ok := rec.Value(unit); ok {
		return v, true
	}
	scale, tidy := benchunit.Tidy(1, unit)
	v, ok := rec.Value(tidy)
	return v / scale, ok
}

// median is the sample's median (benchmath, no assumption on its
// distribution).
func median(v []float64) float64 {
	return benchmath.AssumeNothing.Summary(benchmath.NewSample(v, &benchmath.DefaultThresholds), 0.95).Center
}

// compare makes a row for every comparison with both sides, in family, M
// and shape order.
func compare(samples map[key]map[string][]float64, within float64, minN int) []row {
	var rows []row
	for k, impls := range samples {
		fam := families[k.family]
		own, ref := impls[fam.own], impls[fam.ref]
		if len(own) == 0 || len(ref) == 0 {
			continue
		}
		r := row{key: k, own: median(own), ref: median(ref), nOwn: len(own), nRef: len(ref)}
		switch {
		case len(own) < minN || len(ref) < minN:
			r.verdict = "too few"
		case r.own <= r.ref*(1+within/100):
			r.verdict = "within"
		default:
			r.verdict = "OUTSIDE"
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int { return compareKeys(a.key, b.key) })
	return rows
}

// alt is a shape where another own implementation beat the plan.
type alt struct {
	key
	plan, best, ref float64 // ref: 0 without cuBLASLt's samples
	impl            string
	nPlan, nBest    int
}

// headroomRows is every comparison whose plan has minN samples or more
// and where the fastest other own implementation of minN samples or more
// (the -hot ones left out) has a median at least pct % under the plan's,
// in compare's order.
func headroomRows(samples map[key]map[string][]float64, pct float64, minN int) []alt {
	var alts []alt
	for k, impls := range samples {
		fam := families[k.family]
		own := impls[fam.own]
		if len(own) < minN {
			continue
		}
		a := alt{key: k, plan: median(own), nPlan: len(own)}
		for impl, v := range impls {
			if !strings.HasPrefix(impl, fam.own+"-") || strings.HasSuffix(impl, "-hot") || len(v) < minN {
				continue
			}
			// Ties go to the name first in order, so the output is stable.
			if b := median(v); a.impl == "" || b < a.best || b == a.best && impl < a.impl {
				a.best, a.impl, a.nBest = b, impl, len(v)
			}
		}
		if a.impl == "" || a.best > a.plan*(1-pct/100) {
			continue
		}
		if ref := impls[fam.ref]; len(ref) >= minN {
			a.ref = median(ref)
		}
		alts = append(alts, a)
	}
	slices.SortFunc(alts, func(a, b alt) int { return compareKeys(a.key, b.key) })
	return alts
}

// reportHeadroom writes headroomRows' table, with the implementations'
// plans where the files logged any.
func reportHeadroom(w io.Writer, alts []alt, pct float64, unit string, plans map[key]map[string]string) error {
	if len(alts) == 0 {
		_, err := fmt.Fprintf(w, "\nheadroom: no own implementation %g %% or more under the plan's %s\n", pct, unit)
		return err
	}
	fmt.Fprintf(w, "\nheadroom: own implementations %g %% or more under the plan's %s\n", pct, unit)
	t := newPlanTable(w, plans, fmt.Sprintf("family\tM\tshape\tplan\tfaster\t%s\tfaster / plan\tfaster / cuBLASLt\tsamples", unit), "plan's tile\tfaster's tile")
	for _, a := range alts {
		vsRef := "-"
		if a.ref > 0 {
			vsRef = fmt.Sprintf("%.3f", a.best/a.ref)
		}
		t.row(fmt.Sprintf("%s\t%d\t%s\t%.5g\t%s\t%.5g\t%.3f\t%s\t%d+%d", families[a.family].label, a.m, a.shape, a.plan, a.impl, a.best, a.best/a.plan, vsRef, a.nPlan, a.nBest),
			a.key, families[a.family].own, a.impl)
	}
	return t.flush()
}

// eachRow is one own implementation at one comparison.
type eachRow struct {
	key
	impl       string
	own, ref   float64
	nOwn, nRef int
}

// eachRows is, for every comparison with cuBLASLt's samples, every own
// implementation (the family's own, and own-... but the -hot ones), in
// compare's order and, within a comparison, the plan first, then by name.
func eachRows(samples map[key]map[string][]float64) []eachRow {
	var rows []eachRow
	for k, impls := range samples {
		fam := families[k.family]
		ref := impls[fam.ref]
		if len(ref) == 0 {
			continue
		}
		r := median(ref)
		for impl, v := range impls {
			if impl != fam.own && !strings.HasPrefix(impl, fam.own+"-") || strings.HasSuffix(impl, "-hot") {
				continue
			}
			rows = append(rows, eachRow{key: k, impl: impl, own: median(v), ref: r, nOwn: len(v), nRef: len(ref)})
		}
	}
	slices.SortFunc(rows, func(a, b eachRow) int {
		if c := compareKeys(a.key, b.key); c != 0 {
			return c
		}
		own := families[a.family].own
		if (a.impl == own) != (b.impl == own) {
			if a.impl == own {
				return -1
			}
			return 1
		}
		return strings.Compare(a.impl, b.impl)
	})
	return rows
}

// reportEach writes eachRows' table, with each implementation's plan where
// the files logged any.
func reportEach(w io.Writer, rows []eachRow, unit string, plans map[key]map[string]string) error {
	fmt.Fprintf(w, "\neach own implementation over cuBLASLt's %s\n", unit)
	t := newPlanTable(w, plans, fmt.Sprintf("family\tM\tshape\timplementation\t%s\t/ cuBLASLt\tsamples", unit), "plan")
	for _, r := range rows {
		t.row(fmt.Sprintf("%s\t%d\t%s\t%s\t%.5g\t%.3f\t%d+%d", families[r.family].label, r.m, r.shape, r.impl, r.own, r.own/r.ref, r.nOwn, r.nRef), r.key, r.impl)
	}
	return t.flush()
}

// twin is a forced own implementation that logged the plan's own tile at
// a comparison: the same launch, timed again at another position.
type twin struct {
	key
	impl         string
	plan, twin   float64
	nPlan, nTwin int
	after        bool // timed after the plan (order)
}

// twinRows is every twin with minN samples or more beside a plan with as
// many, in compare's order and then by name: the forced tiles (not their
// -nomc forms, whose plan reads the same without the multicast) whose
// logged plan is the plan's.
func twinRows(samples map[key]map[string][]float64, plans map[key]map[string]string, order map[key][]string, minN int) []twin {
	var ts []twin
	for k, impls := range samples {
		own := families[k.family].own
		p, ok := plans[k][own]
		if !ok || p == "varies" || len(impls[own]) < minN {
			continue
		}
		for impl, v := range impls {
			// Forced tiles only (own-tma-..., own-fp8-tma-...): a kernel
			// path's variant (own-nomc, own-cpasync, ...) may log the same
			// plan and launch something else.
			if !strings.HasPrefix(impl, own+"-tma-") || strings.HasSuffix(impl, "-nomc") || plans[k][impl] != p || len(v) < minN {
				continue
			}
			ts = append(ts, twin{key: k, impl: impl, plan: median(impls[own]), twin: median(v), nPlan: len(impls[own]), nTwin: len(v),
				after: slices.Index(order[k], impl) > slices.Index(order[k], own)})
		}
	}
	slices.SortFunc(ts, func(a, b twin) int {
		if c := compareKeys(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.impl, b.impl)
	})
	return ts
}

// reportTwins writes twinRows' table and, for the twins timed after the
// plan, the median of twin / plan with its 10th and 90th percentiles.
func reportTwins(w io.Writer, ts []twin, unit string, plans map[key]map[string]string) error {
	if len(ts) == 0 {
		_, err := fmt.Fprintf(w, "\ntwins: no forced implementation logged the plan's tile\n")
		return err
	}
	fmt.Fprintf(w, "\ntwins: forced implementations on the plan's tile, %s\n", unit)
	t := newPlanTable(w, plans, fmt.Sprintf("family\tM\tshape\ttwin\tplan %s\ttwin %s\ttwin / plan\ttimed\tsamples", unit, unit), "plan")
	var later []float64
	for _, x := range ts {
		when := "before"
		if x.after {
			when = "after"
			later = append(later, x.twin/x.plan)
		}
		t.row(fmt.Sprintf("%s\t%d\t%s\t%s\t%.5g\t%.5g\t%.3f\t%s\t%d+%d", families[x.family].label, x.m, x.shape, x.impl, x.plan, x.twin, x.twin/x.plan, when, x.nPlan, x.nTwin),
			x.key, families[x.family].own)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(later) == 0 {
		return nil
	}
	slices.Sort(later)
	at := func(q float64) float64 { return later[min(len(later)-1, int(q*float64(len(later))))] }
	_, err := fmt.Fprintf(w, "%d twins timed after the plan: twin / plan median %.4f, 10th-90th percentile %.4f-%.4f\n", len(later), at(0.5), at(0.1), at(0.9))
	return err
}

// planTable is a tab-aligned table whose last columns, where the files
// logged plans, are the plans of the rows' implementations.
type planTable struct {
	tw     *tabwriter.Writer
	plans  map[key]map[string]string
	logged bool
}

// newPlanTable starts a table on w under head, with planHead's columns
// where plans holds any.
func newPlanTable(w io.Writer, plans map[key]map[string]string, head, planHead string) *planTable {
	t := &planTable{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0), plans: plans, logged: len(plans) > 0}
	if t.logged {
		head += "\t" + planHead
	}
	fmt.Fprintln(t.tw, head)
	return t
}

// row writes line and, where plans were logged, the plan of each of impls
// at k.
func (t *planTable) row(line string, k key, impls ...string) {
	if t.logged {
		for _, impl := range impls {
			line += "\t" + planOf(t.plans, k, impl)
		}
	}
	fmt.Fprintln(t.tw, line)
}

// flush writes the table out.
func (t *planTable) flush() error { return t.tw.Flush() }

// compareKeys orders comparisons by family, M and shape.
func compareKeys(a, b key) int {
	if c := strings.Compare(a.family, b.family); c != 0 {
		return c
	}
	if a.m != b.m {
		return a.m - b.m
	}
	return strings.Compare(a.shape, b.shape)
}

// report writes the table (the own GEMM's plan last, where the files
// logged any) and the counts, and returns how many counted shapes are
// outside.
func report(w io.Writer, rows []row, within float64, unit string, plans map[key]map[string]string) (int, error) {
	t := newPlanTable(w, plans, fmt.Sprintf("family\tM\tshape\town %s\tcuBLASLt\town / cuBLASLt\tsamples\tverdict", unit), "plan")
	for _, r := range rows {
		t.row(fmt.Sprintf("%s\t%d\t%s\t%.5g\t%.5g\t%.3f\t%d+%d\t%s", families[r.family].label, r.m, r.shape, r.own, r.ref, r.own/r.ref, r.nOwn, r.nRef, r.verdict), r.key, families[r.family].own)
	}
	if err := t.flush(); err != nil {
		return 0, err
	}
	type group struct {
		family string
		m      int
	}
	var order []group
	counts := map[group]map[string]int{}
	for _, r := range rows {
		g := group{r.family, r.m}
		if counts[g] == nil {
			counts[g] = map[string]int{}
			order = append(order, g)
		}
		counts[g][r.verdict]++
	}
	outside := 0
	fmt.Fprintln(w)
	for _, g := range order {
		c := counts[g]
		outside += c["OUTSIDE"]
		line := fmt.Sprintf("%s M=%d: %d of %d shapes within %g %% of cuBLASLt", families[g.family].label, g.m, c["within"], c["within"]+c["OUTSIDE"]+c["too few"], within)
		if c["too few"] > 0 {
			line += fmt.Sprintf(" (%d with too few samples for a verdict)", c["too few"])
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return 0, err
		}
	}
	return outside, nil
}
