package ticketdesk

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"net/http"
	"strconv"
	"sync"

	"gorm.io/gorm"
)

// NewHandler returns the desk's HTTP JSON API over db (a GORM handle,
// normally on a read-cache pool):
//
//	GET  /lookups                       every lookup: name, expect, code, why
//	GET  /lookups/{name}?seed=N         the lookup with arguments drawn by seed N:
//	                                    {"lookup", "args", "result"}
//	GET  /tickets/{id}                  one ticket (404 when missing)
//	GET  /tickets/{id}/comments         its newest comments
//	GET  /orgs/{id}/tickets?offset=N    a page of an organization's tickets
//	POST /tickets/{id}/comments         {"author_id", "body"}: add a comment (201)
//
// The World that seeds draw from is loaded from db on first use.
func NewHandler(db *gorm.DB) http.Handler {
	h := &handler{db: db, byName: map[string]Lookup{}}
	for _, l := range Lookups() {
		h.byName[l.Name] = l
		h.list = append(h.list, lookupInfo{Name: l.Name, Expect: l.Expect, Code: l.Code, Why: l.Why, Empty: l.Empty})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /lookups", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, h.list) })
	mux.HandleFunc("GET /lookups/{name}", h.lookup)
	mux.HandleFunc("GET /tickets/{id}", h.byID("ticket_by_id"))
	mux.HandleFunc("GET /tickets/{id}/comments", h.byID("latest_comments"))
	mux.HandleFunc("GET /orgs/{id}/tickets", h.orgPage)
	mux.HandleFunc("POST /tickets/{id}/comments", h.comment)
	return mux
}

type lookupInfo struct {
	Name   string `json:"name"`
	Expect Expect `json:"expect"`
	Code   string `json:"code,omitempty"`
	Why    string `json:"why"`
	Empty  bool   `json:"must_stay_empty,omitempty"`
}

type handler struct {
	db     *gorm.DB
	byName map[string]Lookup
	list   []lookupInfo
	mu     sync.Mutex
	world  *World
}

// World loads the World once (a failure is retried on the next request).
func (h *handler) World(ctx context.Context) (*World, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.world != nil {
		return h.world, nil
	}
	sdb, err := h.db.DB()
	if err != nil {
		return nil, err
	}
	w, err := LoadWorld(ctx, sdb)
	if err == nil {
		h.world = w
	}
	return w, err
}

func (h *handler) lookup(w http.ResponseWriter, r *http.Request) {
	l, ok := h.byName[r.PathValue("name")]
	if !ok {
		writeError(w, http.StatusNotFound, errors.New("no such lookup: GET /lookups lists them"))
		return
	}
	seed, err := strconv.ParseInt(r.URL.Query().Get("seed"), 10, 64)
	if err != nil && r.URL.Query().Has("seed") {
		writeError(w, http.StatusBadRequest, errors.New("seed: want a whole number"))
		return
	}
	world, err := h.World(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	args := l.Args(rand.New(rand.NewSource(seed)), world)
	res, err := l.Run(r.Context(), h.db, args)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"lookup": l.Name, "args": args, "result": res})
}

func (h *handler) byID(name string) http.HandlerFunc {
	l := h.byName[name]
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := pathID(w, r)
		if !ok {
			return
		}
		res, err := l.Run(r.Context(), h.db, []any{id})
		switch {
		case err != nil:
			writeError(w, http.StatusInternalServerError, err)
		case res == nil:
			writeError(w, http.StatusNotFound, errors.New("no such ticket"))
		default:
			writeJSON(w, http.StatusOK, res)
		}
	}
}

func (h *handler) orgPage(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	off := int64(0)
	var err error
	if s := r.URL.Query().Get("offset"); s != "" {
		if off, err = strconv.ParseInt(s, 10, 64); err != nil || off < 0 {
			writeError(w, http.StatusBadRequest, errors.New("offset: want a whole number >= 0"))
			return
		}
	}
	res, err := h.byName["org_page"].Run(r.Context(), h.db, []any{id, off})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *handler) comment(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	var in struct {
		AuthorID int64  `json:"author_id"`
		Body     string `json:"body"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || in.AuthorID == 0 || in.Body == "" {
		writeError(w, http.StatusBadRequest, errors.New(`want a JSON body {"author_id": 1, "body": "..."}`))
		return
	}
	c := Comment{TicketID: id, AuthorID: in.AuthorID, Body: in.Body}
	if err := h.db.WithContext(r.Context()).Omit("id").Create(&c).Error; err != nil {
		writeError(w, http.StatusUnprocessableEntity, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

// pathID reads the {id} of the path, answering 400 when it is not a
// whole number.
func pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, errors.New("id: want a whole number"))
		return 0, false
	}
	return id, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
