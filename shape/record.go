package shape

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/freshetdb/freshet/change"
)

// The engine's sessions print intervals in IntervalStyle postgres, and
// the shape layer re-renders interval values (and arrays of them) in ISO
// 8601 as Electric's sessions print them. A composite value is kept as
// its text, so an interval inside one (at any depth, in an array field
// too) is re-rendered here, by a plan of where the intervals are made
// from the catalog when the shape is created: (1,"1 day 02:00:00")
// becomes (1,P1DT2H), as PostgreSQL prints it under IntervalStyle
// iso_8601 and as a subset (read by PostgreSQL with Electric's settings)
// has it.

// textPlan says how to re-render the text of a value of one type: an
// interval, an array of values of elem's plan, or a composite whose
// fields (nil: unchanged) are re-rendered by their plans.
type textPlan struct {
	interval bool
	elem     *textPlan
	fields   []*textPlan
}

// maxPlanDepth bounds the types a plan follows (domains, arrays,
// composites within composites).
const maxPlanDepth = 16

// recordPlan returns the plan for a column of type oid when its values
// hold intervals inside a composite, else nil: intervals and arrays of
// them outside any composite are already printed in ISO 8601 by the
// renderer.
func (srv *Server) recordPlan(ctx context.Context, oid uint32) (*textPlan, error) {
	p, rec, err := srv.planFor(ctx, oid, 0)
	if err != nil || !rec {
		return nil, err
	}
	return p, nil
}

// planFor returns the plan for values of type oid (nil: unchanged) and
// whether it goes through a composite.
func (srv *Server) planFor(ctx context.Context, oid uint32, depth int) (*textPlan, bool, error) {
	if depth > maxPlanDepth {
		return nil, false, errors.New("types nested too deep")
	}
	if oid == intervalOID {
		return &textPlan{interval: true}, false, nil
	}
	if t, ok := change.BuiltinType(oid); ok && t.Kind != change.KindArray {
		return nil, false, nil // a built-in scalar: no intervals inside
	}
	var typtype string
	var relid, elem, base uint32
	err := srv.cfg.Pool.QueryRow(ctx, `SELECT typtype::text, typrelid, typelem, typbasetype FROM pg_type WHERE oid = $1`, oid).Scan(&typtype, &relid, &elem, &base)
	if err != nil {
		return nil, false, fmt.Errorf("read type %d: %w", oid, err)
	}
	switch {
	case typtype == "d":
		return srv.planFor(ctx, base, depth+1)
	case typtype == "c":
		rows, err := srv.cfg.Pool.Query(ctx, `SELECT atttypid FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, relid)
		if err != nil {
			return nil, false, fmt.Errorf("read the fields of type %d: %w", oid, err)
		}
		var fieldTypes []uint32
		for rows.Next() {
			var f uint32
			if err := rows.Scan(&f); err != nil {
				rows.Close()
				return nil, false, err
			}
			fieldTypes = append(fieldTypes, f)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, false, err
		}
		p := &textPlan{fields: make([]*textPlan, len(fieldTypes))}
		any := false
		for i, f := range fieldTypes {
			fp, _, err := srv.planFor(ctx, f, depth+1)
			if err != nil {
				return nil, false, err
			}
			p.fields[i] = fp
			any = any || fp != nil
		}
		if !any {
			return nil, false, nil
		}
		return p, true, nil
	case elem != 0 && typtype == "b":
		ep, rec, err := srv.planFor(ctx, elem, depth+1)
		if err != nil || ep == nil {
			return nil, false, err
		}
		return &textPlan{elem: ep}, rec, nil
	}
	return nil, false, nil
}

const intervalOID = 1186

var (
	intervalType  = change.Type{OID: intervalOID, Name: "interval", Kind: change.KindBase}
	textArrayType = change.Type{OID: 1009, Name: "_text", Kind: change.KindArray, Elem: 25, Delim: ','}
)

// rewrite re-renders text, a value printed under IntervalStyle postgres,
// as PostgreSQL prints it under iso_8601.
func (p *textPlan) rewrite(dst []byte, text string) ([]byte, error) {
	switch {
	case p.interval:
		v, err := change.Decode(intervalType, change.TextValue(text), nil)
		if err != nil {
			return dst, err
		}
		iv, ok := v.(change.Interval)
		if !ok {
			return dst, fmt.Errorf("an interval's text %q", text)
		}
		return appendISOInterval(dst, iv), nil
	case p.elem != nil:
		// The array's elements as text, each re-rendered, then printed
		// back with array_out's quoting (which does not depend on the
		// element type).
		v, err := change.Decode(textArrayType, change.TextValue(text), nil)
		if err != nil {
			return dst, err
		}
		a, ok := v.(change.Array)
		if !ok {
			return dst, fmt.Errorf("an array's text %q", text)
		}
		for i, e := range a.Elems {
			if s, ok := e.(string); ok {
				b, err := p.elem.rewrite(nil, s)
				if err != nil {
					return dst, err
				}
				a.Elems[i] = string(b)
			}
		}
		return change.AppendText(dst, textArrayType, a, nil)
	}
	return p.rewriteRecord(dst, text)
}

// rewriteRecord re-renders a composite's text (record_out's form:
// (f1,f2,...), a NULL field empty, a field quoted when it needs to be,
// with " and \ doubled inside quotes) field by field.
func (p *textPlan) rewriteRecord(dst []byte, text string) ([]byte, error) {
	if len(text) < 2 || text[0] != '(' || text[len(text)-1] != ')' {
		return dst, fmt.Errorf("a composite's text %q", text)
	}
	dst = append(dst, '(')
	in := text[1 : len(text)-1]
	var field strings.Builder
	for i := 0; ; i++ {
		field.Reset()
		null, quoted := true, false
		for len(in) > 0 && (quoted || in[0] != ',') {
			c := in[0]
			in = in[1:]
			null = false
			switch {
			case c == '\\' && len(in) > 0:
				field.WriteByte(in[0])
				in = in[1:]
			case c == '"' && quoted && len(in) > 0 && in[0] == '"':
				field.WriteByte('"')
				in = in[1:]
			case c == '"':
				quoted = !quoted
			default:
				field.WriteByte(c)
			}
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		if !null {
			v := field.String()
			if i < len(p.fields) && p.fields[i] != nil {
				b, err := p.fields[i].rewrite(nil, v)
				if err != nil {
					return dst, err
				}
				v = string(b)
			}
			dst = appendRecordField(dst, v)
		}
		if len(in) == 0 {
			break
		}
		in = in[1:] // the comma
	}
	return append(dst, ')'), nil
}

// appendRecordField writes one non-NULL field as record_out does: quoted
// when empty or holding a quote, a backslash, a parenthesis, a comma or
// white space, with " and \ doubled.
func appendRecordField(dst []byte, v string) []byte {
	quote := v == ""
	for i := 0; i < len(v) && !quote; i++ {
		switch v[i] {
		case '"', '\\', '(', ')', ',', ' ', '\t', '\n', '\r', '\v', '\f':
			quote = true
		}
	}
	if !quote {
		return append(dst, v...)
	}
	dst = append(dst, '"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' || v[i] == '\\' {
			dst = append(dst, v[i])
		}
		dst = append(dst, v[i])
	}
	return append(dst, '"')
}
