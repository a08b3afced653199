package shape_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/shape"
)

// authProxy is the auth-proxy pattern (docs/shape-api.md): the browser
// talks to the app's backend, which authenticates the user, pins the
// shape to what the user may see (its table and a where clause with the
// user's id as a param) and adds the secret, then forwards to Freshet.
// The browser never holds the secret and cannot widen its shape.
func authProxy(freshet, secret string, userOf func(*http.Request) (string, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := userOf(r)
		if !ok {
			http.Error(w, "sign in", http.StatusUnauthorized)
			return
		}
		q := url.Values{}
		// Only the protocol's own parameters pass; the shape is the
		// backend's choice.
		for _, k := range []string{"offset", "handle", "live", "live_sse", "experimental_live_sse", "cursor", "cache-buster", "expired_handle", "log"} {
			if v, ok := r.URL.Query()[k]; ok {
				q[k] = v
			}
		}
		q.Set("table", "todos")
		q.Set("where", "owner = $1")
		q.Set("params[1]", user)
		q.Set("secret", secret)
		up, err := http.NewRequestWithContext(r.Context(), r.Method, freshet+"/v1/shape?"+q.Encode(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if inm := r.Header.Get("If-None-Match"); inm != "" {
			up.Header.Set("If-None-Match", inm)
		}
		res, err := http.DefaultClient.Do(up)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		io.Copy(w, res.Body)
	})
}

func TestAuthProxy(t *testing.T) {
	e := newEnv(t, `CREATE TABLE todos (id int PRIMARY KEY, owner text, title text);
		INSERT INTO todos VALUES (1, 'ann', 'a'), (2, 'bob', 'b'), (3, 'ann', 'c')`, func(c *shape.Config) { c.Insecure, c.Secret = false, "backend-only" })
	proxy := httptest.NewServer(authProxy(e.url, "backend-only", func(r *http.Request) (string, bool) {
		u := r.Header.Get("X-User") // a session cookie in a real app
		return u, u != ""
	}))
	defer proxy.Close()
	get := func(user, query string) (int, string) {
		req, _ := http.NewRequest("GET", proxy.URL+"/shape?"+query, nil)
		if user != "" {
			req.Header.Set("X-User", user)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := get("ann", "offset=-1&table=todos&where=true")
	if code != 200 || !strings.Contains(body, `"title":"a"`) || !strings.Contains(body, `"title":"c"`) || strings.Contains(body, `"owner":"bob"`) {
		t.Errorf("ann through the proxy: %d %s", code, body)
	}
	if code, _ := get("", "offset=-1"); code != 401 {
		t.Errorf("no user: %d", code)
	}
	// Straight to Freshet without the secret: refused.
	if r := e.get("table", "todos", "offset", "-1"); r.code != 401 {
		t.Errorf("without the secret: %d", r.code)
	}
}
