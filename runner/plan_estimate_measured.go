package runner

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/xrun-dev/xrun/engine/profile"
	"github.com/xrun-dev/xrun/results"
)

// measurements are the cells of a results directory, as estimates use
// them.
type measurements struct {
	info  EstimateResults
	dir   string
	cells []measured
	// dev is the GPU the results ran on (kind H100, ...), to scale their
	// times to the GPU estimated for.
	dev    profile.Device
	kind   string
	memory float64
}

type measured struct {
	cell *results.Cell
	// timed is the median total latency of its timed passes.
	timed time.Duration
	w     workload
	sim   simulation // on the results' GPU; zero when w is unknown
	known bool       // w and sim are
}

// readMeasurements reads a results directory for est.
func readMeasurements(dir string, est *Estimate) (*measurements, error) {
	res, path, err := results.Load(dir)
	if err != nil {
		return nil, err
	}
	m := &measurements{dir: filepath.Dir(path), info: EstimateResults{Dir: dir, Study: res.Name}}
	if len(res.Environment.GPUs) == 0 {
		m.info.Unused = "they were measured without a GPU"
		return m, nil
	}
	m.info.GPU = res.Environment.GPUs[0].Name
	var ok bool
	if m.dev, m.kind, m.memory, ok = estimateDevice(m.info.GPU); !ok {
		m.info.Unused = fmt.Sprintf("%s has no known ceilings to scale its times by", m.info.GPU)
		return m, nil
	}
	// The cells ran with the KV paging their switches set (recorded when
	// not the defaults), which decided how many requests ran at once.
	pg := pagingFrom(func(k string) string { return res.Environment.Switches[k] })
	for i := range res.Cells {
		c := &res.Cells[i]
		lat := medianMetric(c, "total_latency_ms")
		if c.Status != results.StatusOK || lat <= 0 || c.Params["engine"] == "cpu" {
			continue
		}
		mc := measured{cell: c, timed: time.Duration(lat * float64(time.Millisecond))}
		if w, ok := flatWorkload(c.Params); ok {
			w.paging = pg
			if sim, why := w.simulate(m.dev, m.memory); why == "" && sim.pass > 0 {
				mc.w, mc.sim, mc.known = w, sim, true
			}
		}
		m.cells = append(m.cells, mc)
	}
	return m, nil
}

// medianMetric is a cell's median of metric k over its repeats; 0 when
// none has it.
func medianMetric(c *results.Cell, k string) float64 {
	if s, ok := c.Summary[k]; ok && s.N > 0 {
		return s.Median
	}
	var v []float64
	for _, r := range c.Repeats {
		if x, ok := r[k]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// same estimates c from its own measurement, when the results hold it
// (the same id, or the same parameters under another id).
func (m *measurements) same(c *Cell, sim simulation, est *Estimate, ce *CellEstimate) bool {
	if m.info.Unused != "" {
		return false
	}
	flat := results.Params(c.Flat())
	var mc *measured
	for i := range m.cells {
		x := &m.cells[i]
		if x.cell.ID == c.ID {
			mc = x
			break
		}
		if mc == nil && paramDistance(flat, x.cell.Params) == 0 && sameWork(flat, x.cell.Params) {
			mc = x
		}
	}
	if mc == nil {
		return false
	}
	// Times scale from the results' GPU to est's by the two rooflines of
	// this cell; on the same kind of GPU they stand as measured.
	ratio := 1.0
	if m.kind != est.GPU {
		if !mc.known || sim.pass <= 0 {
			return false
		}
		ratio = (sim.pass + sim.warmup) / (mc.sim.pass + mc.sim.warmup)
	}
	*ce = CellEstimate{Basis: BasisMeasured, From: mc.cell.ID}
	ce.Pass = scale(mc.timed, ratio)
	if mc.known {
		// The warm-up at the efficiency the timed pass reached, moved to
		// the warm-up's batch.
		ce.Warmup = scale(mc.timed, ratio*mc.sim.warmup/mc.sim.pass*mc.w.derate(mc.sim.slots)/mc.w.derate(mc.sim.warmBatch()))
		ce.Efficiency = mc.sim.pass / mc.timed.Seconds()
	}
	if pr := mc.cell.Profile; pr != nil && pr.PassMetrics["total_latency_ms"] > 0 {
		ce.Profiled = scale(time.Duration(pr.PassMetrics["total_latency_ms"]*float64(time.Millisecond)), ratio) + ce.Warmup
	}
	// The worker's own record, when the directory has it, says how long its
	// passes took, warm-up included, and how long it took to start.
	rec, err := readCellRecord(m.dir, mc.cell.ID)
	if err != nil || rec == nil {
		return true
	}
	rc := &runCell{cell: &Cell{ID: mc.cell.ID}, wc: &workerCell{Params: mc.cell.Params}}
	if p, ok := paceOf(rc, rec); ok {
		whole := scale(p.pass, ratio)
		ce.Warmup = min(ce.Warmup, whole)
		ce.Pass = whole - ce.Warmup
		if p.setup > 0 {
			ce.Startup = p.setup
		}
	}
	for _, q := range rec.Passes {
		if q.Profiled && q.Finished.After(q.Started) {
			ce.Profiled = scale(q.Finished.Sub(q.Started), ratio)
		}
	}
	return true
}

// similar estimates c from the measured cell most like it: that cell's
// efficiency against the roofline, applied to c's (the slowest of the
// nearest, as estimateFirst picks, erring long). Only a cell of the same
// engine counts.
func (m *measurements) similar(c *Cell, w workload, sim simulation, est *Estimate, ce *CellEstimate) bool {
	if m.info.Unused != "" || sim.pass <= 0 {
		return false
	}
	flat := results.Params(c.Flat())
	best, eff, from := -1, 0.0, ""
	for i := range m.cells {
		x := &m.cells[i]
		if !x.known || !sameEngine(w.engine, x.w.engine) {
			continue
		}
		d := paramDistance(flat, x.cell.Params)
		// The measured share of the roofline, without its GEMM path's
		// derating (c's is applied below).
		e := x.sim.pass / x.timed.Seconds() / x.w.derate(x.sim.slots)
		if best < 0 || d < best || d == best && e < eff {
			best, eff, from = d, e, x.cell.ID
		}
	}
	if best < 0 {
		return false
	}
	pass, warm := min(eff*w.derate(sim.slots), 1), min(eff*w.derate(sim.warmBatch()), 1)
	*ce = CellEstimate{Basis: BasisSimilar, From: from, Distance: best, Efficiency: pass,
		Pass: seconds(sim.pass / pass), Warmup: seconds(sim.warmup / warm)}
	return true
}

// sameEngine reports whether cells of engines a and b measure the same
// engine: auto is taken to be cuda, as on a GPU.
func sameEngine(a, b string) bool {
	norm := func(e string) string {
		if e == "auto" {
			return "cuda"
		}
		return e
	}
	return norm(a) == norm(b)
}

// sameWork reports whether a and b agree on the parameters paramDistance
// leaves out.
func sameWork(a, b results.Params) bool {
	for _, k := range workParams {
		if formatValue(a[k]) != formatValue(b[k]) {
			return false
		}
	}
	return true
}
