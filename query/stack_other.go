//go:build !unix

package query

// threadStackBytes returns a conservative guess at the C stack of the
// threads cgo calls run on where it cannot be asked: 1 MiB.
func threadStackBytes() int64 { return 1 << 20 }
