package shape_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/freshetdb/freshet/internal/servetest"
)

// nginxConf is the proxy cache docs/shape-api.md ("Behind a CDN")
// recommends, with the test's paths and ports. %[1]s is the directory,
// %[2]s nginx's address, %[3]s freshet's.
const nginxConf = `daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
    log_format cdn '$msec $status $upstream_cache_status $request_time $upstream_response_time "$request_uri"';
    access_log %[1]s/access.log cdn;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;

    proxy_cache_path %[1]s/cache levels=1:2 keys_zone=shapes:10m max_size=1g inactive=1h use_temp_path=off;

    server {
        listen %[2]s;
        location /v1/shape {
            proxy_pass http://%[3]s;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 60s;

            proxy_cache shapes;
            # The whole URL (the shape, offset, handle, cursor and ?secret=)
            # and the Authorization header: a cached response is served only
            # to a request with the same credentials. A request URI holds no
            # space, so the key is unambiguous.
            proxy_cache_key "$scheme://$host$request_uri $http_authorization";
            # One origin request per URL: live long-polls of one window share
            # it. Longer than --shape-long-poll (20 s), or waiting requests
            # go to the origin after 5 s.
            proxy_cache_lock on;
            proxy_cache_lock_timeout 30s;
            proxy_cache_lock_age 30s;
            # STALE as stale-while-revalidate allows, refreshed in the
            # background; revalidated by etag.
            proxy_cache_background_update on;
            proxy_cache_revalidate on;
            # SSE streams bypass the cache (events pass through as they come).
            proxy_no_cache $arg_live_sse $arg_experimental_live_sse;
            proxy_cache_bypass $arg_live_sse $arg_experimental_live_sse;

            add_header X-Cache-Status $upstream_cache_status always;
        }
    }
}
`

// startNginx runs nginx in front of origin (host:port) as a child of the
// test (one process, not a daemon, killed with the test) and returns its
// address.
func startNginx(t *testing.T, origin string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/nginx"); e != nil {
			t.Fatalf("the CDN test needs nginx: run `bash scripts/ensure-nginx.sh` (make test does), or apt-get install nginx: %v", err)
		}
		bin = "/usr/sbin/nginx"
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(nginxConf, dir, addr, origin)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			a, _ := os.ReadFile(filepath.Join(dir, "access.log"))
			t.Logf("nginx printed: %s\nerror.log:\n%s\naccess.log:\n%s", out.String(), tailOf(string(b), 2000), tailOf(string(a), 6000))
		}
	})
	servetest.Eventually(t, 20*time.Second, func() string {
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s\n%s", out.String(), b)
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return "nginx is not listening: " + err.Error()
		}
		c.Close()
		return ""
	})
	return addr
}

// originCounts reads freshet_shape_requests_total by kind from the
// origin's /metrics.
func originCounts(t *testing.T, origin string) map[string]int {
	t.Helper()
	res, err := http.Get("http://" + origin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got := map[string]int{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, `freshet_shape_requests_total{kind="`)
		if !ok {
			continue
		}
		kind, num, _ := strings.Cut(rest, `"} `)
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		got[kind] = int(f)
	}
	return got
}

// cdnResp is one answer through nginx.
type cdnResp struct {
	code  int
	cache string // X-Cache-Status
	h     http.Header
	body  string
}

// cdnGet sends one GET through nginx with the headers hdr (name, value, ...).
func cdnGet(t *testing.T, addr, query string, hdr ...string) cdnResp {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+"/v1/shape?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", query, err) // not Fatal: clients run on goroutines
		return cdnResp{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return cdnResp{code: res.StatusCode, cache: res.Header.Get("X-Cache-Status"), h: res.Header, body: string(b)}
}

// TestCDN puts a real nginx proxy cache (docs/shape-api.md, "Behind a
// CDN") in front of a real freshet serve and counts the requests that
// reach freshet (freshet_shape_requests_total): non-live responses are
// served from the cache within max-age (HIT) and as stale-while-revalidate
// allows (STALE, refreshed by one background request); live long-polls
// with one URL are collapsed into one origin request, and the next
// cursor is a new one; SSE bypasses the cache and its events pass
// through while the stream is open; nothing is served from the cache to a request
// that must not get it (401s, other credentials, 409s only for the URL
// they answered).
func TestCDN(t *testing.T) {
	db := pgtest.NewDB(t)
	db.Exec(t, itemsSetup)
	const secret = "cdn-test-secret"
	srv := servetest.Start(t, servetest.Options{DSN: db.DSN, Slot: servetest.SlotFor("shc_", db.Name),
		Args: []string{"--token", secret, "--shape-data-dir", t.TempDir(), "--shape-max-age", "3", "--shape-stale-age", "6",
			"--shape-long-poll", "20s", "--shape-allow-deletion"}})
	cdn := startNginx(t, srv.Addr)
	origin := func() map[string]int { return originCounts(t, srv.Addr) }
	// originGrew waits until the origin has answered want more requests
	// of kind than at base, and checks it answered no more.
	originGrew := func(what string, base map[string]int, kind string, want int) {
		t.Helper()
		servetest.Eventually(t, 10*time.Second, func() string {
			if got := origin()[kind] - base[kind]; got < want {
				return sprintf("%s: %d %s requests reached freshet, want %d", what, got, kind, want)
			}
			return ""
		})
		time.Sleep(200 * time.Millisecond) // one more would have arrived by now
		if got := origin()[kind] - base[kind]; got != want {
			t.Errorf("%s: %d %s requests reached freshet, want %d", what, got, kind, want)
		}
	}
	sq := "table=items&secret=" + secret

	// The first chunk (offset=-1): MISS, then HIT for a week in browsers
	// and an hour in the cache (s-maxage).
	base := origin()
	r := cdnGet(t, cdn, sq+"&offset=-1")
	if r.code != 200 || r.cache != "MISS" {
		t.Fatalf("-1: %d %s %s", r.code, r.cache, r.body)
	}
	handle := r.h.Get("electric-handle")
	if r2 := cdnGet(t, cdn, sq+"&offset=-1"); r2.cache != "HIT" || r2.body != r.body || r2.h.Get("electric-handle") != handle {
		t.Errorf("-1 again: %s, handle %s", r2.cache, r2.h.Get("electric-handle"))
	}
	originGrew("-1 twice", base, "other", 1)

	// A non-live catch-up (max-age=3, stale-while-revalidate=6): MISS,
	// HIT; past max-age STALE with one background request to freshet,
	// then HIT again (the refreshed copy); past max-age and the stale
	// window, EXPIRED: freshet answers the request itself. nginx keeps
	// times in whole seconds and a copy is fresh while now <= stored + 3,
	// so "past max-age" is 4 s after the answer and "past the stale
	// window" 10 s.
	catchUp := sq + "&offset=0_0&handle=" + handle
	base = origin()
	r = cdnGet(t, cdn, catchUp)
	if r.code != 200 || r.cache != "MISS" || r.h.Get("cache-control") != "public, max-age=3, stale-while-revalidate=6" || !strings.Contains(r.body, `"up-to-date"`) {
		t.Fatalf("catch-up: %d %s %q %s", r.code, r.cache, r.h.Get("cache-control"), r.body)
	}
	missAt := time.Now()
	if r2 := cdnGet(t, cdn, catchUp); r2.cache != "HIT" || r2.body != r.body {
		t.Errorf("catch-up within max-age: %s", r2.cache)
	}
	originGrew("catch-up twice within max-age", base, "other", 1)
	time.Sleep(time.Until(missAt.Add(4100 * time.Millisecond)))
	base = origin()
	if r2 := cdnGet(t, cdn, catchUp); r2.cache != "STALE" || r2.code != 200 {
		t.Errorf("catch-up past max-age, within stale-while-revalidate: %d %s", r2.code, r2.cache)
	}
	originGrew("the stale copy's background refresh", base, "other", 1)
	if r2 := cdnGet(t, cdn, catchUp); r2.cache != "HIT" {
		t.Errorf("catch-up after the background refresh: %s", r2.cache)
	}
	time.Sleep(10200 * time.Millisecond) // the refreshed copy was stored before that HIT
	base = origin()
	if r2 := cdnGet(t, cdn, catchUp); r2.code != 200 || r2.cache != "EXPIRED" && r2.cache != "REVALIDATED" {
		t.Errorf("catch-up past max-age and stale-while-revalidate: %d %s", r2.code, r2.cache)
	}
	originGrew("past the stale window", base, "other", 1)

	// Live long-polls: clients at one offset send one URL (the first
	// without a cursor, then the cursor of the response they all got);
	// each URL reaches freshet once, whatever the number of clients.
	offset := r.h.Get("electric-offset")
	live := func(round int, query, insert string) string {
		t.Helper()
		const n = 8
		base := origin()
		var wg sync.WaitGroup
		res := make([]cdnResp, n)
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); res[i] = cdnGet(t, cdn, query) }()
		}
		originGrew(sprintf("round %d: %d long-polls held", round, n), base, "live", 1)
		time.Sleep(300 * time.Millisecond)
		db.Exec(t, insert)
		wg.Wait()
		if got := origin()["live"] - base["live"]; got != 1 {
			t.Errorf("round %d: %d long-polls reached freshet for %d clients, want 1", round, got, n)
		}
		miss := 0
		for i, r := range res {
			if r.code != 200 || !strings.Contains(r.body, `"operation":"insert"`) || r.body != res[0].body {
				t.Errorf("round %d client %d: %d %s %s", round, i, r.code, r.cache, r.body)
			}
			if r.cache == "MISS" {
				miss++
			}
			if r.h.Get("electric-cursor") != res[0].h.Get("electric-cursor") {
				t.Errorf("round %d: clients got cursors %s and %s", round, r.h.Get("electric-cursor"), res[0].h.Get("electric-cursor"))
			}
		}
		if miss != 1 {
			t.Errorf("round %d: %d of %d clients were answered by freshet (MISS), want 1", round, miss, n)
		}
		return res[0].h.Get("electric-offset") + "&cursor=" + res[0].h.Get("electric-cursor")
	}
	next := live(1, sq+"&offset="+offset+"&handle="+handle+"&live=true", `INSERT INTO items VALUES (10, 'ten', 10)`)
	next = live(2, sq+"&offset="+next+"&handle="+handle+"&live=true", `INSERT INTO items VALUES (11, 'eleven', 11)`)

	// SSE goes through uncached (BYPASS) and unbuffered: an event arrives
	// while the stream is open, not when it ends (--shape-sse-timeout, 60 s).
	req, _ := http.NewRequest("GET", "http://"+cdn+"/v1/shape?"+sq+"&offset="+next+"&handle="+handle+"&live=true&live_sse=true&experimental_live_sse=true", nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("X-Cache-Status") != "BYPASS" {
		t.Errorf("SSE: %d %s", res.StatusCode, res.Header.Get("X-Cache-Status"))
	}
	got := make(chan string, 1)
	go func() {
		br := bufio.NewReader(res.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				close(got)
				return
			}
			if strings.Contains(line, `"operation":"insert"`) {
				got <- line
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	db.Exec(t, `INSERT INTO items VALUES (12, 'twelve', 12)`)
	select {
	case line, ok := <-got:
		if !ok {
			t.Errorf("the SSE stream ended without the insert")
		} else if !strings.Contains(line, `"twelve"`) {
			t.Errorf("SSE event %s", line)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("no SSE event through nginx within 20 s of the insert: nginx buffers the stream")
	}
	res.Body.Close()

	// Nothing a client must not get. A wrong or missing secret is a 401
	// every time (no-store: never cached), although the right secret's
	// answer for the same shape and offset is in the cache.
	for _, q := range []string{"table=items&offset=-1", "table=items&offset=-1&secret=wrong"} {
		base = origin()
		for range 2 {
			if r := cdnGet(t, cdn, q); r.code != 401 || r.cache == "HIT" {
				t.Errorf("%s: %d %s %s", q, r.code, r.cache, r.body)
			}
		}
		originGrew(q+" twice", base, "other", 2)
	}
	// The secret as a Bearer token: the cached answer is keyed by it, so
	// the same URL without it, or with another, is freshet's 401.
	bq := "table=items&offset=-1&where=id>1"
	if r := cdnGet(t, cdn, bq, "Authorization", "Bearer "+secret); r.code != 200 || r.cache != "MISS" {
		t.Fatalf("bearer: %d %s %s", r.code, r.cache, r.body)
	}
	if r := cdnGet(t, cdn, bq, "Authorization", "Bearer "+secret); r.code != 200 || r.cache != "HIT" {
		t.Errorf("bearer again: %d %s", r.code, r.cache)
	}
	for _, auth := range []string{"", "Bearer wrong"} {
		if r := cdnGet(t, cdn, bq, "Authorization", auth); r.code != 401 || r.cache == "HIT" {
			t.Errorf("the bearer's cached shape with Authorization %q: %d %s %s", auth, r.code, r.cache, r.body)
		}
	}
	// A 409 is cached (Electric's max-age=60, to absorb the herd) for the
	// URL it answered: a handle that names no shape, which is never
	// reused. It names the live shape, which the cache does not hide.
	gone := sq + "&offset=0_0&handle=1-1"
	r = cdnGet(t, cdn, gone)
	if r.code != 409 || r.h.Get("electric-handle") != handle {
		t.Errorf("an unknown handle: %d %s handle %s", r.code, r.body, r.h.Get("electric-handle"))
	}
	if r := cdnGet(t, cdn, catchUp); r.code != 200 {
		t.Errorf("the live handle after a 409 for another: %d %s", r.code, r.body)
	}
	// A 400 is no-store too.
	base = origin()
	for range 2 {
		if r := cdnGet(t, cdn, sq+"&offset=x"); r.code != 400 || r.cache == "HIT" {
			t.Errorf("a bad offset: %d %s", r.code, r.cache)
		}
	}
	originGrew("a 400 twice", base, "other", 2)
}
