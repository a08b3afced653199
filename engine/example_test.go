package engine_test

import (
	"context"
	"fmt"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/engine"
	"github.com/freshetdb/freshet/query"
)

// catalog describes one table, tickets(id int4 primary key, title text),
// as PostgreSQL's catalog would.
type catalog struct{}

func (catalog) Table(_ context.Context, schema, name string) (*query.Table, error) {
	if schema != "public" || name != "tickets" {
		return nil, fmt.Errorf("table %s.%s: %w", schema, name, query.ErrNoTable)
	}
	int4, _ := change.BuiltinType(change.OIDInt4)
	text, _ := change.BuiltinType(change.OIDText)
	c := query.Collation{OID: 950, Name: "C", Provider: 'c', Collate: "C", Deterministic: true}
	return &query.Table{OID: 16384, Schema: "public", Name: "tickets", ReplicaIdentity: 'd', PrimaryKey: []string{"id"},
		Columns: []query.Column{
			{Name: "id", AttNum: 1, TypeOID: change.OIDInt4, DeclaredOID: change.OIDInt4, TypeMod: -1, Type: int4, NotNull: true},
			{Name: "title", AttNum: 2, TypeOID: change.OIDText, DeclaredOID: change.OIDText, TypeMod: -1, Type: text, Collation: c},
		}}, nil
}

// The core is driven by method calls and answers in Ready: subscribe,
// run the read it asks for (here answered by hand, as the runtime would
// from PostgreSQL), apply a committed transaction, and print what the
// subscriber is told.
func ExampleCore() {
	opts := query.DefaultOptions()
	opts.Catalog = catalog{}
	plan, refusal, err := query.Compile(context.Background(), "SELECT id, title FROM tickets WHERE id < 10", nil, opts)
	if err != nil || refusal != nil {
		fmt.Println(err, refusal)
		return
	}
	core := engine.NewCore(engine.CoreOptions{})
	show := func() {
		rd := core.Ready()
		for _, r := range rd.Reads {
			fmt.Printf("read %d: %s\n", r.ID, r.ReadSQL())
		}
		for _, o := range rd.Outputs {
			fmt.Printf("sub %d %s at %s: rows %v removed %d\n", o.Sub, o.Kind, o.LSN, len(o.Rows), len(o.Removed))
			for _, r := range o.Rows {
				fmt.Printf("  %v\n", r.Values)
			}
		}
	}

	core.Subscribe(1, plan, engine.ModeRows)
	read := core.Ready().Reads[0]
	fmt.Printf("read %d: %s\n", read.ID, read.ReadSQL()) // the engine renders it on the read's worker

	// The read ran in a snapshot taken at 0/100 and found one row.
	core.ReadDone(read.ID, engine.ReadResult{
		Snapshot: engine.Snapshot{Xmin: 700, Xmax: 700, LSN: 0x100},
		Rows:     []query.Row{{{int64(1), "printer jams"}}},
		Complete: true,
	})
	show() // nothing yet: the stream has not passed 0/100
	core.Advance(0x100)
	show()

	// A transaction committed at 0/200 inserts a ticket and retitles one.
	rel := &change.Relation{OID: 16384, Schema: "public", Table: "tickets", ReplicaIdentity: 'd', Columns: []change.Column{
		{Name: "id", TypeOID: change.OIDInt4, TypeMod: -1, Key: true},
		{Name: "title", TypeOID: change.OIDText, TypeMod: -1},
	}}
	row := func(id, title string) change.Row {
		return change.Row{{Kind: change.Text, Data: []byte(id)}, {Kind: change.Text, Data: []byte(title)}}
	}
	core.Apply(&change.Txn{XID: 701, CommitLSN: 0x200, Last: true, Changes: []change.Change{
		{Op: change.OpRelation, Rel: rel},
		{Op: change.OpInsert, Rel: rel, New: row("2", "no wifi")},
		{Op: change.OpUpdate, Rel: rel, New: row("1", "printer fixed")},
	}})
	show()
	// Output:
	// read 1: SELECT tickets.id, tickets.title FROM public.tickets WHERE id < 10
	// sub 1 accepted at 0/100: rows 1 removed 0
	//   [1 printer jams]
	// sub 1 delta at 0/200: rows 2 removed 0
	//   [1 printer fixed]
	//   [2 no wifi]
}
