package engine

// Ceilings are the roofline ceilings a backend measured on its device,
// for a GPU xrun knows none for: the best rate of a device-to-device copy
// (bytes read plus written per second) and of a large GEMM in the compute
// dtype. The runner keeps them in the cell's record, where the roofline
// (engine/profile) finds them.
type Ceilings struct {
	BytesPerSec float64 `json:"bytes_per_s"`
	FLOPs       float64 `json:"flop_per_s"`
	// FP8FLOPs is the FP8 GEMM rate where measured (0: unknown; the
	// roofline then runs FP8 GEMMs at FLOPs, or at the ratio to it xrun
	// knows for the GPU: profile.MeasuredDevice).
	FP8FLOPs float64 `json:"fp8_flop_per_s,omitempty"`
	// Device is the GPU's name, DType the GEMM's, Source how and when
	// they were measured.
	Device string `json:"device"`
	DType  string `json:"dtype"`
	Source string `json:"source"`
}

// CeilingsReporter is an Engine whose backend may have measured its
// device's ceilings; Ceilings is nil where it did not (the CPU, a GPU with
// known ceilings).
type CeilingsReporter interface {
	Ceilings() *Ceilings
}

func (e *engine) Ceilings() *Ceilings {
	if r, ok := e.be.(interface{ Ceilings() *Ceilings }); ok {
		return r.Ceilings()
	}
	return nil
}
