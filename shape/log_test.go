package shape_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/shape"
)

// A restart keeps handles and offsets valid, and what changed while the
// server was down is appended as changes at the new position.
func TestRestartKeepsHandles(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", "table", "items")
	e.exec(`UPDATE items SET n = 100 WHERE id = 1`)
	h, off = waitChange(e, rows, h, off)
	e.stop()
	e.exec(`UPDATE items SET title = 'while down' WHERE id = 2`)
	e.exec(`DELETE FROM items WHERE id = 3`)
	e.exec(`INSERT INTO items VALUES (9, 'new', 9)`)
	e.start()
	var got []map[string]any
	eventually(t, 20*time.Second, func() string {
		r := e.get("table", "items", "offset", off, "handle", h)
		if r.code != 200 {
			return r.body
		}
		got = r.msgs(t)
		if len(got) < 4 {
			return "waiting for the catch-up changes: " + r.body
		}
		return ""
	})
	ops := map[string]string{}
	for _, m := range got {
		if hd := m["headers"].(map[string]any); hd["operation"] != nil {
			ops[m["key"].(string)] = hd["operation"].(string)
			if _, ok := hd["txids"]; ok {
				t.Errorf("a catch-up change carries txids: %v", m)
			}
		}
		applyMsg(rows, m)
	}
	want := map[string]string{`"public"."items"/"2"`: "update", `"public"."items"/"3"`: "delete", `"public"."items"/"9"`: "insert"}
	for k, v := range want {
		if ops[k] != v {
			t.Errorf("after the restart: %s got %q, want %q (all %v)", k, ops[k], v, ops)
		}
	}
	if len(ops) != 3 {
		t.Errorf("catch-up changes %v, want exactly three", ops)
	}
	if rows[`"public"."items"/"1"`]["n"] != "100" || rows[`"public"."items"/"2"`]["title"] != "while down" || len(rows) != 5 {
		t.Errorf("rows after the restart: %v", rows)
	}
	// -1 after the restart serves the same handle.
	if r := e.get("table", "items", "offset", "-1"); r.h.Get("electric-handle") != h {
		t.Errorf("-1 after the restart: handle %q, want %q", r.h.Get("electric-handle"), h)
	}
}

// waitChange follows the shape until it has a change past off.
func waitChange(e *env, rows map[string]map[string]any, h, off string) (string, string) {
	e.t.Helper()
	r := e.get("table", "items", "offset", off, "handle", h, "live", "true")
	for _, m := range r.msgs(e.t) {
		applyMsg(rows, m)
	}
	return r.h.Get("electric-handle"), r.h.Get("electric-offset")
}

// A torn or corrupt log tail is cut on open and never served.
func TestTornTailCut(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", "table", "items")
	e.exec(`UPDATE items SET n = 7 WHERE id = 1`)
	h, off = waitChange(e, rows, h, off)
	e.stop()
	logs, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, h, "log-*"))
	if len(logs) != 1 {
		t.Fatalf("log files %v", logs)
	}
	st, _ := os.Stat(logs[0])
	good := st.Size()
	f, _ := os.OpenFile(logs[0], os.O_APPEND|os.O_WRONLY, 0)
	// A line whose checksum fails, then one torn without its newline.
	f.WriteString(strings.Replace(off, "_1", "_2", 1) + " 00000000 {\"key\":\"forged\"}\n")
	f.WriteString("99999999999_1 1234")
	f.Close()
	e.start()
	st, _ = os.Stat(logs[0])
	if st.Size() != good {
		t.Errorf("log is %d bytes after open, want the sound %d", st.Size(), good)
	}
	r := e.get("table", "items", "offset", "0_0", "handle", h)
	if strings.Contains(r.body, "forged") || r.code != 200 {
		t.Errorf("served after a torn tail: %d %s", r.code, r.body)
	}
}

// A row updated many times does not grow what a fresh client reads, and
// superseded generations go after the retention: an offset into them
// answers 409 with a new handle.
func TestBoundedLog(t *testing.T) {
	e := newEnv(t, `CREATE TABLE one (id int PRIMARY KEY, n int); INSERT INTO one VALUES (1, 0)`, func(c *shape.Config) {
		// The shortest retention the cache allows (Config.CacheLife):
		// no response cached past 10 s.
		c.CompactMin, c.MaxAge, c.StaleAge, c.SSETimeout = 10, 0, 0, time.Second
		c.Retention = c.CacheLife()
	})
	rows := map[string]map[string]any{}
	h, first := e.syncTo(rows, "", "-1", "table", "one")
	e.exec(`UPDATE one SET n = 1`)
	h, early := waitChangeT(e, rows, h, first, "one")
	for i := 2; i <= 200; i++ {
		e.exec(`UPDATE one SET n = $1`, i)
	}
	eventually(t, 20*time.Second, func() string {
		rows2 := map[string]map[string]any{}
		var n int
		off, hh := "-1", ""
		for j := 0; j < 50; j++ {
			q := qs("table", "one", "offset", off)
			if hh != "" {
				q.Set("handle", hh)
			}
			r := e.do("GET", q, nil, "")
			ms := r.msgs(t)
			for _, m := range ms {
				if m["headers"].(map[string]any)["operation"] != nil {
					n++
				}
				applyMsg(rows2, m)
			}
			hh, off = r.h.Get("electric-handle"), r.h.Get("electric-offset")
			if _, ok := r.h["Electric-Up-To-Date"]; ok {
				break
			}
		}
		if rows2[`"public"."one"/"1"`]["n"] != "200" {
			return "a fresh client does not see n = 200 yet"
		}
		if n > 25 {
			return "a fresh client reads " + itoa(n) + " changes for one row updated 200 times"
		}
		return ""
	})
	// The early offset is past its retention: 409 with a new handle.
	eventually(t, 40*time.Second, func() string {
		r := e.get("table", "one", "offset", early, "handle", h)
		if r.code != 409 {
			return "an offset before the oldest kept generation answers " + itoa(r.code)
		}
		if r.h.Get("electric-handle") == h || r.h.Get("electric-handle") == "" {
			return "the 409 reuses the handle"
		}
		return ""
	})
	// Once the retention has passed, the log on disk holds no more than
	// the generations kept.
	eventually(t, 40*time.Second, func() string {
		logs, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, h, "log-*"))
		if len(logs) != 1 {
			return sprintf("log files %v, want one", logs)
		}
		b, _ := os.ReadFile(logs[0])
		if n := strings.Count(string(b), "\n"); n > 40 {
			return sprintf("the log holds %d changes of 200 updates", n)
		}
		if snaps, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, h, "snap-*")); len(snaps) > 3 {
			return sprintf("%d snapshots kept", len(snaps))
		}
		return ""
	})
}

// A superseded generation outlives every cached response that can point
// into it (Config.CacheLife) even past MaxGenerations, and goes once none
// can: an offset into it answers 200 until then and 409 after.
func TestGenerationsOutliveTheirCache(t *testing.T) {
	e := newEnv(t, `CREATE TABLE one (id int PRIMARY KEY, n int); INSERT INTO one VALUES (1, 0)`, func(c *shape.Config) {
		c.CompactMin, c.MaxGenerations, c.MaxAge, c.StaleAge, c.SSETimeout = 10, 1, 20, 5, time.Second
		c.Retention = time.Hour // only the count and the cache decide here
	})
	if life := e.cfg.CacheLife(); life != 25*time.Second {
		t.Fatalf("CacheLife = %v, want 25s (max-age 20 + stale 5)", life)
	}
	rows := map[string]map[string]any{}
	h, first := e.syncTo(rows, "", "-1", "table", "one")
	e.exec(`UPDATE one SET n = 1`)
	h, early := waitChangeT(e, rows, h, first, "one")
	for i := 2; i <= 100; i++ {
		e.exec(`UPDATE one SET n = $1`, i)
	}
	eventually(t, 20*time.Second, func() string {
		if snaps, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, h, "snap-*")); len(snaps) < 2 {
			return "no generation after 100 updates"
		}
		return ""
	})
	if err := e.srv.Collect(time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := e.get("table", "one", "offset", early, "handle", h); r.code != 200 {
		t.Fatalf("an offset into a generation superseded within the cache's life answers %d, want 200", r.code)
	}
	if err := e.srv.Collect(time.Now().Add(26 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if r := e.get("table", "one", "offset", early, "handle", h); r.code != 409 {
		t.Fatalf("an offset into a generation past the cache's life and MaxGenerations answers %d, want 409", r.code)
	}
}

// A retention shorter than a cached response can point into a superseded
// generation is refused, naming the settings.
func TestRetentionOutlivesTheCache(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	c := e.cfg
	c.Engine, c.Pool = e.eng, e.pool
	c.MaxAge, c.StaleAge, c.Retention = 600, 300, 10*time.Minute
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--shape-retention") || !strings.Contains(err.Error(), "15m0s") {
		t.Fatalf("Validate = %v, want a refusal of --shape-retention naming 15m0s", err)
	}
}

func waitChangeT(e *env, rows map[string]map[string]any, h, off, table string) (string, string) {
	e.t.Helper()
	r := e.get("table", table, "offset", off, "handle", h, "live", "true")
	for _, m := range r.msgs(e.t) {
		applyMsg(rows, m)
	}
	return r.h.Get("electric-handle"), r.h.Get("electric-offset")
}

func itoa(n int) string { return sprintf("%d", n) }

func TestIdleExpiry(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) {
		c.IdleExpiry, c.MaxAge, c.StaleAge, c.SSETimeout = 300*time.Millisecond, 0, 0, time.Second
		c.Retention = c.CacheLife() // the reaper runs every quarter of it
	})
	h := e.get("table", "items", "offset", "-1").h.Get("electric-handle")
	eventually(t, 20*time.Second, func() string {
		if e.srv.Shapes() != 0 {
			return "the idle shape is still there"
		}
		return ""
	})
	if r := e.get("table", "items", "offset", "0_0", "handle", h); r.code != 409 || r.h.Get("electric-handle") == h {
		t.Errorf("GET of an expired shape: %d %q", r.code, r.h.Get("electric-handle"))
	}
	// The files go after the engine's unsubscription, off the reaper's
	// goroutine (forget).
	eventually(t, 20*time.Second, func() string {
		if _, err := os.Stat(filepath.Join(e.cfg.DataDir, h)); !os.IsNotExist(err) {
			return fmt.Sprintf("the expired shape's directory is still there: %v", err)
		}
		return ""
	})
}

// A log=changes_only shape survives a restart although its log updates
// and deletes rows older than the shape, and after a compaction: the
// base rows are on disk (served to no client), so the reload rebuilds
// the rows the log implies and the re-hydration appends exactly what
// changed while the server was down. The client, which took a subset of
// every row as Electric's requestSnapshot does, continues with its
// handle and offset (no 409) and ends with PostgreSQL's rows.
func TestChangesOnlyRestart(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.CompactMin = 2 })
	kv := []string{"table", "items", "log", "changes_only"}
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", kv...)
	if len(rows) != 0 {
		t.Fatalf("changes_only served rows from -1: %v", rows)
	}
	sub := e.get(append(kv, "offset", "-1", "subset__where", "id > 0")...)
	var snap struct{ Data []map[string]any }
	if err := json.Unmarshal([]byte(sub.body), &snap); sub.code != 200 || err != nil || len(snap.Data) != 5 || sub.h.Get("electric-handle") != h {
		t.Fatalf("subset of every row: %d %s (%v)", sub.code, sub.body, err)
	}
	for _, m := range snap.Data {
		applyMsg(rows, m)
	}
	// catchUp reads from off until up-to-date (never a 409) and returns
	// the change messages read.
	catchUp := func() []map[string]any {
		t.Helper()
		var got []map[string]any
		for i := 0; i < 100; i++ {
			r := e.get(append(kv, "offset", off, "handle", h)...)
			if r.code != 200 {
				t.Fatalf("GET at %s: %d %s", off, r.code, r.body)
			}
			if r.h.Get("electric-handle") != h {
				t.Fatalf("handle %q, want %q", r.h.Get("electric-handle"), h)
			}
			off = r.h.Get("electric-offset")
			for _, m := range r.msgs(t) {
				applyMsg(rows, m)
				if m["headers"].(map[string]any)["operation"] != nil {
					got = append(got, m)
				}
			}
			if _, ok := r.h["Electric-Up-To-Date"]; ok {
				return got
			}
		}
		t.Fatal("never up to date")
		return nil
	}
	same := func(when string) func() string {
		return func() string {
			catchUp()
			if got, want := fmt.Sprint(rows), fmt.Sprint(pgItems(e)); got != want {
				return when + ": the client holds " + got + ", PostgreSQL " + want
			}
			return ""
		}
	}
	// Five changes to rows older than the shape (and one new row) make a
	// second generation (CompactMin 2, 5 rows); one more follows it.
	e.exec(`UPDATE items SET title = 'one' WHERE id = 1`)
	e.exec(`DELETE FROM items WHERE id = 2`)
	e.exec(`UPDATE items SET n = n + 10 WHERE id IN (3, 4)`)
	e.exec(`INSERT INTO items VALUES (6, 'six', 6)`)
	eventually(t, 20*time.Second, func() string {
		if snaps, _ := filepath.Glob(filepath.Join(e.cfg.DataDir, h, "snap-*")); len(snaps) < 2 {
			return sprintf("snapshots %v: no compaction yet", snaps)
		}
		return ""
	})
	e.exec(`UPDATE items SET title = 'five' WHERE id = 5`)
	eventually(t, 20*time.Second, same("before the restart"))
	if r := e.get(append(kv, "offset", "-1")...); r.code != 200 || r.body != "[]" || r.h.Get("electric-handle") != h {
		t.Errorf("-1 after the compaction: %d %s (handle %q, want %q)", r.code, r.body, r.h.Get("electric-handle"), h)
	}

	e.stop()
	e.exec(`UPDATE items SET title = 'down' WHERE id = 3`)
	e.exec(`DELETE FROM items WHERE id = 1`)
	e.exec(`INSERT INTO items VALUES (7, 'seven', 7)`)
	e.exec(`UPDATE items SET n = 60 WHERE id = 6`)
	e.start()
	var got []map[string]any
	eventually(t, 20*time.Second, func() string {
		got = append(got, catchUp()...)
		if len(got) < 4 {
			return sprintf("waiting for the catch-up changes: %v", got)
		}
		return ""
	})
	ops := map[string]string{}
	for _, m := range got {
		k := m["key"].(string)
		if ops[k] != "" {
			t.Errorf("two catch-up changes of %s: %v", k, got)
		}
		ops[k] = m["headers"].(map[string]any)["operation"].(string)
	}
	want := map[string]string{`"public"."items"/"3"`: "update", `"public"."items"/"1"`: "delete", `"public"."items"/"7"`: "insert", `"public"."items"/"6"`: "update"}
	if fmt.Sprint(ops) != fmt.Sprint(want) {
		t.Errorf("catch-up changes %v, want exactly %v", ops, want)
	}
	eventually(t, 20*time.Second, same("after the restart"))
	if r := e.get(append(kv, "offset", "-1")...); r.code != 200 || r.body != "[]" || r.h.Get("electric-handle") != h {
		t.Errorf("-1 after the restart: %d %s (handle %q, want %q)", r.code, r.body, r.h.Get("electric-handle"), h)
	}
}

// pgItems is PostgreSQL's items by Electric key, as a client holds them.
func pgItems(e *env) map[string]map[string]any {
	e.t.Helper()
	rs, err := e.conn.Query(context.Background(), `SELECT id::text, title, n::text FROM items`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rs.Close()
	out := map[string]map[string]any{}
	for rs.Next() {
		var id, title, n string
		if err := rs.Scan(&id, &title, &n); err != nil {
			e.t.Fatal(err)
		}
		out[`"public"."items"/"`+id+`"`] = map[string]any{"id": id, "title": title, "n": n}
	}
	if err := rs.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// A changes_only generation stored without its rows (as freshet wrote it
// before they were kept) cannot say what the log implies: the shape is
// not served again, and its client gets a 409 and refetches, rather than
// inserts of rows that did not change.
func TestChangesOnlyWithoutStoredRows(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	kv := []string{"table", "items", "log", "changes_only"}
	h, off := e.syncTo(map[string]map[string]any{}, "", "-1", kv...)
	e.stop()
	path := filepath.Join(e.cfg.DataDir, h, "gens.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gf struct {
		Gens []map[string]any `json:"gens"`
		Log  string           `json:"log"`
	}
	if err := json.Unmarshal(b, &gf); err != nil || len(gf.Gens) != 1 || gf.Gens[0]["stored"] == nil {
		t.Fatalf("gens.json keeps no stored rows: %s (%v)", b, err)
	}
	delete(gf.Gens[0], "stored")
	old, _ := json.Marshal(gf)
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	e.start()
	if r := e.get(append(kv, "offset", off, "handle", h)...); r.code != 409 || r.h.Get("electric-handle") == h {
		t.Errorf("GET of a changes_only shape without its rows: %d %s (handle %q)", r.code, r.body, r.h.Get("electric-handle"))
	}
}
