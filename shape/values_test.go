package shape_test

import (
	"strings"
	"testing"
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
