package hostile

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// queryCases are hostile queries against the server with small limits
// (--max-sql-bytes 32768, --row-limit 100): each refused with its code,
// or served with the answer PostgreSQL gives, before and after a write.
var queryCases = []hostileCase{
	// Item 1: operator chains are bounded before the parser runs.
	refusedCase("1,000 chained +", subscribeFrame("SELECT id FROM items WHERE id = "+chain("1", "+", 1000)), "too_complex", false),
	refusedCase("1,000 chained ::int8", subscribeFrame("SELECT id FROM items WHERE n = 1"+strings.Repeat("::int8", 1000)), "too_complex", false),
	refusedCase("1,000 chained COLLATE", subscribeFrame(`SELECT id FROM items WHERE v`+strings.Repeat(` COLLATE "C"`, 1000)+` = 'a'`), "too_complex", false),
	refusedCase("24,000 chained + (48 KB, over --max-sql-bytes)", subscribeFrame("SELECT id FROM items WHERE id = "+chain("1", "+", 24000)), "too_long", false),
	// Item 11: a NUL byte would cut the query short in the parser.
	refusedCase("NUL byte", subscribeFrame("SELECT id FROM items WHERE n = -99\x00 OR n >= 0"), "nul_byte", false),

	// Item 2: LIMIT and OFFSET near 2^63 (OFFSET+LIMIT+margin saturates).
	servedCase("LIMIT and OFFSET 2^63-1", "SELECT id, n FROM items WHERE id <= 5 ORDER BY id LIMIT 9223372036854775807 OFFSET 9223372036854775807", nil, ""),
	servedCase("DESC LIMIT 2^63-1", "SELECT id, n FROM items WHERE id <= 5 ORDER BY id DESC LIMIT 9223372036854775807", nil, ""),
	servedCase("LIMIT 1 OFFSET 2^63-33", "SELECT id FROM items WHERE id <= 5 ORDER BY id LIMIT 1 OFFSET 9223372036854775775", nil, ""),
	servedCase("FETCH FIRST 2^63-1", "SELECT id, n FROM items WHERE id <= 5 ORDER BY n, id FETCH FIRST 9223372036854775807 ROWS ONLY", nil, ""),
	servedCase("LIMIT 2^63-1 without ORDER BY", "SELECT id FROM items WHERE id <= 5 LIMIT 9223372036854775807", nil, ""),
	servedCase("int8 text binds of 2^63-1", "SELECT id, n FROM items WHERE id <= 5 ORDER BY id LIMIT $1 OFFSET $2",
		[]param{{oid: 20, value: "9223372036854775807"}, {oid: 20, value: "9223372036854775807"}}, ""),
	servedCase("int8 binary binds", "SELECT id, n FROM items WHERE id <= 5 ORDER BY id DESC LIMIT $1 OFFSET $2",
		[]param{{oid: 20, value: "9223372036854775807", binary: true}, {oid: 20, value: "1", binary: true}}, ""),
	servedCase("COUNT(*) under LIMIT and OFFSET 2^63-1", "SELECT COUNT(*) FROM items WHERE id <= 5 LIMIT 9223372036854775807 OFFSET 9223372036854775807", nil, ""),

	// Item 6: a join's joined size is bounded by --row-limit.
	refusedCase("4-way self-join of 1.6 million rows", subscribeFrame("SELECT COUNT(*) FROM items a JOIN items b ON b.grp = a.grp JOIN items c ON c.grp = b.grp JOIN items d ON d.grp = c.grp"), "row_limit", false),
	refusedCase("join of 4,000 rows", subscribeFrame("SELECT a.id, b.id FROM items a JOIN items b ON b.grp = a.grp"), "row_limit", false),

	// Item 16: an untyped bind in an IN list takes the list's common type.
	servedCase("untyped bind over int4 in an IN list with an int8 bind", "SELECT id FROM items WHERE id IN (12, $1, 15, $2)",
		[]param{{oid: 0, value: "9000000000"}, {oid: 20, value: "16"}},
		// PostgreSQL resolves the list's common type, bigint, with $2 an int8.
		"SELECT id FROM items WHERE id IN (12, 9000000000, 15, 16::int8)"),
	refusedCase("4-byte binary bind where int8 is due", `{"type":"subscribe","id":"s","sql":"SELECT id FROM items WHERE id IN (12, $1, 15, $2)","params":[{"oid":0,"format":"binary","value":"AAAADA=="},{"oid":20,"value":"16"}],"mode":"rows"}`, "bind", false),
	// Item 17: a constant outside a join column's type.
	// (The constant bounds neither side: each is read whole, so the
	// tables are small.)
	servedCase("join with int4 column = 9000000000", "SELECT a.id, b.v FROM pairs a JOIN pairs b ON b.id = a.id WHERE a.id = 9000000000", nil, ""),
	servedCase("join with int4 column IN (3, 9000000000)", "SELECT a.id, b.v FROM pairs a JOIN pairs b ON b.id = a.id WHERE a.id IN (3, 9000000000)", nil, ""),

	// Item 18: right after DROP TABLE and CREATE TABLE, the new table,
	// with the same SQL as a live subscription on the old one: compiled
	// from the catalog's cached shape, its plan had the old table's key
	// and joined the old view, serving the dropped table's rows until the
	// catalog check (found by this suite). No write reaches the new table
	// before the subscribe, so no Relation in the stream refreshes the
	// catalog first.
	{"subscribe right after DROP and CREATE TABLE, same SQL", func(t *testing.T, h *harness) {
		const sql = "SELECT id, v FROM again"
		c := h.dial(t)
		c.send(t, subscribeFrameID("old", sql))
		c.expect(t, "accepted", "")
		h.exec(t, "DROP TABLE again; CREATE TABLE again (id int PRIMARY KEY, v text, w int)")
		c.send(t, subscribeFrameID("new", sql))
		h.canary.check(t, "during")
		var oldEnd, accepted map[string]any
		for oldEnd == nil || accepted == nil {
			f := c.next(t)
			switch {
			case f["id"] == "old" && f["type"] == "ended" && f["code"] == "table_dropped":
				oldEnd = f
			case f["id"] == "new" && f["type"] == "accepted":
				accepted = f
			default:
				t.Fatalf("frame %.300v, want old ended table_dropped and new accepted", f)
			}
		}
		var r result
		r.accepted(accepted)
		r.compare(t, h, sql, nil, false)
		if len(r.rows) != 0 {
			t.Fatalf("new subscription holds %d rows, want the new table's none", len(r.rows))
		}
		// It follows the new table.
		h.exec(t, "INSERT INTO again VALUES (2, 'new', 7)")
		h.canary.check(t, "after the write")
		h.untilLag(t, c, &r)
		r.compare(t, h, sql, nil, false)
		if len(r.rows) != 1 {
			t.Fatalf("new subscription holds %d rows after the insert, want the new table's 1", len(r.rows))
		}
	}},

	// Item 12: values PostgreSQL (or the query layer, before any read)
	// rejects are refused not retryable, with their codes; the server's
	// log never holds the value.
	rejectedCase("float8 bind 1e400", "SELECT id FROM vals WHERE f = $1", `[{"oid":701,"value":"1e400"}]`, "1e400", "bind"),
	rejectedCase("float8 literal 1e400", "SELECT id FROM vals WHERE f = '1e400'::float8", "", "1e400", "type"),
	rejectedCase("text bind with byte 0xFF", "SELECT id FROM vals WHERE s = $1",
		`[{"oid":25,"format":"binary","value":"`+base64.StdEncoding.EncodeToString([]byte("qz7\xffqz7"))+`"}]`, "qz7", "read_failed"),
	rejectedCase("text bind with NUL", "SELECT id FROM vals WHERE s = $1", `[{"oid":25,"value":"qz8\u0000qz8"}]`, "qz8", "read_failed"),
	rejectedCase("binary text bind with NUL", "SELECT id FROM vals WHERE s = $1",
		`[{"oid":25,"format":"binary","value":"`+base64.StdEncoding.EncodeToString([]byte("qz9\x00qz9"))+`"}]`, "qz9", "read_failed"),
	rejectedCase("int4[] bind past 2^31-1", "SELECT id FROM vals WHERE id = ANY($1)", `[{"oid":1007,"value":"{2,2147483648}"}]`, "2147483648", "bind"),
	servedCase("int4[] bind at 2^31-1", "SELECT id FROM vals WHERE id = ANY($1)", []param{{oid: 1007, value: "{2,2147483647}"}}, ""),
}

// rejectedCase subscribes sql with params (a JSON array, "" for none)
// and expects it refused code, not retryable: the same query would fail
// the same way whatever the rows hold, so a read cache must not retry
// it. A read PostgreSQL failed is logged as a warning naming the SQLSTATE
// and the table; no line of the server's log holds literal (a marker in
// the value).
func rejectedCase(name, sql, params, literal, code string) hostileCase {
	return hostileCase{name, func(t *testing.T, h *harness) {
		frame := subscribeFrame(sql)
		if params != "" {
			frame = strings.TrimSuffix(frame, "}") + `,"params":` + params + "}"
		}
		c := h.dial(t)
		c.send(t, frame)
		h.canary.check(t, "during")
		f := c.expect(t, "refused", code)
		if f["retryable"] != false {
			t.Fatalf("refused = %.300v, want retryable false", f)
		}
		if code == "read_failed" {
			line := waitLog(t, h, func(l string) bool {
				return strings.Contains(l, "hydration read failed") && strings.Contains(l, "sqlstate=22021") && strings.Contains(l, "public.vals")
			})
			// PostgreSQL's message quotes the bytes it rejected.
			for _, bad := range []string{"err=", "0xff", "0x00", "invalid byte sequence"} {
				if strings.Contains(line, bad) {
					t.Fatalf("the warning holds PostgreSQL's message (%q): %.500s", bad, line)
				}
			}
		}
		for _, l := range strings.Split(h.srv.Log(), "\n") {
			if strings.Contains(l, literal) {
				t.Fatalf("the server logged the value: %.500s", l)
			}
		}
		c.send(t, `{"type":"ping","data":"usable"}`)
		c.expect(t, "pong", "")
	}}
}

// waitLog waits for a line of the server's log that match accepts, and
// returns it.
func waitLog(t *testing.T, h *harness, match func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, l := range strings.Split(h.srv.Log(), "\n") {
			if match(l) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no such line in the server's log:\n%s", tail(h.srv.Log(), 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// windowCases: item 15, a lag frame vouches only for whole windows; item
// 19, a reorder that changes no output value still touches.
var windowCases = []hostileCase{
	{"windows a DELETE shrank are whole at the next lag frame", func(t *testing.T, h *harness) {
		c := h.dial(t)
		sqls := make([]string, maxSubs)
		args := make([][]any, maxSubs)
		for i := range maxSubs {
			sqls[i] = "SELECT id, k FROM w WHERE k > $1 ORDER BY k, id LIMIT $2"
			if i%2 == 0 {
				sqls[i] = "SELECT id, k, d FROM w WHERE k > $1 ORDER BY d, k, id LIMIT $2"
			}
			args[i] = []any{fmt.Sprint(i % 4), fmt.Sprint(5 + i%60)}
			b, _ := json.Marshal(map[string]any{"type": "subscribe", "id": fmt.Sprint(i), "sql": sqls[i], "mode": "rows",
				"params": []map[string]any{{"oid": 23, "value": args[i][0]}, {"oid": 20, "value": args[i][1]}}})
			c.send(t, string(b))
		}
		res := make([]result, maxSubs)
		for range maxSubs {
			f := c.expect(t, "accepted", "")
			var i int
			fmt.Sscan(fmt.Sprint(f["id"]), &i)
			res[i].accepted(f)
		}
		h.exec(t, "DELETE FROM w WHERE k <= 150")
		var after string
		if err := h.db.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&after); err != nil {
			t.Fatal(err)
		}
		// Apply every frame up to the first lag frame past the DELETE:
		// then every window must be PostgreSQL's.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			_, b, err := c.ws.Read(ctx)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			var f map[string]any
			json.Unmarshal(b, &f)
			if f["type"] == "lag" {
				if lsn, ok := f["lsn"].(string); ok && lsnAtLeast(lsn, after) {
					break
				}
				continue
			}
			if f["type"] != "delta" {
				t.Fatalf("frame %.300s, want deltas", b)
			}
			var i int
			fmt.Sscan(fmt.Sprint(f["id"]), &i)
			res[i].delta(f)
		}
		for i := range maxSubs {
			r := res[i]
			r.compare(t, h, sqls[i], args[i], true)
		}
	}},
	{"a reorder that changes no output value touches", func(t *testing.T, h *harness) {
		c := h.dial(t)
		b, _ := json.Marshal(map[string]any{"type": "subscribe", "id": "t", "sql": "SELECT c FROM ties ORDER BY r LIMIT 3", "mode": "touch"})
		c.send(t, string(b))
		c.expect(t, "accepted", "")
		h.exec(t, "UPDATE ties SET r = 10 WHERE k = 1") // order 2,3,4: every value still 'x'
		h.canary.check(t, "after the reorder")
		f := c.expect(t, "touched", "")
		if ids, _ := f["ids"].([]any); len(ids) != 1 || ids[0] != "t" {
			t.Fatalf("touched %.200v, want t", f)
		}
	}},
}

// untilLag applies the deltas c receives into r until a lag frame past
// every write made so far: what the protocol promises a client (a lag
// frame's heartbeat follows every frame of the transactions before it,
// a view that must read again included).
func (h *harness) untilLag(t *testing.T, c *client, r *result) {
	t.Helper()
	var after string
	if err := h.db.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&after); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, b, err := c.ws.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var f map[string]any
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("frame %.200s: %v", b, err)
		}
		switch f["type"] {
		case "lag":
			if lsn, ok := f["lsn"].(string); ok && lsnAtLeast(lsn, after) {
				return
			}
		case "delta":
			r.delta(f)
		default:
			t.Fatalf("frame %.300s, want deltas and lag frames", b)
		}
	}
}

// lsnAtLeast compares two LSNs in PostgreSQL's text form.
func lsnAtLeast(a, b string) bool {
	parse := func(s string) uint64 {
		var hi, lo uint64
		fmt.Sscanf(s, "%X/%X", &hi, &lo)
		return hi<<32 | lo
	}
	return parse(a) >= parse(b)
}

// retypedCase is item 20: a table joined to itself three times, with
// key lookups carried across the ON equalities, subscribed after its
// column was retyped and before the stream's next Relation for it (the
// view took the old views' values and held 0 rows where PostgreSQL
// returned 2).
var retypedCase = hostileCase{"3-way self-join subscribed after a column was retyped", func(t *testing.T, h *harness) {
	old := h.dial(t)
	old.send(t, subscribeFrameID("old", "SELECT * FROM t2 WHERE k = 1"))
	old.expect(t, "accepted", "")
	h.exec(t, "ALTER TABLE t2 ALTER c1 TYPE uuid USING c1::uuid")
	const sql = `SELECT * FROM t2 s0 JOIN t2 s1 ON s1.k = s0.k JOIN t2 s2 ON s2.r = s1.k
		WHERE (s2.r = $1 OR s2.r IS NULL) AND s1.c1 IN ('00000000-0000-0000-0000-000000000001', 'ffffffff-ffff-ffff-ffff-ffffffffffff')`
	b, _ := json.Marshal(map[string]any{"type": "subscribe", "id": "s", "sql": sql, "mode": "rows",
		"params": []map[string]any{{"oid": 23, "value": "2"}}})
	c := h.dial(t)
	c.send(t, string(b))
	h.canary.check(t, "during")
	var r result
	r.accepted(c.expect(t, "accepted", ""))
	r.compare(t, h, sql, []any{"2"}, false)
	if len(r.rows) != 2 {
		t.Fatalf("%d rows, want the 2 PostgreSQL returns", len(r.rows))
	}
	// The first change after the ALTER brings the table's Relation.
	h.exec(t, "UPDATE t2 SET r = 2 WHERE k = 3")
	h.canary.check(t, "after the write")
	h.untilLag(t, c, &r)
	r.compare(t, h, sql, []any{"2"}, false)
	if len(r.rows) != 3 {
		t.Fatalf("%d rows after the write, want the 3 PostgreSQL returns", len(r.rows))
	}
}}

// liftedCases run against the server with every limit lifted.
var liftedCases = []hostileCase{
	// Item 1: the thresholds that crashed the parser or its deparser.
	refusedCase("24,000 chained + (crashed the parser)", subscribeFrame("SELECT id FROM items WHERE id = "+chain("1", "+", 24000)), "too_complex", false),
	refusedCase("60,000 chained +", subscribeFrame("SELECT id FROM items WHERE id = "+chain("1", "+", 60000)), "too_complex", false),
	refusedCase("500,000 chained + (1 MB)", subscribeFrame("SELECT id FROM items WHERE id = "+chain("1", "+", 500000)), "too_complex", false),
	refusedCase("24,000 chained ::int8", subscribeFrame("SELECT id FROM items WHERE n = 1"+strings.Repeat("::int8", 24000)), "too_complex", false),
	refusedCase("24,000 chained COLLATE", subscribeFrame(`SELECT id FROM items WHERE v`+strings.Repeat(` COLLATE "C"`, 24000)+` = 'a'`), "too_complex", false),
	refusedCase("NUL byte, limits lifted", subscribeFrame("SELECT id FROM items WHERE n = -99\x00 OR n >= 0"), "nul_byte", false),
	// Item 14: --compile-timeout bounds parsing and compiling (300 ms here).
	refusedCase("1 MB of ORed equalities", subscribeFrame("SELECT id FROM items WHERE "+orList(70000)), "timeout", true),
	refusedCase("1 MB IN list", subscribeFrame("SELECT id FROM items WHERE n IN ("+numbers(150000)+")"), "timeout", true),
	// Item 4: tables outside the publication, and system catalogs, whose
	// rows no subscriber may read and whose answers would never change.
	refusedCase("pg_catalog.pg_authid (password hashes)", subscribeFrame("SELECT oid, rolname, rolpassword FROM pg_catalog.pg_authid"), "system_table", false),
	refusedCase("pg_catalog.pg_statistic", subscribeFrame("SELECT * FROM pg_catalog.pg_statistic"), "system_table", false),
	refusedCase("pg_class unqualified", subscribeFrame("SELECT oid, relname FROM pg_class"), "system_table", false),
	refusedCase("information_schema.tables", subscribeFrame("SELECT table_name FROM information_schema.tables"), "system_table", false),
	refusedCase("a table outside --tables", subscribeFrame("SELECT * FROM pairs"), "not_published", true),
	refusedCase("a table in another schema", subscribeFrame("SELECT * FROM secret.vault"), "not_published", true),
	refusedCase("a table in another schema, quoted", subscribeFrame(`SELECT * FROM "secret"."vault"`), "not_published", true),
	refusedCase("a table in another schema, upper case", subscribeFrame("SELECT * FROM SECRET.VAULT"), "not_published", true),
	refusedCase("a table outside the publication, counted", subscribeFrame("SELECT COUNT(*) FROM secret.vault"), "not_published", true),
	refusedCase("a table outside the publication, joined", subscribeFrame("SELECT i.id, v.s FROM items i JOIN secret.vault v ON v.id = i.id"), "not_published", true),
	// A big answer with the limits lifted is served whole.
	servedCase("a 2 MB row", "SELECT * FROM big WHERE id = 1", nil, ""),
}

// chain is n copies of item joined by op.
func chain(item, op string, n int) string {
	return strings.Repeat(item+op, n-1) + item
}

func orList(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("n = %d", i)
	}
	return strings.Join(parts, " OR ")
}

func numbers(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	return strings.Join(parts, ", ")
}

// subscribeFrame is a rows-mode subscribe of sql, id "s".
func subscribeFrame(sql string) string { return subscribeFrameID("s", sql) }

func subscribeFrameID(id, sql string) string {
	b, _ := json.Marshal(map[string]any{"type": "subscribe", "id": id, "sql": sql, "mode": "rows"})
	return string(b)
}

// param is a bind of a served case: sent with its OID (text, or the
// binary form of an int8 when binary), and given to PostgreSQL as text.
type param struct {
	oid    uint32
	value  string
	binary bool
}

// servedCase subscribes sql with params; the accepted result must equal
// PostgreSQL's answer, and so must the result the client holds after a
// write to the rows it reads.
//
// PostgreSQL is asked pgSQL ("" for sql with the params as text values,
// for a query whose binds resolve as literals would).
func servedCase(name, sql string, params []param, pgSQL string) hostileCase {
	return hostileCase{name, func(t *testing.T, h *harness) {
		var ps []map[string]any
		var args []any
		for _, p := range params {
			m := map[string]any{"oid": p.oid, "value": p.value}
			if p.binary {
				var n int64
				fmt.Sscan(p.value, &n)
				m["format"], m["value"] = "binary", base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, uint64(n)))
			}
			ps = append(ps, m)
			args = append(args, p.value)
		}
		b, _ := json.Marshal(map[string]any{"type": "subscribe", "id": "s", "sql": sql, "params": ps, "mode": "rows"})
		c := h.dial(t)
		c.send(t, string(b))
		h.canary.check(t, "during")
		f := c.expect(t, "accepted", "")
		var r result
		r.accepted(f)
		ordered := strings.Contains(sql, "ORDER BY")
		if pgSQL != "" {
			sql, args = pgSQL, nil
		}
		r.compare(t, h, sql, args, ordered)
		h.exec(t, "UPDATE items SET n = n + 1 WHERE id IN (3, 12)")
		h.exec(t, "UPDATE pairs SET v = v || '+' WHERE id = 3")
		h.exec(t, "UPDATE big SET body = body || 'x' WHERE id = 1")
		h.canary.check(t, "after the write")
		h.untilLag(t, c, &r)
		r.compare(t, h, sql, args, ordered)
	}}
}

// result is a rows-mode subscription's result as a client holds it.
type result struct {
	rows  map[string][]string
	order []string
}

func strs(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		if v == nil {
			out[i] = "<null>"
			continue
		}
		out[i] = fmt.Sprint(v)
	}
	return out
}

func (r *result) accepted(f map[string]any) {
	r.rows = map[string][]string{}
	r.order = nil
	rows, _ := f["rows"].([]any)
	for _, x := range rows {
		row, _ := x.(map[string]any)
		k := fmt.Sprint(row["key"])
		vs, _ := row["values"].([]any)
		r.rows[k] = strs(vs)
		r.order = append(r.order, k)
	}
}

func (r *result) delta(f map[string]any) {
	rm, _ := f["remove"].([]any)
	for _, k := range rm {
		delete(r.rows, fmt.Sprint(k))
	}
	ups, _ := f["upsert"].([]any)
	for _, x := range ups {
		row, _ := x.(map[string]any)
		vs, _ := row["values"].([]any)
		r.rows[fmt.Sprint(row["key"])] = strs(vs)
	}
	if o, ok := f["order"].([]any); ok {
		r.order = r.order[:0]
		for _, k := range o {
			r.order = append(r.order, fmt.Sprint(k))
		}
	} else {
		r.order = nil
		for k := range r.rows {
			r.order = append(r.order, k)
		}
	}
}

// values are the result's rows, in order when ordered (else sorted).
func (r *result) values(ordered bool) []string {
	var out []string
	if ordered {
		for _, k := range r.order {
			out = append(out, strings.Join(r.rows[k], "|"))
		}
		return out
	}
	for _, vs := range r.rows {
		out = append(out, strings.Join(vs, "|"))
	}
	slices.Sort(out)
	return out
}

// compare checks the client's result against PostgreSQL's answer to
// sql with args (text values, as psql prints them).
func (r *result) compare(t *testing.T, h *harness, sql string, args []any, ordered bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := h.db.Query(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	var want []string
	for rows.Next() {
		var vs []string
		for _, v := range rows.RawValues() {
			if v == nil {
				vs = append(vs, "<null>")
				continue
			}
			vs = append(vs, string(v))
		}
		want = append(want, strings.Join(vs, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	if !ordered {
		slices.Sort(want)
	}
	if got := r.values(ordered); !slices.Equal(got, want) {
		t.Fatalf("client holds %q, PostgreSQL answers %q", got, want)
	}
}
