package shape

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// wherePrefix is what Electric parses a where clause inside; error
// positions count from its start, as Electric's do.
const wherePrefix = "SELECT 1 WHERE "

// checkWhere parses a where clause as Electric does and refuses anything
// that is not one boolean expression (a clause smuggling ORDER BY, LIMIT,
// a second statement or a set operation changes what a shape is). It
// returns the numbers of the $n parameters it uses and their byte
// positions in where.
func checkWhere(where string) ([]paramRef, error) {
	res, err := pg_query.Parse(wherePrefix + where)
	if err != nil {
		var pe *parser.Error
		if errors.As(err, &pe) {
			// Electric reports libpg_query's cursor position less one
			// (the byte before the token, counted in the whole
			// statement): "1 x 1" gives 17. Pinned by TestValidation400.
			return nil, fmt.Errorf("At location %d: %s", max(pe.Cursorpos-1, 0), pe.Message)
		}
		return nil, err
	}
	if len(res.Stmts) != 1 {
		// Electric's words (parser.ex, get_where_internal_ast).
		return nil, errors.New(`unescaped ";" causing statement split`)
	}
	sel := res.Stmts[0].Stmt.GetSelectStmt()
	if sel == nil || sel.Op != pg_query.SetOperation_SETOP_NONE || len(sel.SortClause) > 0 || sel.LimitCount != nil ||
		sel.LimitOffset != nil || len(sel.GroupClause) > 0 || sel.HavingClause != nil || len(sel.WindowClause) > 0 ||
		len(sel.LockingClause) > 0 || sel.WithClause != nil || sel.IntoClause != nil || len(sel.FromClause) > 0 ||
		len(sel.TargetList) != 1 {
		return nil, errors.New("a where clause is one boolean expression: ORDER BY, LIMIT, OFFSET, GROUP BY, UNION, FOR UPDATE and the like are not part of it")
	}
	if hasSubquery(res.Stmts[0].Stmt.ProtoReflect()) {
		// The engine keeps IN (subquery) conditions, but a shape's where
		// may name only its own table: the allow-list (--shape-tables)
		// and a subset's column rule check names, not tables, and a
		// subquery would read another table through them.
		return nil, errors.New("subqueries are not supported in a shape's where clause; a shape reads its own table only")
	}
	var refs []paramRef
	walkParams(res.Stmts[0].Stmt, &refs)
	for i := range refs {
		refs[i].pos -= len(wherePrefix)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].pos < refs[j].pos })
	return refs, nil
}

// paramRef is a $n in a where clause.
type paramRef struct {
	n   int
	pos int // byte offset of the $ in the clause
}

// walkParams collects the ParamRefs of a parse tree through its protobuf
// reflection-free accessors: only node kinds that can hold expressions
// in a where clause are walked (others cannot hold a $n there).
func walkParams(n *pg_query.Node, out *[]paramRef) {
	if n == nil {
		return
	}
	switch x := n.Node.(type) {
	case *pg_query.Node_ParamRef:
		*out = append(*out, paramRef{n: int(x.ParamRef.Number), pos: int(x.ParamRef.Location)})
	case *pg_query.Node_SelectStmt:
		walkParams(x.SelectStmt.WhereClause, out)
	case *pg_query.Node_AExpr:
		walkParams(x.AExpr.Lexpr, out)
		walkParams(x.AExpr.Rexpr, out)
	case *pg_query.Node_BoolExpr:
		for _, a := range x.BoolExpr.Args {
			walkParams(a, out)
		}
	case *pg_query.Node_NullTest:
		walkParams(x.NullTest.Arg, out)
	case *pg_query.Node_BooleanTest:
		walkParams(x.BooleanTest.Arg, out)
	case *pg_query.Node_TypeCast:
		walkParams(x.TypeCast.Arg, out)
	case *pg_query.Node_List:
		for _, a := range x.List.Items {
			walkParams(a, out)
		}
	case *pg_query.Node_FuncCall:
		for _, a := range x.FuncCall.Args {
			walkParams(a, out)
		}
	case *pg_query.Node_AArrayExpr:
		for _, a := range x.AArrayExpr.Elements {
			walkParams(a, out)
		}
	case *pg_query.Node_RowExpr:
		for _, a := range x.RowExpr.Args {
			walkParams(a, out)
		}
	case *pg_query.Node_CoalesceExpr:
		for _, a := range x.CoalesceExpr.Args {
			walkParams(a, out)
		}
	case *pg_query.Node_CollateClause:
		walkParams(x.CollateClause.Arg, out)
	case *pg_query.Node_SubLink:
		walkParams(x.SubLink.Testexpr, out)
		walkParams(x.SubLink.Subselect, out)
	case *pg_query.Node_CaseExpr:
		walkParams(x.CaseExpr.Arg, out)
		walkParams(x.CaseExpr.Defresult, out)
		for _, a := range x.CaseExpr.Args {
			walkParams(a, out)
		}
	case *pg_query.Node_CaseWhen:
		walkParams(x.CaseWhen.Expr, out)
		walkParams(x.CaseWhen.Result, out)
	case *pg_query.Node_AIndirection:
		walkParams(x.AIndirection.Arg, out)
	}
}

// renumber shifts every $n of where by by (subset params follow the
// shape's).
func renumber(where string, refs []paramRef, by int) string {
	if by == 0 || len(refs) == 0 {
		return where
	}
	var b []byte
	last := 0
	for _, r := range refs {
		if r.pos < last || r.pos >= len(where) || where[r.pos] != '$' {
			continue
		}
		j := r.pos + 1
		for j < len(where) && where[j] >= '0' && where[j] <= '9' {
			j++
		}
		b = append(b, where[last:r.pos]...)
		b = fmt.Appendf(b, "$%d", r.n+by)
		last = j
	}
	b = append(b, where[last:]...)
	return string(b)
}

// columnRefs returns every column a parsed expression names (the last
// part of each ColumnRef: a qualified t.col names col), walking the whole
// parse tree through protobuf reflection so that no node kind is missed.
func columnRefs(m protoreflect.Message, out map[string]bool) {
	if cr, ok := m.Interface().(*pg_query.ColumnRef); ok {
		if n := len(cr.Fields); n > 0 {
			if s := cr.Fields[n-1].GetString_(); s != nil {
				out[s.Sval] = true
			} else if cr.Fields[n-1].GetAStar() != nil {
				out["*"] = true
			}
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				columnRefs(l.Get(i).Message(), out)
			}
		case fd.Message() != nil && !fd.IsMap():
			columnRefs(v.Message(), out)
		}
		return true
	})
}

// hasSubquery reports whether a parse tree holds a subquery anywhere.
func hasSubquery(m protoreflect.Message) bool {
	switch m.Interface().(type) {
	case *pg_query.SubLink, *pg_query.RangeSubselect:
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && !found; i++ {
				found = hasSubquery(l.Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			found = hasSubquery(v.Message())
		}
		return !found
	})
	return found
}

// checkColumns refuses an expression (a where clause, or an ORDER BY list
// with prefix "SELECT 1 ORDER BY ") that names a column outside allowed:
// a subset's where may only test the columns its shape selects, and a
// shape's where only the columns the allow-list permits, or it would be
// an oracle for the values of the others.
func checkColumns(prefix, expr string, allowed func(string) bool) error {
	res, err := pg_query.Parse(prefix + expr)
	if err != nil {
		return nil // the syntax is checked (and reported) elsewhere
	}
	refs := map[string]bool{}
	for _, st := range res.Stmts {
		columnRefs(st.ProtoReflect(), refs)
	}
	var bad []string
	for c := range refs {
		if !allowed(c) {
			bad = append(bad, c)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("may only name the columns this shape may serve; not: %s", strings.Join(bad, ", "))
}
