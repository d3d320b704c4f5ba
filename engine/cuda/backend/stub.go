//go:build !(cgo && linux)

package backend

import (
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
)

// New reports that this binary was built without the CUDA backend.
func New(model.BackendOptions) (model.Backend, error) { return nil, cuda.ErrNotCompiled }
