//go:build !(cgo && linux)

package profile

import "fmt"

// OpenNVML needs cgo on Linux (go-nvml loads libnvidia-ml through cgo);
// this build has no telemetry.
func OpenNVML(uuids []string) (Source, error) {
	return nil, fmt.Errorf("%w: this xrun was built without cgo, so it cannot load NVML", ErrNoTelemetry)
}

// VisibleGPUName is "" without NVML.
func VisibleGPUName() string { return "" }
