package runner

import (
	"bufio"
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/cuda"
	"github.com/xrun-dev/xrun/engine/model"
	"github.com/xrun-dev/xrun/engine/profile"
)

// GPU memory at plan time: what each cell on xrun's own engine will hold on
// its GPU, and whether that fits, before anything runs. A cell holds
//
//   - its weights: every parameter at the dtype's width (all experts of an
//     MoE model; a tied LM head twice, as the engine uploads it twice),
//     except where the engine stores them narrower, counted as the
//     roofline counts them (profile.HeldWeightBytes): under dtype fp8 the
//     linear layers at a byte and a float32 scale per tensor, MXFP4
//     experts at 4.25 bits;
//   - workspaces: the activations of max_num_tokens tokens (fewer when the
//     dataset has fewer prompt tokens, as the engine sizes them), the
//     logits of batch_size rows, the MoE kernels' workspace, the FP8
//     GEMMs' quantized input under dtype fp8, and memContext for the CUDA
//     context, cuBLASLt's workspace and the kernels' modules;
//   - its KV cache, which takes kv_cache_free_gpu_mem_fraction of the
//     memory left (a byte a value under kv_cache_dtype fp8): at the least
//     one request of the dataset's longest length and the slot the CUDA
//     backend keeps for padding rows.
//
// A cell fits when the KV cache it gets can hold that one request:
// weights + workspaces + minimum KV cache / fraction <= the GPU's memory
// (its need). It then holds min(batch_size, requests, what fits) requests
// in flight, every slot sized for the longest request (as the engine and
// TensorRT-LLM's capacity scheduler admit them), or, where the CUDA
// backend's paged cache admits at least 5 % more by default
// (engine.PagingPays), as many as its blocks hold at the mean length.

// memContext is the memory a worker takes on its GPU besides weights,
// activations and KV cache: the CUDA context and its kernel modules, and
// cuBLASLt's handle and 32 MiB workspace.
const memContext = 1 << 30

// memNCCL is what one NCCL communicator takes on each of its GPUs: its
// buffers (4 MiB per protocol, channel and peer by default) and kernels.
// Sized on the high side for two to eight GPUs of one host; not measured.
const memNCCL = 512 << 20

// ncclGroups is how many communicators a rank of s joins: the world's,
// and its tensor-parallel group's where that is not the world (ep > tp).
func ncclGroups(s engine.RankShare) int {
	if s.TP > 1 && s.TP < s.World {
		return 2
	}
	return 1
}

// gib is bytes in GiB, the unit the driver and nvidia-smi count in.
func gib(b float64) float64 { return b / (1 << 30) }

// GPUMemory is a GPU whose memory the cells must fit.
type GPUMemory struct {
	// Index is the GPU's index as xrun devices lists it; -1 for a GPU
	// kind named by --gpu.
	Index int
	Name  string
	Bytes float64
}

// String names the GPU in a sentence: "GPU 0 (NVIDIA H100 80GB HBM3)",
// or "an H100 (--gpu)".
func (g GPUMemory) String() string {
	if g.Index < 0 {
		return "an " + g.Name + " (--gpu)"
	}
	return fmt.Sprintf("GPU %d (%s)", g.Index, g.Name)
}

// MemoryOptions say which GPUs a plan's cells must fit.
type MemoryOptions struct {
	// GPUs are the usable GPUs found on this machine; empty: the kind GPU
	// names.
	GPUs []GPUMemory
	// GPU is a kind the plan can estimate for (--gpu: "H100", "H200", or
	// a name containing one); "" means DefaultEstimateGPU.
	GPU string
	// Getenv is the environment the run will read its XRUN_* switches
	// from, which decide how its KV cache is held (paged or not); nil
	// means the defaults.
	Getenv func(string) string
	// Note says, for the plan's reader, why no GPU of this machine was
	// used (a probe asked for that failed); "" for none.
	Note string
}

// Memory is the GPU memory a plan's cells need, against the smallest GPU
// they may run on.
type Memory struct {
	GPU GPUMemory
	// GPUs is how many GPUs of this machine were found (0: GPU is the
	// --gpu kind).
	GPUs int
	Note string
	// Cells are the cells' needs, in the plan's order.
	Cells []CellMemory
	// Counted cells have a need; CannotFit of them do not fit GPU.
	Counted, CannotFit int
	// NotCounted counts the cells without a need, by reason.
	NotCounted map[string]int
}

// CellMemory is one cell's memory on its GPU; bytes are per GPU.
type CellMemory struct {
	Counted bool
	// Note says why a cell is not counted.
	Note      string
	Weights   float64
	Workspace float64
	// KVMin is the KV cache one request of Longest tokens needs (and the
	// engine's padding slot); KVBatch that of batch_size requests of the
	// dataset's mean length. 0 when the lengths are unknown.
	KVMin, KVBatch float64
	// Need is Weights + Workspace + KVMin / kv_cache_free_gpu_mem_fraction.
	Need    float64
	Longest int
	// InFlight is how many requests the KV cache holds at once on the
	// GPU, at most batch_size (and the dataset's requests); 0 when the
	// cell does not fit. Paged says it counts a paged cache's blocks at
	// the dataset's mean length, where the engine pages (by default where
	// engine.PagingPays; MemoryOptions.Getenv's switches may say always
	// or never), not fixed slots of the longest request.
	InFlight int
	Paged    bool
	Fits     bool
	// GPUs is how many GPUs hold the cell, each a rank's slice (tp, ep);
	// the bytes above are one GPU's.
	GPUs int
}

// Mark is the plan's line for a cell that does not fit g: "needs 94.1
// GiB, GPU 0 (NVIDIA H100 80GB HBM3) has 79.2 GiB".
func (m *CellMemory) Mark(g GPUMemory) string {
	return fmt.Sprintf("needs %.1f GiB, %s has %.1f GiB", gib(m.Need), g, gib(g.Bytes))
}

// CheckMemory computes every cell's need against the smallest of o's GPUs
// (or the --gpu kind) and sets p.Memory. An unknown --gpu is the user's
// error.
func (p *Plan) CheckMemory(o MemoryOptions) error {
	// A GPU whose memory the probe did not report cannot be checked.
	o.GPUs = slices.DeleteFunc(slices.Clone(o.GPUs), func(g GPUMemory) bool { return g.Bytes <= 0 })
	mem := &Memory{GPUs: len(o.GPUs), Note: o.Note, NotCounted: map[string]int{}}
	if len(o.GPUs) > 0 {
		mem.GPU = slices.MinFunc(o.GPUs, func(a, b GPUMemory) int { return cmp.Compare(a.Bytes, b.Bytes) })
	} else {
		name := o.GPU
		if name == "" {
			name = DefaultEstimateGPU
		}
		_, kind, bytes, ok := estimateDevice(name)
		if !ok {
			return &OptionError{"--gpu", fmt.Sprintf("%q: xrun knows neither its memory nor its ceilings; expected one of %s, or a GPU name containing one", name, estimateKinds())}
		}
		mem.GPU = GPUMemory{Index: -1, Name: kind, Bytes: bytes}
	}
	mem.Cells = make([]CellMemory, len(p.Cells))
	pg := pagingFrom(o.Getenv)
	for i := range p.Cells {
		cm := p.Cells[i].memory(mem.GPU.Bytes, pg)
		mem.Cells[i] = cm
		switch {
		case !cm.Counted:
			mem.NotCounted[cm.Note]++
		case !cm.Fits:
			mem.CannotFit++
			mem.Counted++
		default:
			mem.Counted++
		}
	}
	p.Memory = mem
	return nil
}

func estimateKinds() string {
	kinds := make([]string, len(estimateGPUs))
	for i, g := range estimateGPUs {
		kinds[i] = g.kind
	}
	return strings.Join(kinds, ", ")
}

// memory is the cell's need on a GPU of total bytes; not counted for cells
// that run on no GPU of xrun's (engine cpu) or on an external engine,
// whose tool allocates as it sees fit.
func (c *Cell) memory(total float64, pg kvPaging) CellMemory {
	switch {
	case c.Params.Engine == "cpu":
		return CellMemory{Note: "on the cpu engine (no GPU memory)"}
	case !builtinEngine(c.Params.Engine):
		return CellMemory{Note: "on an external engine (its tool allocates GPU memory as it sees fit)"}
	}
	w, unknown := cellWorkload(c)
	w.paging = pg
	m := w.memory(total)
	if unknown != "" {
		// A dataset file's lengths are read at run time: its weights and
		// workspaces are known, its KV cache not.
		m.KVMin, m.KVBatch, m.Longest, m.InFlight = 0, 0, 0, 0
		m.Need = m.Weights + m.Workspace
		m.Fits = m.Need <= total
	}
	return m
}

// memory is the workload's need on a GPU of total bytes (see the top of
// this file).
func (w workload) memory(total float64) CellMemory {
	eb := float64(w.elemBytes)
	mc := &w.mc
	m := CellMemory{Counted: true, Longest: w.maxLen, GPUs: max(w.share.World, 1)}
	// Per GPU: a split cell's rank holds its slice of the weights and of
	// the KV cache (engine.Share, as engine/model's shard.go cuts them).
	local := w.share.Local(*mc)
	// Each weight at the width the engine stores it in (FP8 linear layers
	// and their scales, MXFP4 experts), counted as the roofline counts it.
	dev := profile.Device{ElemBytes: w.elemBytes}.WithFormats(w.formats)
	m.Weights = profile.HeldWeightBytes(*mc, w.split, float64(w.share.HeldParams(*mc)), dev)
	kvEB := w.elemBytes
	if w.formats.KVFP8 {
		kvEB = 1
	}
	perToken := kvBytesPerToken(&local, kvEB)
	// As the engine reserves: activations for the tokens of one iteration
	// (no more than the dataset's prompts and a token per slot), logits for
	// a row per request in flight. A dataset file's are counted in full.
	slots, tokens := w.batch, w.maxTokens
	if w.requests > 0 {
		slots = min(w.batch, w.requests)
		tokens = min(w.maxTokens, w.requests*w.input+slots)
	}
	slots, tokens = max(slots, 1), max(tokens, 1)
	m.Workspace = memContext + activationBytes(&local, tokens, eb) + float64(min(slots, tokens))*float64(mc.Hidden+mc.Vocab)*eb
	if w.formats.FP8 {
		// The FP8 GEMMs' quantized input: a byte per value of the widest
		// input of any of them, and a float32 scale per row.
		m.Workspace += float64(tokens) * (float64(fp8WidestInput(&local)) + 4)
	}
	if w.share.Split() {
		// NCCL's buffers for each group the rank joins, and under tp the
		// rank's own logits before they are gathered (engine/model's
		// logits_shard; an ep-only split has the whole LM head).
		m.Workspace += memNCCL * float64(ncclGroups(w.share))
		if w.share.TP > 1 {
			m.Workspace += float64(min(slots, tokens)) * float64(w.share.Vocab) * eb
		}
	}
	frac := w.kvFraction
	if frac <= 0 {
		frac = 0.9
	}
	perSlot := perToken * kvPositions(mc, w.maxLen)
	// One request and the CUDA backend's scratch slot for padding rows.
	m.KVMin = 2 * perSlot
	m.KVBatch = float64(w.batch) * kvPositions(mc, w.input+w.output) * perToken
	m.Need = m.Weights + m.Workspace + m.KVMin/frac
	if perSlot > 0 {
		// The engine's MaxKVSlots: what the budget holds, less the scratch slot.
		budget := frac * (total - m.Weights - m.Workspace)
		fit := math.Floor(budget/perSlot) - 1
		m.InFlight = int(max(0, min(fit, float64(slots))))
		if m.InFlight >= 1 && !mc.MLA() && !mc.OSSAttention() && w.paging.mode != "0" {
			// The CUDA backend's paged cache (XRUN_CUDA_KV_PAGED: where it
			// pays, or always with `1`): blocks of XRUN_KV_BLOCK
			// positions, less the scratch block, each request holding its
			// own length's.
			bs := cmp.Or(w.paging.block, engine.DefaultSwitches().KVBlock)
			blocks := math.Floor(budget/(perToken*float64(bs))) - 1
			per := float64(engine.BlocksFor(w.input, w.output, bs))
			paged := int(min(blocks/per, float64(slots)))
			if w.paging.mode == "1" && paged >= 1 || engine.PagingPays(slots, m.InFlight, paged) {
				m.InFlight, m.Paged = paged, true
			}
		}
	}
	m.Fits = m.InFlight >= 1
	return m
}

// fp8WidestInput is the widest K of the FP8 GEMMs (the linear layers of
// attention and the MLP or experts), which sizes the CUDA backend's
// quantized-input scratch.
func fp8WidestInput(mc *engine.ModelConfig) int {
	return max(mc.Hidden, mc.Heads*mc.HeadDim, mc.FFN)
}

// heldWeights is how many weights the engine holds on the GPU: every
// parameter, and an LM head tied to the embedding a second time (the
// engine uploads it as a GEMM weight of its own).
func heldWeights(mc *engine.ModelConfig) float64 {
	return float64(engine.RankShare{}.HeldParams(*mc))
}

// kvBytesPerToken is the KV cache one position of one request takes at
// eb bytes an element: K and V of every layer's KV heads, or an MLA
// model's compressed latent and shared rotary key.
func kvBytesPerToken(mc *engine.ModelConfig, eb int) float64 {
	return float64(mc.KVElemsPerToken()) * float64(eb)
}

// activationBytes are the engine's activation buffers for tokens rows
// (engine/model's Reserve): the residual stream and its norm and delta,
// q/k/v and the attention output; a dense MLP's gate, up and product; or
// the router's logits and choices and the MoE kernels' workspace, whose
// gathered rows and intermediate products grow with tokens × top-k (the
// larger of the grouped kernels' and the per-expert GEMMs' layouts).
func activationBytes(mc *engine.ModelConfig, tokens int, eb float64) float64 {
	t, h := float64(tokens), float64(mc.Hidden)
	per := 3*h + float64(mc.HeadLayout().QKVWidth()) + float64(mc.Heads*mc.HeadDim)
	dense := 3 * float64(mc.FFN)
	if !mc.MoE() {
		return t * (per + dense) * eb
	}
	// DeepSeek-V3's first dense layers and its shared experts run MLPs
	// beside the routed ones.
	dense = 3 * float64(mc.SharedWidth())
	if mc.MoELayers() < mc.Layers {
		dense = max(dense, 3*float64(mc.DenseWidth()))
	}
	k := float64(mc.TopK)
	routed := k * max(h+float64(mc.FFN), 4*h) * eb
	return t * ((per+dense+float64(mc.Experts))*eb + k*(4+eb) + routed)
}

// MemoryError is the run's refusal of cells that cannot fit the GPUs they
// would run on: the user's input (exit status 2), before anything runs.
type MemoryError struct {
	// Cells are "ID: needs ..., GPU 0 (...) has ..." lines.
	Cells []string
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("cells that cannot fit the GPUs here (weights + workspaces + the KV cache of one request; xrun plan shows every cell's need):\n  %s\nexclude them, run the model's first layers (layers: N), lower max_num_tokens or batch_size, or run on a GPU with more memory",
		strings.Join(e.Cells, "\n  "))
}
func (e *MemoryError) BadInput() bool { return true }

// CheckFit refuses the cells that would run on xrun's engine on these
// GPUs and cannot fit the smallest of them; nil when they all fit (or
// there is no GPU whose memory is known).
func CheckFit(cells []*Cell, gpus []GPUMemory) error {
	gpus = slices.DeleteFunc(slices.Clone(gpus), func(g GPUMemory) bool { return g.Bytes <= 0 })
	if len(gpus) == 0 {
		return nil
	}
	g := slices.MinFunc(gpus, func(a, b GPUMemory) int { return cmp.Compare(a.Bytes, b.Bytes) })
	var bad []string
	for _, c := range cells {
		// Whether a cell fits does not depend on paging (one request must
		// fit either way).
		if m := c.memory(g.Bytes, kvPaging{}); m.Counted && !m.Fits {
			bad = append(bad, c.ID+": "+m.Mark(g))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &MemoryError{Cells: bad}
}

// column is the cell's MEMORY in the text plan: its need, marked when it
// cannot fit, "+" when a dataset file's KV cache is not in it, "-" when
// not counted.
func (m *CellMemory) column() string {
	switch {
	case !m.Counted:
		return "-"
	case !m.Fits:
		return fmt.Sprintf("%.1f GiB (too large)", gib(m.Need))
	case m.Longest == 0:
		return fmt.Sprintf("%.1f GiB+", gib(m.Need))
	}
	return fmt.Sprintf("%.1f GiB", gib(m.Need))
}

// listed is how many cells a section of the text plan names before
// "and N more".
const listed = 10

// writeText writes the memory section of the text plan.
func (m *Memory) writeText(bw *bufio.Writer, cells []Cell) {
	fmt.Fprintf(bw, "\nGPU memory on %s: %.1f GiB", m.GPU, gib(m.GPU.Bytes))
	switch {
	case m.GPUs > 1:
		fmt.Fprintf(bw, ", the smallest of the %d GPUs here", m.GPUs)
	case m.GPUs == 1:
		bw.WriteString(", the GPU here")
	}
	bw.WriteByte('\n')
	if m.Note != "" {
		wrapText(bw, m.Note)
	}
	var tooLarge, fewer, unknown []string
	largest, split := -1, 0
	for i := range m.Cells {
		cm, c := &m.Cells[i], &cells[i]
		if cm.Counted && cm.GPUs > 1 {
			split++
		}
		switch {
		case !cm.Counted:
			continue
		case !cm.Fits:
			tooLarge = append(tooLarge, c.ID+"  "+cm.Mark(m.GPU))
		case cm.Longest > 0 && cm.InFlight < min(c.Params.BatchSize, c.Dataset.Params.NumRequests):
			paged := ""
			if cm.Paged {
				paged = " (paged)"
			}
			fewer = append(fewer, fmt.Sprintf("%s %s of %s%s", c.ID, group(int64(cm.InFlight)), group(int64(c.Params.BatchSize)), paged))
		}
		if cm.Longest == 0 {
			unknown = append(unknown, c.ID)
		}
		if cm.Fits && (largest < 0 || cm.Need > m.Cells[largest].Need) {
			largest = i
		}
	}
	switch {
	case m.Counted == 0:
	case len(tooLarge) == 0:
		fmt.Fprintf(bw, "  every cell fits; the largest needs %.1f GiB (%s)\n", gib(m.Cells[largest].Need), cells[largest].ID)
	default:
		fmt.Fprintf(bw, "  %s cannot fit it:\n", plural(len(tooLarge), "cell"))
		for i, l := range tooLarge {
			if i == listed {
				fmt.Fprintf(bw, "    and %s more\n", group(int64(len(tooLarge)-listed)))
				break
			}
			fmt.Fprintf(bw, "    %s\n", l)
		}
		if largest >= 0 {
			fmt.Fprintf(bw, "  the others fit; the largest of them needs %.1f GiB (%s)\n", gib(m.Cells[largest].Need), cells[largest].ID)
		}
	}
	if n := len(fewer); n > 0 {
		more := ""
		if n > listed {
			more = fmt.Sprintf(", and %s more", group(int64(n-listed)))
			fewer = fewer[:listed]
		}
		wrapText(bw, fmt.Sprintf("%s: the KV cache holds fewer requests than batch_size, so fewer run at once: %s%s",
			plural(n, "cell"), strings.Join(fewer, ", "), more))
		if slices.ContainsFunc(m.Cells, func(c CellMemory) bool { return c.Paged }) {
			wrapText(bw, "(paged): counted as the CUDA backend's paged cache holds them, at the dataset's mean length in blocks rather than in slots of its longest (XRUN_CUDA_KV_PAGED: by default where lengths spread enough for paging to admit more)")
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(bw, "  %s read dataset files: their KV cache is not counted (the lengths are read at run time)\n", plural(len(unknown), "cell"))
	}
	for _, n := range slices.Sorted(maps.Keys(m.NotCounted)) {
		fmt.Fprintf(bw, "  not counted: %s %s\n", plural(m.NotCounted[n], "cell"), n)
	}
	if m.Counted > 0 {
		wrapText(bw, fmt.Sprintf("a cell needs its weights (every parameter at the dtype's width, all experts), workspaces (activations of max_num_tokens tokens, logits of batch_size rows, %.0f GiB for the CUDA context and libraries) and the KV cache of one request of the dataset's longest length (the means + %d stdevs) and the engine's padding slot, which gets kv_cache_free_gpu_mem_fraction of the memory left",
			gib(memContext), tailStdevs))
	}
	if n := formatsNote(m, cells); n != "" {
		wrapText(bw, n)
	}
	if split > 0 {
		wrapText(bw, fmt.Sprintf("%s split over GPUs (tp, ep): their need is per GPU, each holding its rank's slice of the model (attention, MLPs and the LM head divided by tp, the experts by expert group, the embedding, norms and routers whole) and of the KV cache (its KV heads), and %.1f GiB for each NCCL communicator",
			plural(split, "cell"), gib(memNCCL)))
	}
}

// formatsNote says how the counted cells' weight and KV-cache formats
// narrow their widths; "" when none has any.
func formatsNote(m *Memory, cells []Cell) string {
	var fp8, kv, mx int
	for i := range m.Cells {
		if !m.Cells[i].Counted {
			continue
		}
		w, _ := cellWorkload(&cells[i])
		fp8 += b2i(w.formats.FP8)
		kv += b2i(w.formats.KVFP8)
		mx += b2i(w.formats.MXFP4Experts)
	}
	var parts []string
	if fp8 > 0 {
		parts = append(parts, fmt.Sprintf("%s of dtype fp8 hold the linear layers' weights (attention's and the MLP's) at a byte each with a float32 scale per tensor, the embedding, norms, routers and LM head at two, and the FP8 GEMMs' quantized input among the workspaces", plural(fp8, "cell")))
	}
	if mx > 0 {
		parts = append(parts, fmt.Sprintf("%s of moe_weights mxfp4 hold the routed experts at %g bits a weight", plural(mx, "cell"), model.MXFP4BitsPerWeight))
	}
	if kv > 0 {
		parts = append(parts, fmt.Sprintf("%s of kv_cache_dtype fp8 hold the KV cache at a byte a value", plural(kv, "cell")))
	}
	return strings.Join(parts, "; ")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

type memoryJSON struct {
	GPU          gpuMemoryJSON  `json:"gpu"`
	GPUsHere     int            `json:"gpus_here"`
	Note         string         `json:"note,omitempty"`
	ContextBytes int64          `json:"context_bytes"`
	Cells        int            `json:"cells"`
	CannotFit    []string       `json:"cannot_fit"`
	NotCounted   map[string]int `json:"not_counted"`
}

type gpuMemoryJSON struct {
	Index       *int   `json:"index,omitempty"`
	Name        string `json:"name"`
	MemoryBytes int64  `json:"memory_bytes"`
}

type cellMemoryJSON struct {
	NeedBytes      int64 `json:"need_bytes"`
	Fits           bool  `json:"fits"`
	WeightsBytes   int64 `json:"weights_bytes"`
	WorkspaceBytes int64 `json:"workspace_bytes"`
	KVMinBytes     int64 `json:"kv_min_bytes"`
	KVBatchBytes   int64 `json:"kv_batch_bytes"`
	LongestTokens  int   `json:"longest_tokens"`
	InFlight       int   `json:"in_flight"`
	KVPaged        bool  `json:"kv_paged"`
}

func (m *Memory) json(cells []Cell) *memoryJSON {
	out := &memoryJSON{GPU: gpuMemoryJSON{Name: m.GPU.Name, MemoryBytes: int64(m.GPU.Bytes)}, GPUsHere: m.GPUs, Note: m.Note,
		ContextBytes: memContext, Cells: m.Counted, CannotFit: []string{}, NotCounted: m.NotCounted}
	if m.GPU.Index >= 0 {
		out.GPU.Index = &m.GPU.Index
	}
	for i := range m.Cells {
		if m.Cells[i].Counted && !m.Cells[i].Fits {
			out.CannotFit = append(out.CannotFit, cells[i].ID)
		}
	}
	return out
}

func (m *CellMemory) json() *cellMemoryJSON {
	if !m.Counted {
		return nil
	}
	r := func(f float64) int64 { return int64(math.Round(f)) }
	return &cellMemoryJSON{NeedBytes: r(m.Need), Fits: m.Fits, WeightsBytes: r(m.Weights), WorkspaceBytes: r(m.Workspace),
		KVMinBytes: r(m.KVMin), KVBatchBytes: r(m.KVBatch), LongestTokens: m.Longest, InFlight: m.InFlight, KVPaged: m.Paged}
}

// gpuMemories are the probed GPUs as the memory check sees them.
func gpuMemories(gpus []cuda.DeviceInfo) []GPUMemory {
	out := make([]GPUMemory, len(gpus))
	for i, g := range gpus {
		out[i] = GPUMemory{Index: g.Index, Name: g.Name, Bytes: float64(g.MemoryBytes)}
	}
	return out
}
