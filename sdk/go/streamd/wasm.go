//go:build wasip1

package streamd

import "unsafe"

//go:wasmimport streamd reply
func hostReply(ptr unsafe.Pointer, n uint32)

//go:wasmimport streamd log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

// input is the instance's input buffer (docs/abi.md section 4).
var input []byte

func reply(b []byte) {
	hostReply(unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b)))
}

// Log writes msg to streamd's log at level (LevelDebug..LevelError).
func Log(level int, msg string) {
	hostLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

//go:wasmexport streamd_abi_v1
func abiV1() {}

//go:wasmexport streamd_buffer
func streamdBuffer(n uint32) uint32 {
	if uint64(n) > uint64(cap(input)) {
		input = make([]byte, max(uint64(n), 2*uint64(cap(input)), 64<<10))
	}
	input = input[:cap(input)]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

//go:wasmexport streamd_manifest
func streamdManifest() uint32 {
	status, b := registered.doManifest()
	reply(b)
	return status
}

//go:wasmexport streamd_init
func streamdInit(n uint32) uint32 {
	status, b := registered.doInit(input[:n])
	if b != nil {
		reply(b)
	}
	return status
}

//go:wasmexport streamd_process
func streamdProcess(n uint32) uint32 {
	status, b := registered.process(input[:n])
	reply(b)
	return status
}
