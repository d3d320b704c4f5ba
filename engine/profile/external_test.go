package profile

import (
	"strings"
	"testing"
	"time"

	"github.com/xrun-dev/xrun/engine"
)

func TestDiagnoseSummary(t *testing.T) {
	mc, _ := engine.ZooModel("tinyllama-1.1b")
	dev, _ := GPUDevice("NVIDIA H100 80GB HBM3")
	stats := []KernelStat{
		{Name: "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_cublas", TotalNs: 600_000, Instances: 100, AvgNs: 6000, TimePct: 60},
		{Name: "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", TotalNs: 300_000, Instances: 50, AvgNs: 6000, TimePct: 30},
		{Name: "fmha_v2_flash_attention_fp16_64_128_S_q_paged_kv_64_causal_sm90_kernel", TotalNs: 100_000, Instances: 20, AvgNs: 5000, TimePct: 10},
	}
	// Ten decode iterations of 64 requests, two of them in the window.
	res := &engine.Result{}
	for i := range 10 {
		res.Iterations = append(res.Iterations, engine.IterationRecord{Index: i, GenRequests: 64, Start: time.Duration(i) * time.Millisecond,
			Duration: time.Millisecond, Profiled: i >= 4 && i <= 5})
	}
	res.Requests = []engine.RequestRecord{{InputTokens: 128, OutputTokens: 128}}
	d := DiagnoseSummary(stats, res, mc, dev)
	if d.Iterations != 2 || d.Window != 2*time.Millisecond || d.KernelTime != time.Millisecond || d.Kernels != 170 {
		t.Errorf("diagnosis %+v", d)
	}
	text := strings.Join(d.Lines(), "\n")
	for _, want := range []string{"low GPU utilization: kernels ran 50.0% of the 2.00 ms", "memory-bandwidth bound", "communication: collectives take 30.0% of kernel time",
		"GEMM path: GEMMs take 60.0% of kernel time", "top kernel:"} {
		if !strings.Contains(text, want) {
			t.Errorf("diagnosis lacks %q:\n%s", want, text)
		}
	}
	// Without iterations the shares stand alone.
	d = DiagnoseSummary(stats, &engine.Result{}, mc, dev)
	text = strings.Join(d.Lines(), "\n")
	for _, want := range []string{"GEMMs take 60.0% of kernel time in the window", "collectives take 30.0%", "no figures per iteration"} {
		if !strings.Contains(text, want) {
			t.Errorf("diagnosis without iterations lacks %q:\n%s", want, text)
		}
	}
}
