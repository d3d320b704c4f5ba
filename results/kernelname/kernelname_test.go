package kernelname

import "testing"

// TestCategory keeps the kinds the kernel diff's replacements pair by.
func TestCategory(t *testing.T) {
	for name, want := range map[string]string{
		"nvjet_sm90_hsh_112x64_64x9_4x1_v_bz_TNN": "GEMM", "gemm_m_f16": "GEMM", "cpu_gemm_blocked_6x16": "GEMM", "cpu_moe_experts": "GEMM",
		"sm90_xmma_gemm_f16f16_f16f32": "GEMM", "gemv_f16": "GEMM", "attention_f16_d64_r8": "attention", "flash_fwd_kernel": "attention",
		"add_rmsnorm_f16": "norm", "rope_f16": "rope", "cpu_moe_route": "MoE", "cpu_gather_rows": "copy", "argmax_f16": "other",
		"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "comm", "void ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)": "comm",
		"ncclDevKernel_AllReduce_Sum_bf16_RING_LL": "comm", "cpu_comm_allreduce": "comm", "cpu_comm_allgather": "comm", "gather_blocks": "copy",
	} {
		if got := Category(name); got != want {
			t.Errorf("Category(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestIsGEMM: the engine's own expert GEMMs are GEMMs, the MoE kernels
// around them are not.
func TestIsGEMM(t *testing.T) {
	for name, want := range map[string]bool{
		"moe_gate_up_s_bf16": true, "moe_down_s_bf16": true, "cpu_moe_experts": true, "nvjet_hsh_64x8": true,
		"void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm>(Params)": true, "cublasLt::splitKreduce_kernel": true,
		"moe_combine_bf16": false, "moe_route_softmax_topk_renorm_bf16": false, "attention_f16_d64_r8": false, "": false,
	} {
		if got := IsGEMM(name); got != want {
			t.Errorf("IsGEMM(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestShort(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"cpu_add", "cpu_add"},
		{"void gemm_f16_tile<128, 64>(__half const*, __half const*, __half*, int, int, int)", "gemm_f16_tile<128, 64>"},
		{"void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, __half, false, float, __half, __half, true, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*)",
			"cublasLt::splitKreduce_kernel<…>"},
		{"void (anonymous namespace)::softmax<float>(float*, int)", "(anonymous namespace)::softmax<float>"},
		{"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::Half>, std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::Half>, std::array<char*, 1ul>)",
			"at::native::vectorized_elementwise_kernel<…>"},
	} {
		if got := Short(tc.in); got != tc.want {
			t.Errorf("Short(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestIsComm: NCCL's kernels, custom all-reduces and the CPU's collectives
// are communication; the copy that lays an all-gather out is not.
func TestIsComm(t *testing.T) {
	for name, want := range map[string]bool{
		"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": true,
		"void ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)":                 true,
		"tensorrt_llm::kernels::oneShotAllReduceKernel":                              true,
		"cpu_comm_allreduce": true,
		"gather_blocks":      false,
		"cpu_gather_rows":    false,
		"moe_combine_bf16":   false,
		"":                   false,
	} {
		if got := IsComm(name); got != want {
			t.Errorf("IsComm(%q) = %v, want %v", name, got, want)
		}
	}
}
