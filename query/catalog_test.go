package query

import (
	"context"
	"errors"
	"testing"

	"github.com/freshetdb/freshet/change"
)

func TestPGCatalog(t *testing.T) {
	conn, cat := testDB(t)
	ctx := context.Background()
	items, err := cat.Table(ctx, "public", "items")
	if err != nil {
		t.Fatal(err)
	}
	if got := items.PrimaryKey; len(got) != 2 || got[0] != "order_id" || got[1] != "line" {
		t.Fatalf("items primary key = %v, want [order_id line]", got)
	}
	users, err := cat.Table(ctx, "public", "users")
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) *Column {
		c, _ := users.Column(name)
		if c == nil {
			t.Fatalf("users has no column %s", name)
		}
		return c
	}
	if c := col("level"); c.TypeOID != change.OIDInt4 || c.DeclaredOID == change.OIDInt4 {
		t.Errorf("domain column level: TypeOID %d, DeclaredOID %d; want int4 and the domain", c.TypeOID, c.DeclaredOID)
	}
	if c := col("feeling"); c.Type.Kind != change.KindEnum {
		t.Errorf("feeling kind = %v, want enum", c.Type.Kind)
	}
	if c := col("tags"); c.Type.Kind != change.KindArray || c.Type.Elem != change.OIDText {
		t.Errorf("tags type = %+v, want array of text", c.Type)
	}
	if c := col("name"); !c.NotNull || !c.Collation.Bytewise() || c.Collation.Collate != "C.UTF-8" {
		t.Errorf("name: not null %v, collation %+v; want NOT NULL under the database's C.UTF-8", c.NotNull, c.Collation)
	}
	if c := col("handle"); !c.Collation.Bytewise() || c.Collation.Name != "C" {
		t.Errorf("handle collation = %+v, want C", c.Collation)
	}
	if c := col("title"); c.Collation.Bytewise() || c.Collation.Provider != 'i' {
		t.Errorf("title collation = %+v, want ICU, not bytewise", c.Collation)
	}
	if c := col("age"); c.Collation.OID != 0 {
		t.Errorf("age collation = %+v, want none", c.Collation)
	}
	if _, err := cat.Table(ctx, "public", "nosuch"); !errors.Is(err, ErrNoTable) {
		t.Errorf("missing table error = %v, want ErrNoTable", err)
	}
	// Cached until invalidated.
	if _, err := conn.Exec(ctx, "ALTER TABLE items ADD COLUMN note text"); err != nil {
		t.Fatal(err)
	}
	if again, _ := cat.Table(ctx, "public", "items"); len(again.Columns) != len(items.Columns) {
		t.Errorf("catalog re-read items without Invalidate")
	}
	cat.Invalidate("public", "items")
	again, err := cat.Table(ctx, "public", "items")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := again.Column("note"); c == nil {
		t.Errorf("after Invalidate, items has no column note")
	}
}
