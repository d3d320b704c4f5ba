package cupti

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/xrun-dev/xrun/engine/model"
)

// The documented member order of the records' prefixes, declared as Go
// structs: Go lays these types out as C does on 64-bit Linux (natural
// alignment), so their offsets check the hand-computed layout.
type kernelPrefix struct {
	kind                     uint32
	cacheConfig, smemConfig  uint8
	registersPerThread       uint16
	pgcRequested, pgcExec    uint32
	start, end, completed    uint64
	deviceID, ctxID, stream  uint32
	gridX, gridY, gridZ      int32
	blockX, blockY, blockZ   int32
	staticSmem, dynamicSmem  int32
	localPerThread, localAll uint32
	correlationID            uint32
	gridID                   int64
	name                     uintptr
}

type memcpyPrefix struct {
	kind                              uint32
	copyKind, srcKind, dstKind, flags uint8
	bytes, start, end                 uint64
	deviceID, ctxID, stream, corrID   uint32
}

type memsetPrefix struct {
	kind, value                     uint32
	bytes, start, end               uint64
	deviceID, ctxID, stream, corrID uint32
}

func TestLayoutMatchesDocumentedStructs(t *testing.T) {
	var k kernelPrefix
	var c memcpyPrefix
	var s memsetPrefix
	l := prefix
	for _, tc := range []struct {
		field     string
		got, want uintptr
	}{
		{"kernel start", uintptr(l.kStart), unsafe.Offsetof(k.start)},
		{"kernel end", uintptr(l.kEnd), unsafe.Offsetof(k.end)},
		{"kernel streamId", uintptr(l.kStream), unsafe.Offsetof(k.stream)},
		{"kernel gridX", uintptr(l.kGrid), unsafe.Offsetof(k.gridX)},
		{"kernel blockX", uintptr(l.kBlock), unsafe.Offsetof(k.blockX)},
		{"kernel correlationId", uintptr(l.kCorr), unsafe.Offsetof(k.correlationID)},
		{"kernel name", uintptr(l.kName), unsafe.Offsetof(k.name)},
		{"kernel prefix length", uintptr(l.kLen), unsafe.Sizeof(k)},
		{"memcpy copyKind", uintptr(l.cKind), unsafe.Offsetof(c.copyKind)},
		{"memcpy bytes", uintptr(l.cBytes), unsafe.Offsetof(c.bytes)},
		{"memcpy start", uintptr(l.cStart), unsafe.Offsetof(c.start)},
		{"memcpy end", uintptr(l.cEnd), unsafe.Offsetof(c.end)},
		{"memcpy streamId", uintptr(l.cStream), unsafe.Offsetof(c.stream)},
		{"memcpy correlationId", uintptr(l.cCorr), unsafe.Offsetof(c.corrID)},
		{"memcpy prefix length", uintptr(l.cLen), unsafe.Sizeof(c)},
		{"memset bytes", uintptr(l.sBytes), unsafe.Offsetof(s.bytes)},
		{"memset start", uintptr(l.sStart), unsafe.Offsetof(s.start)},
		{"memset streamId", uintptr(l.sStream), unsafe.Offsetof(s.stream)},
		{"memset correlationId", uintptr(l.sCorr), unsafe.Offsetof(s.corrID)},
		{"memset prefix length", uintptr(l.sLen), unsafe.Sizeof(s)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s at offset %d; the documented struct puts it at %d", tc.field, tc.got, tc.want)
		}
	}
	// The brief's figures for CUDA 13.0's CUpti_ActivityKernel10.
	if l.kStart != 16 || l.kEnd != 24 || l.kCorr != 92 || l.kName != 104 {
		t.Errorf("kernel offsets %d/%d/%d/%d; want 16/24/92/104", l.kStart, l.kEnd, l.kCorr, l.kName)
	}
}

func TestLayoutFor(t *testing.T) {
	for _, tc := range []struct {
		version uint32
		kernel  string
		known   bool
	}{
		{130000, "CUpti_ActivityKernel10", true},
		{130100, "CUpti_ActivityKernel10", true},
		{130200, "CUpti_ActivityKernel11", true},
		{24, "CUpti_ActivityKernel9", true},
		{990000, "CUpti_ActivityKernel12", false},
	} {
		l, err := layoutFor(tc.version)
		if err != nil || l.Kernel != tc.kernel || l.Known != tc.known {
			t.Errorf("layoutFor(%d) = %s known=%v, %v; want %s known=%v", tc.version, l.Kernel, l.Known, err, tc.kernel, tc.known)
		}
	}
	if _, err := layoutFor(7); err == nil {
		t.Error("an ancient CUPTI was accepted")
	}
}

// fake is CUPTI as records in memory: a clock that runs with the host's
// (as CUPTI's does), offset by a million ns, and buffers of encoded
// records.
type fake struct {
	base    time.Time
	last    uint64 // the last timestamp read
	enabled map[uint32]bool
	bufs    [][]byte
	names   map[uint64]string
	failOn  uint32
	drops   uint64
	closed  bool
	events  []string
}

func newFake() *fake {
	return &fake{base: time.Now(), enabled: map[uint32]bool{}, names: map[uint64]string{}}
}

func (f *fake) now() uint64 { return 1_000_000 + uint64(time.Since(f.base)) }

// waitUntil lets the clock pass ts.
func (f *fake) waitUntil(ts uint64) {
	for f.now() <= ts {
	}
}

func (f *fake) version() uint32   { return 130000 }
func (f *fake) timestamp() uint64 { f.last = f.now(); return f.last }
func (f *fake) enable(k uint32) error {
	if k == f.failOn {
		return errors.New("cuptiActivityEnable: CUPTI_ERROR_NOT_COMPATIBLE")
	}
	f.enabled[k] = true
	f.events = append(f.events, "enable")
	return nil
}
func (f *fake) disable(k uint32) error {
	delete(f.enabled, k)
	f.events = append(f.events, "disable")
	return nil
}
func (f *fake) flush() error { f.events = append(f.events, "flush"); return nil }
func (f *fake) records(fn func([]byte)) error {
	for _, b := range f.bufs {
		for len(b) >= 8 {
			n := int(binary.LittleEndian.Uint32(b[4:]))
			fn(b[8 : 8+n])
			b = b[8+n:]
		}
	}
	f.bufs = nil
	return nil
}
func (f *fake) name(p uint64) string { return f.names[p] }
func (f *fake) dropped() uint64      { return f.drops }
func (f *fake) close()               { f.closed = true }

// put encodes one record (length-prefixed in the fake's buffer).
func (f *fake) put(rec []byte) {
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[4:], uint32(len(rec)))
	f.bufs = append(f.bufs, append(hdr[:], rec...))
}

func (f *fake) kernel(name string, start, end uint64, stream uint32, grid, block [3]uint32) {
	b := make([]byte, 160) // a record longer than the prefix, as CUPTI's are
	le := binary.LittleEndian
	le.PutUint32(b[0:], kindConcurrentKernel)
	le.PutUint64(b[16:], start)
	le.PutUint64(b[24:], end)
	le.PutUint32(b[48:], stream)
	for i := range 3 {
		le.PutUint32(b[52+4*i:], grid[i])
		le.PutUint32(b[64+4*i:], block[i])
	}
	ptr := uint64(0x1000 + len(f.names))
	f.names[ptr] = name
	le.PutUint64(b[104:], ptr)
	f.put(b)
}

func (f *fake) copy(kind uint32, copyKind uint8, bytes, start, end uint64, stream uint32) {
	b := make([]byte, 72)
	le := binary.LittleEndian
	le.PutUint32(b[0:], kind)
	b[4] = copyKind
	le.PutUint64(b[8:], bytes)
	le.PutUint64(b[16:], start)
	le.PutUint64(b[24:], end)
	le.PutUint32(b[40:], stream)
	f.put(b)
}

func TestSessionWindow(t *testing.T) {
	f := newFake()
	s, err := newSession(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Drain(); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Drain before Begin: %v", err)
	}
	s.Begin(time.Now())
	if err := s.Start(); err != nil || len(f.enabled) != 3 {
		t.Fatalf("Start: %v, enabled %v", err, f.enabled)
	}
	s.Mark(7)
	m7 := f.last
	f.kernel("_Z4gemmv", m7+500, m7+10_500, 13, [3]uint32{64, 2, 1}, [3]uint32{128, 1, 1})
	f.copy(kindMemcpy, 2, 4096, m7+11_000, m7+11_400, 13)
	f.waitUntil(m7 + 12_000) // iteration 7's work is done before 8 starts
	s.Mark(8)
	m8 := f.last
	f.copy(kindMemset, 0, 512, m8+4_000, m8+4_100, 14)
	f.kernel("argmax", m8+5_000, m8+5_000, 13, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1})
	f.kernel("late", m7+600, m8+10, 13, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}) // ends after mark 8: invalid
	f.waitUntil(m8 + 6_000)
	s.Mark(9)
	f.kernel("bad", 0, 0, 13, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}) // no timestamps
	f.put([]byte{99, 0, 0, 0, 1, 2, 3, 4})                            // another kind
	f.put(make([]byte, 20))                                           // kind 0, short
	if err := s.Stop(); err != nil || len(f.enabled) != 0 {
		t.Fatalf("Stop: %v, still enabled %v", err, f.enabled)
	}
	f.drops = 2
	ops, err := s.Drain()
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 4 {
		t.Fatalf("%d ops: %+v", len(ops), ops)
	}
	k := ops[0]
	if k.Name != "_Z4gemmv" || k.Kind != model.OpKernel || k.Iteration != 7 || k.Duration != 10_000 || k.Stream != 13 ||
		k.Grid != [3]uint32{64, 2, 1} || k.Block != [3]uint32{128, 1, 1} {
		t.Errorf("kernel record %+v", k)
	}
	if c := ops[1]; c.Kind != model.OpMemcpy || c.Copy != "DtoH" || c.Bytes != 4096 || c.Iteration != 7 || c.Duration != 400 {
		t.Errorf("memcpy record %+v", c)
	}
	if m := ops[2]; m.Kind != model.OpMemset || m.Bytes != 512 || m.Iteration != 8 || m.Stream != 14 {
		t.Errorf("memset record %+v", m)
	}
	// Times are converted through the nearest mark, and the clocks run
	// together: the memset starts as long after the kernel on the host as
	// in CUPTI's records, to a microsecond.
	if d, want := ops[2].Start-ops[0].Start, time.Duration(m8+4_000-(m7+500)); d < want-time.Microsecond || d > want+time.Microsecond {
		t.Errorf("memset starts %v after the kernel; want %v", d, want)
	}
	st := s.Stats()
	if st.Kernels != 2 || st.Copies != 1 || st.Memsets != 1 || st.Skipped != 3 || st.Invalid != 1 || st.Dropped != 2 || st.Layout != "CUpti_ActivityKernel10" {
		t.Errorf("stats %+v", st)
	}
	if err := s.Stop(); !errors.Is(err, ErrNotStarted) {
		t.Errorf("a second Stop: %v", err)
	}
	s.Close()
	if !f.closed || s.Start() == nil {
		t.Error("Close did not release CUPTI, or Start worked after it")
	}
}

func TestSessionStartFailureDisablesWhatItEnabled(t *testing.T) {
	f := newFake()
	f.failOn = kindMemset
	s, _ := newSession(f)
	s.Begin(time.Now())
	if err := s.Start(); err == nil || !strings.Contains(err.Error(), "NOT_COMPATIBLE") {
		t.Fatalf("Start: %v", err)
	}
	if len(f.enabled) != 0 {
		t.Errorf("kinds left enabled: %v", f.enabled)
	}
}

func TestSelfTest(t *testing.T) {
	f := newFake()
	s, _ := newSession(f)
	launch := func(name string, block uint32) func() error {
		return func() error {
			f.kernel(name, f.last+100, f.last+2100, 7, [3]uint32{4, 1, 1}, [3]uint32{block, 1, 1})
			return nil
		}
	}
	if err := s.SelfTest(launch("other_kernel", 256), "random_fill_f16"); err == nil || !strings.Contains(err.Error(), `"other_kernel"`) {
		t.Errorf("self-test without the kernel: %v", err)
	}
	if err := s.SelfTest(launch("random_fill_f16", 0), "random_fill_f16"); err == nil || !strings.Contains(err.Error(), "implausible") {
		t.Errorf("self-test with a zero block: %v", err)
	}
	if s.Stats().Verified {
		t.Error("verified after failures")
	}
	if err := s.SelfTest(launch("random_fill_f16", 256), "random_fill_f16"); err != nil || !s.Stats().Verified {
		t.Errorf("self-test: %v, verified %v", err, s.Stats().Verified)
	}
	want := []string{"enable", "enable", "enable", "flush", "disable", "disable", "disable", "flush"}
	if got := f.events[len(f.events)-len(want):]; !slices.Equal(got, want) {
		t.Errorf("last calls %v; want %v", got, want)
	}
}

func TestOpenStepsAsideForInjectedProfiler(t *testing.T) {
	t.Setenv("CUDA_INJECTION64_PATH", "/opt/nvidia/nsight-systems/lib/libToolsInjection64.so")
	_, err := open()
	var ue *UnavailableError
	if !errors.As(err, &ue) || !ue.StepAside || !strings.Contains(ue.Error(), "steps aside") {
		t.Errorf("open under an injected profiler: %v", err)
	}
}

// cuptiInstalled guesses, without loading it (loading claims CUPTI's one
// subscriber slot for the whole test binary), whether libcupti is here.
func cuptiInstalled() bool {
	for _, pat := range []string{"/usr/local/cuda*/targets/*/lib/libcupti.so*", "/usr/local/cuda*/extras/CUPTI/lib64/libcupti.so*",
		"/usr/lib/*/libcupti.so*", "/usr/local/cuda*/lib64/libcupti.so*"} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			return true
		}
	}
	out, _ := exec.Command("ldconfig", "-p").Output()
	return bytes.Contains(out, []byte("libcupti"))
}

// TestOpenWithoutCUPTI runs where no libcupti is installed (CI): Open
// says why, and Notes carries it into the diagnosis.
func TestOpenWithoutCUPTI(t *testing.T) {
	if cuptiInstalled() {
		t.Skip("libcupti is installed here; the GPU test covers Open")
	}
	t.Setenv("CUDA_INJECTION64_PATH", "")
	t.Setenv("XRUN_LIBCUPTI", "/nonexistent/libcupti.so")
	_, err := Open()
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.StepAside {
		t.Fatalf("Open: %v", err)
	}
	if n := Notes(); len(n) != 1 || !strings.HasPrefix(n[0], "no kernel records: cupti:") {
		t.Errorf("Notes = %q", n)
	}
	t.Logf("without CUPTI: %v", err)
}

// TestAttachedProfiler: each sign of an outside profiler makes open step
// aside, and none makes it go on. The maps line is as Nsight Compute
// 2025.3 left it in a process it launched, with no injection variable.
func TestAttachedProfiler(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(name string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == name {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	const ncuMaps = "7fcd2ce00000-7fcd2ce35000 r--p 00000000 fe:00 2008                       /opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetInjection.so\n"
	const plainMaps = "7f0000000000-7f0000001000 r-xp 00000000 fe:00 11 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	for _, c := range []struct {
		name   string
		getenv func(string) string
		maps   string
		want   string
	}{
		{"injection variable", env("CUDA_INJECTION64_PATH", "/opt/nsys/libToolsInjection64.so"), plainMaps, "CUDA_INJECTION64_PATH=/opt/nsys/libToolsInjection64.so"},
		{"launcher token", env("NV_TPS_LAUNCH_TOKEN", "Interactive Profile"), plainMaps, "NV_TPS_LAUNCH_TOKEN set"},
		{"launcher transport", env("NV_NSIGHT_INJECTION_TRANSPORT_TYPE", "uds"), plainMaps, "NV_NSIGHT_INJECTION_TRANSPORT_TYPE set"},
		{"launcher library", env(), ncuMaps, "libTreeLauncherTargetInjection.so loaded"},
		{"none", env("NV_LIBNCCL_PACKAGE", "libnccl2"), plainMaps, ""},
		{"no maps", env(), "", ""},
	} {
		got := attachedProfiler(c.getenv, func() string { return c.maps })
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
