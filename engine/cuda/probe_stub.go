//go:build !(cgo && linux)

package cuda

// ProbeHere reports that this binary has no CUDA backend.
func ProbeHere() (Devices, error) {
	return Devices{}, &NoGPUError{Reason: "no usable GPU: " + ErrNotCompiled.Error()}
}
