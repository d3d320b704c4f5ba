package profile

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// TimedEnergy is the energy, in joules, the sampled GPUs used from..to
// (times as Sample.T), summed over them: each GPU's energy counter read
// at from and at to. A window rarely starts or ends on a sample, so each
// end is interpolated between the readings on either side of it (the
// power taken as constant between two readings); the first and last
// readings inside the window would lose up to a sampling period at each
// end, a few per cent of a short repeat.
//
// ok is false, and the energy unknown rather than 0, unless every GPU in
// samples has counter readings at or before from and at or after to, its
// counter did not go back (a driver reloaded), the window spans at least
// MinCounterUpdates of the counter's updates, and the GPUs used some
// energy: a cell with a GPU that has no counter, a window the readings do
// not cover or one too short for the counter gets no energy figure, never
// a partial or a wrong one.
// MinCounterUpdates is how many updates of a GPU's energy counter a
// window must span for TimedEnergy. The driver's counter advances in
// steps (on an H100, passes of 20-30 ms under the 50 ms sampler gave
// 0.004 to 0.045 J per token for one cell, the latter an impossible
// 2.2 kW): interpolating between readings is off by up to one step at
// each end, so ten steps keep the error within about 20 %.
const MinCounterUpdates = 10

func TimedEnergy(samples []Sample, from, to time.Duration) (joules float64, ok bool) {
	if to <= from {
		return 0, false
	}
	type reading struct {
		t time.Duration
		e float64
	}
	byGPU := map[int][]reading{}
	var gpus []int
	for _, s := range samples {
		if _, seen := byGPU[s.GPU]; !seen {
			gpus = append(gpus, s.GPU)
			byGPU[s.GPU] = nil
		}
		if !math.IsNaN(s.EnergyJ) {
			byGPU[s.GPU] = append(byGPU[s.GPU], reading{s.T, s.EnergyJ})
		}
	}
	if len(gpus) == 0 {
		return 0, false
	}
	// at is the counter at t, between the readings around it: rs covers
	// t, so a reading at or after it exists, and one before it unless
	// that one is at t.
	at := func(rs []reading, t time.Duration) float64 {
		i, found := slices.BinarySearchFunc(rs, t, func(r reading, t time.Duration) int { return cmp.Compare(r.t, t) })
		if found {
			return rs[i].e
		}
		a, b := rs[i-1], rs[i]
		return a.e + (b.e-a.e)*float64(t-a.t)/float64(b.t-a.t)
	}
	for _, g := range gpus {
		rs := byGPU[g]
		slices.SortStableFunc(rs, func(a, b reading) int { return cmp.Compare(a.t, b.t) })
		if len(rs) < 2 || rs[0].t > from || rs[len(rs)-1].t < to {
			return 0, false
		}
		changes := 0
		var first, last time.Duration
		for i := 1; i < len(rs); i++ {
			if rs[i].e != rs[i-1].e {
				if changes == 0 {
					first = rs[i].t
				}
				last = rs[i].t
				changes++
			}
		}
		// The counter's update period, from the readings: with fewer than
		// two updates it is unknown, and so is the energy.
		if changes < 2 || to-from < MinCounterUpdates*(last-first)/time.Duration(changes-1) {
			return 0, false
		}
		e := at(rs, to) - at(rs, from)
		if e < 0 {
			return 0, false
		}
		joules += e
	}
	return joules, joules > 0
}
