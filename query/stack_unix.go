//go:build unix

package query

import "syscall"

// threadStackBytes returns the C stack of the threads cgo calls run on:
// glibc gives new threads RLIMIT_STACK's soft limit, or 2 MiB when it is
// unlimited (RLIM_INFINITY, the largest value).
func threadStackBytes() int64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &r); err != nil || r.Cur > 1<<40 {
		return 2 << 20
	}
	return int64(r.Cur)
}
