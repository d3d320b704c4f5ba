package cupti

import (
	"encoding/binary"
	"fmt"
)

// Activity kinds (CUpti_ActivityKind) this package enables and reads.
const (
	kindMemcpy           = 1
	kindMemset           = 2
	kindKernel           = 3
	kindConcurrentKernel = 10
)

// enabledKinds are enabled at Start and disabled at Stop.
var enabledKinds = []uint32{kindConcurrentKernel, kindMemcpy, kindMemset}

// layout gives the byte offsets of the fields read from each record kind.
// CUPTI's records are packed, 8-byte aligned structs whose versions grow
// at the end: every kernel record since CUpti_ActivityKernel4 (CUDA 9)
// keeps the same prefix up to the name pointer, every memcpy record since
// CUpti_ActivityMemcpy the same prefix up to correlationId, and every
// memset record likewise. The offsets below are that prefix, computed from
// the documented member order and sizes (cupti_activity.h):
//
//	kernel: kind u32 @0, cacheConfig u8 @4, sharedMemoryConfig u8 @5,
//	  registersPerThread u16 @6, partitionedGlobalCache{Requested,Executed}
//	  enum @8,@12, start u64 @16, end u64 @24, completed u64 @32,
//	  deviceId u32 @40, contextId @44, streamId @48, gridX,Y,Z i32 @52..60,
//	  blockX,Y,Z i32 @64..72, static/dynamicSharedMemory @76,@80,
//	  localMemoryPerThread @84, localMemoryTotal @88, correlationId @92,
//	  gridId i64 @96, name char* @104.
//	memcpy: kind @0, copyKind u8 @4, srcKind @5, dstKind @6, flags @7,
//	  bytes u64 @8, start @16, end @24, deviceId u32 @32, contextId @36,
//	  streamId @40, correlationId @44.
//	memset: kind @0, value u32 @4, bytes u64 @8, start @16, end @24,
//	  deviceId @32, contextId @36, streamId @40, correlationId @44.
//
// The self-test (Session.SelfTest) checks the kernel offsets on a real
// record before they are trusted.
type layout struct {
	// Kernel names the kernel record's struct for this CUPTI version.
	Kernel string
	// Known is false for a version newer than any listed: the prefix is
	// assumed and only the self-test vouches for it.
	Known bool

	kStart, kEnd, kStream, kGrid, kBlock, kCorr, kName, kLen int
	cKind, cBytes, cStart, cEnd, cStream, cCorr, cLen        int
	sBytes, sStart, sEnd, sStream, sCorr, sLen               int
	// deviceId of each kind: CUPTI records every GPU of the process, and a
	// split cell's ranks share it (DrainDevice).
	kDevice, cDevice, sDevice int
}

var prefix = layout{
	kStart: 16, kEnd: 24, kStream: 48, kGrid: 52, kBlock: 64, kCorr: 92, kName: 104, kLen: 112,
	cKind: 4, cBytes: 8, cStart: 16, cEnd: 24, cStream: 40, cCorr: 44, cLen: 48,
	sBytes: 8, sStart: 16, sEnd: 24, sStream: 40, sCorr: 44, sLen: 48,
	kDevice: 40, cDevice: 32, sDevice: 32,
}

// versions maps cuptiGetVersion's API version to the kernel record CUPTI
// writes, newest first. CUDA 11.8 is API version 18, 12.0 is 19 (12.6 is
// 24); CUDA 13 numbers them like the toolkit (130000 is 13.0, 130200 13.2).
var versions = []struct {
	min    uint32
	kernel string
}{
	{130400, "CUpti_ActivityKernel12"},
	{130200, "CUpti_ActivityKernel11"},
	{130000, "CUpti_ActivityKernel10"},
	{19, "CUpti_ActivityKernel9"},
	{14, "CUpti_ActivityKernel5..8"},
}

// newestKnown is the first API version this package has not seen.
const newestKnown = 130600

// layoutFor returns the record layout for a CUPTI API version, or an
// error for one older than any listed.
func layoutFor(version uint32) (layout, error) {
	for _, v := range versions {
		if version >= v.min {
			l := prefix
			l.Kernel, l.Known = v.kernel, version < newestKnown
			return l, nil
		}
	}
	return layout{}, fmt.Errorf("CUPTI API version %d is older than xrun reads (API version 14, CUDA 11)", version)
}

// raw is one activity record's fields as read from its bytes.
type raw struct {
	Kind        uint32
	Start, End  uint64
	Stream      uint32
	Device      uint32
	Correlation uint32
	Grid, Block [3]uint32
	Bytes       uint64
	CopyKind    uint8
	// NamePtr is the kernel name's address (a C string CUPTI owns).
	NamePtr uint64
}

// parse reads a record; ok is false for kinds this package does not read
// or a record shorter than its layout.
func (l *layout) parse(b []byte) (r raw, ok bool) {
	if len(b) < 4 {
		return r, false
	}
	le := binary.LittleEndian
	u32 := func(off int) uint32 { return le.Uint32(b[off:]) }
	u64 := func(off int) uint64 { return le.Uint64(b[off:]) }
	r.Kind = u32(0)
	switch r.Kind {
	case kindKernel, kindConcurrentKernel:
		if len(b) < l.kLen {
			return r, false
		}
		r.Start, r.End, r.Stream, r.Correlation, r.NamePtr = u64(l.kStart), u64(l.kEnd), u32(l.kStream), u32(l.kCorr), u64(l.kName)
		r.Device = u32(l.kDevice)
		for i := range 3 {
			r.Grid[i], r.Block[i] = u32(l.kGrid+4*i), u32(l.kBlock+4*i)
		}
	case kindMemcpy:
		if len(b) < l.cLen {
			return r, false
		}
		r.CopyKind, r.Bytes, r.Start, r.End, r.Stream, r.Correlation = b[l.cKind], u64(l.cBytes), u64(l.cStart), u64(l.cEnd), u32(l.cStream), u32(l.cCorr)
		r.Device = u32(l.cDevice)
	case kindMemset:
		if len(b) < l.sLen {
			return r, false
		}
		r.Bytes, r.Start, r.End, r.Stream, r.Correlation = u64(l.sBytes), u64(l.sStart), u64(l.sEnd), u32(l.sStream), u32(l.sCorr)
		r.Device = u32(l.sDevice)
	default:
		return r, false
	}
	return r, true
}

// copyKinds name CUpti_ActivityMemcpyKind values.
var copyKinds = []string{"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"}

func copyKindName(k uint8) string {
	if int(k) < len(copyKinds) {
		return copyKinds[k]
	}
	return fmt.Sprintf("kind%d", k)
}
