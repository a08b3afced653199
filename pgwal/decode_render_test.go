package pgwal

import (
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
)

// render prints events in a compact text form that tests and golden files
// compare: one line per event header, one indented line per change.
func render(evs []change.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *change.Txn:
			fmt.Fprintf(&b, "txn xid=%d commit=%v end=%v time=%s frag=%d", ev.XID, ev.CommitLSN, ev.EndLSN, renderTime(ev.CommitTime), ev.Fragment)
			if ev.Last {
				b.WriteString(" last")
			}
			if ev.Origin != "" || ev.OriginLSN != 0 {
				fmt.Fprintf(&b, " origin=%q@%v", ev.Origin, ev.OriginLSN)
			}
			b.WriteByte('\n')
			for i := range ev.Changes {
				b.WriteString("  ")
				b.WriteString(renderChange(&ev.Changes[i]))
				b.WriteByte('\n')
			}
		case *change.Heartbeat:
			fmt.Fprintf(&b, "heartbeat lsn=%v seq=%d written=%s\n", ev.LSN, ev.Seq, renderTime(ev.Written))
		default:
			fmt.Fprintf(&b, "unknown event %T\n", ev)
		}
	}
	return b.String()
}

func renderTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.999999Z")
}

func renderChange(c *change.Change) string {
	var b strings.Builder
	b.WriteString(c.Op.String())
	switch c.Op {
	case change.OpRelation:
		r := c.Rel
		fmt.Fprintf(&b, " %d %s.%s ident=%c (", r.OID, r.Schema, r.Table, r.ReplicaIdentity)
		for i, col := range r.Columns {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %d", col.Name, col.TypeOID)
			if col.TypeMod != -1 {
				fmt.Fprintf(&b, "(%d)", col.TypeMod)
			}
			if col.Key {
				b.WriteString(" key")
			}
		}
		b.WriteString(")")
	case change.OpInsert, change.OpUpdate, change.OpDelete:
		fmt.Fprintf(&b, " %s.%s", c.Rel.Schema, c.Rel.Table)
		if c.Old != nil {
			if c.OldIsRow {
				b.WriteString(" old=")
			} else {
				b.WriteString(" key=")
			}
			b.WriteString(renderRow(c.Old))
		}
		if c.New != nil {
			b.WriteString(" new=")
			b.WriteString(renderRow(c.New))
		}
		if c.Changed != nil {
			b.WriteString(" changed=")
			for _, ch := range c.Changed {
				if ch {
					b.WriteByte('1')
				} else {
					b.WriteByte('0')
				}
			}
		}
	case change.OpTruncate:
		for i, r := range c.Truncate.Rels {
			if i == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s.%s", r.Schema, r.Table)
		}
		if c.Truncate.Cascade {
			b.WriteString(" cascade")
		}
		if c.Truncate.RestartIdentity {
			b.WriteString(" restart")
		}
	case change.OpMessage:
		m := c.Message
		fmt.Fprintf(&b, " lsn=%v transactional=%v prefix=%q content=%q", m.LSN, m.Transactional, m.Prefix, m.Content)
	}
	return b.String()
}

// longValue is the length past which render prints a value's start, its
// length and a hash instead of the whole value.
const longValue = 200

func renderRow(row change.Row) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, v := range row {
		if i > 0 {
			b.WriteByte(',')
		}
		switch v.Kind {
		case change.Text:
			if len(v.Data) > longValue {
				h := fnv.New64a()
				h.Write(v.Data)
				fmt.Fprintf(&b, "%s...(%d bytes, fnv %016x)", strconv.Quote(string(v.Data[:32])), len(v.Data), h.Sum64())
				break
			}
			b.WriteString(strconv.Quote(string(v.Data)))
		case change.Binary:
			b.WriteString("x" + hex.EncodeToString(v.Data))
		default:
			b.WriteString(strings.ToUpper(v.Kind.String()))
		}
	}
	b.WriteByte(')')
	return b.String()
}

// feed decodes msgs in order, draining Next after each, and returns every
// event. It fails the test on an error.
func feed(t testing.TB, d *Decoder, msgs ...[]byte) []change.Event {
	t.Helper()
	evs, err := feedErr(d, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func feedErr(d *Decoder, msgs ...[]byte) ([]change.Event, error) {
	var evs []change.Event
	for i, m := range msgs {
		if err := d.Decode(m, change.LSN(0x1000+i)); err != nil {
			return evs, fmt.Errorf("message %d: %w", i, err)
		}
		for {
			ev, err := d.Next()
			if err != nil {
				return evs, fmt.Errorf("message %d: Next: %w", i, err)
			}
			if ev == nil {
				break
			}
			evs = append(evs, ev)
		}
	}
	return evs, nil
}
