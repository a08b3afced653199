package shape_test

import (
	"slices"
	"strings"
	"testing"
)

// golden replaces the handle and LSN-dependent parts of a body.
func golden(s string, repl ...string) string {
	for i := 0; i+1 < len(repl); i += 2 {
		s = strings.ReplaceAll(s, repl[i], repl[i+1])
	}
	return s
}

func TestInitialSyncGolden(t *testing.T) {
	e := newEnv(t, `CREATE TABLE items (id int PRIMARY KEY, title text, n numeric, d interval);
		INSERT INTO items VALUES (1, 'a', 1.50, '1 day 2 hours'), (2, 'b/c', NULL, '-1 mon 3.5 sec')`, nil)
	r := e.get("table", "items", "offset", "-1")
	if r.code != 200 {
		t.Fatalf("-1: %d %s", r.code, r.body)
	}
	// The snapshot's rows come in no particular order (Electric's have
	// none): each message's bytes are compared, not their order.
	want := []string{`{"key":"\"public\".\"items\"/\"1\"","value":{"id":"1","title":"a","n":"1.50","d":"P1DT2H"},"headers":{"operation":"insert","relation":["public","items"]}}`,
		`{"key":"\"public\".\"items\"/\"2\"","value":{"id":"2","title":"b/c","n":null,"d":"P-1MT3.5S"},"headers":{"operation":"insert","relation":["public","items"]}}`}
	got := []string{r.body}
	if strings.HasPrefix(r.body, "[{") && strings.HasSuffix(r.body, "}]") {
		got = strings.Split(r.body[1:len(r.body)-1], `}},{"key"`)
		for i := range got {
			if i > 0 {
				got[i] = `{"key"` + got[i]
			}
			if i < len(got)-1 {
				got[i] += "}}"
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("-1 body: the messages\n got %q\nwant %q", got, want)
	}
	h := r.h.Get("electric-handle")
	for k, v := range map[string]string{
		"electric-offset": "0_0",
		"electric-schema": `{"d":{"type":"interval"},"id":{"not_null":true,"pk_index":0,"type":"int4"},"n":{"type":"numeric"},"title":{"type":"text"}}`,
		"cache-control":   "public, max-age=604800, s-maxage=3600, stale-while-revalidate=2629746",
		"etag":            `"` + h + `:-1:0_0"`,
		"content-type":    "application/json; charset=utf-8",
	} {
		if got := r.h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if _, ok := r.h["Electric-Up-To-Date"]; ok {
		t.Errorf("a -1 response carries electric-up-to-date")
	}
	r = e.get("table", "items", "offset", "0_0", "handle", h)
	if r.code != 200 || r.h.Get("electric-offset") != "0_0" || !strings.HasPrefix(r.body, `[{"headers":{"control":"up-to-date","global_last_seen_lsn":"`) {
		t.Fatalf("0_0: %d offset %s %s", r.code, r.h.Get("electric-offset"), r.body)
	}
	if v, ok := r.h["Electric-Up-To-Date"]; !ok || v[0] != "" {
		t.Errorf("electric-up-to-date = %v, want present and empty", v)
	}
	e.exec(`UPDATE items SET title = 'z' WHERE id = 1`)
	r = e.get("table", "items", "offset", "0_0", "handle", h, "live", "true")
	msgs := r.msgs(t)
	if len(msgs) != 2 {
		t.Fatalf("live: %s", r.body)
	}
	hd := msgs[0]["headers"].(map[string]any)
	if hd["operation"] != "update" || hd["op_position"] != float64(1) || hd["last"] != true || r.h.Get("electric-offset") != hd["lsn"].(string)+"_1" {
		t.Errorf("live update: %s (offset %s)", r.body, r.h.Get("electric-offset"))
	}
	if v := msgs[0]["value"].(map[string]any); len(v) != 2 || v["title"] != "z" || v["id"] != "1" {
		t.Errorf("update value = %v, want the key and the changed column", v)
	}
	if tx, ok := hd["txids"].([]any); !ok || len(tx) != 1 || tx[0].(float64) < 3 {
		t.Errorf("txids = %v, want the transaction's xid", hd["txids"])
	}
}
