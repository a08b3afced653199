package query

import (
	"context"
	"strconv"
	"testing"

	"github.com/freshetdb/freshet/change"
)

// Plans of one shape with distinct binds share one template and each
// still evaluates, routes (Constraints) and keys its own values; a plan
// whose binds change what the template is (a NULL bind folds its
// comparison to NULL) has its own.
func TestTemplateSharing(t *testing.T) {
	opts := DefaultOptions()
	opts.Catalog = snapshotCatalog(t)
	compile := func(sql string, binds ...Bind) *Plan {
		t.Helper()
		p, r, err := Compile(context.Background(), sql, binds, opts)
		if err != nil || r != nil {
			t.Fatalf("compile %s: %v %v", sql, err, r)
		}
		return p
	}
	const sql = "SELECT id, name FROM users WHERE age = $1 AND name <> $2 AND score > 1.5"
	row := func(p *Plan, age int64, name string) Row {
		vals := make([]any, len(p.Sources[0].Columns))
		for i, c := range p.Sources[0].Columns {
			switch c.Name {
			case "id":
				vals[i] = int64(1)
			case "age":
				vals[i] = age
			case "name":
				vals[i] = name
			case "score":
				n, _ := numericLiteral("2")
				vals[i] = n
			}
		}
		return Row{vals}
	}
	var plans []*Plan
	for i := range 5 {
		plans = append(plans, compile(sql, Bind{OID: change.OIDInt4, Data: []byte(strconv.Itoa(i))}, Bind{Data: []byte("n" + strconv.Itoa(i))}))
	}
	for i, p := range plans {
		if p.Template != plans[0].Template {
			t.Errorf("plan %d has its own template", i)
		}
		if got := p.Eval(row(p, int64(i), "x")); got != True {
			t.Errorf("plan %d (age = %d) on age %d: %v, want true", i, i, i, got)
		}
		if got := p.Eval(row(p, int64(i+1), "x")); got != False {
			t.Errorf("plan %d (age = %d) on age %d: %v, want false", i, i, i+1, got)
		}
		if got := p.Eval(row(p, int64(i), "n"+strconv.Itoa(i))); got != False {
			t.Errorf("plan %d (name <> n%d) on its name: %v, want false", i, i, got)
		}
		cs := p.Constraints(0)
		var in *Constraint
		for j := range cs {
			if cs[j].Kind == ConstraintIn {
				in = &cs[j]
			}
		}
		if in == nil || len(in.Values) != 1 || in.Values[0] != int64(i) {
			t.Errorf("plan %d: constraints %+v, want age in (%d)", i, cs, i)
		}
		if got := p.Params(); len(got) != 2 || got[0] != int64(i) || got[1] != "n"+strconv.Itoa(i) {
			t.Errorf("plan %d: Params() = %v", i, got)
		}
	}
	null := compile(sql, Bind{OID: change.OIDInt4}, Bind{Data: []byte("x")})
	if null.Template == plans[0].Template {
		t.Errorf("a NULL bind shares the template of non-NULL ones")
	}
	if got := null.Eval(row(null, 0, "y")); got == True {
		t.Errorf("age = NULL keeps a row")
	}
	// Two binds of one value: the template of distinct ones still serves.
	eq := compile(sql, Bind{OID: change.OIDInt4, Data: []byte("7")}, Bind{Data: []byte("7")})
	if got := eq.Eval(row(eq, 7, "8")); got != True {
		t.Errorf("age = 7 and name <> '7' on (7, 8): %v, want true", got)
	}
}

// A shape whose first plan holds a template the later ones cannot share
// (a NULL bind folds its comparison; a schema change gives the table a new
// shape) still shares one template among the later plans: the template
// held for the shape is not only the first plan's.
func TestTemplateSharingAfterAnOddFirst(t *testing.T) {
	cat := snapshotCatalog(t)
	compile := func(cat memCatalog, sql string, binds ...Bind) *Plan {
		t.Helper()
		opts := DefaultOptions()
		opts.Catalog = cat
		p, r, err := Compile(context.Background(), sql, binds, opts)
		if err != nil || r != nil {
			t.Fatalf("compile %s: %v %v", sql, err, r)
		}
		return p
	}
	int4 := func(i int) Bind { return Bind{OID: change.OIDInt4, Data: []byte(strconv.Itoa(i))} }
	shared := func(what string, plans []*Plan) {
		t.Helper()
		for i, p := range plans[1:] {
			if p.Template != plans[0].Template {
				t.Errorf("%s: plan %d has a template of its own", what, i+1)
			}
		}
	}

	const sql = "SELECT id FROM users WHERE age = $1 AND id > 100"
	if null := compile(cat, sql, Bind{OID: change.OIDInt4}); null.Template == nil {
		t.Fatal("no template")
	}
	var plans []*Plan
	for i := range 4 {
		plans = append(plans, compile(cat, sql, int4(i)))
	}
	shared("after a NULL bind", plans)

	// The same tables read again (a catalog refresh after DDL): each
	// *Table is new, so are the plans' source shapes.
	fresh := memCatalog{}
	for k, tb := range cat {
		c := *tb
		fresh[k] = &c
	}
	plans = plans[:0]
	for i := range 4 {
		plans = append(plans, compile(fresh, sql, int4(i)))
	}
	shared("after a catalog refresh", plans)
	if plans[0].Template == compile(cat, sql, int4(9)).Template {
		t.Errorf("plans of two catalogs share a template")
	}
}
