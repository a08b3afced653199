package query

import (
	"strconv"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// intConst is an integer constant of any size (A_Const's Ival is 32-bit;
// larger ones are written as the lexer writes them, as a float constant's
// text).
func intConst(n int64) *pg.Node {
	if n <= 1<<31-1 {
		return pg.MakeAConstIntNode(n, -1)
	}
	return &pg.Node{Node: &pg.Node_AConst{AConst: &pg.A_Const{
		Val: &pg.A_Const_Fval{Fval: &pg.Float{Fval: strconv.FormatInt(n, 10)}}, Location: -1}}}
}

func colNode(alias, name string) *pg.Node {
	return pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode(name)}, -1)
}

// Render returns SQL the engine runs against PostgreSQL to read this
// query's rows (see RenderOptions), with $n parameters to pass with Args.
//
// A plan does not keep its parse tree (it was about half of a plan's
// memory): Render parses the template's Text again, which is the compiled
// tree as the deparser printed it and parses back to the same statement,
// puts the plan's lifted literals back in it and changes that tree. Render
// runs once per read of PostgreSQL, so the parse costs little next to the
// read; it grows with the statement's size, so the engine calls it on the
// goroutine that runs the read, never on the one that owns its core.
func (p *Plan) Render(o RenderOptions) string {
	tree := p.parseText()
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if (o.At != nil || o.Hold) && len(p.Clock) > 0 && sel.WhereClause != nil {
		sel.WhereClause = renderClock(sel.WhereClause, o.At, o.Hold)
	}
	targets, sorts := sel.TargetList, sel.SortClause
	// exprNode is where an expression output or key is in the statement.
	exprNode := func(target, item int) *pg.Node {
		if target >= 0 {
			return targets[target].GetResTarget().Val
		}
		return sorts[item].GetSortBy().Node
	}
	if o.Columns == SelectNeeded {
		sel.TargetList = nil
		for _, s := range p.Sources {
			if s.Subquery() {
				// Its table is the subquery's, not in the outer scope;
				// a Row holds nothing of it.
				continue
			}
			for _, c := range s.Columns {
				sel.TargetList = append(sel.TargetList, pg.MakeResTargetNodeWithVal(colNode(s.Alias, c.Name), -1))
			}
		}
		if p.Count || p.Agg != nil {
			// The counted rows: the aggregate's LIMIT/OFFSET do not apply.
			sel.LimitCount, sel.LimitOffset = nil, nil
		}
		if p.Agg != nil {
			// The aggregated rows: grouping, HAVING and the order of
			// groups are the engine's.
			sel.GroupClause, sel.HavingClause, sel.SortClause, sel.DistinctClause = nil, nil, nil, nil
			sel.LimitOption = pg.LimitOption_LIMIT_OPTION_DEFAULT
		}
	}
	if p.Agg != nil {
		o.Window = false
	}
	if (o.Window || o.Columns == SelectNeeded) && !p.Count && p.Agg == nil {
		// ORDER BY is written out from the plan: the original may name
		// output aliases or positions that a different select list lacks.
		sel.SortClause = nil
		for _, k := range p.Order {
			dir := pg.SortByDir_SORTBY_ASC
			if k.Desc {
				dir = pg.SortByDir_SORTBY_DESC
			}
			nulls := pg.SortByNulls_SORTBY_NULLS_LAST
			if k.NullsFirst {
				nulls = pg.SortByNulls_SORTBY_NULLS_FIRST
			}
			var key *pg.Node
			if k.expr != nil {
				key = exprNode(k.target, k.item)
			} else {
				s := p.Sources[k.Source]
				key = colNode(s.Alias, s.Columns[k.Column].Name)
			}
			sel.SortClause = append(sel.SortClause, pg.MakeSortByNode(key, dir, nulls, -1))
		}
	}
	if o.Window && !p.Count {
		if p.Limit >= 0 {
			ordered := make(map[[2]int]bool)
			for _, k := range p.Order {
				ordered[[2]int{k.Source, k.Column}] = true
			}
			for i, s := range p.Sources {
				if s.Subquery() {
					continue
				}
				for j := 0; j < s.KeyN; j++ {
					if ordered[[2]int{i, j}] {
						continue
					}
					sel.SortClause = append(sel.SortClause, pg.MakeSortByNode(colNode(s.Alias, s.Columns[j].Name),
						pg.SortByDir_SORTBY_ASC, pg.SortByNulls_SORTBY_NULLS_LAST, -1))
				}
			}
			// A window holds only its rows, but PostgreSQL computes the
			// select list of every row it sorts: sorting last by each
			// output expression that can raise (the keys before are
			// unique, so the order is unchanged) makes the read fail as
			// the query would.
			for _, out := range p.Output {
				if out.expr != nil && out.expr.raises {
					sel.SortClause = append(sel.SortClause, pg.MakeSortByNode(exprNode(out.target, -1),
						pg.SortByDir_SORTBY_ASC, pg.SortByNulls_SORTBY_NULLS_LAST, -1))
				}
			}
			sel.LimitCount = intConst(p.WindowEnd(o.Margin))
			sel.LimitOption = pg.LimitOption_LIMIT_OPTION_COUNT
		} else {
			sel.LimitCount = nil
		}
		sel.LimitOffset = nil
	}
	s, err := pg.Deparse(tree)
	if err != nil {
		// The tree came from the parser and was changed only in ways the
		// deparser knows; an error here is a bug.
		panic("query: deparse: " + err.Error())
	}
	return s
}
