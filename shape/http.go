package shape

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// The exposed headers and methods Electric's server sends.
const (
	exposeHeaders = "electric-cursor,electric-handle,electric-has-data,electric-offset,electric-schema,electric-up-to-date,electric-internal-known-error,retry-after"
	shapeMethods  = "GET, POST, HEAD, DELETE, OPTIONS"
	otherMethods  = "GET, HEAD"
	cacheMinusOne = "public, max-age=604800, s-maxage=3600, stale-while-revalidate=2629746"
	cacheLive     = "public, max-age=5, stale-while-revalidate=5"
	jsonType      = "application/json; charset=utf-8"
)

var mustRefetchBody = []byte(`[{"headers":{"control":"must-refetch"}}]`)

// Handler returns the handler to mount at {base}/v1/ (it serves
// {base}/v1/shape and {base}/v1/health; base is stripped by the caller or
// given here).
func (srv *Server) Handler(base string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := path.Clean("/" + strings.TrimPrefix(r.URL.Path, base))
		srv.serve(w, r, p)
	})
}

// ServeHTTP serves requests whose path is /v1/shape or /v1/health.
func (srv *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	srv.serve(w, r, path.Clean("/"+r.URL.Path))
}

func (srv *Server) serve(w http.ResponseWriter, r *http.Request, p string) {
	h := w.Header()
	h.Set("x-request-id", requestID(r))
	h.Set("electric-server", "Freshet/"+srv.cfg.ServerVersion)
	if o := r.Header.Get("Origin"); o != "" {
		h.Set("access-control-allow-origin", o)
	} else {
		h.Set("access-control-allow-origin", "*")
	}
	h.Set("access-control-expose-headers", exposeHeaders)
	// Electric's router: GET and HEAD / answer 200 "", GET /v1/health its
	// status, GET, HEAD, POST, DELETE and OPTIONS /v1/shape the shape API;
	// anything else, another method on those paths too, 404 "Not found"
	// (with the other paths' CORS methods and no authentication).
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case p == "/" && get:
		h.Set("access-control-allow-methods", otherMethods)
		writePlain(w, http.StatusOK, nil, false)
		return
	case p == "/v1/health" && get:
		h.Set("access-control-allow-methods", otherMethods)
		srv.health(w, r)
		return
	case p == "/v1/shape" && (get || r.Method == http.MethodPost || r.Method == http.MethodDelete || r.Method == http.MethodOptions):
	default:
		h.Set("access-control-allow-methods", otherMethods)
		writePlain(w, http.StatusNotFound, []byte("Not found"), false)
		return
	}
	h.Set("access-control-allow-methods", shapeMethods)
	srv.countRequest(r)
	if r.Method == http.MethodOptions {
		srv.options(w, r)
		return
	}
	if !srv.authorized(r) {
		// Electric's router sends its 401 before its CORS headers, with
		// Plug's default cache-control and no content-type; Freshet keeps
		// the CORS headers, so that a browser's client sees the 401
		// (docs/shape-api.md, "Where Freshet differs").
		writePlain(w, http.StatusUnauthorized, []byte(`{"message":"Unauthorized - Invalid API secret"}`), false)
		return
	}
	if r.Method == http.MethodDelete {
		srv.deleteShape(w, r)
		return
	}
	srv.serveShape(w, r)
}

// requestID is the response's x-request-id, as Electric's Plug.RequestId
// gives it: the request's own when it has 20 to 200 bytes, else 20
// random URL-safe base64 characters.
func requestID(r *http.Request) string {
	if id := r.Header.Get("x-request-id"); len(id) >= 20 && len(id) <= 200 {
		return id
	}
	var b [15]byte
	_, _ = rand.Read(b[:])
	return base64.URLEncoding.EncodeToString(b[:])
}

func (srv *Server) authorized(r *http.Request) bool {
	if srv.cfg.Insecure {
		return true
	}
	if srv.cfg.Secret == "" {
		return false // neither a secret nor insecure on purpose
	}
	q := r.URL.Query()
	got := q.Get("secret")
	if got == "" {
		got = q.Get("api_secret")
	}
	if got == "" {
		if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
			got = strings.TrimPrefix(a, "Bearer ")
		}
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(srv.cfg.Secret)) == 1
}

func (srv *Server) health(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("cache-control", "no-cache, no-store, must-revalidate")
	h.Set("content-type", jsonType)
	if srv.cfg.Ready != nil && !srv.cfg.Ready() {
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"status":"starting"}`)
		return
	}
	io.WriteString(w, `{"status":"active"}`)
}

func (srv *Server) options(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("access-control-max-age", "86400")
	// As Electric's Api.Options: each access-control-request-headers
	// field whose whole value is one of the two names, in any case, is
	// kept as sent, in order, joined by ",". A field listing several
	// names ("if-none-match, traceparent") is not split, and is dropped.
	var allowed []string
	for _, x := range r.Header.Values("Access-Control-Request-Headers") {
		if l := strings.ToLower(x); l == "if-none-match" || l == "traceparent" {
			allowed = append(allowed, x)
		}
	}
	if len(allowed) > 0 {
		h.Set("access-control-allow-headers", strings.Join(allowed, ","))
	}
	h.Set("connection", "keep-alive")
	// No cache-control, as Electric's (Api.Options deletes it): the
	// preflight's allow-origin echoes the request's Origin.
	w.WriteHeader(http.StatusNoContent)
}

// plugCache is the cache-control of an Electric response that sets none
// (Plug.Conn's default): its root, its unknown routes, its 401, its
// request-body errors and its 500.
const plugCache = "max-age=0, private, must-revalidate"

// writeError answers a status >= 400 as Electric's Response.send does: a
// GET's (or HEAD's) must not be cached, by a CDN either; any other
// method's is no-cache, as all its responses are.
func writeError(w http.ResponseWriter, r *http.Request, code int, body []byte) {
	h := w.Header()
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		h.Set("cache-control", "no-store")
		h.Set("surrogate-control", "no-store")
	} else {
		h.Set("cache-control", "no-cache")
	}
	if len(body) > 0 && (body[0] == '{' || body[0] == '[') {
		h.Set("content-type", jsonType)
	}
	w.WriteHeader(code)
	w.Write(body)
}

// writePlain answers as Electric's plugs that send a response directly
// (send_resp): Plug's default cache-control, and a JSON content-type only
// where the plug put one (none sniffed).
func writePlain(w http.ResponseWriter, code int, body []byte, json bool) {
	h := w.Header()
	h.Set("cache-control", plugCache)
	if json {
		h.Set("content-type", jsonType)
	} else {
		h["Content-Type"] = nil
	}
	w.WriteHeader(code)
	w.Write(body)
}

func writeFieldErrors(w http.ResponseWriter, r *http.Request, fe *fieldErrors) {
	writeError(w, r, http.StatusBadRequest, fe.body())
}

// unavailable answers 503: no-store, by a CDN either, for every method,
// as Electric's database and admission 503s.
func (srv *Server) unavailable(w http.ResponseWriter, retry int, body string) {
	h := w.Header()
	h.Set("retry-after", strconv.Itoa(retry))
	h.Set("cache-control", "no-store")
	h.Set("surrogate-control", "no-store")
	h.Set("content-type", jsonType)
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, body)
}

// internalError answers a subset that failed unexpectedly 500, through
// writeError as Electric's Response.error(request, _, status: 500), with
// Electric's catch-all body (the error is logged, never echoed).
func (srv *Server) internalError(w http.ResponseWriter, r *http.Request, err error) {
	srv.log.Error("shape: request failed", "err", err)
	writeError(w, r, http.StatusInternalServerError, []byte(`{"error":"Internal server error"}`))
}

// mustRefetch answers 409 with the handle of the shape that now matches.
func (srv *Server) mustRefetch(w http.ResponseWriter, r *http.Request, handle string) {
	h := w.Header()
	switch {
	case r.Method == http.MethodPost:
		h.Set("cache-control", "no-cache")
	case handle != "":
		h.Set("cache-control", "public, max-age=60, must-revalidate")
	default:
		h.Set("cache-control", "public, max-age=1, must-revalidate")
	}
	if handle != "" {
		h.Set("electric-handle", handle)
		// Electric's put_etag_headers, for a response with a handle and
		// neither the request's offset nor its own: "<handle>::".
		h.Set("etag", `"`+handle+`::"`)
	}
	h.Set("content-type", jsonType)
	w.WriteHeader(http.StatusConflict)
	w.Write(mustRefetchBody)
}

// createErr answers a failure of getOrCreate.
func (srv *Server) createErr(w http.ResponseWriter, r *http.Request, fe *fieldErrors, err error) {
	switch {
	case fe != nil:
		writeFieldErrors(w, r, fe)
	case errors.Is(err, errShapeLimit):
		srv.unavailable(w, 5, `{"code":"shape_limit_exceeded","message":"The server holds its most shapes (--shape-max-shapes `+strconv.Itoa(srv.cfg.MaxShapes)+`), please retry"}`)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		srv.unavailable(w, 1, `{"code":"shape_creation_failed","message":"Shape creation did not finish, please retry"}`)
	default:
		srv.log.Warn("shape: create", "err", err)
		srv.unavailable(w, 10, `{"code":"database_unreachable","error":"Database is unreachable"}`)
	}
}

// nonLiveCache is the cache-control of a non-live response past -1; a
// POST's is no-cache (Electric caches GET and OPTIONS only).
func (srv *Server) nonLiveCache(r *http.Request) string {
	if r.Method == http.MethodPost {
		return "no-cache"
	}
	return "public, max-age=" + strconv.Itoa(srv.cfg.MaxAge) + ", stale-while-revalidate=" + strconv.Itoa(srv.cfg.StaleAge)
}

// electric's cursor epoch: 2024-10-09T00:00:00Z.
var cursorEpoch = time.Date(2024, 10, 9, 0, 0, 0, 0, time.UTC)

// nextCursor is the live cursor: the end of the current long-poll window,
// moved on randomly when the client already sent it (so a CDN's cached
// empty answer is never served again).
func (srv *Server) nextCursor(prev string) string {
	t := int64(srv.cfg.LongPoll / time.Second)
	if t < 1 {
		t = 1
	}
	secs := int64(time.Since(cursorEpoch) / time.Second)
	c := (secs + t - 1) / t * t
	if p, err := strconv.ParseInt(prev, 10, 64); err == nil && c <= p {
		n, _ := rand.Int(rand.Reader, big.NewInt(3600))
		c = p + 1 + n.Int64()
	}
	return strconv.FormatInt(c, 10)
}

func upToDateMsg(lsn uint64) []byte {
	b := []byte(`{"headers":{"control":"up-to-date","global_last_seen_lsn":"`)
	b = strconv.AppendUint(b, lsn, 10)
	return append(b, `"}}`...)
}

// waitFirst waits until s can answer: it has its first generation (or,
// with needReady, is live), or is gone; for at most d.
func (s *Shape) waitFirst(ctx context.Context, d time.Duration, needReady bool) bool {
	s.mu.Lock()
	done := s.st == gone || (s.gen != nil && (!needReady || s.st == ready))
	s.mu.Unlock()
	if done {
		// No timer and no wake-up channel: a channel made here would
		// stay with the shape until its next change.
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		done := s.st == gone || (s.gen != nil && (!needReady || s.st == ready))
		var ch <-chan struct{}
		if !done {
			ch = s.waitLocked()
		}
		s.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (srv *Server) serveShape(w http.ResponseWriter, r *http.Request) {
	req, fe := parseRequest(r.URL.Query())
	if fe != nil {
		writeFieldErrors(w, r, fe)
		return
	}
	if srv.cfg.Origin != nil {
		if base := srv.cfg.Origin(req.def.id()); base != "" {
			// Not cached: which replica is the origin changes when one
			// dies.
			w.Header().Set("cache-control", "no-store")
			w.Header().Set("location", strings.TrimSuffix(base, "/")+r.URL.Path+"?"+r.URL.RawQuery)
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, srv.cfg.MaxBodyBytes+1))
		if err != nil {
			writePlain(w, http.StatusBadRequest, []byte(`{"error":"Failed to read request body"}`), true)
			return
		}
		if int64(len(body)) > srv.cfg.MaxBodyBytes {
			writePlain(w, http.StatusRequestEntityTooLarge, []byte(`{"error":"Request body too large"}`), true)
			return
		}
		if len(bytes.TrimSpace(body)) > 0 {
			sp, code, eb := parseSubsetBody(body)
			if code != 0 {
				if bytes.HasPrefix(eb, []byte(`{"error"`)) {
					// Electric's parse_body sends these itself.
					writePlain(w, code, eb, true)
				} else {
					writeError(w, r, code, eb)
				}
				return
			}
			req.subset = sp
		}
	}
	ctx := r.Context()
	var s *Shape
	start := req.now || req.offset.Before
	if start {
		var err error
		s, fe, err = srv.getOrCreate(ctx, req.def)
		if s == nil {
			srv.createErr(w, r, fe, err)
			return
		}
	} else {
		s = srv.lookup(req.handle)
		if s == nil || !s.definition().equal(req.def) {
			m, fe, err := srv.getOrCreate(ctx, req.def)
			if m == nil {
				srv.createErr(w, r, fe, err)
				return
			}
			srv.mustRefetch(w, r, m.Handle())
			return
		}
	}
	handle := req.handle
	if start {
		handle = s.Handle()
	}
	s.mu.Lock()
	s.used = time.Now().UnixNano()
	s.mu.Unlock()
	if !s.waitFirst(ctx, srv.cfg.LongPoll, req.now || req.subset != nil) {
		srv.unavailable(w, 1, `{"code":"snapshot_pending","message":"The shape's first snapshot is not ready yet, please retry"}`)
		return
	}
	s.mu.Lock()
	st, end := s.st, s.endLocked()
	s.mu.Unlock()
	if st == gone {
		if end.code != 0 {
			fe := &fieldErrors{}
			fe.add("shape", end.why)
			writeError(w, r, end.code, fe.body())
			return
		}
		srv.refetchFor(w, r, req.def)
		return
	}
	if req.subset != nil {
		srv.serveSubset(w, r, s, req, handle)
		return
	}
	if req.now {
		srv.serveNow(w, r, s, handle)
		return
	}
	if req.sse {
		srv.serveSSE(w, r, s, req, handle)
		return
	}
	srv.serveLog(w, r, s, req, handle)
}

// refetchFor answers 409 pointing at the (new) shape for def.
func (srv *Server) refetchFor(w http.ResponseWriter, r *http.Request, def definition) {
	m, fe, err := srv.getOrCreate(r.Context(), def)
	if m == nil {
		srv.createErr(w, r, fe, err)
		return
	}
	srv.mustRefetch(w, r, m.Handle())
}

func (srv *Server) serveNow(w http.ResponseWriter, r *http.Request, s *Shape, handle string) {
	pos := uint64(srv.cfg.Engine.Position())
	s.mu.Lock()
	latest, seen := s.latest.off(), s.resumeLocked(pos)
	s.mu.Unlock()
	h := w.Header()
	h.Set("electric-handle", handle)
	h.Set("electric-offset", latest.String())
	h.Set("etag", `"`+handle+":now:"+latest.String()+":"+strconv.FormatInt(time.Now().UnixNano(), 10)+`"`)
	h.Set("electric-schema", s.lay.schema)
	h.Set("electric-up-to-date", "")
	h.Set("electric-has-data", "false")
	h.Set("cache-control", srv.nonLiveCache(r))
	h.Set("content-type", jsonType)
	body := append([]byte{'['}, upToDateMsg(seen)...)
	w.Write(append(body, ']'))
}

// serveLog answers a normal or long-polling request.
func (srv *Server) serveLog(w http.ResponseWriter, r *http.Request, s *Shape, req *request, handle string) {
	ctx := r.Context()
	deadline := time.Now().Add(srv.cfg.LongPoll)
	oobDeadline := time.Now().Add(srv.cfg.LongPoll / 2)
	// The body shared by the requests at this offset: held from the
	// first wait or read of messages until the answer is written.
	var shared *sharedBody
	defer func() {
		if shared != nil {
			s.mu.Lock()
			s.releaseBodyLocked(req.offset, shared)
			s.mu.Unlock()
		}
	}()
	for {
		pos := uint64(srv.cfg.Engine.Position())
		s.mu.Lock()
		res, loc := s.readLocked(req.offset, srv.cfg.ChunkBytes)
		seen := s.resumeLocked(pos)
		st, latest := s.st, s.latest.off()
		if res.stale {
			// An offset older than what is kept: start again. The
			// handle the client holds must not come back (Electric's
			// client takes a reused handle for a stale cache), so the
			// shape takes a new one.
			if s.handleLocked() == handle {
				h := newHandle()
				x := s.rareLocked()
				x.rotated = append(x.rotated, h)
				if err := s.saveMetaLocked(); err != nil {
					srv.log.Warn("shape: save new handle", "err", err)
				}
				srv.mu.Lock()
				srv.reg.rotate(s, h)
				srv.mu.Unlock()
			}
			cur := s.handleLocked()
			s.mu.Unlock()
			srv.mustRefetch(w, r, cur)
			return
		}
		// Past the shape's end: out of bounds, unless the shape is
		// still catching up after a restart (its new position will pass
		// every offset it ever handed out).
		past := pastLatest(req.offset, latest, seen)
		oob := past && st == ready
		if past && st != ready {
			res.wait = true
		}
		empty := loc == nil && len(res.msgs) == 0
		wait := res.wait || (empty && !res.upToDate) || oob || (req.live && empty)
		var ch <-chan struct{}
		if wait && st != gone {
			ch = s.waitLocked() // under the same lock as the read: no wake-up is missed
		}
		if shared == nil && !req.offset.Before && (wait || (loc == nil && len(res.msgs) > 0)) {
			shared = s.holdBodyLocked(req.offset)
		}
		s.mu.Unlock()
		if st == gone {
			srv.refetchFor(w, r, req.def)
			return
		}
		if wait {
			limit := deadline
			if oob {
				limit = oobDeadline
			}
			left := time.Until(limit)
			if left > 0 {
				t := time.NewTimer(left)
				select {
				case <-ch:
					t.Stop()
					continue
				case <-t.C:
					continue
				case <-ctx.Done():
					t.Stop()
					return
				}
			}
			if oob {
				fe := &fieldErrors{}
				fe.add("offset", "out of bounds for this shape")
				writeFieldErrors(w, r, fe)
				return
			}
			if !req.live && !res.upToDate {
				srv.unavailable(w, 1, `{"code":"shape_not_ready","message":"The shape is catching up after a restart, please retry"}`)
				return
			}
		}
		var chunk *os.File
		if loc != nil {
			f, err := os.Open(loc.file)
			if err != nil {
				// The generation was collected meanwhile.
				srv.mustRefetch(w, r, s.Handle())
				return
			}
			// Open, the file stays readable even if the generation is
			// collected while it is being sent.
			defer f.Close()
			chunk = f
		}
		srv.writeLog(w, r, s, req, handle, res, chunk, loc, seen, shared)
		return
	}
}

// pastLatest reports whether a request at o is out of bounds: past the
// shape's latest offset (a snapshot chunk it does not have, while it has
// no changes, or a change it has not made), and past seen_0, where
// Electric's SSE client resumes after an up-to-date naming seen.
func pastLatest(o, latest Offset, seen uint64) bool {
	if o.Before || o.Compare(latest) <= 0 {
		return false
	}
	return o.Virtual() || o.Compare(Offset{Tx: seen}) > 0
}

// writeLog writes a response: the messages of res (their bytes shared
// with the other holders of shared, if not nil), or the snapshot chunk at
// loc in the open file chunk.
func (srv *Server) writeLog(w http.ResponseWriter, r *http.Request, s *Shape, req *request, handle string, res chunkResult, chunk *os.File, loc *chunkLoc, seen uint64, shared *sharedBody) {
	h := w.Header()
	var chunkLen int64
	if loc != nil {
		chunkLen = loc.r[1]
	}
	empty := len(res.msgs) == 0 && chunkLen == 0 && !res.snapshot
	reqOff := req.offset.String()
	var body []byte
	var etag, endTxt string
	if loc == nil && len(res.msgs) > 0 {
		body, etag, endTxt = srv.messagesBody(shared, res, reqOff, handle)
		if hook := srv.bodyHook.Load(); hook != nil {
			(*hook)()
		}
	} else {
		endTxt = res.end.String()
		etag = `"` + handle + ":" + reqOff + ":" + endTxt
		if req.live && empty {
			etag += ":" + strconv.FormatInt(time.Now().UnixNano(), 10)
		}
		etag += `"`
	}
	h.Set("electric-handle", handle)
	h.Set("electric-offset", endTxt)
	h.Set("etag", etag)
	switch {
	case r.Method == http.MethodPost:
		h.Set("cache-control", "no-cache")
	case req.offset.Before:
		h.Set("cache-control", cacheMinusOne)
	case req.live:
		h.Set("cache-control", cacheLive)
	default:
		h.Set("cache-control", srv.nonLiveCache(r))
	}
	if req.live {
		h.Set("electric-cursor", srv.nextCursor(req.cursor))
	} else {
		h.Set("electric-schema", s.lay.schema)
	}
	upToDate := res.upToDate && !req.offset.Before
	if upToDate {
		h.Set("electric-up-to-date", "")
	}
	// "false" only for a live request's timeout (and offset=now), as
	// Electric's no_changes.
	if empty && req.live {
		h.Set("electric-has-data", "false")
	} else {
		h.Set("electric-has-data", "true")
	}
	// Electric's if_none_match: every If-None-Match field, split at
	// commas, each trimmed of spaces and quotes.
	for _, inm := range r.Header.Values("If-None-Match") {
		for _, t := range strings.Split(inm, ",") {
			if strings.Trim(strings.TrimSpace(t), `"`) == strings.Trim(etag, `"`) {
				h.Del("electric-schema") // a 200's only
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
	}
	h.Set("content-type", jsonType)
	var tail []byte
	if upToDate {
		if chunkLen > 0 || len(res.msgs) > 0 {
			tail = append(tail, ',')
		}
		tail = append(tail, upToDateMsg(seen)...)
	}
	tail = append(tail, ']')
	n := chunkLen + int64(len(tail))
	if body != nil {
		n += int64(len(body))
	} else {
		n++ // '['
		for i, m := range res.msgs {
			n += int64(len(m))
			if i > 0 || chunkLen > 0 {
				n++
			}
		}
	}
	h.Set("content-length", strconv.FormatInt(n, 10))
	if chunkLen > 0 {
		// A snapshot chunk (up to the chunk threshold, 10 MiB by
		// default) goes from the file to the socket without being
		// read into memory: with a content-length, net/http hands a
		// limited *os.File to the connection's ReadFrom, which is
		// sendfile(2) on Linux.
		w.Write([]byte{'['})
		if _, err := chunk.Seek(loc.r[0], io.SeekStart); err != nil {
			return
		}
		if _, err := io.Copy(w, io.LimitReader(chunk, chunkLen)); err != nil {
			return
		}
		w.Write(tail)
		return
	}
	if body == nil {
		body = []byte{'['}
	}
	// Two writes, the shared body and this request's tail; a big body
	// goes past net/http's buffer to the connection.
	w.Write(body)
	w.Write(tail)
}

func (srv *Server) deleteShape(w http.ResponseWriter, r *http.Request) {
	if !srv.cfg.AllowDeletion {
		writeError(w, r, http.StatusMethodNotAllowed, []byte(`{"message":"DELETE not allowed"}`))
		return
	}
	q := r.URL.Query()
	handle := q.Get("handle")
	var s *Shape
	if q.Get("table") != "" {
		q.Set("offset", "-1")
		req, fe := parseRequest(q)
		if fe != nil {
			writeFieldErrors(w, r, fe)
			return
		}
		srv.mu.Lock()
		s = srv.reg.get(&req.def)
		srv.mu.Unlock()
		if s != nil && handle != "" && srv.lookup(handle) != s {
			fe := &fieldErrors{}
			fe.add("handle", "The specified shape definition and handle do not match. Please ensure the shape definition is correct or omit the shape handle from the request to obtain a new one.")
			writeFieldErrors(w, r, fe)
			return
		}
	} else if handle != "" {
		s = srv.lookup(handle)
	} else {
		fe := &fieldErrors{}
		fe.add("handle", "can't be blank when shape definition is missing")
		writeFieldErrors(w, r, fe)
		return
	}
	if s == nil {
		writeError(w, r, http.StatusNotFound, []byte(`{"message":"No existing shape found"}`))
		return
	}
	s.mu.Lock()
	s.goneLocked("deleted")
	s.mu.Unlock()
	// Electric's 202 goes through Response.send from a plug that put a
	// JSON content-type: no-cache (not a GET), electric-has-data "true"
	// (status < 400), no body.
	h := w.Header()
	h.Set("cache-control", "no-cache")
	h.Set("content-type", jsonType)
	h.Set("electric-has-data", "true")
	w.WriteHeader(http.StatusAccepted)
}

// RequestCounts counts the requests to /v1/shape this server answered,
// by kind: what reached the origin through a CDN (freshet serve exports
// them as freshet_shape_requests_total).
type RequestCounts struct {
	Live  uint64 // live=true long-polls
	SSE   uint64 // live=true&live_sse=true (or experimental_live_sse)
	Other uint64 // every other request: initial and catch-up GETs, HEAD, POST, DELETE, OPTIONS
}

// Requests returns the counts so far.
func (srv *Server) Requests() RequestCounts {
	return RequestCounts{Live: srv.reqLive.Load(), SSE: srv.reqSSE.Load(), Other: srv.reqOther.Load()}
}

func (srv *Server) countRequest(r *http.Request) {
	q := r.URL.Query()
	on := func(name string) bool { v, ok := q[name]; return ok && len(v) > 0 && v[0] != "false" }
	switch {
	case r.Method == http.MethodGet && on("live") && (on("live_sse") || on("experimental_live_sse")):
		srv.reqSSE.Add(1)
	case r.Method == http.MethodGet && on("live"):
		srv.reqLive.Add(1)
	default:
		srv.reqOther.Add(1)
	}
}
