package cupti

import (
	"encoding/binary"
	"testing"
	"time"
	"unsafe"
)

// TestDeviceOffsets: deviceId is read where the documented structs hold it.
func TestDeviceOffsets(t *testing.T) {
	var k kernelPrefix
	var c memcpyPrefix
	var s memsetPrefix
	for _, tc := range []struct {
		field     string
		got, want uintptr
	}{
		{"kernel deviceId", uintptr(prefix.kDevice), unsafe.Offsetof(k.deviceID)},
		{"memcpy deviceId", uintptr(prefix.cDevice), unsafe.Offsetof(c.deviceID)},
		{"memset deviceId", uintptr(prefix.sDevice), unsafe.Offsetof(s.deviceID)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s at offset %d; the documented struct puts it at %d", tc.field, tc.got, tc.want)
		}
	}
}

// TestKeepDevice: with two GPUs' records in the process's buffers (the
// ranks of a split cell), KeepDevice leaves the other GPU's out and counts
// them; -1 keeps all.
func TestKeepDevice(t *testing.T) {
	defer KeepDevice(-1)
	for _, tc := range []struct {
		keep        int
		names       []string
		otherDevice int
	}{
		{-1, []string{"gemv_rank0", "gemv_rank1", "ncclDevKernel_AllReduce_rank0", "ncclDevKernel_AllReduce_rank1"}, 0},
		{0, []string{"gemv_rank0", "ncclDevKernel_AllReduce_rank0"}, 3},
		{1, []string{"gemv_rank1", "ncclDevKernel_AllReduce_rank1"}, 2}, // the copy is device 1's
	} {
		f := newFake()
		s, err := newSession(f)
		if err != nil {
			t.Fatal(err)
		}
		KeepDevice(tc.keep)
		s.Begin(time.Now())
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		s.Mark(0)
		m := f.last
		onDevice := func(dev uint32) {
			b := f.bufs[len(f.bufs)-1]
			binary.LittleEndian.PutUint32(b[8+prefix.kDevice:], dev)
		}
		for i, name := range []string{"gemv_rank0", "gemv_rank1", "ncclDevKernel_AllReduce_rank0", "ncclDevKernel_AllReduce_rank1"} {
			f.kernel(name, m+uint64(100*i+10), m+uint64(100*i+90), 13, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1})
			onDevice(uint32(i % 2))
		}
		// A copy on device 1.
		f.copy(kindMemcpy, 2, 64, m+500, m+510, 13)
		binary.LittleEndian.PutUint32(f.bufs[len(f.bufs)-1][8+prefix.cDevice:], 1)
		f.waitUntil(m + 1_000)
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		ops, err := s.Drain()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, op := range ops {
			if op.Name != "" {
				names = append(names, op.Name)
			}
		}
		if len(names) != len(tc.names) {
			t.Errorf("keep %d: kernels %v, want %v", tc.keep, names, tc.names)
			continue
		}
		for i := range names {
			if names[i] != tc.names[i] {
				t.Errorf("keep %d: kernels %v, want %v", tc.keep, names, tc.names)
				break
			}
		}
		if got := s.Stats().OtherDevices; got != tc.otherDevice {
			t.Errorf("keep %d: OtherDevices %d, want %d", tc.keep, got, tc.otherDevice)
		}
	}
}
