package shape_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/shape"
)

// wantResp checks a response's status, body and headers: want maps a
// header to its value, or to "-" for a header that must be absent.
func wantResp(t *testing.T, what string, r resp, code int, body string, want map[string]string) {
	t.Helper()
	if r.code != code || r.body != body {
		t.Errorf("%s: %d %s, want %d %s", what, r.code, r.body, code, body)
	}
	for k, v := range want {
		got, ok := r.h[http.CanonicalHeaderKey(k)]
		switch {
		case v == "-" && ok:
			t.Errorf("%s: %s = %q, want none", what, k, got)
		case v != "-" && (len(got) != 1 || got[0] != v):
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

const oobBody = `{"message":"Invalid request","errors":{"offset":["out of bounds for this shape"]}}`

// oobHeaders are the headers of Electric's out-of-bounds 400 to a GET
// (Response.invalid_request(api, ...): no handle, so no etag; >= 400, so
// no-store and no electric-has-data; no offset, schema or cursor).
var oobHeaders = map[string]string{
	"cache-control":               "no-store",
	"surrogate-control":           "no-store",
	"content-type":                "application/json; charset=utf-8",
	"access-control-allow-origin": "*",
	"electric-handle":             "-",
	"electric-offset":             "-",
	"electric-schema":             "-",
	"electric-cursor":             "-",
	"electric-up-to-date":         "-",
	"electric-has-data":           "-",
	"etag":                        "-",
}

// An offset past the shape's latest is out of bounds (Electric's
// is_out_of_bounds: latest < offset), also a virtual one: a snapshot
// chunk the shape does not have, while its latest offset is its last
// chunk, and 0_inf then. Electric holds such a request as a live one for
// half the long-poll timeout, then answers 400 with these headers, live
// or not. (Freshet answered 409 to the virtual ones.)
func TestOutOfBoundsGolden(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.LongPoll = 600 * time.Millisecond })
	r := e.get("table", "items", "offset", "-1")
	h := r.h.Get("electric-handle")
	if r.h.Get("electric-offset") != "0_0" {
		t.Fatalf("-1: electric-offset %q, want 0_0 (one chunk)", r.h.Get("electric-offset"))
	}
	for _, off := range []string{"0_1", "0_7", "0_inf", "99999999999999_1"} {
		for _, live := range []string{"false", "true"} {
			r := e.get("table", "items", "offset", off, "handle", h, "live", live)
			wantResp(t, off+" live="+live, r, 400, oobBody, oobHeaders)
		}
	}
	// The last chunk itself is the end: up to date at once.
	r = e.get("table", "items", "offset", "0_0", "handle", h)
	if r.code != 200 || r.h.Get("electric-offset") != "0_0" {
		t.Errorf("0_0: %d offset %q %s", r.code, r.h.Get("electric-offset"), r.body)
	}
}

// An out-of-bounds request whose offset appears while it is held (a
// transaction gives the shape a latest offset past it) is served as any
// request at that offset: a virtual offset past the snapshot, once the
// shape has changes, is served as the end of the snapshot, the log from
// its start (Electric's get_chunk_end_log_offset and get_log_stream). The
// long-poll timeout here is long enough that a 400 or a 409 can only be
// the old behaviour, not the hold running out.
func TestOutOfBoundsAppears(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.LongPoll = 10 * time.Minute })
	h := e.get("table", "items", "offset", "-1").h.Get("electric-handle")
	type got struct {
		live string
		r    resp
	}
	done := make(chan got, 2)
	for _, live := range []string{"false", "true"} {
		go func() { done <- got{live, e.get("table", "items", "offset", "0_3", "handle", h, "live", live)} }()
	}
	// Both are held (a held request keeps its offset's shared body).
	eventually(t, 20*time.Second, func() string {
		select {
		case g := <-done:
			t.Fatalf("live=%s answered before its offset appeared: %d %s", g.live, g.r.code, g.r.body)
		default:
		}
		if n, _ := e.srv.BodyHolders(); n < 2 {
			return sprintf("%d of the 2 requests held", n)
		}
		return ""
	})
	e.exec(`INSERT INTO items VALUES (6, 'six', 6)`)
	for range 2 {
		var g got
		select {
		case g = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a held out-of-bounds request was not answered when its offset appeared")
		}
		r := g.r
		ms := r.msgs(t)
		if r.code != 200 || len(ms) != 2 || !strings.Contains(r.body, `"value":{"id":"6","title":"six","n":"6"}`) || !strings.Contains(r.body, `"control":"up-to-date"`) {
			t.Errorf("live=%s, the offset appeared: %d %s", g.live, r.code, r.body)
			continue
		}
		hd := ms[0]["headers"].(map[string]any)
		off := hd["lsn"].(string) + "_1"
		want := map[string]string{"electric-handle": h, "electric-offset": off, "electric-up-to-date": "", "electric-has-data": "true", "etag": `"` + h + ":0_3:" + off + `"`}
		if g.live == "true" {
			want["cache-control"] = "public, max-age=5, stale-while-revalidate=5"
			want["electric-schema"] = "-"
		} else {
			want["cache-control"] = "public, max-age=60, stale-while-revalidate=300"
			want["electric-cursor"] = "-"
		}
		wantResp(t, "live="+g.live, r, 200, r.body, want)
		// Served as the end of the snapshot: what 0_0 is served.
		if g.live == "false" {
			r0 := e.get("table", "items", "offset", "0_0", "handle", h)
			if r0.code != 200 || r0.body != r.body || r0.h.Get("electric-offset") != off {
				t.Errorf("0_0: %d %s offset %q; 0_3: %s", r0.code, r0.body, r0.h.Get("electric-offset"), r.body)
			}
		}
	}
	// And at once now that the shape has changes.
	r := e.get("table", "items", "offset", "0_9", "handle", h)
	if r.code != 200 || !strings.Contains(r.body, `"id":"6"`) {
		t.Errorf("0_9 after a change: %d %s", r.code, r.body)
	}
}

// An SSE request past the shape's latest names the latest as its
// electric-offset (Electric's determine_log_chunk_offset for an
// out-of-bounds request) and its stream ends, with no event, after half
// the long-poll timeout when the offset has not appeared (the SSE
// timeout here is far longer).
func TestOutOfBoundsSSE(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) { c.LongPoll = 600 * time.Millisecond; c.SSETimeout = 10 * time.Minute })
	h := e.get("table", "items", "offset", "-1").h.Get("electric-handle")
	req, _ := http.NewRequest("GET", e.url+"/v1/shape?"+qs("table", "items", "offset", "0_4", "handle", h, "live", "true", "live_sse", "true").Encode(), nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("electric-offset") != "0_0" || res.Header.Get("content-type") != "text/event-stream" || res.Header.Get("electric-handle") != h {
		t.Errorf("SSE out of bounds: %d offset %q content-type %q handle %q", res.StatusCode, res.Header.Get("electric-offset"), res.Header.Get("content-type"), res.Header.Get("electric-handle"))
	}
	ended := make(chan string, 1)
	go func() {
		var sb strings.Builder
		br := bufio.NewReader(res.Body)
		for {
			line, err := br.ReadString('\n')
			sb.WriteString(line)
			if err != nil {
				ended <- sb.String()
				return
			}
		}
	}()
	select {
	case body := <-ended:
		if strings.Contains(body, "data:") {
			t.Errorf("SSE out of bounds sent events: %q", body)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the SSE stream at an out-of-bounds offset did not end")
	}
}

// OPTIONS's access-control-allow-headers is Electric's Api.Options: the
// request's access-control-request-headers fields (each header line,
// not split at commas) whose value, lower-cased, is if-none-match or
// traceparent, kept as sent, in order, joined by "," with no space; none
// kept, no header. (Freshet split a field at commas, lower-cased the
// names and joined them with ", ".)
func TestOptionsAllowHeaders(t *testing.T) {
	e := newEnv(t, "", nil)
	for _, c := range []struct {
		fields []string
		want   string // "-": no access-control-allow-headers
	}{
		{[]string{"If-None-Match"}, "If-None-Match"},
		{[]string{"traceparent"}, "traceparent"},
		{[]string{"TraceParent", "x-custom", "if-none-match"}, "TraceParent,if-none-match"},
		{[]string{"if-none-match, traceparent"}, "-"},
		{[]string{"if-none-match,traceparent"}, "-"},
		{[]string{"x-custom"}, "-"},
		{nil, "-"},
	} {
		req, err := http.NewRequest("OPTIONS", e.url+"/v1/shape", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range c.fields {
			req.Header.Add("Access-Control-Request-Headers", f)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		r := resp{code: res.StatusCode, h: res.Header}
		wantResp(t, sprintf("OPTIONS %q", c.fields), r, 204, "", map[string]string{
			"access-control-allow-headers":  c.want,
			"access-control-max-age":        "86400",
			"connection":                    "keep-alive",
			"cache-control":                 "-",
			"access-control-allow-origin":   "*",
			"access-control-allow-methods":  "GET, POST, HEAD, DELETE, OPTIONS",
			"access-control-expose-headers": "electric-cursor,electric-handle,electric-has-data,electric-offset,electric-schema,electric-up-to-date,electric-internal-known-error,retry-after",
		})
	}
}
