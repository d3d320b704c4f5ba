package backend

import "github.com/xrun-dev/xrun/engine"

// The engine knows backends by name only; this package adds "cuda".
func init() { engine.RegisterBackend("cuda", New) }
