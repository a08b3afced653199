package pgwal

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/freshetdb/freshet/change"
	"github.com/freshetdb/freshet/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// decodeSchema is the schema the differential workload runs on.
const decodeSchema = `
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TABLE types (
	id serial PRIMARY KEY,
	i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, n numeric(20,5), nn numeric,
	b bool, t text, vc varchar(10), c char(3), "Quoted Col" name, by bytea, u uuid,
	j json, jb jsonb, d date, tm time, ttz timetz, ts timestamp, tstz timestamptz,
	iv interval, ai int[], at text[], a2 int[][], m mood, pi posint, ip inet, pt point, r int4range
);
CREATE TABLE toasty (id int PRIMARY KEY, small text, big text);
ALTER TABLE toasty ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE fullrow (id int, v text, big text);
ALTER TABLE fullrow REPLICA IDENTITY FULL;
ALTER TABLE fullrow ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE evolve (id int PRIMARY KEY, a int);
CREATE TABLE parent (id serial PRIMARY KEY);
CREATE TABLE child (id int PRIMARY KEY, p int REFERENCES parent(id));
CREATE TABLE bulk (id int PRIMARY KEY, v text);
CREATE SCHEMA "Other";
CREATE TABLE "Other"."Mixed Case" (k text PRIMARY KEY, v int);
CREATE PUBLICATION pub FOR ALL TABLES;
SELECT pg_replication_origin_create('node_a');
`

// decodeWorkload is run statement by statement after the slots exist. It
// covers every operation and common type, TOAST, REPLICA IDENTITY FULL,
// relation changes, messages and subtransaction aborts. Strings starting
// with "B:" run on a second connection, interleaved with the first.
var decodeWorkload = []string{
	`INSERT INTO types (i2, i4, i8, f4, f8, n, nn, b, t, vc, c, "Quoted Col", by, u, j, jb, d, tm, ttz, ts, tstz, iv, ai, at, a2, m, pi, ip, pt, r) VALUES
	 (-32768, 2147483647, -9223372036854775808, 'NaN', 'Infinity', 123456789012345.12345, '1e-30', true, 'it''s "quoted"
	 with a newline and ünïcødé', 'ten chars!', 'ab', 'nm', '\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
	 '{"a": [1, 2.50, null]}', '{"b": {"c": true}}', '0044-03-15 BC', '24:00:00', '13:14:15.123456+05:30',
	 '10000-01-01 00:00:00.000001', 'infinity', '1 year 2 mons -3 days 04:05:06.7', '{1,NULL,3}', '{"a b",NULL,"c,d","\"e\""}',
	 '[0:1][1:2]={{1,2},{3,4}}', 'happy', 7, '192.168.0.1/24', '(1.5,-2)', '[1,10)'),
	 (0, 0, 0, '-Infinity', '-0', 'NaN', '-Infinity', false, '', NULL, NULL, NULL, '', NULL, 'null', '[]', '-infinity', '00:00', '00:00+00',
	 '-infinity', '1999-12-31 23:59:59.999999+00', '-178000000 years', '{}', '{}', '{{NULL}}', 'sad', 1, '::1', '(0,0)', 'empty'),
	 (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
	`UPDATE types SET t = 'updated', f8 = 1.5e300 WHERE id = 1`,
	`UPDATE types SET id = 100 WHERE id = 2`,
	`DELETE FROM types WHERE id = 3`,
	`INSERT INTO toasty SELECT 1, 'small', string_agg(md5(i::text), '') FROM generate_series(1, 200) i`,
	`UPDATE toasty SET small = 'small 2' WHERE id = 1`,
	`UPDATE toasty SET big = big || 'x' WHERE id = 1`,
	`UPDATE toasty SET id = 2 WHERE id = 1`,
	`DELETE FROM toasty WHERE id = 2`,
	`INSERT INTO fullrow SELECT 1, 'v', string_agg(md5(i::text), '') FROM generate_series(1, 200) i`,
	`INSERT INTO fullrow VALUES (2, NULL, NULL)`,
	`UPDATE fullrow SET v = 'w' WHERE id = 1`,
	`UPDATE fullrow SET v = 'x' WHERE id = 2`,
	`DELETE FROM fullrow WHERE id = 1`,
	`INSERT INTO parent DEFAULT VALUES`,
	`INSERT INTO child VALUES (1, 1)`,
	`TRUNCATE parent CASCADE`,
	`TRUNCATE child RESTART IDENTITY`,
	`TRUNCATE parent, child RESTART IDENTITY CASCADE`,
	`INSERT INTO "Other"."Mixed Case" VALUES ('k', 1)`,
	`SELECT pg_logical_emit_message(true, 'app', 'transactional')`,
	`SELECT pg_logical_emit_message(false, 'app', '\x0062696e617279ff'::bytea)`,
	`SELECT pg_logical_emit_message(false, 'freshet_hb', '1 1767323045123456')`,
	`BEGIN; SELECT pg_logical_emit_message(true, 'freshet_hb', '2 1767323046000000'); COMMIT`,
	`BEGIN; INSERT INTO evolve VALUES (1, 1); SELECT pg_logical_emit_message(true, 'freshet_hb', '3 1767323047000000'); COMMIT`,
	`ALTER TABLE evolve ADD COLUMN b text`,
	`INSERT INTO evolve VALUES (2, 2, 'two')`,
	`ALTER TABLE evolve DROP COLUMN a`,
	`INSERT INTO evolve VALUES (3, 'three')`,
	`ALTER TABLE evolve ALTER COLUMN b TYPE varchar(20)`,
	`INSERT INTO evolve VALUES (4, 'four')`,
	`ALTER TABLE evolve RENAME COLUMN b TO c`,
	`INSERT INTO evolve VALUES (5, 'five')`,
	`ALTER TABLE evolve REPLICA IDENTITY FULL`,
	`UPDATE evolve SET c = 'FIVE' WHERE id = 5`,
	`BEGIN; INSERT INTO evolve VALUES (6, 'kept'); SAVEPOINT s; INSERT INTO evolve VALUES (7, 'rolled back'); ROLLBACK TO s; INSERT INTO evolve VALUES (8, 'kept too'); COMMIT`,
	// Transactions replayed from another node carry an origin.
	`SELECT pg_replication_origin_session_setup('node_a')`,
	`BEGIN; SELECT pg_replication_origin_xact_setup('0/ABCDEF', '2026-01-02 03:04:05+00'); INSERT INTO evolve VALUES (11, 'from node_a'); COMMIT`,
	// A transaction big enough to be streamed under 64kB of
	// logical_decoding_work_mem, with a subtransaction rolled back after it
	// was streamed, DDL in the middle, and other transactions committing
	// while it runs.
	`BEGIN`,
	`INSERT INTO bulk SELECT i, 'row ' || i FROM generate_series(1, 700) i`,
	`B:INSERT INTO evolve VALUES (9, 'interleaved')`,
	`SAVEPOINT a`,
	`INSERT INTO bulk SELECT i, 'doomed ' || i FROM generate_series(1001, 1700) i`,
	`B:SELECT pg_logical_emit_message(false, 'app', 'while streaming')`,
	`ROLLBACK TO a`,
	`SELECT pg_logical_emit_message(true, 'freshet_hb', '4 1767323048000000')`,
	`ALTER TABLE bulk ADD COLUMN extra int DEFAULT 0`,
	`INSERT INTO bulk SELECT i, 'late ' || i, i FROM generate_series(2001, 2400) i`,
	`SAVEPOINT b`,
	`UPDATE bulk SET v = 'updated' WHERE id <= 300`,
	`RELEASE b`,
	`DELETE FROM bulk WHERE id > 2300`,
	`COMMIT`,
	`SELECT pg_replication_origin_session_reset()`,
	// A streamed transaction that aborts as a whole.
	`BEGIN`,
	`INSERT INTO bulk SELECT i, 'aborted ' || i FROM generate_series(5001, 6000) i`,
	`ROLLBACK`,
	`INSERT INTO evolve VALUES (10, 'after')`,
}

func TestDecodeDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	db := pgtest.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if _, err := a.Exec(ctx, decodeSchema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	for _, slot := range []string{"d1", "d2", "d3"} {
		if _, err := a.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
			t.Fatalf("create slot %s: %v", slot, err)
		}
	}
	for _, stmt := range decodeWorkload {
		conn := a
		if len(stmt) > 2 && stmt[:2] == "B:" {
			conn, stmt = b, stmt[2:]
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	for _, tc := range []struct {
		name  string
		proto int
		slot  string
		args  string
		save  bool // keep as testdata/pgoutput-<name>.rec
	}{
		{"v1", 1, "d1", `'proto_version', '1', 'publication_names', 'pub', 'messages', 'true'`, true},
		{"v2", 2, "d2", `'proto_version', '2', 'publication_names', 'pub', 'messages', 'true', 'streaming', 'on'`, true},
		{"v1-binary", 1, "d3", `'proto_version', '1', 'publication_names', 'pub', 'messages', 'true', 'binary', 'true'`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The SQL slot functions read logical_decoding_work_mem from
			// the session: 64kB makes the big transaction stream.
			if _, err := a.Exec(ctx, `SET logical_decoding_work_mem = '64kB'`); err != nil {
				t.Fatal(err)
			}
			rows, err := a.Query(ctx, fmt.Sprintf(`SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('%s', NULL, NULL, %s)`, tc.slot, tc.args))
			if err != nil {
				t.Fatal(err)
			}
			var msgs []recMsg
			kinds := map[byte]int{}
			for rows.Next() {
				var lsn string
				var data []byte
				if err := rows.Scan(&lsn, &data); err != nil {
					t.Fatal(err)
				}
				l, err := change.ParseLSN(lsn)
				if err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, recMsg{LSN: l, Data: data})
				if len(data) > 0 {
					kinds[data[0]]++
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			// The recording must hold what the workload is for.
			want := "BCORIUDTMY"
			if tc.proto == 2 {
				want += "SEcA"
			}
			for _, k := range []byte(want) {
				if kinds[k] == 0 {
					t.Errorf("recording has no %q message (have %v)", k, kinds)
				}
			}
			evs := compareDecoders(t, msgs, recordingOpts(tc.proto, t.TempDir()))
			if len(evs) == 0 {
				t.Fatal("no events decoded")
			}
			if tc.name == "v1-binary" {
				binary := 0
				for _, ev := range evs {
					if tx, ok := ev.(*change.Txn); ok {
						for _, c := range tx.Changes {
							for _, v := range c.New {
								if v.Kind == change.Binary {
									binary++
								}
							}
						}
					}
				}
				if binary == 0 {
					t.Error("binary mode decoded no Binary values")
				}
			}
			if *rewriteDecode && tc.save {
				path := filepath.Join("testdata", "pgoutput-"+tc.name+".rec")
				if err := writeRecording(path, msgs); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %s (%d messages); run TestDecodeRecordings -rewrite-decode to refresh its golden file", path, len(msgs))
			}
		})
	}
}
