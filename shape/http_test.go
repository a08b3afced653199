package shape_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/shape"
)

const itemsSetup = `CREATE TABLE items (id int PRIMARY KEY, title text, n int);
	INSERT INTO items SELECT i, 'item ' || i, i FROM generate_series(1, 5) i`

// one test per rule: each names the rule of shared/shape-api.md it pins.

func TestHealth(t *testing.T) {
	e := newEnv(t, "", nil)
	res, err := http.Get(e.url + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b := make([]byte, 100)
	n, _ := res.Body.Read(b)
	if res.StatusCode != 200 || string(b[:n]) != `{"status":"active"}` || res.Header.Get("cache-control") != "no-cache, no-store, must-revalidate" {
		t.Errorf("health: %d %q cache-control %q", res.StatusCode, b[:n], res.Header.Get("cache-control"))
	}
	// Before the stream's first consistent point: 202 starting.
	s := newEnv(t, "", func(c *shape.Config) { c.Ready = func() bool { return false } })
	r := s.path("GET", "/v1/health")
	if r.code != 202 || r.body != `{"status":"starting"}` || r.h.Get("cache-control") != "no-cache, no-store, must-revalidate" {
		t.Errorf("health while starting: %d %q cache-control %q", r.code, r.body, r.h.Get("cache-control"))
	}
}

func TestUnknownRoute404(t *testing.T) {
	e := newEnv(t, "", nil)
	r := e.path("GET", "/v1/nope")
	if r.code != 404 || r.body != "Not found" || r.h.Get("access-control-allow-methods") != "GET, HEAD" {
		t.Errorf("unknown route: %d %q, methods %q", r.code, r.body, r.h.Get("access-control-allow-methods"))
	}
}

func TestCORSHeaders(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.do("GET", qs("table", "items", "offset", "-1"), map[string]string{"Origin": "https://app.example"}, "")
	want := map[string]string{
		"access-control-allow-origin":   "https://app.example",
		"access-control-expose-headers": "electric-cursor,electric-handle,electric-has-data,electric-offset,electric-schema,electric-up-to-date,electric-internal-known-error,retry-after",
		"access-control-allow-methods":  "GET, POST, HEAD, DELETE, OPTIONS",
	}
	for k, v := range want {
		if got := r.h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if r.h.Get("x-request-id") == "" || r.h.Get("electric-server") == "" {
		t.Errorf("x-request-id %q electric-server %q", r.h.Get("x-request-id"), r.h.Get("electric-server"))
	}
	r = e.get("table", "items", "offset", "-1")
	if got := r.h.Get("access-control-allow-origin"); got != "*" {
		t.Errorf("without Origin: allow-origin %q, want *", got)
	}
}

func TestOptions(t *testing.T) {
	// A preflight carries no secret: OPTIONS is not authenticated.
	e := newEnv(t, "", func(c *shape.Config) { c.Insecure, c.Secret = false, "s3cret" })
	r := e.do("OPTIONS", nil, map[string]string{"Access-Control-Request-Headers": "If-None-Match"}, "")
	if r.code != 204 || r.h.Get("access-control-max-age") != "86400" || r.h.Get("access-control-allow-headers") != "If-None-Match" {
		t.Errorf("OPTIONS: %d max-age %q allow-headers %q", r.code, r.h.Get("access-control-max-age"), r.h.Get("access-control-allow-headers"))
	}
	// Electric's OPTIONS deletes cache-control (Api.Options): the
	// preflight's allow-origin is the request's Origin, which a shared
	// cache must not hand to another origin.
	if v, ok := r.h["Cache-Control"]; ok {
		t.Errorf("OPTIONS carries cache-control %q", v)
	}
	if r.h.Get("access-control-allow-methods") != "GET, POST, HEAD, DELETE, OPTIONS" {
		t.Errorf("OPTIONS: methods %q", r.h.Get("access-control-allow-methods"))
	}
}

func TestSecret(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.Insecure, c.Secret = false, "s3cret" })
	for _, path := range []string{"/v1/shape", "/v1//shape", "/v1/shape/"} {
		res, err := http.Get(e.url + path + "?table=items&offset=-1")
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 200)
		n, _ := res.Body.Read(b)
		res.Body.Close()
		if res.StatusCode != 401 || string(b[:n]) != `{"message":"Unauthorized - Invalid API secret"}` {
			t.Errorf("%s without the secret: %d %s", path, res.StatusCode, b[:n])
		}
	}
	if r := e.get("table", "items", "offset", "-1", "secret", "wrong"); r.code != 401 {
		t.Errorf("a wrong secret: %d", r.code)
	}
	if r := e.get("table", "items", "offset", "-1", "secret", "s3cret"); r.code != 200 {
		t.Errorf("secret=: %d %s", r.code, r.body)
	}
	if r := e.get("table", "items", "offset", "-1", "api_secret", "s3cret"); r.code != 200 {
		t.Errorf("api_secret=: %d %s", r.code, r.body)
	}
	if r := e.do("GET", qs("table", "items", "offset", "-1"), map[string]string{"Authorization": "Bearer s3cret"}, ""); r.code != 200 {
		t.Errorf("Authorization: Bearer: %d %s", r.code, r.body)
	}
	for _, a := range []string{"Bearer wrong", "Bearer ", "Basic s3cret", "s3cret", "Bearer s3cret2"} {
		if r := e.do("GET", qs("table", "items", "offset", "-1"), map[string]string{"Authorization": a}, ""); r.code != 401 {
			t.Errorf("Authorization: %s: %d, want 401", a, r.code)
		}
	}
}

func TestNoSecretNotInsecure401(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.Insecure = false })
	if r := e.get("table", "items", "offset", "-1"); r.code != 401 {
		t.Errorf("no secret configured and not insecure: %d, want 401", r.code)
	}
}

// validation: 400 with Electric's bodies.
func TestValidation400(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	cases := []struct {
		q    []string
		want string
	}{
		{[]string{"offset", "-1"}, `{"message":"Invalid request","errors":{"table":["can't be blank"]}}`},
		{[]string{"table", "items"}, `{"message":"Invalid request","errors":{"offset":["can't be blank"]}}`},
		{[]string{"table", "items", "offset", "abc"}, `{"message":"Invalid request","errors":{"offset":["has invalid format"]}}`},
		{[]string{"table", "items", "offset", "1_x"}, `{"message":"Invalid request","errors":{"offset":["has invalid format"]}}`},
		{[]string{"table", "items", "offset", "0_0"}, `{"message":"Invalid request","errors":{"handle":["can't be blank when offset != -1"]}}`},
		{[]string{"table", "items", "offset", "-1", "live", "true"}, `{"message":"Invalid request","errors":{"live":["can't be true when offset == -1"]}}`},
		{[]string{"table", "items", "offset", "now", "live", "true"}, `{"message":"Invalid request","errors":{"live":["can't be true when offset is 'now'"]}}`},
		{[]string{"table", "items", "offset", "0_0", "handle", "h", "live_sse", "true"}, `{"message":"Invalid request","errors":{"live_sse":["can't be true unless live is also true"]}}`},
		{[]string{"table", "items", "offset", "-1", "columns", `"id",""`}, `{"message":"Invalid request","errors":{"columns":["Invalid zero-length delimited identifier"]}}`},
		{[]string{"table", "items", "offset", "-1", "columns", "title"}, `{"message":"Invalid request","errors":{"columns":["The list of columns must include all primary key columns, missing: id"]}}`},
		{[]string{"table", "items", "offset", "-1", "columns", "id,nope"}, `{"message":"Invalid request","errors":{"columns":["The following columns are not found on the table: nope"]}}`},
		{[]string{"table", "nope", "offset", "-1"}, `{"message":"Invalid request","errors":{"table":["Table \"public\".\"nope\" does not exist. If the table name contains capitals or special characters you must quote it."]}}`},
		{[]string{"table", "pg_catalog.pg_class", "offset", "-1"}, `{"message":"Invalid request","errors":{"table":["Table \"pg_catalog\".\"pg_class\" is a system catalog: shapes serve only the tables of the publication"]}}`},
		{[]string{"table", "items", "offset", "-1", "where", "1 x 1"}, `{"message":"Invalid request","errors":{"where":["At location 17: syntax error at or near \"x\""]}}`},
		{[]string{"table", "items", "offset", "-1", "where", "id = $1"}, `{"message":"Invalid request","errors":{"params":["the where clause uses $1 but params[1] is not given"]}}`},
		{[]string{"table", "items", "offset", "-1", "where", "true LIMIT 1"}, `{"message":"Invalid request","errors":{"where":["a where clause is one boolean expression: ORDER BY, LIMIT, OFFSET, GROUP BY, UNION, FOR UPDATE and the like are not part of it"]}}`},
		{[]string{"table", "items", "offset", "-1", "where", "true; DROP TABLE items"}, `{"message":"Invalid request","errors":{"where":["unescaped \";\" causing statement split"]}}`},
		{[]string{"table", "items", "offset", "-1", "replica", "half"}, `{"message":"Invalid request","errors":{"replica":["is invalid"]}}`},
		{[]string{"table", "items", "offset", "-1", "subset__limit", "5"}, `{"message":"Invalid request","errors":{"subset":{"order_by":["order_by is required when limit or offset is present"]}}}`},
	}
	for _, c := range cases {
		r := e.get(c.q...)
		if r.code != 400 || r.body != c.want {
			t.Errorf("%v:\n got %d %s\nwant 400 %s", c.q, r.code, r.body, c.want)
		}
		if r.h.Get("cache-control") != "no-store" || r.h.Get("surrogate-control") != "no-store" {
			t.Errorf("%v: cache-control %q surrogate-control %q", c.q, r.h.Get("cache-control"), r.h.Get("surrogate-control"))
		}
	}
	// The engine's refusal names the construct.
	r := e.get("table", "items", "offset", "-1", "where", "id IN (SELECT 1)")
	if r.code != 400 || !strings.Contains(r.body, `"where":[`) || !strings.Contains(strings.ToLower(r.body), "sub") {
		t.Errorf("a subquery: %d %s", r.code, r.body)
	}
	// The engine keeps this one; a shape refuses it: a where may read its
	// own table only (the allow-list checks names, not tables).
	r = e.get("table", "items", "offset", "-1", "where", "id IN (SELECT id FROM items WHERE id > 1)")
	if r.code != 400 || !strings.Contains(r.body, "subqueries are not supported in a shape's where clause") {
		t.Errorf("a kept subquery: %d %s", r.code, r.body)
	}
	if e.srv.Shapes() != 0 {
		t.Errorf("%d shapes after refusals, want 0", e.srv.Shapes())
	}
}

func TestUnknownParamsIgnored(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.get("table", "items", "offset", "-1", "customParam", "test-value", "cache-buster", "x", "expired_handle", "1-2", "subset__where_expr", "{}")
	if r.code != 200 {
		t.Errorf("unknown params: %d %s", r.code, r.body)
	}
}

func TestQuotedTableNames(t *testing.T) {
	e := newEnv(t, `CREATE SCHEMA app; CREATE TABLE app."issues for team/1.x" (id int PRIMARY KEY, "Title" text); INSERT INTO app."issues for team/1.x" VALUES (7, 'T')`, nil)
	r := e.get("table", `app."issues for team/1.x"`, "offset", "-1", "columns", `"id","Title"`)
	want := `[{"key":"\"app\".\"issues for team//1..x\"/\"7\"","value":{"id":"7","Title":"T"},"headers":{"operation":"insert","relation":["app","issues for team/1.x"]}}]`
	if r.code != 200 || r.body != want {
		t.Errorf("quoted table:\n got %d %s\nwant %s", r.code, r.body, want)
	}
}

func TestMustRefetchUnknownHandle(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.get("table", "items", "offset", "0_0", "handle", "123-456")
	if r.code != 409 || r.body != `[{"headers":{"control":"must-refetch"}}]` {
		t.Fatalf("unknown handle: %d %s", r.code, r.body)
	}
	h := r.h.Get("electric-handle")
	if h == "" || h == "123-456" || r.h.Get("cache-control") != "public, max-age=60, must-revalidate" {
		t.Errorf("409 handle %q cache-control %q", h, r.h.Get("cache-control"))
	}
	if r.h.Get("electric-offset") != "" {
		t.Errorf("409 carries electric-offset %q", r.h.Get("electric-offset"))
	}
	// Electric's Response.error(request, ..., handle: new) goes through
	// put_etag_headers with the handle and no offsets, and sends no
	// electric-has-data (>= 400), cursor, schema or up-to-date.
	wantResp(t, "409", r, 409, r.body, map[string]string{"etag": `"` + h + `::"`, "electric-has-data": "-", "electric-schema": "-",
		"electric-cursor": "-", "electric-up-to-date": "-", "surrogate-control": "-", "content-type": "application/json; charset=utf-8"})
	// The 409 created the matching shape: -1 now answers with its handle.
	if r2 := e.get("table", "items", "offset", "-1"); r2.h.Get("electric-handle") != h {
		t.Errorf("-1 handle %q, want the 409's %q", r2.h.Get("electric-handle"), h)
	}
}

func TestMustRefetchMismatchedDefinition(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	a := e.get("table", "items", "offset", "-1").h.Get("electric-handle")
	r := e.get("table", "items", "offset", "0_0", "handle", a, "where", "id > 2")
	if r.code != 409 || r.h.Get("electric-handle") == a || r.h.Get("electric-handle") == "" {
		t.Errorf("mismatched definition: %d handle %q (old %q)", r.code, r.h.Get("electric-handle"), a)
	}
}

func TestDeleteDisabled405(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.do("DELETE", qs("table", "items"), nil, "")
	// Through Electric's Response.send: not a GET, so no-cache.
	wantResp(t, "DELETE disabled", r, 405, `{"message":"DELETE not allowed"}`, map[string]string{
		"cache-control": "no-cache", "surrogate-control": "-", "content-type": "application/json; charset=utf-8"})
}

func TestDelete(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.AllowDeletion = true })
	if r := e.do("DELETE", qs("table", "items"), nil, ""); r.code != 404 || r.body != `{"message":"No existing shape found"}` {
		t.Errorf("DELETE of no shape: %d %s", r.code, r.body)
	}
	h := e.get("table", "items", "offset", "-1").h.Get("electric-handle")
	if r := e.do("DELETE", qs("table", "items", "handle", "1-1"), nil, ""); r.code != 400 || !strings.Contains(r.body, "do not match") {
		t.Errorf("DELETE definition with another handle: %d %s", r.code, r.body)
	}
	if r := e.do("DELETE", qs("handle", h), nil, ""); r.code != 202 || r.body != "" {
		t.Errorf("DELETE ?handle=: %d %s", r.code, r.body)
	}
	r := e.get("table", "items", "offset", "0_0", "handle", h)
	if r.code != 409 || r.h.Get("electric-handle") == h {
		t.Errorf("GET after DELETE: %d handle %q", r.code, r.h.Get("electric-handle"))
	}
	h2 := r.h.Get("electric-handle")
	if r := e.do("DELETE", qs("table", "items"), nil, ""); r.code != 202 {
		t.Errorf("DELETE ?table=: %d %s", r.code, r.body)
	}
	if r := e.get("table", "items", "offset", "0_0", "handle", h2); r.code != 409 {
		t.Errorf("GET after DELETE ?table=: %d", r.code)
	}
}

func TestOffsetNow(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.get("table", "items", "offset", "now")
	if r.code != 200 || !regexp.MustCompile(`^\[\{"headers":\{"control":"up-to-date","global_last_seen_lsn":"\d+"\}\}\]$`).MatchString(r.body) {
		t.Fatalf("now: %d %s", r.code, r.body)
	}
	if r.h.Get("electric-offset") != "0_0" || r.h.Get("electric-has-data") != "false" || r.h.Get("electric-schema") == "" {
		t.Errorf("now headers: %v", r.h)
	}
	// Electric's etag of a response with no changes: the request's
	// offset (now), the response's, and a unique time, so that it never
	// revalidates.
	if !regexp.MustCompile(`^"` + regexp.QuoteMeta(r.h.Get("electric-handle")) + `:now:0_0:\d+"$`).MatchString(r.h.Get("etag")) {
		t.Errorf("now etag %q", r.h.Get("etag"))
	}
	if _, ok := r.h["Electric-Up-To-Date"]; !ok {
		t.Errorf("now: no electric-up-to-date")
	}
	e.exec(`UPDATE items SET n = 0 WHERE id = 1`)
	eventually(t, 10*time.Second, func() string {
		r = e.get("table", "items", "offset", "now")
		if r.h.Get("electric-offset") == "0_0" {
			return "offset=now still at 0_0 after a change"
		}
		return ""
	})
	if !regexp.MustCompile(`^\d+_1$`).MatchString(r.h.Get("electric-offset")) {
		t.Errorf("now after a change: offset %q", r.h.Get("electric-offset"))
	}
}

func TestLongPollTimeout(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.LongPoll = 500 * time.Millisecond })
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", "table", "items")
	r := e.get("table", "items", "offset", off, "handle", h, "live", "true", "cursor", "0")
	if r.code != 200 || r.h.Get("electric-offset") != off || r.h.Get("electric-has-data") != "false" {
		t.Fatalf("timeout: %d offset %q has-data %q %s", r.code, r.h.Get("electric-offset"), r.h.Get("electric-has-data"), r.body)
	}
	if !regexp.MustCompile(`^\[\{"headers":\{"control":"up-to-date","global_last_seen_lsn":"\d+"\}\}\]$`).MatchString(r.body) {
		t.Errorf("timeout body %s", r.body)
	}
	if r.h.Get("cache-control") != "public, max-age=5, stale-while-revalidate=5" {
		t.Errorf("live cache-control %q", r.h.Get("cache-control"))
	}
	// An empty live answer's etag has a fourth, unique part.
	if !regexp.MustCompile(`^"` + regexp.QuoteMeta(h+":"+off+":"+off) + `:\d+"$`).MatchString(r.h.Get("etag")) {
		t.Errorf("empty live etag %q", r.h.Get("etag"))
	}
	if r.h.Get("electric-schema") != "" {
		t.Errorf("a live response carries electric-schema")
	}
	// The cursor: a multiple of the long-poll window (at least 1 s here),
	// and moved on past the one the client sent.
	c1, err := strconv.ParseInt(r.h.Get("electric-cursor"), 10, 64)
	if err != nil || c1 <= 0 {
		t.Fatalf("electric-cursor %q", r.h.Get("electric-cursor"))
	}
	r2 := e.get("table", "items", "offset", off, "handle", h, "live", "true", "cursor", strconv.FormatInt(c1, 10))
	if c2, _ := strconv.ParseInt(r2.h.Get("electric-cursor"), 10, 64); c2 <= c1 {
		t.Errorf("cursor %d after the client sent %d", c2, c1)
	}
}

func TestLongPollWakes(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.LongPoll = 20 * time.Second })
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", "table", "items")
	done := make(chan resp, 1)
	// Electric's cursor: the end of the current long-poll window,
	// ceil(seconds since 2024-10-09T00:00:00Z / 20) * 20.
	window := func() int64 {
		secs := int64(time.Since(time.Date(2024, 10, 9, 0, 0, 0, 0, time.UTC)) / time.Second)
		return (secs + 19) / 20 * 20
	}
	before := window()
	go func() { done <- e.get("table", "items", "offset", off, "handle", h, "live", "true") }()
	time.Sleep(200 * time.Millisecond)
	e.exec(`INSERT INTO items VALUES (6, 'six', 6)`)
	select {
	case r := <-done:
		if r.code != 200 || !strings.Contains(r.body, `"operation":"insert"`) || !strings.Contains(r.body, `"up-to-date"`) {
			t.Errorf("woken: %d %s", r.code, r.body)
		}
		if r.h.Get("electric-has-data") != "true" {
			t.Errorf("has-data %q", r.h.Get("electric-has-data"))
		}
		if c, err := strconv.ParseInt(r.h.Get("electric-cursor"), 10, 64); err != nil || c%20 != 0 || c < before || c > window() {
			t.Errorf("electric-cursor %q, want the end of the 20 s window (%d..%d)", r.h.Get("electric-cursor"), before, window())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long-poll was not woken by the commit")
	}
}

// A shape that goes away while a live request is held answers that
// request 409 with the handle of the shape that now matches (Electric's
// shape_rotation while held).
func TestLiveHeld409(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.AllowDeletion, c.LongPoll = true, 20*time.Second })
	h, off := e.syncTo(map[string]map[string]any{}, "", "-1", "table", "items")
	done := make(chan resp, 1)
	go func() { done <- e.get("table", "items", "offset", off, "handle", h, "live", "true") }()
	time.Sleep(300 * time.Millisecond)
	if r := e.do("DELETE", qs("handle", h), nil, ""); r.code != 202 {
		t.Fatalf("DELETE: %d %s", r.code, r.body)
	}
	select {
	case r := <-done:
		if r.code != 409 || r.body != `[{"headers":{"control":"must-refetch"}}]` || r.h.Get("electric-handle") == "" || r.h.Get("electric-handle") == h {
			t.Errorf("held request after DELETE: %d %s handle %q (old %q)", r.code, r.body, r.h.Get("electric-handle"), h)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the held request was not answered when its shape went away")
	}
}

func TestExclusiveSince(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", "table", "items")
	e.exec(`BEGIN; UPDATE items SET n = 10 WHERE id = 1; UPDATE items SET n = 20 WHERE id = 2; COMMIT`)
	r := e.get("table", "items", "offset", off, "handle", h, "live", "true")
	ms := r.msgs(t)
	if len(ms) != 3 {
		t.Fatalf("two changes and up-to-date, got %s", r.body)
	}
	first := ms[0]["headers"].(map[string]any)
	lsn := first["lsn"].(string)
	if first["last"] != nil || ms[1]["headers"].(map[string]any)["last"] != true {
		t.Errorf("last on the transaction's last change only: %s", r.body)
	}
	// Asking from the first change's offset returns the second only.
	r = e.get("table", "items", "offset", lsn+"_1", "handle", h)
	ms = r.msgs(t)
	if len(ms) != 2 || ms[0]["headers"].(map[string]any)["op_position"] != float64(2) {
		t.Errorf("since %s_1: %s", lsn, r.body)
	}
	// The SSE resume point global_last_seen_lsn_0 returns nothing again.
	up := ms[len(ms)-1]["headers"].(map[string]any)["global_last_seen_lsn"].(string)
	r = e.get("table", "items", "offset", up+"_0", "handle", h)
	if r.code != 200 || strings.Contains(r.body, `"operation"`) {
		t.Errorf("resume at %s_0: %d %s", up, r.code, r.body)
	}
}

// global_last_seen_lsn is a sound resume point while changes wait to be
// made durable: an up-to-date answered then names a position at or
// before the first of them, so Electric's SSE client, resuming at
// ${global_last_seen_lsn}_0, is sent them once they are served (the
// engine's position alone is past them, and resuming there loses them).
func TestResumePointWithPendingChanges(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	h, off := e.syncTo(map[string]map[string]any{}, "", "-1", "table", "items")
	release := make(chan struct{})
	e.srv.SetFlushHook(func() { <-release })
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	ctx := context.Background()
	e.exec(`UPDATE items SET title = 'pending' WHERE id = 1`)
	var after string
	if err := e.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	lsn, err := change.ParseLSN(after)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		if e.eng.Position() < lsn {
			return "the engine has not applied the update"
		}
		return ""
	})
	// The change is the shape's, not yet durable: not served, and the
	// up-to-date names a point before it.
	r := e.get("table", "items", "offset", off, "handle", h)
	if r.code != 200 || strings.Contains(r.body, "pending") {
		t.Fatalf("before the flush: %d %s", r.code, r.body)
	}
	ms := r.msgs(t)
	seen := ms[len(ms)-1]["headers"].(map[string]any)["global_last_seen_lsn"].(string)
	e.srv.SetFlushHook(nil)
	close(release)
	released = true
	eventually(t, 10*time.Second, func() string {
		r := e.get("table", "items", "offset", seen+"_0", "handle", h)
		if r.code != 200 || !strings.Contains(r.body, `"title":"pending"`) {
			return "resuming at " + seen + "_0 (global_last_seen_lsn) misses the change: " + r.body
		}
		return ""
	})
}

func TestOutOfBounds(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.LongPoll = 600 * time.Millisecond })
	h := e.get("table", "items", "offset", "-1").h.Get("electric-handle")
	r := e.get("table", "items", "offset", "99999999999999_1", "handle", h)
	if r.code != 400 || r.body != `{"message":"Invalid request","errors":{"offset":["out of bounds for this shape"]}}` {
		t.Errorf("out of bounds: %d %s", r.code, r.body)
	}
}

func TestEtag304(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.get("table", "items", "offset", "-1")
	etag := r.h.Get("etag")
	r2 := e.do("GET", qs("table", "items", "offset", "-1"), map[string]string{"If-None-Match": `"other", ` + etag}, "")
	if r2.code != 304 || r2.body != "" {
		t.Errorf("If-None-Match: %d %q", r2.code, r2.body)
	}
	// electric-schema goes on a 200 only (Response.put_schema_header).
	if r2.h.Get("electric-schema") != "" || r2.h.Get("etag") != etag || r2.h.Get("electric-handle") == "" {
		t.Errorf("304: schema %q etag %q handle %q", r2.h.Get("electric-schema"), r2.h.Get("etag"), r2.h.Get("electric-handle"))
	}
	h := r.h.Get("electric-handle")
	r = e.get("table", "items", "offset", "0_0", "handle", h)
	if r.h.Get("etag") != `"`+h+`:0_0:0_0"` {
		t.Errorf("etag %q", r.h.Get("etag"))
	}
	// Up-to-date with nothing new, not live: Electric's no_changes is
	// set only for offset=now and a live request's timeout.
	if r.h.Get("electric-has-data") != "true" || r.h.Get("electric-schema") == "" {
		t.Errorf("non-live, nothing new: has-data %q schema %q", r.h.Get("electric-has-data"), r.h.Get("electric-schema"))
	}
	if r.h.Get("cache-control") != "public, max-age=60, stale-while-revalidate=300" {
		t.Errorf("non-live cache-control %q", r.h.Get("cache-control"))
	}
	if r3 := e.do("GET", qs("table", "items", "offset", "0_0", "handle", h), map[string]string{"If-None-Match": r.h.Get("etag")}, ""); r3.code != 304 {
		t.Errorf("mid-log If-None-Match: %d", r3.code)
	}
}

func TestMaxAgeSettings(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.MaxAge, c.StaleAge = 1, 3 })
	h := e.get("table", "items", "offset", "-1").h.Get("electric-handle")
	if r := e.get("table", "items", "offset", "0_0", "handle", h); r.h.Get("cache-control") != "public, max-age=1, stale-while-revalidate=3" {
		t.Errorf("cache-control %q", r.h.Get("cache-control"))
	}
}

func TestChunking(t *testing.T) {
	e := newEnv(t, `CREATE TABLE big (id int PRIMARY KEY, body text);
		INSERT INTO big SELECT i, repeat('x', 1000) FROM generate_series(1, 35) i`, func(c *shape.Config) { c.ChunkBytes = 10000 })
	rows := map[string]map[string]any{}
	var sizes []int
	off, h := "-1", ""
	for i := 0; i < 20; i++ {
		q := qs("table", "big", "offset", off)
		if h != "" {
			q.Set("handle", h)
		}
		r := e.do("GET", q, nil, "")
		sizes = append(sizes, len(r.body))
		for _, m := range r.msgs(t) {
			applyMsg(rows, m)
		}
		h, off = r.h.Get("electric-handle"), r.h.Get("electric-offset")
		if _, ok := r.h["Electric-Up-To-Date"]; ok {
			break
		}
	}
	if len(rows) != 35 {
		t.Fatalf("%d rows after %v", len(rows), sizes)
	}
	for _, s := range sizes[:len(sizes)-2] {
		if s < 10000 || s > 12000 {
			t.Errorf("a response of %d bytes (sizes %v), want 10-12 kB", s, sizes)
		}
	}
	// 35 more in the log.
	e.exec(`INSERT INTO big SELECT i, repeat('y', 1000) FROM generate_series(36, 70) i`)
	eventually(t, 10*time.Second, func() string {
		r := e.get("table", "big", "offset", off, "handle", h)
		if len(r.msgs(t)) < 2 {
			return "no log yet"
		}
		return ""
	})
	sizes = nil
	for i := 0; i < 20; i++ {
		r := e.get("table", "big", "offset", off, "handle", h)
		sizes = append(sizes, len(r.body))
		for _, m := range r.msgs(t) {
			applyMsg(rows, m)
		}
		off = r.h.Get("electric-offset")
		if _, ok := r.h["Electric-Up-To-Date"]; ok {
			break
		}
	}
	if len(rows) != 70 {
		t.Fatalf("%d rows, want 70 (sizes %v)", len(rows), sizes)
	}
	for _, s := range sizes[:len(sizes)-1] {
		if s < 10000 || s > 12000 {
			t.Errorf("a log response of %d bytes (sizes %v)", s, sizes)
		}
	}
	if sizes[len(sizes)-1] >= 11000+200 {
		t.Errorf("the last response is %d bytes", sizes[len(sizes)-1])
	}
}

func TestChangesOnly(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.get("table", "items", "offset", "-1", "log", "changes_only")
	if r.code != 200 || r.body != "[]" || r.h.Get("electric-offset") != "0_0" {
		t.Fatalf("changes_only -1: %d %s offset %s", r.code, r.body, r.h.Get("electric-offset"))
	}
	h := r.h.Get("electric-handle")
	if full := e.get("table", "items", "offset", "-1"); full.h.Get("electric-handle") == h {
		t.Errorf("log=full and changes_only share a handle")
	}
	e.exec(`UPDATE items SET n = 99 WHERE id = 3`)
	r = e.get("table", "items", "offset", "0_0", "handle", h, "log", "changes_only", "live", "true")
	if !strings.Contains(r.body, `"operation":"update"`) {
		t.Errorf("changes_only live: %s", r.body)
	}
}

func TestSubsetGET(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.get("table", "items", "offset", "-1", "log", "changes_only", "subset__where", "id > $1", "subset__params", `{"1":"2"}`, "subset__order_by", "id DESC", "subset__limit", "2")
	if r.code != 200 {
		t.Fatalf("subset: %d %s", r.code, r.body)
	}
	re := regexp.MustCompile(`^\{"metadata":\{"xmin":"\d+","xmax":"\d+","xip_list":\[[^\]]*\],"snapshot_mark":(\d+),"database_lsn":"\d+"\},"data":\[(.*)\]\}$`)
	m := re.FindStringSubmatch(r.body)
	if m == nil {
		t.Fatalf("subset body %s", r.body)
	}
	want := `{"key":"\"public\".\"items\"/\"5\"","value":{"id":"5","title":"item 5","n":"5"},"headers":{"operation":"insert","relation":["public","items"],"snapshot_mark":` + m[1] + `}},` +
		`{"key":"\"public\".\"items\"/\"4\"","value":{"id":"4","title":"item 4","n":"4"},"headers":{"operation":"insert","relation":["public","items"],"snapshot_mark":` + m[1] + `}}`
	if m[2] != want {
		t.Errorf("subset data:\n got %s\nwant %s", m[2], want)
	}
	for k, v := range map[string]string{"electric-snapshot": "true", "cache-control": "no-cache", "electric-offset": "0_0"} {
		if r.h.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, r.h.Get(k), v)
		}
	}
	if r.h.Get("electric-schema") == "" || r.h.Get("electric-handle") == "" {
		t.Errorf("subset without schema or handle")
	}
	// Electric's put_resp_headers for a subset puts no electric-has-data,
	// etag or cursor.
	wantResp(t, "subset", r, 200, r.body, map[string]string{"electric-has-data": "-", "etag": "-", "electric-cursor": "-", "electric-up-to-date": "-", "surrogate-control": "-"})
	bad := e.get("table", "items", "offset", "-1", "log", "changes_only", "subset__where", "id IN (SELECT 1)")
	if bad.code != 400 || !strings.HasPrefix(bad.body, `{"message":"Invalid request","errors":{"subset":{"where":["`) {
		t.Errorf("bad subset where: %d %s", bad.code, bad.body)
	}
	bad = e.get("table", "items", "offset", "-1", "log", "changes_only", "subset__order_by", "(SELECT 1)")
	if bad.code != 400 || !strings.HasPrefix(bad.body, `{"message":"Invalid request","errors":{"subset":{"order_by":["`) {
		t.Errorf("bad order_by: %d %s", bad.code, bad.body)
	}
}

// A subset's validation errors are nested under errors.subset by field,
// each a list of messages, as Electric's Ecto changeset of the embedded
// subset gives them (router_test.exs: %{"errors" => %{"subset" =>
// %{"where" => [message]}}}), with Ecto's messages for limit and offset;
// a GET's subset__* and a POST body alike.
func TestSubsetErrors(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	body := func(inner string) string {
		return `{"message":"Invalid request","errors":{"subset":{` + inner + `}}}`
	}
	cases := []struct {
		q    []string
		want string
	}{
		{[]string{"subset__limit", "5"}, body(`"order_by":["order_by is required when limit or offset is present"]`)},
		{[]string{"subset__offset", "5"}, body(`"order_by":["order_by is required when limit or offset is present"]`)},
		{[]string{"subset__limit", "0", "subset__order_by", "id"}, body(`"limit":["must be greater than 0"]`)},
		{[]string{"subset__offset", "-1", "subset__order_by", "id"}, body(`"offset":["must be greater than or equal to 0"]`)},
		{[]string{"subset__limit", "abc", "subset__order_by", "id"}, body(`"limit":["is invalid"]`)},
		{[]string{"subset__limit", "0"}, body(`"limit":["must be greater than 0"],"order_by":["order_by is required when limit or offset is present"]`)},
		{[]string{"subset__params", "nope"}, body(`"params":["params must be valid JSON"]`)},
		{[]string{"subset__params", "[1]"}, body(`"params":["params must be a JSON object"]`)},
		{[]string{"subset__where", "1 x 1"}, body(`"where":["At location 17: syntax error at or near \"x\""]`)},
	}
	for _, c := range cases {
		r := e.get(append([]string{"table", "items", "offset", "-1", "log", "changes_only"}, c.q...)...)
		if r.code != 400 || r.body != c.want {
			t.Errorf("GET %v:\n got %d %s\nwant 400 %s", c.q, r.code, r.body, c.want)
		}
	}
	q := qs("table", "items", "offset", "-1", "log", "changes_only")
	posts := []struct{ body, want string }{
		{`{"limit":1}`, body(`"order_by":["order_by is required when limit or offset is present"]`)},
		{`{"subset":{"limit":0,"order_by":"id"}}`, body(`"limit":["must be greater than 0"]`)},
		{`{"offset":-2,"order_by":"id"}`, body(`"offset":["must be greater than or equal to 0"]`)},
		{`{"limit":"x","order_by":"id"}`, body(`"limit":["is invalid"]`)},
		{`{"where":"1 x 1"}`, body(`"where":["At location 17: syntax error at or near \"x\""]`)},
	}
	for _, c := range posts {
		if r := e.do("POST", q, nil, c.body); r.code != 400 || r.body != c.want {
			t.Errorf("POST %s:\n got %d %s\nwant 400 %s", c.body, r.code, r.body, c.want)
		}
	}
	// A value PostgreSQL refuses (Electric's "subsets return 400 for
	// invalid enum values") is a 400 under errors.subset.where too.
	e.exec(`CREATE TYPE mood AS ENUM ('ok', 'sad'); CREATE TABLE moods (id int PRIMARY KEY, m mood)`)
	r := e.get("table", "moods", "offset", "-1", "log", "changes_only", "subset__where", "m = 'invalid_value'")
	if r.code != 400 || !strings.HasPrefix(r.body, `{"message":"Invalid request","errors":{"subset":{"where":`) || !strings.Contains(r.body, "invalid_value") {
		t.Errorf("a bad enum literal: %d %s", r.code, r.body)
	}
}

// A subset's rows and its metadata are one snapshot (REPEATABLE READ):
// a transaction committed between the metadata's read and the rows'
// query is in neither, its xid is past xmax, and the log delivers it
// after the subset's offset, so the client applies it.
func TestSubsetOneSnapshot(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	kv := []string{"table", "items", "log", "changes_only"}
	h, off := e.syncTo(map[string]map[string]any{}, "", "-1", kv...)
	var xid int64
	e.srv.SetSubsetHook(func() {
		e.srv.SetSubsetHook(nil)
		if err := e.conn.QueryRow(context.Background(), `INSERT INTO items VALUES (100, 'late', 100) RETURNING txid_current() % 4294967296`).Scan(&xid); err != nil {
			t.Error(err)
		}
	})
	r := e.get(append(kv, "offset", off, "handle", h, "subset__where", "id > 0")...)
	var sub struct {
		Metadata struct {
			Xmin, Xmax string
			Xip        []string `json:"xip_list"`
		}
		Data []map[string]any
	}
	if err := json.Unmarshal([]byte(r.body), &sub); r.code != 200 || err != nil {
		t.Fatalf("subset: %d %s (%v)", r.code, r.body, err)
	}
	if len(sub.Data) != 5 || strings.Contains(r.body, `"late"`) {
		t.Errorf("the subset's rows are not its snapshot's: %d rows %s", len(sub.Data), r.body)
	}
	xmax, _ := strconv.ParseInt(sub.Metadata.Xmax, 10, 64)
	if xid == 0 || xid < xmax {
		t.Errorf("the late transaction's xid %d is below the snapshot's xmax %s", xid, sub.Metadata.Xmax)
	}
	eventually(t, 10*time.Second, func() string {
		r := e.get(append(kv, "offset", r.h.Get("electric-offset"), "handle", h)...)
		if !strings.Contains(r.body, `"late"`) || !strings.Contains(r.body, `"txids":[`+strconv.FormatInt(xid, 10)+`]`) {
			return "the late insert is not in the log after the subset's offset: " + r.body
		}
		return ""
	})
}

func TestSubsetPOST(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.MaxBodyBytes = 200 })
	q := qs("table", "items", "offset", "-1", "log", "changes_only")
	r := e.do("POST", q, nil, `{"where":"n <= $1","params":{"1":"2"},"order_by":"id"}`)
	if r.code != 200 || !strings.Contains(r.body, `"id":"1"`) || !strings.Contains(r.body, `"id":"2"`) || strings.Contains(r.body, `"id":"3"`) {
		t.Errorf("POST subset: %d %s", r.code, r.body)
	}
	if r := e.do("POST", q, nil, `{"subset":{"where":"id = 3"}}`); r.code != 200 || !strings.Contains(r.body, `"id":"3"`) {
		t.Errorf("nested POST subset: %d %s", r.code, r.body)
	}
	if r := e.do("POST", q, nil, `[1]`); r.code != 400 || r.body != `{"error":"Request body must be a JSON object"}` {
		t.Errorf("array body: %d %s", r.code, r.body)
	}
	if r := e.do("POST", q, nil, `{nope`); r.code != 400 || !strings.HasPrefix(r.body, `{"error":"Invalid JSON in request body","details":`) {
		t.Errorf("bad JSON: %d %s", r.code, r.body)
	}
	if r := e.do("POST", q, nil, `{"where":"`+strings.Repeat("x", 300)+`"}`); r.code != 413 || r.body != `{"error":"Request body too large"}` {
		t.Errorf("too large: %d %s", r.code, r.body)
	}
}

func TestReplicaFull(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", "table", "items", "replica", "full")
	e.exec(`UPDATE items SET title = 'new' WHERE id = 2`)
	e.exec(`DELETE FROM items WHERE id = 3`)
	var got []map[string]any
	eventually(t, 10*time.Second, func() string {
		r := e.get("table", "items", "offset", off, "handle", h, "replica", "full")
		got = r.msgs(t)
		if len(got) < 3 {
			return "waiting for both changes: " + r.body
		}
		return ""
	})
	upd, del := got[0], got[1]
	if v := upd["value"].(map[string]any); len(v) != 3 || v["title"] != "new" || v["n"] != "2" {
		t.Errorf("full update value %v", v)
	}
	if o := upd["old_value"].(map[string]any); len(o) != 1 || o["title"] != "item 2" {
		t.Errorf("old_value %v", o)
	}
	if v := del["value"].(map[string]any); len(v) != 3 || v["title"] != "item 3" {
		t.Errorf("full delete value %v", v)
	}
}

func TestWhereMovesRows(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", "table", "items", "where", "n > $1", "params[1]", "3")
	if len(rows) != 2 {
		t.Fatalf("rows %v", rows)
	}
	e.exec(`UPDATE items SET n = 10 WHERE id = 1`)
	e.exec(`UPDATE items SET n = 0 WHERE id = 5`)
	eventually(t, 10*time.Second, func() string {
		h, off = e.syncTo(rows, h, off, "table", "items", "where", "n > $1", "params[1]", "3")
		if _, in := rows[`"public"."items"/"1"`]; !in {
			return "row 1 did not move in"
		}
		if _, in := rows[`"public"."items"/"5"`]; in {
			return "row 5 did not move out"
		}
		return ""
	})
}

func TestShapeCap503(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.MaxShapes = 1 })
	if r := e.get("table", "items", "offset", "-1"); r.code != 200 {
		t.Fatalf("first shape: %d", r.code)
	}
	r := e.get("table", "items", "offset", "-1", "where", "id = 1")
	if r.code != 503 || r.h.Get("retry-after") == "" || !strings.Contains(r.body, "shape_limit_exceeded") {
		t.Errorf("past the cap: %d retry-after %q %s", r.code, r.h.Get("retry-after"), r.body)
	}
}

func TestAllowList(t *testing.T) {
	e := newEnv(t, itemsSetup+`; CREATE TABLE other (id int PRIMARY KEY)`, func(c *shape.Config) {
		c.Tables = map[string][]string{"public.items": {"id", "title"}}
	})
	if r := e.get("table", "other", "offset", "-1"); r.code != 400 || !strings.Contains(r.body, "allow-list") {
		t.Errorf("a table outside the allow-list: %d %s", r.code, r.body)
	}
	if r := e.get("table", "items", "offset", "-1"); r.code != 400 || !strings.Contains(r.body, "n;") && !strings.Contains(r.body, ": n") {
		t.Errorf("a column outside the allow-list: %d %s", r.code, r.body)
	}
	if r := e.get("table", "items", "offset", "-1", "columns", "id,title"); r.code != 200 {
		t.Errorf("allowed columns: %d %s", r.code, r.body)
	}
	// A where (or a subset's where) on a column outside the allow-list
	// would be an oracle for its values.
	if r := e.get("table", "items", "offset", "-1", "columns", "id,title", "where", "n > 3"); r.code != 400 || !strings.Contains(r.body, "not: n") {
		t.Errorf("a where on a column outside the allow-list: %d %s", r.code, r.body)
	}
	if r := e.get("table", "items", "offset", "-1", "columns", "id,title", "log", "changes_only", "subset__where", "items.n > 3"); r.code != 400 || !strings.Contains(r.body, "not: n") {
		t.Errorf("a subset where on a column the shape does not select: %d %s", r.code, r.body)
	}
	if r := e.get("table", "items", "offset", "-1", "columns", "id,title", "log", "changes_only", "subset__order_by", "n", "subset__limit", "1"); r.code != 400 || !strings.Contains(r.body, "not: n") {
		t.Errorf("a subset order_by on a column the shape does not select: %d %s", r.code, r.body)
	}
	if r := e.get("table", "items", "offset", "-1", "columns", "id,title", "log", "changes_only", "subset__where", "title LIKE 'item%' AND (id > 1 OR NOT (title IS NULL))"); r.code != 200 {
		t.Errorf("a subset where on selected columns: %d %s", r.code, r.body)
	}
}

// Electric caches responses to GET (and HEAD, which Plug.Head makes a
// GET) only: a POST, subset or not, is no-cache.
func TestPostNoCache(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.do("POST", qs("table", "items", "offset", "-1"), nil, "")
	if r.code != 200 || r.h.Get("cache-control") != "no-cache" || !strings.Contains(r.body, `"item 1"`) {
		t.Errorf("POST -1: %d cache-control %q %s", r.code, r.h.Get("cache-control"), r.body)
	}
	h := r.h.Get("electric-handle")
	for _, q := range []url.Values{
		qs("table", "items", "offset", "0_0", "handle", h),
		qs("table", "items", "offset", "now"),
		qs("table", "items", "offset", "0_0", "handle", "1-1"),
	} {
		if r := e.do("POST", q, nil, ""); r.h.Get("cache-control") != "no-cache" {
			t.Errorf("POST %v: %d cache-control %q", q, r.code, r.h.Get("cache-control"))
		}
	}
	if r := e.do("HEAD", qs("table", "items", "offset", "0_0", "handle", h), nil, ""); r.h.Get("cache-control") != "public, max-age=60, stale-while-revalidate=300" {
		t.Errorf("HEAD: cache-control %q", r.h.Get("cache-control"))
	}
}

// A table outside the publication the server follows is refused: its
// changes would never reach the shape.
func TestOutsidePublication(t *testing.T) {
	e := newEnv(t, itemsSetup+`; CREATE TABLE other (id int PRIMARY KEY); CREATE PUBLICATION narrow FOR TABLE items`,
		func(c *shape.Config) { c.Publication = "narrow" })
	r := e.get("table", "other", "offset", "-1")
	want := `{"message":"Invalid request","errors":{"table":["Table \"public\".\"other\" is not in the publication \"narrow\" that this server follows: add it (ALTER PUBLICATION \"narrow\" ADD TABLE \"public\".\"other\")"]}}`
	if r.code != 400 || r.body != want {
		t.Errorf("a table outside the publication:\n got %d %s\nwant 400 %s", r.code, r.body, want)
	}
	if r := e.get("table", "items", "offset", "-1"); r.code != 200 {
		t.Errorf("a table of the publication: %d %s", r.code, r.body)
	}
	if e.srv.Shapes() != 1 {
		t.Errorf("%d shapes, want 1", e.srv.Shapes())
	}
}

func TestHeadLikeGet(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.do("HEAD", qs("table", "items", "offset", "-1"), nil, "")
	if r.code != 200 || r.h.Get("electric-handle") == "" || r.body != "" {
		t.Errorf("HEAD: %d %q %q", r.code, r.h.Get("electric-handle"), r.body)
	}
}

var _ = url.Values{}

// txids is the transaction's real xid, which clients compare with a
// subset's xmin/xmax/xip.
func TestTxidsAreRealXids(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	rows := map[string]map[string]any{}
	h, off := e.syncTo(rows, "", "-1", "table", "items")
	ctx := context.Background()
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var xid int64
	if err := tx.QueryRow(ctx, `UPDATE items SET n = 42 WHERE id = 4 RETURNING txid_current() % 4294967296`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := e.get("table", "items", "offset", off, "handle", h, "live", "true")
	ms := r.msgs(t)
	if len(ms) < 1 {
		t.Fatalf("no change: %s", r.body)
	}
	tx0, _ := ms[0]["headers"].(map[string]any)["txids"].([]any)
	if len(tx0) != 1 || int64(tx0[0].(float64)) != xid {
		t.Errorf("txids = %v, want [%d] (the transaction's xid)", tx0, xid)
	}
}
