package shape_test

import (
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
		c.CompactMin, c.Retention = 10, 300*time.Millisecond
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
	eventually(t, 20*time.Second, func() string {
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
	eventually(t, 20*time.Second, func() string {
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
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.IdleExpiry, c.Retention = 300*time.Millisecond, 100*time.Millisecond })
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
	if _, err := os.Stat(filepath.Join(e.cfg.DataDir, h)); !os.IsNotExist(err) {
		t.Errorf("the expired shape's directory is still there: %v", err)
	}
}
