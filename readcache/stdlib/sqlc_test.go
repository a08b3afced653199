package stdlib_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/prometheus/client_golang/prometheus"
)

// sqlcQueries is written the way sqlc writes database/sql code.
type sqlcQueries struct{ db *sql.DB }

type sqlcUser struct {
	ID   int32
	Name string
	Team sql.NullString
}

const sqlcListUsers = `-- name: ListUsers :many
SELECT id, name, team FROM users WHERE team = $1 ORDER BY id LIMIT $2`

func (q *sqlcQueries) ListUsers(ctx context.Context, team string, limit int32) ([]sqlcUser, error) {
	rows, err := q.db.QueryContext(ctx, sqlcListUsers, team, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var items []sqlcUser
	for rows.Next() {
		var i sqlcUser
		if err := rows.Scan(&i.ID, &i.Name, &i.Team); err != nil {
			return nil, err
		}
		items = append(items, i)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return items, rows.Err()
}

const sqlcGetUser = `-- name: GetUser :one
SELECT id, name, team FROM users WHERE id = $1`

func (q *sqlcQueries) GetUser(ctx context.Context, id int32) (sqlcUser, error) {
	row := q.db.QueryRowContext(ctx, sqlcGetUser, id)
	var i sqlcUser
	err := row.Scan(&i.ID, &i.Name, &i.Team)
	return i, err
}

func TestSqlcDatabaseSQL(t *testing.T) {
	e := newEnv(t, schema, nil)
	q := &sqlcQueries{db: e.sqlDB}
	ctx := context.Background()
	e.warm(func() error { _, err := q.GetUser(ctx, 9); return err })
	e.hit(func() error { _, err := q.GetUser(ctx, 9); return err })
	var got []sqlcUser
	e.warm(func() error { var err error; got, err = q.ListUsers(ctx, "red", 4); return err })
	want, err := q.ListUsers(readcache.ViaPostgres(ctx), "red", 4)
	if err != nil || !reflect.DeepEqual(got, want) || len(got) != 4 {
		t.Fatalf("cached %+v, want %+v (%v)", got, want, err)
	}
	e.exec("UPDATE users SET team = 'red' WHERE id = 1")
	e.fresh(func() (string, error) {
		us, err := q.ListUsers(ctx, "red", 4)
		if err != nil || len(us) == 0 {
			return "", err
		}
		return fmt.Sprint(us[0].ID), nil
	}, "1")
	// A missing row is sql.ErrNoRows, as from PostgreSQL.
	e.warm(func() error {
		_, err := q.GetUser(ctx, 999)
		if err != sql.ErrNoRows {
			return fmt.Errorf("GetUser(999) error = %v, want sql.ErrNoRows", err)
		}
		return nil
	})

	// The Prometheus collector reports the same counters.
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.conn.Cache().Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			if m.Counter != nil {
				found[name] = m.GetCounter().GetValue()
			} else {
				found[name] = m.GetGauge().GetValue()
			}
		}
	}
	st := e.conn.Cache().Stats()
	if found["freshet_readcache_hits_total"] != float64(st.Hits) || st.Hits == 0 {
		t.Errorf("hits metric = %v, stats say %d", found["freshet_readcache_hits_total"], st.Hits)
	}
	if found["freshet_readcache_postgres_reads_total{route}"] != float64(st.Postgres["route"]) {
		t.Errorf("route metric = %v, stats say %d", found["freshet_readcache_postgres_reads_total{route}"], st.Postgres["route"])
	}
	if found["freshet_readcache_entries"] != float64(st.Entries) || found["freshet_readcache_sockets_connected"] != 2 {
		t.Errorf("gauges = %v", found)
	}
}

// TestReadersUnderWriter: sixteen readers under a steady writer never get
// a value that was already replaced longer ago than the staleness the
// cache told them just before the read (Cache.Staleness; zero when it
// could not tell, and the read then goes to PostgreSQL), nor longer ago
// than MaxLag.
func TestReadersUnderWriter(t *testing.T) {
	const maxLag = time.Second
	e := newEnv(t, "CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL); INSERT INTO counter VALUES (1, 0);",
		func(c *readcache.Config) { c.MaxLag = maxLag })
	ctx := context.Background()
	read := func() (int, error) {
		var n int
		err := e.sqlDB.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = $1", 1).Scan(&n)
		return n, err
	}
	e.warm(func() error { _, err := read(); return err })

	var mu sync.Mutex
	replaced := map[int]time.Time{} // n -> when n+1 had committed (at the latest)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := e.admin.Exec(ctx, "UPDATE counter SET n = $1 WHERE id = 1", n); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			replaced[n-1] = time.Now()
			mu.Unlock()
		}
	}()
	type obs struct {
		start time.Time
		told  time.Duration
		n     int
	}
	cache := e.conn.Cache()
	var wg sync.WaitGroup
	seen := make([][]obs, 16)
	for r := range seen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
				told, _ := cache.Staleness()
				start := time.Now()
				n, err := read()
				if err != nil {
					t.Error(err)
					return
				}
				seen[r] = append(seen[r], obs{start, told, n})
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-done
	hits := e.conn.Cache().Stats().Hits
	var bad []string
	var worst time.Duration
	for _, os := range seen {
		for _, o := range os {
			if at, ok := replaced[o.n]; ok {
				worst = max(worst, o.start.Add(-o.told).Sub(at))
			}
			if o.told > maxLag {
				bad = append(bad, fmt.Sprintf("read at %s was told %s, over MaxLag", o.start.Format("15:04:05.000"), o.told))
			}
			if at, ok := replaced[o.n]; ok && at.Before(o.start.Add(-o.told)) {
				bad = append(bad, fmt.Sprintf("read at %s, told %s, got %d, replaced at %s", o.start.Format("15:04:05.000"), o.told, o.n, at.Format("15:04:05.000")))
			}
		}
	}
	t.Logf("%d cache hits; the oldest was %s past the bound it was told (0: none)", hits, worst)
	if len(bad) > 0 {
		t.Fatalf("%d reads older than they were told, e.g. %s", len(bad), strings.Join(bad[:min(3, len(bad))], "; "))
	}
	if hits < 20 {
		t.Fatalf("only %d reads were served from the cache: the check proves little", hits)
	}
}
