package engine

import "fmt"

// NeedsMLA reports whether a model has the DeepSeek-V3 architecture's ops
// (multi-head latent attention, grouped sigmoid routing), which only
// backends implementing model.MLABackend run (the CPU and CUDA backends).
func NeedsMLA(mc ModelConfig) bool { return mc.MLA() || mc.GroupedRouting() }

// NoMLAMessage says that backend cannot run model (NeedsMLA) and what to
// do instead (engine.New's refusal).
func NoMLAMessage(backend, model string) string {
	return fmt.Sprintf("model %s has the DeepSeek-V3 architecture (multi-head latent attention, grouped routing), and the %s backend has no MLA kernels; run it on engine cpu or cuda", model, backend)
}

// noMLAError is New's refusal of a model the backend cannot run.
func noMLAError(backend string, mc ModelConfig) error {
	return &ParamError{Field: "engine", Value: backend, Msg: NoMLAMessage(backend, mc.Name)}
}
