package shape_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// Values of many types (geometric, network, ranges and multiranges, text
// search, xml, money, bit strings, BC and infinite timestamps, extreme
// intervals, json's spacing, arrays with another delimiter) as the
// snapshot and the log print them from the engine's values equal what
// PostgreSQL prints under Electric's settings (a subset of the same
// rows): the rendering is PostgreSQL's, type by type.
func TestValuesDifferential(t *testing.T) {
	e := newEnv(t, `CREATE TABLE k (id int PRIMARY KEY,
		m money, i inet, ci cidr, mac macaddr, bt bit(4), vb varbit, pt point, bx box, pa path, pg polygon, cr circle, ln line, ls lseg,
		tv tsvector, tq tsquery, x xml, tm time(3), ttz timetz, r4 int4range, nr numrange, tr tsrange, dr daterange, mr int4multirange,
		o oid, ch "char", nm name, j json, jb jsonb, f4 float4, f8 float8, n numeric, ivs interval[], bxs box[], ts timestamp, tz timestamptz, d date,
		iv interval, ivs2 interval[][], u uuid, by bytea, tx text, arr text[], mt money[])`, nil)
	e.exec(`INSERT INTO k VALUES (1, '12.34', '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', B'1010', B'101', '(1.5,2)', '((0,0),(1,1))', '[(0,0),(1,1)]', '((0,0),(1,0),(0,1))', '<(1,1),2>', '{1,-1,0}', '[(0,0),(1,1)]',
		'a fat cat', 'fat & rat', '<a>b</a>', '01:02:03.456', '01:02:03+05:30', '[1,10)', '(1.5,2.5]', '[2026-01-01 00:00,2026-01-02 00:00)', '[2026-01-01,2026-02-01)', '{[1,3),[5,7)}',
		42, 'x', 'nm', '{"a" : 1,  "b":[1,2]}', '{"b":[1,2],"a":1}', 'Infinity', '-0', '123456789012345678901234567890.000000001', ARRAY['1 mon -1 day'::interval, '-1 year -2 mons +3 days -04:05:06.789'], ARRAY['((0,0),(1,1))'::box, '((2,2),(3,3))'], '0044-03-15 12:00:00 BC', 'infinity', '-infinity',
		'1 mon -1 day 00:00:00.000001', '{{"1 day","2 days"},{"3 hours",NULL}}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\x00ff', E'é\t"\\x', '{"a b",NULL,"",NULL,"NULL"}', '{1.5,-2}'),
		(2, NULL, '::1', '::/0', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '', '', '', '24:00:00', '00:00:00-12', 'empty', '(,)', '(,)', 'empty', '{}',
		0, '', '', 'null', 'null', 'NaN', '1e-300', 'NaN', '{}', '{}', '2026-06-30 23:59:59.999999', '1999-12-31 23:00:00-01', '0001-01-01 BC',
		'-178956970 years -2147483648 days -2562047788:00:54.775807', '{}', NULL, '', '', '{}', '{}')`)
	compare := func(what string, msgs []map[string]any) int {
		t.Helper()
		s := e.get("table", "k", "offset", "-1", "log", "changes_only", "subset__where", "id > 0")
		var sub struct{ Data []map[string]any }
		if err := json.Unmarshal([]byte(s.body), &sub); err != nil {
			t.Fatalf("%v %s", err, s.body)
		}
		want := map[string]map[string]any{}
		for _, m := range sub.Data {
			want[m["key"].(string)] = m["value"].(map[string]any)
		}
		n := 0
		for _, m := range msgs {
			v, ok := m["value"].(map[string]any)
			if !ok {
				continue
			}
			k := m["key"].(string)
			for c, x := range v {
				n++
				if fmt.Sprint(x) != fmt.Sprint(want[k][c]) {
					t.Errorf("%s: %s %s = %q, PostgreSQL prints %q", what, k, c, x, want[k][c])
				}
			}
		}
		return n
	}
	r := e.get("table", "k", "offset", "-1", "replica", "full")
	h := r.h.Get("electric-handle")
	if n := compare("snapshot", r.msgs(t)); n != 2*44 {
		t.Errorf("compared %d values of the snapshot, want %d", n, 2*44)
	}
	// The log: a row inserted as a copy of row 1, row 1 updated to row
	// 2's values (replica=full: whole rows).
	e.exec(`INSERT INTO k SELECT 3, m, i, ci, mac, bt, vb, pt, bx, pa, pg, cr, ln, ls, tv, tq, x, tm, ttz, r4, nr, tr, dr, mr, o, ch, nm, j, jb, f4, f8, n, ivs, bxs, ts, tz, d, iv, ivs2, u, by, tx, arr, mt FROM k WHERE id = 1;
		UPDATE k SET (m, i, ci, mac, bt, vb, pt, bx, pa, pg, cr, ln, ls, tv, tq, x, tm, ttz, r4, nr, tr, dr, mr, o, ch, nm, j, jb, f4, f8, n, ivs, bxs, ts, tz, d, iv, ivs2, u, by, tx, arr, mt) =
		  (SELECT m, i, ci, mac, bt, vb, pt, bx, pa, pg, cr, ln, ls, tv, tq, x, tm, ttz, r4, nr, tr, dr, mr, o, ch, nm, j, jb, f4, f8, n, ivs, bxs, ts, tz, d, iv, ivs2, u, by, tx, arr, mt FROM k WHERE id = 2) WHERE id = 1`)
	eventually(t, 10*time.Second, func() string {
		r := e.get("table", "k", "offset", "0_0", "handle", h, "replica", "full")
		if n := compare("log", r.msgs(t)); n < 2*44 {
			return "waiting for the insert and the update: " + r.body
		}
		return ""
	})
}
