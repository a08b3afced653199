package s2s_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/s2s"
)

const itemsSetup = `
CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2), tags text[]);
INSERT INTO items VALUES (1, 'apple', 1.50, '{red,"a b"}'), (2, 'pear', NULL, NULL), (3, 'fig "x"', 10.00, '{}');
`

// waitFor polls fn until it returns nil or wait passes.
func waitFor(t *testing.T, wait time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", wait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHelloAndLag(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c, _, err := e.dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	hello, err := c.read()
	if err != nil {
		t.Fatal(err)
	}
	var sysid string
	if err := e.conn.QueryRow(context.Background(), "SELECT system_identifier::text FROM pg_control_system()").Scan(&sysid); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"type":"hello","protocol":1,"server":"test","system_identifier":%q,"database":%q,"max_subscriptions":1000,"max_frame_bytes":1048576,"lag_interval_ms":100}`, sysid, e.db.Name)
	if hello.raw != want {
		t.Fatalf("hello =\n%s\nwant\n%s", hello.raw, want)
	}
	lag, err := c.read()
	if err != nil {
		t.Fatal(err)
	}
	if lag.str("type") != "lag" {
		t.Fatalf("frame after hello = %s, want a lag frame", lag.raw)
	}
	if _, ok := lag.m["ms"]; !ok {
		t.Fatalf("lag frame %s has no ms member", lag.raw)
	}
	// Heartbeats come every 50 ms: lag frames soon carry a number and
	// the heartbeat's position, and keep coming.
	var numbered int
	for i := 0; i < 50 && numbered < 3; i++ {
		f, err := c.read()
		if err != nil {
			t.Fatal(err)
		}
		if f.str("type") != "lag" {
			t.Fatalf("unexpected frame %s", f.raw)
		}
		if ms, ok := f.m["ms"].(float64); ok && ms >= 0 && f.str("lsn") != "" {
			numbered++
			// written_us is when the heartbeat was written: ms before the
			// frame was made, give or take the rounding.
			us, _ := f.m["written_us"].(float64)
			if age := time.Since(time.UnixMicro(int64(us))); age < time.Duration(ms)*time.Millisecond || age > time.Minute {
				t.Fatalf("lag frame %s: written_us is %s ago, want at least ms ago", f.raw, age)
			}
		}
	}
	if numbered < 3 {
		t.Fatalf("saw %d lag frames with a number, want 3", numbered)
	}
}

func TestSubscribeRows(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c, _ := e.connect()
	c.send(`{"type":"subscribe","id":"q1","sql":"SELECT id, name, price, tags FROM items WHERE id < $1 ORDER BY id","params":[{"oid":23,"value":"10"}],"mode":"rows"}`)
	acc := c.expect("accepted")
	if acc.str("id") != "q1" || acc.str("mode") != "rows" || acc.str("lsn") == "" {
		t.Fatalf("accepted = %s, want id q1, mode rows and an lsn", acc.raw)
	}
	if got := fmt.Sprint(acc.m["order"]); got != "[map[column:0]]" || acc.m["limit"] != nil || acc.m["offset"] != nil {
		t.Errorf("accepted order = %s, limit = %v, offset = %v; want [map[column:0]] and no limit or offset", got, acc.m["limit"], acc.m["offset"])
	}
	cols := fmt.Sprint(acc.m["columns"])
	if want := "[map[name:id type_oid:23] map[name:name type_oid:25] map[name:price type_mod:655366 type_oid:1700] map[name:tags type_oid:1009]]"; cols != want {
		t.Errorf("columns = %s, want %s", cols, want)
	}
	var got [][]string
	keys := map[string]string{}
	for _, r := range list(acc, "rows") {
		got = append(got, values(r))
		keys[values(r)[0]] = key(r)
	}
	want := [][]string{{"1", "apple", "1.50", `{red,"a b"}`}, {"2", "pear", "<null>", "<null>"}, {"3", `fig "x"`, "10.00", "{}"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows = %q, want %q", got, want)
	}

	// An insert, an update and a delete in one transaction: one delta.
	tx, _ := e.conn.Begin(context.Background())
	tx.Exec(context.Background(), "INSERT INTO items VALUES (4, 'kiwi', 0.10, NULL)")
	tx.Exec(context.Background(), "UPDATE items SET price = 2.25 WHERE id = 1")
	tx.Exec(context.Background(), "DELETE FROM items WHERE id = 2")
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	var lsn string
	e.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&lsn)
	d := c.expect("delta")
	if d.str("id") != "q1" || d.str("lsn") == "" {
		t.Fatalf("delta = %s, want id q1 and a commit lsn", d.raw)
	}
	var ups [][]string
	for _, r := range list(d, "upsert") {
		ups = append(ups, values(r))
	}
	slices.SortFunc(ups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	if want := [][]string{{"1", "apple", "2.25", `{red,"a b"}`}, {"4", "kiwi", "0.10", "<null>"}}; fmt.Sprint(ups) != fmt.Sprint(want) {
		t.Errorf("upsert = %q, want %q", ups, want)
	}
	if rm := fmt.Sprint(list(d, "remove")); rm != fmt.Sprint([]any{keys["2"]}) {
		t.Errorf("remove = %s, want [%s] (the key row 2 was accepted with)", rm, keys["2"])
	}
	if n := len(list(d, "order")); n != 3 {
		t.Errorf("order has %d keys, want 3: %s", n, d.raw)
	}
	// A change the query does not see sends nothing; the next that it
	// sees comes next.
	e.exec("INSERT INTO items VALUES (50, 'out of range', 1, NULL)")
	e.exec("UPDATE items SET name = 'APPLE' WHERE id = 1")
	d = c.expect("delta")
	if ups := list(d, "upsert"); len(ups) != 1 || values(ups[0])[1] != "APPLE" {
		t.Fatalf("delta = %s, want row 1 renamed APPLE", d.raw)
	}
}

func TestSubscribeTouch(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c, _ := e.connect()
	c.send(`{"type":"subscribe","id":"t1","sql":"SELECT * FROM items WHERE id = 1","mode":"touch"}`)
	c.send(`{"type":"subscribe","id":"t2","sql":"SELECT name FROM items WHERE price > $1","params":[{"oid":1700,"value":"5"}],"mode":"touch"}`)
	for _, id := range []string{"t1", "t2"} {
		_ = id
		acc := c.expect("accepted")
		if acc.str("mode") != "touch" || acc.m["rows"] != nil {
			t.Fatalf("accepted = %s, want touch mode with rows null", acc.raw)
		}
	}
	// One transaction touching both: one touched frame naming both.
	tx, _ := e.conn.Begin(context.Background())
	tx.Exec(context.Background(), "UPDATE items SET name = 'green apple' WHERE id = 1")
	tx.Exec(context.Background(), "UPDATE items SET name = 'fig' WHERE id = 3")
	tx.Commit(context.Background())
	if ids := c.touchedIDs(2); ids != "[t1 t2]" {
		t.Fatalf("touched ids = %s, want t1 and t2", ids)
	}
	e.exec("UPDATE items SET name = 'pear!' WHERE id = 2") // neither sees it
	e.exec("UPDATE items SET price = 99 WHERE id = 1")     // t1 and t2 (1 enters price > 5)
	if ids := c.touchedIDs(2); ids != "[t1 t2]" {
		t.Fatalf("touched ids = %s, want t1 and t2", ids)
	}
}

func TestRefusals(t *testing.T) {
	e := newEnv(t, itemsSetup, func(s *s2s.Config, ec *engine.Config) {
		s.MaxSubscriptions = 3
		ec.Query.MaxInValues = 5
		ec.RowLimit = 2
	})
	c, _ := e.connect()
	tests := []struct {
		frame, code string
		retryable   bool
	}{
		{`{"type":"subscribe","id":"a","sql":"SELECT name FROM items UNION SELECT name FROM items","mode":"rows"}`, "set_operation", false},
		{`{"type":"subscribe","id":"b","sql":"SELECT * FROM nope","mode":"rows"}`, "unknown_table", true},
		{`{"type":"subscribe","id":"c","sql":"SELECT * FROM items","mode":"both"}`, "bad_mode", false},
		{`{"type":"subscribe","id":"d","sql":"SELECT * FROM items WHERE id = $1","params":[{"oid":23,"format":"binary","value":"%%%"}],"mode":"rows"}`, "bad_param", false},
		{`{"type":"subscribe","id":"e","sql":"SELECT * FROM items WHERE id = $1","params":[{"oid":23,"value":"x"}],"mode":"rows"}`, "bind", false},
		{`{"type":"subscribe","id":"f","sql":"SELECT * FROM items WHERE id IN (1,2,3,4,5,6)","mode":"rows"}`, "too_many_in_values", false},
		{`{"type":"subscribe","id":"g","sql":"SELECT * FROM items","mode":"rows"}`, "row_limit", false},
	}
	for _, tt := range tests {
		c.send(tt.frame)
		f := c.expect("refused")
		if f.str("code") != tt.code || f.m["retryable"] != tt.retryable || f.str("reason") == "" {
			t.Errorf("%s\n  refused = %s, want code %s, retryable %v and a reason", tt.frame, f.raw, tt.code, tt.retryable)
		}
	}
	// The subscription cap: a retryable refusal naming the limit.
	for i := range 3 {
		c.sendf(`{"type":"subscribe","id":"ok%d","sql":"SELECT * FROM items WHERE id = %d","mode":"touch"}`, i, i)
		c.expect("accepted")
	}
	c.send(`{"type":"subscribe","id":"over","sql":"SELECT * FROM items WHERE id = 9","mode":"touch"}`)
	f := c.expect("refused")
	if f.str("code") != "too_many_subscriptions" || f.m["retryable"] != true || !strings.Contains(f.str("reason"), "3") {
		t.Fatalf("refused = %s, want too_many_subscriptions, retryable, naming the limit 3", f.raw)
	}
	// Unsubscribing frees a place.
	c.send(`{"type":"unsubscribe","id":"ok0"}`)
	c.send(`{"type":"subscribe","id":"again","sql":"SELECT * FROM items WHERE id = 9","mode":"touch"}`)
	c.expect("accepted")
	// A duplicate id is an error frame, not a refusal of the live one.
	c.send(`{"type":"subscribe","id":"ok1","sql":"SELECT * FROM items","mode":"touch"}`)
	if f := c.expect("error"); f.str("code") != "bad_id" || f.str("id") != "ok1" {
		t.Fatalf("error = %s, want bad_id for ok1", f.raw)
	}
}

func TestUnsubscribeStopsFrames(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c, _ := e.connect()
	c.send(`{"type":"subscribe","id":"gone","sql":"SELECT * FROM items WHERE id = 1","mode":"rows"}`)
	c.expect("accepted")
	c.send(`{"type":"subscribe","id":"stays","sql":"SELECT id, name FROM items WHERE id <= 1","mode":"rows"}`)
	c.expect("accepted")
	e.exec("UPDATE items SET name = 'one' WHERE id = 1")
	seen := map[string]bool{}
	for range 2 {
		seen[c.expect("delta").str("id")] = true
	}
	if !seen["gone"] || !seen["stays"] {
		t.Fatalf("deltas for %v, want both subscriptions", seen)
	}
	c.send(`{"type":"unsubscribe","id":"gone"}`)
	c.send(`{"type":"ping","data":"p1"}`)
	if f := c.expect("pong"); f.str("data") != "p1" {
		t.Fatalf("pong = %s, want data p1", f.raw)
	}
	e.exec("UPDATE items SET name = 'two' WHERE id = 1")
	if f := c.expect("delta"); f.str("id") != "stays" {
		t.Fatalf("delta after unsubscribe = %s, want only stays", f.raw)
	}
	e.exec("UPDATE items SET name = 'three' WHERE id = 1")
	if f := c.expect("delta"); f.str("id") != "stays" {
		t.Fatalf("delta after unsubscribe = %s, want only stays", f.raw)
	}
	c.send(`{"type":"unsubscribe","id":"gone"}`)
	if f := c.expect("error"); f.str("code") != "unknown_id" {
		t.Fatalf("second unsubscribe answered %s, want unknown_id", f.raw)
	}
}

func TestBadFrames(t *testing.T) {
	e := newEnv(t, itemsSetup, func(s *s2s.Config, _ *engine.Config) { s.MaxFrameBytes = 4096 })
	c, _ := e.connect()
	tests := []struct{ send, code string }{
		{`this is not json`, "bad_frame"},
		{`{"id":"x"}`, "bad_frame"},
		{`{"type":"subscribe","id":"x","sql":42}`, "bad_frame"},
		{`{"type":"launch"}`, "unknown_type"},
		{`{"type":"hello"}`, "unknown_type"},
		{`{"type":"ping","data":"` + strings.Repeat("x", 5000) + `"}`, "frame_too_large"},
		{`{"type":"subscribe","id":"","sql":"SELECT 1","mode":"rows"}`, "bad_id"},
	}
	for _, tt := range tests {
		c.send(tt.send)
		f := c.expect("error")
		if f.str("code") != tt.code || f.str("message") == "" {
			t.Errorf("%.40s...: error = %s, want code %s", tt.send, f.raw, tt.code)
		}
		// The socket stays usable.
		c.send(`{"type":"ping","data":"still"}`)
		if f := c.expect("pong"); f.str("data") != "still" {
			t.Fatalf("pong = %s", f.raw)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.ws.Write(ctx, websocket.MessageBinary, []byte(`{"type":"ping"}`))
	if f := c.expect("error"); f.str("code") != "bad_frame" {
		t.Fatalf("binary message answered %s, want bad_frame", f.raw)
	}
	c.send(`{"type":"subscribe","id":"q","sql":"SELECT * FROM items WHERE id = 1","mode":"rows"}`)
	c.expect("accepted")
}

func TestToken(t *testing.T) {
	e := newEnv(t, itemsSetup, func(s *s2s.Config, _ *engine.Config) { s.Token = "s3cret" })
	for _, tt := range []struct {
		name string
		hdr  http.Header
		want int
	}{
		{"missing", nil, 401},
		{"wrong", http.Header{"Authorization": {"Bearer s3cret2"}}, 401},
		{"not bearer", http.Header{"Authorization": {"Basic s3cret"}}, 401},
		{"right", http.Header{"Authorization": {"Bearer s3cret"}}, 101},
	} {
		_, resp, err := e.dial(tt.hdr)
		if resp == nil {
			t.Fatalf("%s: no response: %v", tt.name, err)
		}
		if resp.StatusCode != tt.want {
			t.Errorf("%s token: status %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}
}

func TestConnectionCap(t *testing.T) {
	e := newEnv(t, itemsSetup, func(s *s2s.Config, _ *engine.Config) { s.MaxConnections = 2 })
	a, _ := e.connect()
	e.connect()
	_, resp, err := e.dial(nil)
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third connection: %v, %v; want 503", resp, err)
	}
	a.ws.Close(websocket.StatusNormalClosure, "")
	waitFor(t, 10*time.Second, func() error {
		c, resp, err := e.dial(nil)
		if err != nil {
			return fmt.Errorf("dial after a close: %v (%v)", err, resp)
		}
		c.expect("hello")
		return nil
	})
}

func TestAcceptedWindow(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c, _ := e.connect()
	c.send(`{"type":"subscribe","id":"w","sql":"SELECT name, price FROM items ORDER BY price DESC, id LIMIT 2 OFFSET 1","mode":"rows"}`)
	acc := c.expect("accepted")
	// price DESC puts NULL first (pear), then 10.00 (fig), 1.50 (apple):
	// OFFSET 1 LIMIT 2 is fig, apple. id is not in the output (-1).
	if got, want := fmt.Sprint(acc.m["order"]), "[map[column:1 desc:true nulls_first:true] map[column:-1]]"; got != want {
		t.Errorf("order = %s, want %s", got, want)
	}
	if acc.m["limit"] != float64(2) || acc.m["offset"] != float64(1) {
		t.Errorf("limit = %v, offset = %v, want 2 and 1", acc.m["limit"], acc.m["offset"])
	}
	var got []string
	for _, r := range list(acc, "rows") {
		got = append(got, values(r)[0])
	}
	if fmt.Sprint(got) != `[fig "x" apple]` {
		t.Errorf("rows = %q, want fig then apple", got)
	}
}
