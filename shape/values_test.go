package shape_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Values are PostgreSQL's text under Electric's display settings, and
// electric-schema carries Electric's modifiers.
func TestValuesAndSchema(t *testing.T) {
	e := newEnv(t, `CREATE TABLE v (id int8 PRIMARY KEY, c char(5), vc varchar(20) NOT NULL, nm numeric(12,2), f8 float8, f4 float4,
			b bytea, iv interval, ivs interval[], ts timestamp(3), tz timestamptz, d date, j jsonb, arr int4[][], bo bool, u uuid, ivd interval day to second(2));
		INSERT INTO v VALUES (1, 'ab', 'x', 12.5, 0.1, 1.5, '\xdead', '1 year 2 mons 3 days 04:05:06.5', '{"1 day","-2 hours",NULL}',
			'2026-01-02 03:04:05.678', '2026-01-02 03:04:05+02', '2026-01-02', '{"a": [1, 2]}', '{{1,2},{3,4}}', true, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '1 day 00:00:01.25')`, nil)
	r := e.get("table", "v", "offset", "-1")
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	want := `[{"key":"\"public\".\"v\"/\"1\"","value":{"id":"1","c":"ab   ","vc":"x","nm":"12.50","f8":"0.1","f4":"1.5","b":"\\xdead",` +
		`"iv":"P1Y2M3DT4H5M6.5S","ivs":"{P1D,PT-2H,NULL}","ts":"2026-01-02 03:04:05.678","tz":"2026-01-02 01:04:05+00","d":"2026-01-02",` +
		`"j":"{\"a\": [1, 2]}","arr":"{{1,2},{3,4}}","bo":"t","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","ivd":"P1DT1.25S"},"headers":{"operation":"insert","relation":["public","v"]}}]`
	if r.body != want {
		t.Errorf("values:\n got %s\nwant %s", r.body, want)
	}
	wantSchema := `{"arr":{"dims":2,"type":"int4"},"b":{"type":"bytea"},"bo":{"type":"bool"},"c":{"length":5,"type":"bpchar"},"d":{"type":"date"},` +
		`"f4":{"type":"float4"},"f8":{"type":"float8"},"id":{"not_null":true,"pk_index":0,"type":"int8"},"iv":{"type":"interval"},` +
		`"ivd":{"fields":"DAY TO SECOND","precision":2,"type":"interval"},"ivs":{"dims":1,"type":"interval"},"j":{"type":"jsonb"},` +
		`"nm":{"precision":12,"scale":2,"type":"numeric"},"ts":{"precision":3,"type":"timestamp"},"tz":{"type":"timestamptz"},` +
		`"u":{"type":"uuid"},"vc":{"max_length":20,"not_null":true,"type":"varchar"}}`
	if got := r.h.Get("electric-schema"); got != wantSchema {
		t.Errorf("electric-schema:\n got %s\nwant %s", got, wantSchema)
	}
	// The same values through a subset (read by PostgreSQL with the same
	// settings) print alike.
	s := e.get("table", "v", "offset", "-1", "log", "changes_only", "subset__where", "id = 1")
	if s.code != 200 {
		t.Fatalf("subset: %d %s", s.code, s.body)
	}
	for _, frag := range []string{`"iv":"P1Y2M3DT4H5M6.5S"`, `"c":"ab   "`, `"b":"\\xdead"`, `"f8":"0.1"`, `"tz":"2026-01-02 01:04:05+00"`, `"ivs":"{P1D,PT-2H,NULL}"`} {
		if !strings.Contains(s.body, frag) {
			t.Errorf("subset lacks %s: %s", frag, s.body)
		}
	}
}

// An interval inside a composite value (a field, an array field, a
// nested composite, a domain over interval; in a composite array too)
// is in ISO 8601 as PostgreSQL prints it under Electric's settings: the
// snapshot and the log carry what a subset, which PostgreSQL prints,
// carries for the same row. A composite without an interval is as it
// was.
func TestCompositeIntervals(t *testing.T) {
	e := newEnv(t, `CREATE DOMAIN dur AS interval;
		CREATE TYPE span AS (n int, d interval);
		CREATE TYPE wrap AS (label text, inner_s span, ds interval[], dd dur, note text);
		CREATE TYPE pt AS (x int, y text);
		CREATE TABLE c (id int PRIMARY KEY, s span, ss span[], w wrap, ws wrap[], p pt);
		INSERT INTO c VALUES
		  (1, '(1,"1 day 02:00:00")', ARRAY['(2,"-1 mons")', NULL, '(3,)']::span[],
		   ROW('a "q" \ (b), c', '(4,"00:00:01.5")', '{"1 year",NULL,"-2 hours"}', '3 days', '')::wrap,
		   ARRAY[ROW('x', NULL, NULL, '1 mon', NULL)::wrap], '(1,"a b")'),
		  (2, '(,)', '{}', ROW(NULL, '(,)', '{}', NULL, 'NULL')::wrap, NULL, NULL)`, nil)
	cols := []string{"s", "ss", "w", "ws", "p"}
	values := func(body string, data bool) map[string]map[string]any {
		var msgs []map[string]any
		if data {
			var sub struct{ Data []map[string]any }
			if err := json.Unmarshal([]byte(body), &sub); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			msgs = sub.Data
		} else if err := json.Unmarshal([]byte(body), &msgs); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		out := map[string]map[string]any{}
		for _, m := range msgs {
			if v, ok := m["value"].(map[string]any); ok {
				out[m["key"].(string)] = v
			}
		}
		return out
	}
	compare := func(what string, got map[string]map[string]any) {
		t.Helper()
		sub := e.get("table", "c", "offset", "-1", "log", "changes_only", "subset__where", "id > 0")
		if sub.code != 200 {
			t.Fatalf("subset: %d %s", sub.code, sub.body)
		}
		want := values(sub.body, true)
		for k, w := range want {
			for _, c := range cols {
				if gv, ok := got[k][c]; ok && fmt.Sprint(gv) != fmt.Sprint(w[c]) {
					t.Errorf("%s: %s %s = %v, PostgreSQL (a subset) says %v", what, k, c, gv, w[c])
				}
			}
		}
	}
	r := e.get("table", "c", "offset", "-1")
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	snap := values(r.body, false)
	if fmt.Sprint(snap[`"public"."c"/"1"`]["s"]) != "(1,P1DT2H)" {
		t.Errorf("s = %v, want (1,P1DT2H)", snap[`"public"."c"/"1"`]["s"])
	}
	compare("snapshot", snap)
	h := r.h.Get("electric-handle")
	e.exec(`UPDATE c SET s = '(5,"-3 days +04:00:00")', w = ROW('z', '(6,"2 mons -1 days")', '{"00:00:00"}', '-1 year', 'n')::wrap WHERE id = 1`)
	eventually(t, 10*time.Second, func() string {
		r := e.get("table", "c", "offset", "0_0", "handle", h)
		if !strings.Contains(r.body, `"operation":"update"`) {
			return "no update yet: " + r.body
		}
		log := map[string]map[string]any{}
		for _, m := range r.msgs(t) {
			if v, ok := m["value"].(map[string]any); ok {
				log[m["key"].(string)] = v
			}
		}
		compare("log", log)
		return ""
	})
}
