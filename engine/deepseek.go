package engine

import "fmt"

// NeedsMLA reports whether a model has the DeepSeek-V3 architecture's ops
// (multi-head latent attention, grouped sigmoid routing), which only
// backends implementing model.MLABackend run: the CPU backend, not (yet)
// the CUDA one.
func NeedsMLA(mc ModelConfig) bool { return mc.MLA() || mc.GroupedRouting() }

// NoMLAMessage says that backend cannot run model (NeedsMLA) and what to
// do instead: the plan's refusal and engine.New's say the same.
func NoMLAMessage(backend, model string) string {
	return fmt.Sprintf("model %s has the DeepSeek-V3 architecture (multi-head latent attention, grouped routing), and the %s backend has no MLA kernels yet; run it on engine cpu", model, backend)
}

// noMLAError is New's refusal of a model the backend cannot run.
func noMLAError(backend string, mc ModelConfig) error {
	return &ParamError{Field: "engine", Value: backend, Msg: NoMLAMessage(backend, mc.Name)}
}
