package change_test

import (
	"fmt"
	"os"
	"time"

	"github.com/freshetdb/freshet/change"
)

func ExampleDecodeOID() {
	v, err := change.DecodeOID(change.OIDNumeric, change.TextValue("1.50"), nil)
	if err != nil {
		panic(err)
	}
	n := v.(change.Numeric)
	one5, _ := change.ParseNumeric("1.5")
	fmt.Println(n, n.Cmp(one5))

	v, _ = change.DecodeOID(change.OIDTimestamptz, change.TextValue("0044-03-15 12:00:00+00 BC"), nil)
	ts := v.(change.Timestamp)
	t, _ := ts.Time()
	fmt.Println(ts.StringTZ(), t.Year())

	v, _ = change.DecodeOID(change.OIDInt4Array, change.TextValue("[0:1]={1,NULL}"), nil)
	a := v.(change.Array)
	fmt.Println(a.Dims, a.Elems)
	// Output:
	// 1.50 0
	// 0044-03-15 12:00:00+00 BC -43
	// [{2 0}] [1 <nil>]
}

func ExampleTxnJSONWriter() {
	users := &change.Relation{Schema: "public", Table: "users", Columns: []change.Column{
		{Name: "id", TypeOID: change.OIDInt4, Key: true},
		{Name: "bio", TypeOID: change.OIDText},
	}}
	w := change.NewTxnJSONWriter(os.Stdout)
	txn := &change.Txn{XID: 7, CommitLSN: 0x16B3748, EndLSN: 0x16B3778, Last: true,
		CommitTime: time.Date(2026, 11, 30, 14, 1, 2, 123456000, time.UTC),
		Changes: []change.Change{{Op: change.OpUpdate, Rel: users,
			New: change.Row{change.TextValue("1"), {Kind: change.Unchanged}}}}}
	if err := w.Write(txn); err != nil {
		panic(err)
	}
	// Output:
	// {"lsn":"0/16B3748","end_lsn":"0/16B3778","xid":7,"commit_time":"2026-11-30T14:01:02.123456Z","changes":[{"op":"update","schema":"public","table":"users","key":{"id":"1"},"new":{"id":"1","bio":{"unchanged":true}}}]}
}
