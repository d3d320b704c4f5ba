package cpu

import "github.com/xrun-dev/xrun/engine/model"

var _ model.ExpertShard = (*Backend)(nil)

// MoEShard runs this rank's experts first.. only: the routed rows of
// other experts are not gathered, so a rank's cost is its experts' share
// of the tokens (model.ExpertShard).
func (b *Backend) MoEShard(out, x, idx, weights, gateUp, down model.Tensor, rows, k, first int) {
	b.moeRun(out, x, idx, weights, gateUp, down, rows, k, first, true)
}
