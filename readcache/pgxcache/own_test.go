package pgxcache

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestOwnTypes: a read state's map gets its own enum codecs (for the enum,
// arrays of it and composites holding it), so two states copied from one
// pool map never share an enum codec's member cache; other types stay
// shared.
func TestOwnTypes(t *testing.T) {
	tmpl := pgtype.NewMap()
	mood := &pgtype.Type{Name: "mood", OID: 50001, Codec: &pgtype.EnumCodec{}}
	tmpl.RegisterType(mood)
	tmpl.RegisterType(&pgtype.Type{Name: "_mood", OID: 50002, Codec: &pgtype.ArrayCodec{ElementType: mood}})
	text, _ := tmpl.TypeForOID(pgtype.TextOID)
	tmpl.RegisterType(&pgtype.Type{Name: "pair", OID: 50003, Codec: &pgtype.CompositeCodec{Fields: []pgtype.CompositeCodecField{{Name: "m", Type: mood}, {Name: "b", Type: text}}}})
	tmpl.RegisterType(&pgtype.Type{Name: "plain", OID: 50004, Codec: &pgtype.CompositeCodec{Fields: []pgtype.CompositeCodecField{{Name: "b", Type: text}}}})

	enumOf := func(m *pgtype.Map, oid uint32) pgtype.Codec {
		typ, _ := m.TypeForOID(oid)
		switch c := typ.Codec.(type) {
		case *pgtype.ArrayCodec:
			return c.ElementType.Codec
		case *pgtype.CompositeCodec:
			return c.Fields[0].Type.Codec
		}
		return typ.Codec
	}
	a := &state{m: tmpl.Copy(), own: map[uint32]bool{}}
	b := &state{m: tmpl.Copy(), own: map[uint32]bool{}}
	for _, oid := range []uint32{50001, 50002, 50003} {
		a.ownTypes(oid)
		b.ownTypes(oid)
		if ca, cb := enumOf(a.m, oid), enumOf(b.m, oid); ca == cb || ca == mood.Codec {
			t.Errorf("type %d: two states share enum codec %p", oid, ca)
		}
	}
	a.ownTypes(50004)
	if pa, _ := a.m.TypeForOID(50004); pa != func() *pgtype.Type { p, _ := tmpl.TypeForOID(50004); return p }() {
		t.Errorf("a composite without enums was copied, want it shared")
	}
}
