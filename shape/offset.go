package shape

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// Offset is a position in a shape's log, as the protocol writes it:
// "-1" (before everything), "<tx>_<op>" or "<tx>_inf". Tx 0 addresses the
// virtual snapshot chunks (0_N is the end of chunk N); a real offset's Tx is
// the commit LSN of the transaction, its Op the change's number in the
// shape's part of it, from 1.
type Offset struct {
	Tx, Op uint64
	// Before is the "-1" offset, which sorts below every other.
	Before bool
}

// opInf is the Op of "<tx>_inf".
const opInf = math.MaxUint64

// beforeAll is the offset "-1".
var beforeAll = Offset{Before: true}

var errOffset = errors.New("has invalid format")

// parseOffset reads an offset's text form ("now" is the caller's).
func parseOffset(s string) (Offset, error) {
	if s == "-1" {
		return beforeAll, nil
	}
	tx, op, ok := strings.Cut(s, "_")
	if !ok || tx == "" || op == "" {
		return Offset{}, errOffset
	}
	t, err := strconv.ParseUint(tx, 10, 64)
	if err != nil || (len(tx) > 1 && tx[0] == '0') {
		return Offset{}, errOffset
	}
	if op == "inf" {
		return Offset{Tx: t, Op: opInf}, nil
	}
	o, err := strconv.ParseUint(op, 10, 64)
	if err != nil || o == opInf || (len(op) > 1 && op[0] == '0') {
		return Offset{}, errOffset
	}
	return Offset{Tx: t, Op: o}, nil
}

// String returns the offset's text form.
func (o Offset) String() string {
	if o.Before {
		return "-1"
	}
	b := strconv.AppendUint(nil, o.Tx, 10)
	b = append(b, '_')
	if o.Op == opInf {
		return string(append(b, "inf"...))
	}
	return string(strconv.AppendUint(b, o.Op, 10))
}

// Compare orders offsets: -1 first, then by Tx, then by Op.
func (o Offset) Compare(p Offset) int {
	switch {
	case o.Before && p.Before:
		return 0
	case o.Before:
		return -1
	case p.Before:
		return 1
	case o.Tx != p.Tx:
		if o.Tx < p.Tx {
			return -1
		}
		return 1
	case o.Op != p.Op:
		if o.Op < p.Op {
			return -1
		}
		return 1
	}
	return 0
}

// Virtual reports whether o addresses the snapshot chunks (0_N).
func (o Offset) Virtual() bool { return !o.Before && o.Tx == 0 }
