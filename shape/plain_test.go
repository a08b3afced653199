package shape_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/shape"
)

// Electric's headers besides the CORS ones on a response its router or a
// plug sends directly (send_resp): Plug's default cache-control, and no
// content-type unless the plug put one.
const plugCache = "max-age=0, private, must-revalidate"

// The responses Electric's router and plugs send directly, and the errors
// to methods other than GET, each as Electric sends it (the root, unknown
// routes and methods, the 401, a POST body's errors, a POST's and a
// DELETE's other errors, the 202 of a DELETE, x-request-id). Freshet sent
// no-store (and surrogate-control) on all of these errors, a sniffed
// text/plain on its 404, no root, a 401 to another method on /v1/shape, a
// DELETE's 202 without electric-has-data, and its own x-request-id.
func TestPlainResponses(t *testing.T) {
	e := newEnv(t, itemsSetup, func(c *shape.Config) {
		c.Insecure, c.Secret, c.AllowDeletion, c.MaxBodyBytes = false, "s3cret", true, 200
	})
	cors := func(methods string) map[string]string {
		return map[string]string{"access-control-allow-origin": "*", "access-control-allow-methods": methods, "electric-server": "Freshet/test"}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	const shapeMethods = "GET, POST, HEAD, DELETE, OPTIONS"
	t.Run("root", func(t *testing.T) {
		for _, m := range []string{"GET", "HEAD"} {
			wantResp(t, m+" /", e.path(m, "/"), 200, "", with(cors("GET, HEAD"), "cache-control", plugCache, "content-type", "-", "surrogate-control", "-"))
		}
		wantResp(t, "POST /", e.path("POST", "/"), 404, "Not found", with(cors("GET, HEAD"), "cache-control", plugCache, "content-type", "-"))
	})
	t.Run("unknown route", func(t *testing.T) {
		wantResp(t, "GET /v1/nope", e.path("GET", "/v1/nope"), 404, "Not found", with(cors("GET, HEAD"), "cache-control", plugCache, "content-type", "-", "surrogate-control", "-"))
		wantResp(t, "POST /v1/health", e.path("POST", "/v1/health"), 404, "Not found", with(cors("GET, HEAD"), "cache-control", plugCache))
		// No route matches PUT /v1/shape: no authentication, the other
		// paths' methods.
		wantResp(t, "PUT /v1/shape", e.path("PUT", "/v1/shape?table=items&offset=-1"), 404, "Not found", with(cors("GET, HEAD"), "cache-control", plugCache, "content-type", "-"))
	})
	t.Run("401", func(t *testing.T) {
		wantResp(t, "GET without the secret", e.get("table", "items", "offset", "-1"), 401, `{"message":"Unauthorized - Invalid API secret"}`,
			with(cors(shapeMethods), "cache-control", plugCache, "content-type", "-", "surrogate-control", "-"))
	})
	t.Run("POST body errors", func(t *testing.T) {
		q := qs("table", "items", "offset", "-1", "log", "changes_only", "secret", "s3cret")
		json := with(cors(shapeMethods), "cache-control", plugCache, "content-type", "application/json; charset=utf-8", "surrogate-control", "-")
		wantResp(t, "array body", e.do("POST", q, nil, `[1]`), 400, `{"error":"Request body must be a JSON object"}`, json)
		wantResp(t, "too large", e.do("POST", q, nil, `{"where":"`+strings.Repeat("x", 300)+`"}`), 413, `{"error":"Request body too large"}`, json)
	})
	t.Run("POST and DELETE errors", func(t *testing.T) {
		noCache := with(cors(shapeMethods), "cache-control", "no-cache", "surrogate-control", "-", "content-type", "application/json; charset=utf-8")
		wantResp(t, "POST bad offset", e.do("POST", qs("table", "items", "offset", "x", "secret", "s3cret"), nil, ""), 400,
			`{"message":"Invalid request","errors":{"offset":["has invalid format"]}}`, noCache)
		wantResp(t, "POST bad subset", e.do("POST", qs("table", "items", "offset", "-1", "log", "changes_only", "secret", "s3cret"), nil, `{"limit":2}`), 400,
			`{"message":"Invalid request","errors":{"subset":{"order_by":["order_by is required when limit or offset is present"]}}}`, noCache)
		wantResp(t, "DELETE of no shape", e.do("DELETE", qs("table", "items", "secret", "s3cret"), nil, ""), 404, `{"message":"No existing shape found"}`, noCache)
		// A GET's 400 is no-store, by a CDN too.
		wantResp(t, "GET bad offset", e.get("table", "items", "offset", "x", "secret", "s3cret"), 400,
			`{"message":"Invalid request","errors":{"offset":["has invalid format"]}}`,
			with(cors(shapeMethods), "cache-control", "no-store", "surrogate-control", "no-store", "content-type", "application/json; charset=utf-8"))
	})
	t.Run("DELETE 202", func(t *testing.T) {
		h := e.get("table", "items", "offset", "-1", "secret", "s3cret").h.Get("electric-handle")
		wantResp(t, "DELETE ?handle=", e.do("DELETE", qs("handle", h, "secret", "s3cret"), nil, ""), 202, "",
			with(cors(shapeMethods), "cache-control", "no-cache", "content-type", "application/json; charset=utf-8", "electric-has-data", "true", "surrogate-control", "-"))
	})
	t.Run("x-request-id", func(t *testing.T) {
		// Plug.RequestId: the request's own, if 20 to 200 bytes long;
		// else 20 URL-safe base64 characters.
		id := "req-0123456789abcdefghij"
		r := e.send("GET", e.url+"/v1/health", map[string]string{"x-request-id": id}, "")
		if got := r.h.Get("x-request-id"); got != id {
			t.Errorf("x-request-id %q, want the request's %q", got, id)
		}
		for _, in := range []string{"", "short"} {
			r := e.send("GET", e.url+"/v1/health", map[string]string{"x-request-id": in}, "")
			got := r.h.Get("x-request-id")
			if len(got) != 20 || strings.Trim(got, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
				t.Errorf("request's x-request-id %q: %q, want 20 URL-safe base64 characters", in, got)
			}
		}
	})
}

// A 304 is Electric's: every If-None-Match field counts (if_none_match
// reads them all), and it carries the headers of the 200 it stands for
// but electric-schema (and content-type, which net/http drops from a
// 304; Electric's carries ServeShapePlug's). Freshet read the first
// field only.
func TestEtag304Fields(t *testing.T) {
	e := newEnv(t, itemsSetup, nil)
	r := e.get("table", "items", "offset", "-1")
	etag, h := r.h.Get("etag"), r.h.Get("electric-handle")
	req, err := http.NewRequest("GET", e.url+"/v1/shape?table=items&offset=-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Add("If-None-Match", `"other"`)
	req.Header.Add("If-None-Match", etag)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	wantResp(t, "304", resp{code: res.StatusCode, h: res.Header}, 304, "", map[string]string{
		"etag": etag, "electric-handle": h, "electric-offset": "0_0", "electric-has-data": "true",
		"cache-control":   "public, max-age=604800, s-maxage=3600, stale-while-revalidate=2629746",
		"electric-schema": "-", "electric-up-to-date": "-",
	})
}
