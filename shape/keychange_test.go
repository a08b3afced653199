package shape_test

import (
	"bufio"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/freshetdb/freshet/shape"
)

// An UPDATE that changes a row's primary key is Electric's split
// (shared/shape-api.md §1.7, LogItems.from_change): a delete of the old
// key with key_change_to naming the new key (value: the key columns, or
// the whole old row under replica=full; no last), then an insert of the
// whole new row with key_change_from naming the old key (no old_value;
// last when it ends the transaction). A row moving into or out of the
// where while its key changes is a plain insert or delete, as Electric's
// convert_change makes it.

var (
	maskLSN  = regexp.MustCompile(`"(lsn|global_last_seen_lsn)":"\d+"`)
	maskTxid = regexp.MustCompile(`"txids":\[\d+\]`)
)

// masked hides what differs between runs (commit LSNs and xids) and puts
// one message on a line.
func masked(body string) string {
	body = maskLSN.ReplaceAllString(body, `"$1":"L"`)
	body = maskTxid.ReplaceAllString(body, `"txids":[X]`)
	return strings.ReplaceAll(body, `}},{"`, "}},\n{\"")
}

const keyChangeSetup = `CREATE TABLE items (id int PRIMARY KEY, title text, n int);
	INSERT INTO items SELECT i, 'item ' || i, i FROM generate_series(1, 5) i;
	CREATE TABLE pairs (a int, b text, v text, PRIMARY KEY (a, b));
	ALTER TABLE pairs REPLICA IDENTITY FULL;
	INSERT INTO pairs VALUES (1, 'x', 'one'), (2, 'y', 'two')`

// keyChangeGolden is what each shape's log holds after the writes of
// TestKeyChange, one transaction after another.
var keyChangeGolden = map[string]string{
	"default": `[{"key":"\"public\".\"items\"/\"2\"","value":{"id":"2"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"key_change_to":"\"public\".\"items\"/\"20\"","lsn":"L","op_position":1}},
{"key":"\"public\".\"items\"/\"20\"","value":{"id":"20","title":"item 2","n":"2"},"headers":{"operation":"insert","relation":["public","items"],"txids":[X],"key_change_from":"\"public\".\"items\"/\"2\"","lsn":"L","op_position":2,"last":true}},
{"key":"\"public\".\"items\"/\"1\"","value":{"id":"1"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"lsn":"L","op_position":1}},
{"key":"\"public\".\"items\"/\"3\"","value":{"id":"3"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"key_change_to":"\"public\".\"items\"/\"31\"","lsn":"L","op_position":2}},
{"key":"\"public\".\"items\"/\"31\"","value":{"id":"31","title":"item 3","n":"3"},"headers":{"operation":"insert","relation":["public","items"],"txids":[X],"key_change_from":"\"public\".\"items\"/\"3\"","lsn":"L","op_position":3}},
{"key":"\"public\".\"items\"/\"4\"","value":{"id":"4","title":"four"},"headers":{"operation":"update","relation":["public","items"],"txids":[X],"lsn":"L","op_position":4}},
{"key":"\"public\".\"items\"/\"5\"","value":{"id":"5","title":"was 1","n":"1"},"headers":{"operation":"update","relation":["public","items"],"txids":[X],"lsn":"L","op_position":5,"last":true}},
{"key":"\"public\".\"items\"/\"4\"","value":{"id":"4"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"key_change_to":"\"public\".\"items\"/\"104\"","lsn":"L","op_position":1}},
{"key":"\"public\".\"items\"/\"104\"","value":{"id":"104","title":"four","n":"0"},"headers":{"operation":"insert","relation":["public","items"],"txids":[X],"key_change_from":"\"public\".\"items\"/\"4\"","lsn":"L","op_position":2}},
{"key":"\"public\".\"items\"/\"20\"","value":{"id":"20"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"key_change_to":"\"public\".\"items\"/\"100\"","lsn":"L","op_position":3}},
{"key":"\"public\".\"items\"/\"100\"","value":{"id":"100","title":"item 2","n":"100"},"headers":{"operation":"insert","relation":["public","items"],"txids":[X],"key_change_from":"\"public\".\"items\"/\"20\"","lsn":"L","op_position":4,"last":true}},
{"headers":{"control":"up-to-date","global_last_seen_lsn":"L"}}]`,
	"full": `[{"key":"\"public\".\"items\"/\"2\"","value":{"id":"2","title":"item 2","n":"2"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"key_change_to":"\"public\".\"items\"/\"20\"","lsn":"L","op_position":1}},
{"key":"\"public\".\"items\"/\"20\"","value":{"id":"20","title":"item 2","n":"2"},"headers":{"operation":"insert","relation":["public","items"],"txids":[X],"key_change_from":"\"public\".\"items\"/\"2\"","lsn":"L","op_position":2,"last":true}},
{"key":"\"public\".\"items\"/\"1\"","value":{"id":"1","title":"item 1","n":"1"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"lsn":"L","op_position":1}},
{"key":"\"public\".\"items\"/\"3\"","value":{"id":"3","title":"item 3","n":"3"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"key_change_to":"\"public\".\"items\"/\"31\"","lsn":"L","op_position":2}},
{"key":"\"public\".\"items\"/\"31\"","value":{"id":"31","title":"item 3","n":"3"},"headers":{"operation":"insert","relation":["public","items"],"txids":[X],"key_change_from":"\"public\".\"items\"/\"3\"","lsn":"L","op_position":3}},
{"key":"\"public\".\"items\"/\"4\"","value":{"id":"4","title":"four","n":"4"},"old_value":{"title":"item 4"},"headers":{"operation":"update","relation":["public","items"],"txids":[X],"lsn":"L","op_position":4}},
{"key":"\"public\".\"items\"/\"5\"","value":{"id":"5","title":"was 1","n":"1"},"old_value":{"title":"item 5","n":"5"},"headers":{"operation":"update","relation":["public","items"],"txids":[X],"lsn":"L","op_position":5,"last":true}},
{"key":"\"public\".\"items\"/\"4\"","value":{"id":"4","title":"four","n":"4"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"key_change_to":"\"public\".\"items\"/\"104\"","lsn":"L","op_position":1}},
{"key":"\"public\".\"items\"/\"104\"","value":{"id":"104","title":"four","n":"0"},"headers":{"operation":"insert","relation":["public","items"],"txids":[X],"key_change_from":"\"public\".\"items\"/\"4\"","lsn":"L","op_position":2}},
{"key":"\"public\".\"items\"/\"20\"","value":{"id":"20","title":"item 2","n":"2"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"key_change_to":"\"public\".\"items\"/\"100\"","lsn":"L","op_position":3}},
{"key":"\"public\".\"items\"/\"100\"","value":{"id":"100","title":"item 2","n":"100"},"headers":{"operation":"insert","relation":["public","items"],"txids":[X],"key_change_from":"\"public\".\"items\"/\"20\"","lsn":"L","op_position":4,"last":true}},
{"headers":{"control":"up-to-date","global_last_seen_lsn":"L"}}]`,
	// where n > 3: row 5 leaves (it is row 1 now, n = 1), row 2 enters
	// with its new key 100 (an insert), row 4 leaves with its new key 104
	// (a delete of 4).
	"where": `[{"key":"\"public\".\"items\"/\"5\"","value":{"id":"5"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"lsn":"L","op_position":1}},
{"key":"\"public\".\"items\"/\"4\"","value":{"id":"4","title":"four"},"headers":{"operation":"update","relation":["public","items"],"txids":[X],"lsn":"L","op_position":2,"last":true}},
{"key":"\"public\".\"items\"/\"4\"","value":{"id":"4"},"headers":{"operation":"delete","relation":["public","items"],"txids":[X],"lsn":"L","op_position":1}},
{"key":"\"public\".\"items\"/\"100\"","value":{"id":"100","title":"item 2","n":"100"},"headers":{"operation":"insert","relation":["public","items"],"txids":[X],"lsn":"L","op_position":2,"last":true}},
{"headers":{"control":"up-to-date","global_last_seen_lsn":"L"}}]`,
	"pairs": `[{"key":"\"public\".\"pairs\"/\"1\"/\"x\"","value":{"a":"1","b":"x"},"headers":{"operation":"delete","relation":["public","pairs"],"txids":[X],"key_change_to":"\"public\".\"pairs\"/\"1\"/\"z\"","lsn":"L","op_position":1}},
{"key":"\"public\".\"pairs\"/\"1\"/\"z\"","value":{"a":"1","b":"z","v":"one"},"headers":{"operation":"insert","relation":["public","pairs"],"txids":[X],"key_change_from":"\"public\".\"pairs\"/\"1\"/\"x\"","lsn":"L","op_position":2,"last":true}},
{"headers":{"control":"up-to-date","global_last_seen_lsn":"L"}}]`,
}

// TestKeyChange pins the split's bytes in the shape log as long-poll,
// SSE and a restart serve it, for replica=default and full, a
// changes_only shape, a where the row moves across, and a composite key
// on a table with REPLICA IDENTITY FULL.
func TestKeyChange(t *testing.T) {
	e := newEnv(t, keyChangeSetup, func(c *shape.Config) { c.SSEKeepAlive = 300 * time.Millisecond; c.SSETimeout = 3 * time.Second })
	shapes := map[string][]string{
		"default":      {"table", "items"},
		"full":         {"table", "items", "replica", "full"},
		"changes_only": {"table", "items", "log", "changes_only"},
		"where":        {"table", "items", "where", "n > 3"},
		"pairs":        {"table", "pairs"},
	}
	type pos struct{ h, off string }
	start := map[string]pos{}
	for name, kv := range shapes {
		rows := map[string]map[string]any{}
		h, off := e.syncTo(rows, "", "-1", kv...)
		start[name] = pos{h, off}
	}
	e.exec(`UPDATE items SET id = 20 WHERE id = 2`)
	// 3 -> 30 -> 31 is one key change; 4 -> 40 -> 4 none; 1 takes the key
	// of 5, deleted first: a delete of 1 and an update of 5.
	e.exec(`BEGIN;
		UPDATE items SET id = 30 WHERE id = 3; UPDATE items SET id = 31 WHERE id = 30;
		UPDATE items SET id = 40, title = 'four' WHERE id = 4; UPDATE items SET id = 4 WHERE id = 40;
		DELETE FROM items WHERE id = 5; UPDATE items SET id = 5, title = 'was 1' WHERE id = 1;
		COMMIT`)
	e.exec(`UPDATE items SET id = CASE id WHEN 20 THEN 100 ELSE 104 END, n = CASE id WHEN 20 THEN 100 ELSE 0 END WHERE id IN (20, 4)`)
	e.exec(`UPDATE pairs SET b = 'z' WHERE a = 1`)

	// Read each shape's log up to its last transaction.
	read := func(name string, extra ...string) string {
		kv := append(append([]string{}, shapes[name]...), "offset", start[name].off, "handle", start[name].h)
		kv = append(kv, extra...)
		var body string
		eventually(t, 10*time.Second, func() string {
			r := e.get(kv...)
			if r.code != 200 {
				return sprintf("%d %s", r.code, r.body)
			}
			body = r.body
			if !strings.Contains(body, `"up-to-date"`) {
				return "waiting for up-to-date: " + body
			}
			if strings.Count(body, `"last":true`) < map[string]int{"where": 2, "pairs": 1}[name] || name != "where" && name != "pairs" && strings.Count(body, `"last":true`) < 3 {
				return "waiting for the writes: " + body
			}
			return ""
		})
		return body
	}
	want := func(name string) string {
		if name == "changes_only" {
			return keyChangeGolden["default"]
		}
		return keyChangeGolden[name]
	}
	before := map[string]string{}
	for name := range shapes {
		got := read(name)
		before[name] = got
		if masked(got) != want(name) {
			t.Errorf("%s: the log\n%s\nwant\n%s", name, masked(got), want(name))
		}
		// Long-poll: the same messages.
		live := read(name, "live", "true")
		if masked(live) != want(name) {
			t.Errorf("%s live: %s", name, masked(live))
		}
	}

	// SSE sends each message as an event, the same bytes.
	for _, name := range []string{"default", "full"} {
		kv := append(append([]string{}, shapes[name]...), "offset", start[name].off, "handle", start[name].h, "live", "true", "live_sse", "true")
		req, _ := http.NewRequest("GET", e.url+"/v1/shape?"+qs(kv...).Encode(), nil)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(res.Body)
		var events []string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				break
			}
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: "); ok {
				events = append(events, d)
				if strings.Contains(d, `"up-to-date"`) && len(events) > 10 {
					break
				}
			}
		}
		res.Body.Close()
		// One up-to-date per batch: drop them and compare the changes.
		var changes []string
		for _, ev := range events {
			if !strings.Contains(ev, `"control"`) {
				changes = append(changes, ev)
			}
		}
		golden := want(name)
		golden = golden[1:strings.LastIndex(golden, ",\n{\"headers\":{\"control\"")]
		if got := masked(strings.Join(changes, ",")); got != golden {
			t.Errorf("%s SSE events:\n%s\nwant\n%s", name, got, golden)
		}
	}

	// A restart serves the log it wrote, byte for byte (changes_only too,
	// although its log updates rows it never inserted).
	e.restart()
	for name := range shapes {
		if got := read(name); maskLSN.ReplaceAllString(got, "") != maskLSN.ReplaceAllString(before[name], "") {
			t.Errorf("%s after a restart:\n%s\nbefore:\n%s", name, got, before[name])
		}
	}
	// And a client following the shape ends with PostgreSQL's rows.
	rows := map[string]map[string]any{}
	e.syncTo(rows, "", "-1", "table", "items")
	if len(rows) != 4 || rows[`"public"."items"/"100"`]["n"] != "100" || rows[`"public"."items"/"104"`]["title"] != "four" || rows[`"public"."items"/"31"`] == nil || rows[`"public"."items"/"5"`]["title"] != "was 1" {
		t.Errorf("rows after the key changes: %v", rows)
	}
}
