//go:build windows

package cli

import (
	"os"

	"golang.org/x/sys/windows"
)

// attachParentProcess is AttachConsole's ATTACH_PARENT_PROCESS, (DWORD)-1.
const attachParentProcess = ^uintptr(0) & 0xFFFFFFFF

// attachConsole gives the GUI-subsystem atrium.exe (linked with -H=windowsgui) the
// console of the terminal that started it: Windows gives a GUI program no console and no
// standard handles, so without this `atrium version` typed in cmd or PowerShell would
// print nothing. Standard handles that are already usable (redirected to a file or a
// pipe) are kept; the others are re-opened on the attached console (CONOUT$, CONIN$).
// Started without a parent console (a double-click) it does nothing. Best effort: every
// failure leaves the handles as they were.
func attachConsole() {
	out, errOut, in := usable(windows.STD_OUTPUT_HANDLE), usable(windows.STD_ERROR_HANDLE), usable(windows.STD_INPUT_HANDLE)
	if out && errOut {
		return
	}
	// x/sys/windows has no wrapper for AttachConsole; kernel32 has had it since Windows XP.
	attach := windows.NewLazySystemDLL("kernel32.dll").NewProc("AttachConsole")
	if attach.Find() != nil {
		return
	}
	if r, _, _ := attach.Call(attachParentProcess); r == 0 {
		return // no parent console: started by a double-click (Explorer)
	}
	open := func(name string, access uint32) (windows.Handle, bool) {
		p, err := windows.UTF16PtrFromString(name)
		if err != nil {
			return 0, false
		}
		h, err := windows.CreateFile(p, access, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, nil, windows.OPEN_EXISTING, 0, 0)
		return h, err == nil
	}
	if h, ok := open("CONOUT$", windows.GENERIC_READ|windows.GENERIC_WRITE); ok {
		if !out && windows.SetStdHandle(windows.STD_OUTPUT_HANDLE, h) == nil {
			os.Stdout = os.NewFile(uintptr(h), "/dev/stdout")
		}
		// The runtime writes panics to the process's standard error handle.
		if !errOut && windows.SetStdHandle(windows.STD_ERROR_HANDLE, h) == nil {
			os.Stderr = os.NewFile(uintptr(h), "/dev/stderr")
		}
	}
	if !in {
		if h, ok := open("CONIN$", windows.GENERIC_READ|windows.GENERIC_WRITE); ok && windows.SetStdHandle(windows.STD_INPUT_HANDLE, h) == nil {
			os.Stdin = os.NewFile(uintptr(h), "/dev/stdin")
		}
	}
}

// usable reports whether the standard handle std is open on something (console, file,
// pipe).
func usable(std uint32) bool {
	h, err := windows.GetStdHandle(std)
	if err != nil || h == 0 || h == windows.InvalidHandle {
		return false
	}
	t, err := windows.GetFileType(h)
	return err == nil && t != windows.FILE_TYPE_UNKNOWN
}
