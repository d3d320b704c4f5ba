package runner

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
)

// CellOrder is the order in which a run runs its cells. results.json lists
// them in the plan's order whatever it is.
type CellOrder string

const (
	// OrderPlan runs the cells in the plan's order (Options' zero value).
	OrderPlan CellOrder = "plan"
	// OrderRandom runs them in an order shuffled with a seed, recorded in
	// results.json and the log: a machine that drifts (warming up,
	// throttling, a neighbour's load) then does not favour the cells that
	// happen to come first, nor line each axis value up with one phase of
	// the drift, and a seed reproduces the order.
	OrderRandom CellOrder = "random"
)

// ParseCellOrder reads --order.
func ParseCellOrder(s string) (CellOrder, error) {
	switch o := CellOrder(strings.TrimSpace(s)); o {
	case OrderPlan, OrderRandom:
		return o, nil
	}
	return "", &OptionError{"--order", fmt.Sprintf("%q: expected plan or random", s)}
}

// maxDrawnSeed bounds the seeds a run draws for itself: small enough to
// read, type and survive every JSON reader (doubles hold integers to 2^53).
const maxDrawnSeed = 1<<31 - 1

// orderSeed is the seed the cells of this run are shuffled with, 0 when
// they run in the plan's order: Options.OrderSeed, else one drawn at random
// (from a source the runtime seeds, which differs from run to run as one
// derived from the clock would).
func (s *study) orderSeed() (int64, error) {
	switch s.o.Order {
	case "":
		if s.o.OrderSeed == 0 {
			return 0, nil
		}
	case OrderPlan:
		if s.o.OrderSeed != 0 {
			return 0, &OptionError{"--order-seed", "only with --order random: --order plan runs the cells in the plan's order"}
		}
		return 0, nil
	case OrderRandom:
	default:
		return 0, &OptionError{"--order", fmt.Sprintf("%q: expected plan or random", s.o.Order)}
	}
	switch {
	case s.o.OrderSeed < 0:
		return 0, &OptionError{"--order-seed", fmt.Sprintf("%d: expected an integer >= 1 (results.json's order_seed)", s.o.OrderSeed)}
	case s.o.OrderSeed > 0:
		return s.o.OrderSeed, nil
	}
	return 1 + rand.Int64N(maxDrawnSeed), nil
}

// shuffled returns queue in the order seed gives it: a Fisher-Yates
// shuffle driven by math/rand/v2's PCG, whose output is specified, and a
// multiply-shift range reduction written here, so that a seed gives the
// same order on every platform and with every Go release.
func shuffled(queue []*runCell, seed int64) []*runCell {
	out := slices.Clone(queue)
	src := rand.NewPCG(uint64(seed), 0x7872756e) // "xrun"
	for i := len(out) - 1; i > 0; i-- {
		j, _ := bits.Mul64(src.Uint64(), uint64(i+1))
		out[i], out[j] = out[j], out[i]
	}
	return out
}
