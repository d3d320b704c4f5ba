// Package kernelname classifies GPU kernels by name: whether a kernel is
// a GEMM, what kind it is (communication, GEMM, attention, norm, rope,
// MoE, copy, other)
// and its short form for tables and sentences. The profiler's diagnosis
// (engine/profile) and the kernel diff and report pages (results,
// results/htmlreport) read names with the same rules, so the rules live
// here, below both: results never imports the engine, and engine/profile
// does not import results.
//
// It has no dependencies beyond the standard library.
package kernelname

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// gemmRE recognises GEMM (and GEMV) kernels: cuBLAS/cuBLASLt (nvjet,
// sm90_xmma, cutlass), the engine's own (including its grouped expert
// GEMMs) and the CPU backend's.
var gemmRE = regexp.MustCompile(`(?i)gemm|gemv|nvjet|xmma|cutlass|matmul|cublas|moe_gate_up|moe_down|cpu_moe_experts`)

// IsGEMM reports whether a kernel name is a GEMM.
func IsGEMM(name string) bool { return gemmRE.MatchString(name) }

// commRE recognises communication between the ranks of a split model:
// NCCL's kernels (ncclDevKernel_*, ncclKernel_* before 2.19), custom
// all-reduce kernels (TensorRT-LLM's), MoE dispatch and combine all-to-alls
// and the CPU backend's in-process collectives (cpu_comm_*).
var commRE = regexp.MustCompile(`(?i)nccl|allreduce|all_reduce|allgather|all_gather|reducescatter|alltoall|moe_comm|cpu_comm_`)

// IsComm reports whether a kernel is communication (a collective) rather
// than compute. Its time includes waiting for the slowest rank.
func IsComm(name string) bool { return commRE.MatchString(name) }

// categories classify kernels so that kernels of one kind found in only
// one of two cells pair up as replacements; the first match wins,
// anything else is "other".
var categories = []struct {
	name string
	re   *regexp.Regexp
}{
	// First: NCCL's names hold words of other kinds (AllGather: "gather").
	{"comm", commRE},
	{"GEMM", gemmRE},
	{"attention", regexp.MustCompile(`(?i)attn|attention|fmha|flash|sdpa`)},
	{"norm", regexp.MustCompile(`(?i)norm`)},
	{"rope", regexp.MustCompile(`(?i)rope|rotary`)},
	{"MoE", regexp.MustCompile(`(?i)moe|expert|route|topk`)},
	{"copy", regexp.MustCompile(`(?i)copy|memcpy|memset|fill|gather|embed`)},
}

// Category names the kind of a kernel: comm (communication), GEMM,
// attention, norm, rope, MoE, copy or other.
func Category(name string) string {
	for _, c := range categories {
		if c.re.MatchString(name) {
			return c.name
		}
	}
	return "other"
}

// Short is a kernel's name for tables and sentences: a demangled C++ name
// without its return type and parameter list, and with its template
// arguments elided when it is still longer than 60 characters
// ("cublasLt::splitKreduce_kernel<…>"). Files keep the full name.
func Short(name string) string {
	s := strings.TrimPrefix(name, "void ")
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<':
			depth++
		case '>':
			depth--
		case '(':
			if strings.HasPrefix(s[i:], "(anonymous namespace)") {
				i += len("(anonymous namespace)") - 1
				continue
			}
			if depth == 0 && i > 0 {
				s = s[:i]
				i = len(s)
			}
		}
	}
	if utf8.RuneCountInString(s) <= 60 {
		return s
	}
	var b strings.Builder
	depth = 0
	for _, r := range s {
		switch {
		case r == '<':
			if depth == 0 {
				b.WriteString("<…>")
			}
			depth++
		case r == '>':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
