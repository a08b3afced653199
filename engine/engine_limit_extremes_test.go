package engine

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/query"
)

// int8Bind is an int8 bind of n in text or binary format.
func int8Bind(n int64, bin bool) query.Bind {
	if bin {
		return query.Bind{OID: 20, Format: query.FormatBinary, Data: binary.BigEndian.AppendUint64(nil, uint64(n))}
	}
	return query.Bind{OID: 20, Data: []byte(strconv.FormatInt(n, 10))}
}

// LIMIT and OFFSET up to 2^63-1, as constants and as int8 binds (an
// application's LIMIT $1 is the user's page size): OFFSET+LIMIT+the
// window's margin once wrapped around int64 and the core panicked with
// "slice bounds out of range" when the read landed. Every answer is
// compared with PostgreSQL's, before and after writes that shrink and grow
// the windows (deletes make a window refill), and the engine keeps serving.
func TestEngineLimitExtremes(t *testing.T) {
	const maxI = math.MaxInt64
	type tc struct {
		sql     string
		binds   []query.Bind
		ordered bool
	}
	ord := func(sql string, binds ...query.Bind) tc { return tc{sql, binds, true} }
	cases := []tc{
		ord("SELECT id, qty FROM items ORDER BY id LIMIT 9223372036854775807 OFFSET 9223372036854775807"),
		ord("SELECT id, qty FROM items ORDER BY id DESC LIMIT 9223372036854775807"),
		ord("SELECT id FROM items ORDER BY id LIMIT 1 OFFSET 9223372036854775775"),
		ord("SELECT id, qty FROM items ORDER BY qty, id FETCH FIRST 9223372036854775807 ROWS ONLY"),
		ord("SELECT id FROM items ORDER BY id OFFSET 9223372036854775807"),
		ord("SELECT id FROM items ORDER BY id LIMIT 9223372036854775807 OFFSET 17"),
		// LIMIT+margin (32) is 2^63 and more: the margin alone overflows.
		ord("SELECT id FROM items ORDER BY id DESC LIMIT 9223372036854775776"),
		ord("SELECT id FROM items ORDER BY id DESC LIMIT 9223372036854775800 OFFSET 2"),
		ord("SELECT id, qty FROM items ORDER BY id LIMIT $1 OFFSET $2", int8Bind(maxI, false), int8Bind(maxI, false)),
		ord("SELECT id, qty FROM items ORDER BY id LIMIT $1 OFFSET $2", int8Bind(maxI, true), int8Bind(maxI, true)),
		ord("SELECT id FROM items ORDER BY qty DESC, id LIMIT $1", int8Bind(maxI, true)),
		ord("SELECT id FROM items ORDER BY id LIMIT $1 OFFSET $2", int8Bind(1, false), int8Bind(maxI-32, false)),
		ord("SELECT id FROM items ORDER BY id LIMIT $1 OFFSET $2", int8Bind(maxI-40, true), int8Bind(4, true)),
		ord("SELECT a.id, b.qty FROM items a JOIN items b ON b.id = a.id ORDER BY a.id LIMIT 9223372036854775807 OFFSET 9223372036854775807"),
		ord("SELECT a.id, b.qty FROM items a JOIN items b ON b.id = a.id ORDER BY a.id DESC LIMIT $1 OFFSET 3", int8Bind(maxI, false)),
		{"SELECT id FROM items LIMIT 9223372036854775807", nil, false},
		{"SELECT count(*) FROM items LIMIT 9223372036854775807 OFFSET 9223372036854775807", nil, false},
		{"SELECT count(*) FROM items LIMIT $1", []query.Bind{int8Bind(maxI, true)}, false},
	}
	r := newRig(t, itemsDDL, Config{})
	recs := make([]*recorder, len(cases))
	for i, c := range cases {
		_, recs[i] = r.subscribe(c.sql, c.binds...)
	}
	waitAccepted(t, recs...)
	check := func() {
		t.Helper()
		for i, c := range cases {
			ref := c.sql
			if c.ordered {
				// The tie group column sameRows wants: dense_rank over the
				// query's own ORDER BY.
				at := strings.Index(ref, " ORDER BY ")
				end := len(ref)
				for _, w := range []string{" LIMIT ", " OFFSET ", " FETCH "} {
					if j := strings.Index(ref[at+1:], w); j >= 0 && at+1+j < end {
						end = at + 1 + j
					}
				}
				from := strings.Index(ref, " FROM ")
				ref = ref[:from] + ", dense_rank() OVER (" + ref[at+1:end] + ")" + ref[from:]
			}
			r.check(recs[i], ref, c.ordered, c.binds...)
		}
	}
	check()
	r.exec("DELETE FROM items WHERE id <= 5 OR id = 19")
	r.exec("INSERT INTO items SELECT g, 'more' || g, g % 7 FROM generate_series(21, 60) g")
	r.exec("UPDATE items SET qty = qty + 1 WHERE id % 3 = 0")
	r.exec("DELETE FROM items WHERE id > 40")
	r.quiesce(30 * time.Second)
	check()
}
