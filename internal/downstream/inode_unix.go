//go:build unix

package downstream

import (
	"os"
	"syscall"
)

// inode returns the device and inode of fi, so a file replaced by another
// of the same size and time still reads as changed.
func inode(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino) // int32 and uint32 on some platforms
	}
	return 0, 0
}
