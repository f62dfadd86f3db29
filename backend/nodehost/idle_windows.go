package nodehost

import (
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// lastInputInfo is LASTINPUTINFO.
type lastInputInfo struct {
	cbSize uint32
	dwTime uint32
}

// LastInput is the time since the last input event of this session
// (GetLastInputInfo: keyboard or mouse, any application), from the tick
// counts, which wrap every 49.7 days (the uint32 difference does not).
// False when the call fails (e.g. a service session without input).
func LastInput() (time.Duration, bool) {
	// Resolved per call (once a minute), not kept in package variables.
	getLastInputInfo := windows.NewLazySystemDLL("user32.dll").NewProc("GetLastInputInfo")
	getTickCount := windows.NewLazySystemDLL("kernel32.dll").NewProc("GetTickCount")
	if getLastInputInfo.Find() != nil || getTickCount.Find() != nil {
		return 0, false
	}
	info := lastInputInfo{cbSize: uint32(unsafe.Sizeof(lastInputInfo{}))}
	if r, _, _ := getLastInputInfo.Call(uintptr(unsafe.Pointer(&info))); r == 0 {
		return 0, false
	}
	now, _, _ := getTickCount.Call()
	return time.Duration(uint32(now)-info.dwTime) * time.Millisecond, true
}
