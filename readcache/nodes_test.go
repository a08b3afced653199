package readcache

import (
	"fmt"
	"testing"
)

// Rendezvous hashing: every key has one home among the alive engines, the
// same in every process; when an engine dies only its keys move, and when
// one comes it takes only keys that then prefer it.
func TestHomeMovesOnlyADeadEnginesKeys(t *testing.T) {
	urls := []string{"ws://a:1/s2s/v1", "ws://b:1/s2s/v1", "ws://c:1/s2s/v1", "ws://d:1/s2s/v1"}
	mk := func() *Cache {
		c := &Cache{}
		for i, u := range urls {
			c.nodes = append(c.nodes, &node{url: u, i: i, id: hrwID(u)})
		}
		return c
	}
	c, other := mk(), mk()
	abc := uint64(0b0111)
	ac := uint64(0b0101)
	abcd := uint64(0b1111)
	count := map[string]int{}
	movedAC, movedD := 0, 0
	for i := range 3000 {
		k := Key(fmt.Sprintf("SELECT * FROM t WHERE id = %d", i), nil)
		h := c.home(k, abc)
		if o := other.home(k, abc); o.url != h.url {
			t.Fatalf("two caches send %q to %s and %s", k, h.url, o.url)
		}
		count[h.url]++
		if h2 := c.home(k, ac); h2 != h {
			if h.url != urls[1] {
				t.Fatalf("key on %s moved to %s when b died", h.url, h2.url)
			}
			movedAC++
		}
		if h3 := c.home(k, abcd); h3 != h {
			if h3.url != urls[3] {
				t.Fatalf("key on %s moved to %s when d came, not to d", h.url, h3.url)
			}
			movedD++
		}
	}
	for _, u := range urls[:3] {
		if n := count[u]; n < 800 || n > 1200 {
			t.Fatalf("%s holds %d of 3000 keys, want about a third: %v", u, n, count)
		}
	}
	if movedAC != count[urls[1]] {
		t.Fatalf("%d keys moved when b died, b held %d", movedAC, count[urls[1]])
	}
	if movedD < 600 || movedD > 900 {
		t.Fatalf("d took %d of 3000 keys, want about a quarter", movedD)
	}
	// With no engine alive, keys stay on their first choice of all.
	if c.home("k", 0) != c.home("k", abcd) {
		t.Fatalf("home with none alive is not the first choice of all")
	}
}

func TestEndpoints(t *testing.T) {
	got, err := endpoints(" ws://a:1 , http://b:2/s2s/v1,")
	if err != nil || fmt.Sprint(got) != "[ws://a:1/s2s/v1 ws://b:2/s2s/v1]" {
		t.Fatalf("endpoints = %v, %v", got, err)
	}
	for _, bad := range []string{",", "ws://a:1,ws://a:1", "ws://a:1,ftp://b"} {
		if _, err := endpoints(bad); err == nil {
			t.Fatalf("endpoints(%q) accepted", bad)
		}
	}
	if v := lsnOf("16/B374D848"); formatLSN(v) != "16/B374D848" || lsnOf("x") != 0 {
		t.Fatalf("lsn round trip: %x %s", v, formatLSN(v))
	}
}
