package engine

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/freshetdb/freshet/change"
)

var (
	coreSeeds = flag.Int("core.seeds", 20, "seeds of TestCoreRandom")
	coreSteps = flag.Int("core.steps", 200, "steps per seed of TestCoreRandom")
)

// queryTemplates are the subscriptions TestCoreRandom draws from; %[1]d..%[3]d
// are small random integers.
var singleTemplates = []string{
	"SELECT * FROM t1 WHERE a = %[1]d",
	"SELECT id, b FROM t1 WHERE a IN (%[1]d, %[2]d)",
	"SELECT * FROM t1 WHERE a > %[1]d",
	"SELECT id, c FROM t1 WHERE a BETWEEN %[1]d AND %[2]d OR a = %[3]d",
	"SELECT * FROM t1 WHERE a <> %[1]d",
	"SELECT * FROM t1 WHERE a NOT IN (%[1]d, %[2]d)",
	"SELECT id FROM t1 WHERE b = 'x%[1]d' OR c IS NULL",
	"SELECT * FROM t1",
	"SELECT * FROM t1 WHERE c > %[1]d ORDER BY a, c DESC LIMIT %[2]d OFFSET %[3]d",
	"SELECT id, b FROM t1 ORDER BY b NULLS FIRST LIMIT %[1]d",
	"SELECT id, a FROM t1 WHERE a >= %[1]d ORDER BY a DESC",
	"SELECT count(*) FROM t1 WHERE a < %[1]d",
	"SELECT count(*) FROM t1",
	"SELECT id, a FROM t1 ORDER BY c LIMIT %[1]d OFFSET %[2]d",
}

var joinTemplates = []string{
	"SELECT t1.id, t2.k2, t2.v FROM t1 JOIN t2 ON t2.k1 = t1.a",
	"SELECT t1.id, t2.k1, t2.k2 FROM t1 LEFT JOIN t2 ON t2.ref = t1.id WHERE t1.a > %[1]d",
	"SELECT t1.id, t2.v FROM t1 LEFT JOIN t2 ON t2.ref = t1.id AND t2.k1 = t1.a",
	"SELECT count(*) FROM t1 JOIN t2 ON t2.ref = t1.id WHERE t2.k2 = %[1]d",
	"SELECT t1.id, t2.v, t3.id FROM t1 JOIN t2 ON t2.ref = t1.id LEFT JOIN t3 ON t3.t2k1 = t2.k1 AND t3.t2k2 = t2.k2",
	"SELECT t1.id, t2.v FROM t1 JOIN t2 ON t2.ref = t1.id WHERE t2.v IS NULL OR t1.a = %[1]d ORDER BY t2.v, t1.id LIMIT %[2]d",
}

// joinsSupported turns join subscriptions on in TestCoreRandom.
const joinsSupported = true

type randRead struct {
	id  ReadID
	lsn change.LSN // the core's position when it was asked for
}

func randomHarness(t *testing.T, margin int) *harness {
	h := newHarness(t, CoreOptions{WindowMargin: margin})
	h.createTable("t1", []string{"id int4 pk", "a int4", "b text", "c int4"})
	h.createTable("t2", []string{"k1 int4 pk", "k2 int4 pk", "ref int4", "v text"})
	h.createTable("t3", []string{"id int4 pk", "t2k1 int4", "t2k2 int4"})
	return h
}

// TestCoreRandom drives the core with random subscriptions, writes and
// reads landing at random snapshots, and checks every live subscription
// against the brute-force oracle after every step.
func TestCoreRandom(t *testing.T) {
	seeds := *coreSeeds
	if raceEnabled || testing.Short() {
		seeds = min(seeds, 4)
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandom(t, uint64(seed), *coreSteps, joinsSupported) })
	}
}

func runRandom(t *testing.T, seed uint64, steps int, joins bool) *harness {
	rng := rand.New(rand.NewPCG(seed, 7))
	h := randomHarness(t, 1+rng.IntN(3))
	n := func(k int) string { return fmt.Sprint(rng.IntN(k)) }
	nullable := func(k int) string {
		if rng.IntN(5) == 0 {
			return "null"
		}
		return n(k)
	}
	var reads []randRead
	var nextSub SubID
	var subs []SubID
	writeRow := func() {
		table := []string{"t1", "t1", "t2", "t3"}[rng.IntN(4)]
		if !joins {
			table = "t1"
		}
		ht := h.tables[table]
		st := h.state(func(htxn) bool { return true })
		for _, ch := range h.pending {
			h.applyTo(st, ch)
		}
		existing := st[table]
		var ks []string
		for k := range existing {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		row := func(key []string) []string {
			switch table {
			case "t1":
				return append(key, n(6), "x"+n(4), nullable(6))
			case "t2":
				return append(key, nullable(8), "v"+n(3))
			}
			return append(key, nullable(5), nullable(3))
		}
		newKey := func() []string {
			if table == "t2" {
				return []string{n(5), n(3)}
			}
			return []string{n(12)}
		}
		keyOf := func(r hrow) []string {
			var out []string
			for _, c := range ht.cat.PrimaryKey {
				_, i := ht.cat.Column(c)
				out = append(out, *r[i])
			}
			return out
		}
		switch op := rng.IntN(10); {
		case op < 4 || len(ks) == 0:
			k := newKey()
			if _, dup := existing[h.rowKey(ht, toHStr(k, len(ht.rel.Columns)))]; dup {
				return
			}
			h.insert(table, row(k)...)
		case op < 8:
			old := existing[ks[rng.IntN(len(ks))]]
			k := keyOf(old)
			var oldKey []string
			if rng.IntN(4) == 0 {
				nk := newKey()
				if _, dup := existing[h.rowKey(ht, toHStr(nk, len(ht.rel.Columns)))]; !dup {
					oldKey, k = k, nk
				}
			}
			r := row(k)
			if table == "t1" && rng.IntN(3) == 0 && old[2] != nil {
				r[2] = "@u" // b unchanged and TOASTed
			}
			h.update(table, oldKey, r...)
		default:
			h.delete(table, keyOf(existing[ks[rng.IntN(len(ks))]])...)
		}
	}
	for step := 0; step < steps; step++ {
		switch op := rng.IntN(20); {
		case op < 3:
			nextSub++
			tpl := singleTemplates
			if joins && rng.IntN(3) == 0 {
				tpl = joinTemplates
			}
			sql := strings.NewReplacer("%[1]d", fmt.Sprint(rng.IntN(6)), "%[2]d", fmt.Sprint(1+rng.IntN(5)),
				"%[3]d", fmt.Sprint(rng.IntN(4))).Replace(tpl[rng.IntN(len(tpl))])
			mode := ModeRows
			if rng.IntN(8) == 0 {
				mode = ModeTouch
			}
			before := h.core.st.nextReadID
			h.subscribe(nextSub, sql, mode)
			for id := before + 1; id <= h.core.st.nextReadID; id++ {
				reads = append(reads, randRead{id, h.core.Position()})
			}
			subs = append(subs, nextSub)
		case op < 4 && len(subs) > 0:
			i := rng.IntN(len(subs))
			h.unsubscribe(subs[i])
			subs = slices.Delete(subs, i, i+1)
		case op < 7 && len(reads) > 0:
			i := rng.IntN(len(reads))
			r := reads[i]
			reads = slices.Delete(reads, i, i+1)
			if _, ok := h.reads[r.id]; !ok {
				continue
			}
			// The read ran at some point after it was asked for.
			var after []htxn
			for _, tx := range h.history {
				if tx.lsn > r.lsn {
					after = append(after, tx)
				}
			}
			at := h.lsn + 1
			if len(after) > 0 && rng.IntN(2) == 0 {
				at = after[rng.IntN(len(after))].lsn + 1
			}
			if rng.IntN(5) == 0 {
				at = h.lsn + 0x30 // not passed yet: lands later
			}
			// A transaction still in progress at the snapshot shares no
			// row with a later one the snapshot sees (that one would
			// have waited for it).
			var inProgress []uint32
			for i, tx := range after {
				if tx.lsn >= at || rng.IntN(4) != 0 {
					continue
				}
				mine := h.touchedRows(tx)
				ok := mine != nil
				for _, later := range after[i+1:] {
					if later.lsn >= at {
						break
					}
					lr := h.touchedRows(later)
					if lr == nil {
						ok = false
					}
					for k := range lr {
						if mine[k] {
							ok = false
						}
					}
				}
				if ok {
					inProgress = append(inProgress, tx.xid)
				}
			}
			h.answer(r.id, at, inProgress...)
		case op < 8:
			h.core.Advance(h.lsn + 1)
			h.collect()
		case op < 9 && rng.IntN(6) == 0:
			h.truncate("t1")
			if rng.IntN(2) == 0 {
				writeRow()
			}
			h.commit(0)
		default:
			for i, m := 0, 1+rng.IntN(4); i < m; i++ {
				writeRow()
			}
			h.commit(rng.IntN(3))
		}
		// New reads asked for by the core (refills, re-reads).
		for _, id := range h.readIDs {
			if !slices.ContainsFunc(reads, func(r randRead) bool { return r.id == id }) {
				reads = append(reads, randRead{id, h.core.Position()})
			}
		}
		if t.Failed() {
			t.Fatalf("seed %d failed at step %d; transcript:\n%s", seed, step, tail(h.out.String(), 3000))
		}
	}
	// Quiesce: land every read, then every live subscription must match.
	h.core.Advance(h.lsn + 0x100) // the stream passes every snapshot taken
	h.lsn += 0x100
	h.collect()
	for round := 0; round < 10 && len(h.readIDs) > 0; round++ {
		h.answerAll()
	}
	h.verify()
	for id, m := range h.models {
		if !m.gone && !m.accepted {
			sb := h.core.st.subs.get(id)
			t.Errorf("seed %d: sub %d never accepted (view status %v, read %v, pending reads %v)", seed, id, sb.v.status, sb.v.x().read, h.readIDs)
		}
	}
	t.Logf("seed %d: %d single-table and %d join checks", seed, h.verified[false], h.verified[true])
	if t.Failed() {
		t.Fatalf("seed %d failed after quiescing; transcript:\n%s", seed, tail(h.out.String(), 3000))
	}
	return h
}

// touchedRows returns the rows a transaction wrote (nil if it truncated).
func (h *harness) touchedRows(tx htxn) map[string]bool {
	out := map[string]bool{}
	for _, ch := range tx.changes {
		if ch.Op == change.OpTruncate {
			return nil
		}
		ht := h.byOID[ch.Rel.OID]
		if ch.Old != nil {
			out[ht.name+"/"+h.rowKey(ht, toH(ch.Old))] = true
		}
		if ch.New != nil {
			out[ht.name+"/"+h.rowKey(ht, toH(ch.New))] = true
		}
	}
	return out
}

func toHStr(key []string, n int) hrow {
	r := make(hrow, n)
	for i := range key {
		r[i] = &key[i]
	}
	return r
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
