package ticketdesk_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/internal/servetest"
	"github.com/freshetdb/freshet/ticketdesk"
)

func testHandler(t *testing.T, d *desk) {
	p, g := d.pool(t)
	srv := httptest.NewServer(ticketdesk.NewHandler(g))
	t.Cleanup(srv.Close)
	get := func(path string, wantCode int) []byte {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantCode {
			t.Fatalf("GET %s: %d %s, want %d", path, resp.StatusCode, b, wantCode)
		}
		return b
	}
	var list []struct{ Name, Expect, Code string }
	json.Unmarshal(get("/lookups", 200), &list)
	if len(list) != len(ticketdesk.Lookups()) || list[0].Name != "ticket_by_id" || list[0].Expect != "cached" {
		t.Fatalf("GET /lookups = %+v", list)
	}
	for _, l := range ticketdesk.Lookups() {
		var out struct {
			Lookup string
			Args   []any
			Result json.RawMessage
		}
		if err := json.Unmarshal(get("/lookups/"+l.Name+"?seed=5", 200), &out); err != nil || out.Lookup != l.Name || len(out.Args) == 0 {
			t.Fatalf("GET /lookups/%s = %+v, %v", l.Name, out, err)
		}
	}
	get("/lookups/nope", 404)
	get("/lookups/ticket_by_id?seed=x", 400)
	var tk ticketdesk.Ticket
	json.Unmarshal(get("/tickets/12", 200), &tk)
	if tk.ID != 12 || len(tk.Body) < 1900 {
		t.Fatalf("GET /tickets/12 = id %d, %d body bytes", tk.ID, len(tk.Body))
	}
	get("/tickets/99999999", 404)
	get("/tickets/abc", 400)
	var page []ticketdesk.TicketRow
	json.Unmarshal(get("/orgs/1/tickets?offset=20", 200), &page)
	if len(page) != 20 {
		t.Fatalf("GET /orgs/1/tickets?offset=20: %d tickets, want 20", len(page))
	}
	// A comment posted through the handler shows in the ticket's comments
	// (read-your-writes sends the next reads to PostgreSQL, then the cache
	// has it).
	resp, err := http.Post(srv.URL+"/tickets/12/comments", "application/json",
		strings.NewReader(fmt.Sprintf(`{"author_id": %d, "body": "posted through the API"}`, d.world.UsersByOrg[1][0])))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST comment: %d, want 201", resp.StatusCode)
	}
	servetest.Eventually(t, 20*time.Second, func() string {
		hits := p.Cache.Stats().Hits
		b := get("/tickets/12/comments", 200)
		if !strings.Contains(string(b), "posted through the API") {
			return "comment not shown: " + string(b)
		}
		if p.Cache.Stats().Hits == hits {
			return "comments not yet read from the cache"
		}
		return ""
	})
}
