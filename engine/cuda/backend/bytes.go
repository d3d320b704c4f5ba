//go:build cgo && linux

package backend

import "unsafe"

// u16Bytes and i32Bytes view a slice's memory as bytes (little-endian on
// every platform the backend builds for), without copying.
func u16Bytes(v []uint16) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 2*len(v))
}

func i32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
