package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/query"
)

// A plan is compiled against the catalog's cached shapes, which may be
// older than PostgreSQL's: nothing in the change stream reports a DROP
// TABLE, a table made again under its name, or a column dropped and added
// again until a write to the table follows. A plan compiled from such a
// shape has the old table's OID and attnums in its key, so it equals the
// key of a live view of the old table, and joining that view does no read
// that could notice: it would be accepted with the dropped table's rows.
// So every subscribe checks its plan against PostgreSQL as it is now
// (resolveQuery: one round trip on the read pool, off the core goroutine)
// before the core sees it; on a difference the catalog forgets the
// plan's tables, the query is compiled again, and a catalog check is
// asked for, which ends the old views (CodeTableDropped,
// CodeSchemaChanged). A DDL that commits after the check is the same race
// as one that commits just after a subscription is accepted: the
// subscription ends when the catalog check or its next read sees it.

// resolveQuery reads, as shapeQuery does, the tables (plain and
// partitioned: what the catalog compiles against) named one of $1 in a
// schema among $2 (both text[]): every table a plan's names can resolve
// to now, whatever OID it has.
const resolveQuery = shapeSelect + `
WHERE c.relname = ANY($1) AND n.nspname = ANY($2) AND c.relkind IN ('r', 'p')
ORDER BY c.oid, a.attnum`

// textArray renders ss as a text[] literal (text format), each element
// quoted.
func textArray(ss []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for _, r := range s {
			if r == '"' || r == '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// searchPath is the path unqualified names resolve through (as Compile
// takes it).
func (e *Engine) searchPath() []string {
	if len(e.cfg.Query.SearchPath) == 0 {
		return []string{"public"}
	}
	return e.cfg.Query.SearchPath
}

// compileCurrent compiles sql with its binds and checks the plan against
// PostgreSQL now (checkPlan), compiling again, after the catalog forgets
// the tables, when it was compiled from an older shape. A plan that still
// differs after maxRecompiles compiles (a catalog that cannot be told to
// forget, or DDL committing as fast as it compiles) is refused with the
// difference's code, retryable: never served from the old table.
func (e *Engine) compileCurrent(ctx context.Context, sql string, binds []query.Bind) (*query.Plan, *query.Refusal, error) {
	for attempt := 0; ; attempt++ {
		plan, refusal, err := query.Compile(ctx, sql, binds, e.cfg.Query)
		if err != nil || refusal != nil {
			return nil, refusal, err
		}
		code, reason, err := e.checkPlan(ctx, plan)
		if err != nil {
			return nil, nil, err
		}
		if code == "" {
			return plan, nil, nil
		}
		// The catalog's shape was stale: so are the views of it (the
		// check ends them), and what the catalog holds under the names.
		e.invalidatePlan(plan)
		e.askCheck()
		if attempt >= maxRecompiles {
			return nil, &query.Refusal{Code: code, Retryable: true,
				Message: reason + " (and compiling again met another shape: subscribe again once the schema change is done)"}, nil
		}
	}
}

// checkPlan compares the tables of plan with PostgreSQL's now: each name
// as the query wrote it resolves (through the search path when
// unqualified, as Compile resolves it) to the table the plan has, by OID,
// with the columns the plan uses at the attnums and types it has
// (shapeProblem). It returns "" when they agree, or the code and reason
// of the first difference.
func (e *Engine) checkPlan(ctx context.Context, plan *query.Plan) (query.Code, string, error) {
	if len(plan.Sources) == 0 {
		return "", "", nil
	}
	path := e.searchPath()
	var names, schemas []string
	add := func(list []string, s string) []string {
		if slices.Contains(list, s) {
			return list
		}
		return append(list, s)
	}
	for _, src := range plan.Sources {
		names = add(names, src.Table.Name)
		if src.Qualified {
			schemas = add(schemas, src.Table.Schema)
			continue
		}
		for _, s := range path {
			schemas = add(schemas, s)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.ReadTimeout)
	defer cancel()
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return "", "", fmt.Errorf("check the plan's tables: acquire a read connection: %w", err)
	}
	res := conn.Conn().PgConn().ExecParams(ctx, resolveQuery, [][]byte{[]byte(textArray(names)), []byte(textArray(schemas))},
		[]uint32{1009, 1009}, []int16{0, 0}, nil).Read()
	conn.Release()
	if res.Err != nil {
		return "", "", fmt.Errorf("check the plan's tables: %w", res.Err)
	}
	shapes, err := parseShapes(res.Rows)
	if err != nil {
		return "", "", fmt.Errorf("check the plan's tables: %w", err)
	}
	code, reason := planDrift(plan, path, shapes)
	return code, reason, nil
}

// planDrift says how shapes, the tables plan's names can resolve to now,
// differ from what plan was compiled against: a code and reason, or "".
func planDrift(plan *query.Plan, path []string, shapes map[uint32]*change.Relation) (query.Code, string) {
	byName := make(map[[2]string]*change.Relation, len(shapes))
	for _, rel := range shapes {
		byName[[2]string{rel.Schema, rel.Table}] = rel
	}
	for _, src := range plan.Sources {
		t := src.Table
		where := path
		if src.Qualified {
			where = []string{t.Schema}
		}
		var rel *change.Relation
		for _, s := range where {
			if rel = byName[[2]string{s, t.Name}]; rel != nil {
				break
			}
		}
		switch {
		case rel == nil:
			return CodeTableDropped, fmt.Sprintf("table %s.%s was dropped or renamed", t.Schema, t.Name)
		case rel.OID != t.OID && rel.Schema == t.Schema:
			return CodeTableDropped, fmt.Sprintf("table %s.%s was dropped or renamed (a table of that name now is another table)", t.Schema, t.Name)
		case rel.OID != t.OID:
			return CodeSchemaChanged, fmt.Sprintf("%q now names table %s.%s, earlier on the search path than %s.%s", t.Name, rel.Schema, rel.Table, t.Schema, t.Name)
		}
		if code, reason, _ := shapeProblem(src, rel); code != "" {
			return code, reason
		}
	}
	return "", ""
}

// invalidatePlan makes the catalog read the tables of plan again.
func (e *Engine) invalidatePlan(plan *query.Plan) {
	inv, ok := e.catalog.(invalidator)
	if !ok {
		return
	}
	for _, src := range plan.Sources {
		inv.Invalidate(src.Table.Schema, src.Table.Name)
	}
}
