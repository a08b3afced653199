package main

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/freshetdb/freshet/ticketdesk"
	"gorm.io/gorm"
)

// migration is a schema change the demo runs under load. The engine
// treats each kind differently: a wider type re-types the rows it holds,
// a new type must be learned from the stream, a dropped column or table
// must end (or re-hydrate) the subscriptions that name it.
type migration struct {
	what string
	// setup runs before the load: objects the change then alters or drops.
	setup []string
	// extra are lookups of the setup's (or the change's) objects, added to
	// the desk's; extraOn says whether they are read from the start
	// (otherwise only after the change).
	extra   []ticketdesk.Lookup
	extraOn bool
	// watch are lookups that must be served from memory before the change,
	// so that the change meets live subscriptions.
	watch []string
	// change is the schema change, run under load.
	change []string
	// gone are extra lookups whose objects the change drops: afterwards
	// they must fail through the cache exactly as through PostgreSQL.
	gone []string
	// use, when set, starts using what the change made, under load.
	use func(ctx context.Context, db *gorm.DB, r *rand.Rand) error
}

// migrations are the kinds `freshet demo migrate` runs.
var migrations = map[string]migration{
	"widen": {
		what: "widen two columns in place: tickets.priority int -> bigint (the table is rewritten) and users.name varchar(200) -> text (binary-compatible, no rewrite)",
		setup: []string{
			"ALTER TABLE tickets ALTER COLUMN priority TYPE int",
			"ALTER TABLE users ALTER COLUMN name TYPE varchar(200)",
		},
		watch: []string{"blocked_or_urgent", "org_page", "assigned_with_user", "user_by_email"},
		change: []string{
			"ALTER TABLE tickets ALTER COLUMN priority TYPE bigint",
			"ALTER TABLE users ALTER COLUMN name TYPE text",
		},
	},
	"new-type": {
		what: "create an enum type, add a column of it to tickets, and start setting it",
		setup: []string{
			"DROP TYPE IF EXISTS ticket_mood CASCADE",
		},
		watch: []string{"ticket_by_id", "org_page"},
		change: []string{
			"CREATE TYPE ticket_mood AS ENUM ('calm', 'annoyed', 'furious')",
			"ALTER TABLE tickets ADD COLUMN mood ticket_mood",
		},
		extra: []ticketdesk.Lookup{
			{
				Name: "mood_of", Why: "a column of a type made after the engine started",
				Args: randomTicket,
				Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
					return rows[moodRow](db.WithContext(ctx).Table("tickets").Select("id, mood").Where("id = ?", a[0]))
				},
			},
			{
				Name: "moody", Why: "a filter on the new enum column",
				Args: func(r *rand.Rand, w *ticketdesk.World) []any {
					return []any{w.Orgs[r.Intn(len(w.Orgs))], moods[r.Intn(len(moods))]}
				},
				Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
					return rows[moodRow](db.WithContext(ctx).Table("tickets").Select("id, mood").
						Where("org_id = ? AND mood = ?", a[0], a[1]).Order("id"))
				},
			},
		},
		use: func(ctx context.Context, db *gorm.DB, r *rand.Rand) error {
			return db.WithContext(ctx).Exec("UPDATE tickets SET mood = ? WHERE id IN (SELECT id FROM tickets ORDER BY random() LIMIT 3)",
				moods[r.Intn(len(moods))]).Error
		},
	},
	"drop": {
		what: "drop a column (tickets.legacy_ref) and a table (ticket_archive) that lookups name, while they are cached",
		setup: []string{
			"ALTER TABLE tickets ADD COLUMN IF NOT EXISTS legacy_ref text",
			"UPDATE tickets SET legacy_ref = 'LEG-' || id WHERE legacy_ref IS NULL",
			"CREATE TABLE IF NOT EXISTS ticket_archive (ticket_id bigint PRIMARY KEY, note text NOT NULL)",
			"INSERT INTO ticket_archive SELECT id, 'archived #' || id FROM tickets WHERE id % 3 = 0 ON CONFLICT DO NOTHING",
		},
		extraOn: true,
		extra: []ticketdesk.Lookup{
			{
				Name: "legacy_ref_of", Why: "names a column the migration drops",
				Args: randomTicket,
				Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
					return rows[legacyRow](db.WithContext(ctx).Table("tickets").Select("id, legacy_ref").Where("id = ?", a[0]))
				},
			},
			{
				Name: "archived", Why: "reads a table the migration drops",
				Args: randomTicket,
				Run: func(ctx context.Context, db *gorm.DB, a []any) (any, error) {
					return rows[archiveRow](db.WithContext(ctx).Table("ticket_archive").Where("ticket_id = ?", a[0]))
				},
			},
		},
		watch:  []string{"legacy_ref_of", "archived", "ticket_by_id"},
		change: []string{"ALTER TABLE tickets DROP COLUMN legacy_ref", "DROP TABLE ticket_archive"},
		gone:   []string{"legacy_ref_of", "archived"},
	},
}

var moods = []string{"calm", "annoyed", "furious"}

type moodRow struct {
	ID   int64   `json:"id"`
	Mood *string `json:"mood"`
}

type legacyRow struct {
	ID        int64   `json:"id"`
	LegacyRef *string `json:"legacy_ref"`
}

type archiveRow struct {
	TicketID int64  `json:"ticket_id"`
	Note     string `json:"note"`
}

// rows runs a GORM query into a slice (never nil, so no rows is []).
func rows[T any](tx *gorm.DB) (any, error) {
	out := []T{}
	if err := tx.Find(&out).Error; err != nil {
		return nil, err
	}
	return out, nil
}

// randomTicket draws a ticket id among the seeded ones.
func randomTicket(r *rand.Rand, w *ticketdesk.World) []any { return []any{1 + r.Int63n(w.MaxTicketID)} }

// migrateResult is what a migration found.
type migrateResult struct {
	Kind        string
	Before      int                       // verifier passes before the change
	After       int                       // verifier passes after it
	Checkpoints int                       // exact checkpoints, one before the change and one after (their mismatches are in Mismatches)
	Mismatches  []ticketdesk.Mismatch     // over every pass, and the gone checks
	WatchBefore map[string]int            // watched lookups' cached reads served from memory before the change
	WatchAfter  map[string]int            // and after
	RoutesAfter map[string]map[string]int // how the watched lookups' cached reads were routed after the change
	GoneRoutes  map[string]string         // how each gone lookup's cached read ended: "error like PostgreSQL" or the wrong answer
}

// runMigration runs one kind of schema change on st under load: the load
// runs cfg.Load, the verifier must agree, the change runs, the load runs
// cfg.Load again with the verifier running pass after pass.
func (m *Main) runMigration(ctx context.Context, st *demoStack, cfg *demoConfig) (*migrateResult, error) {
	mg := migrations[cfg.Kind]
	res := &migrateResult{Kind: cfg.Kind, WatchBefore: map[string]int{}, WatchAfter: map[string]int{}, GoneRoutes: map[string]string{},
		RoutesAfter: map[string]map[string]int{}}
	for _, q := range mg.setup {
		if err := st.direct.WithContext(ctx).Exec(q).Error; err != nil {
			return nil, fmt.Errorf("migrate %s: set up (%s): %w", cfg.Kind, q, err)
		}
	}
	st.extra, st.extraOn = mg.extra, mg.extraOn
	ld, err := st.startLoad(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer ld.Stop()
	r := rand.New(rand.NewSource(int64(cfg.Seed) + 11))

	// Before: the load runs, the verifier passes until the watched
	// lookups have been served from memory.
	m.say("migrate %s: load for %v (writer %v/s, %d readers), verifying", cfg.Kind, cfg.Load, cfg.Rate, cfg.Readers)
	deadline := time.Now().Add(cfg.Load)
	for time.Now().Before(deadline) || !watched(mg.watch, res.WatchBefore) {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			return res, fmt.Errorf("migrate %s: the watched lookups %v were never served from the cache before the change (served: %v)", cfg.Kind, mg.watch, res.WatchBefore)
		}
		if _, err := passInto(ctx, ld, r, cfg.Settle, res, res.WatchBefore); err != nil {
			return res, err
		}
		res.Before++
	}
	if err := checkpointInto(ctx, ld, r, res); err != nil {
		return res, err
	}
	// The gone lookups' subscriptions, read by a known argument, through
	// the verifier's pool: a cached answer from memory first.
	goneArgs := map[string][]any{}
	for _, name := range mg.gone {
		l := lookupNamed(ld.lookups, name)
		args := l.Args(r, st.world)
		fixed := l
		fixed.Args = func(*rand.Rand, *ticketdesk.World) []any { return args }
		ok := false
		for try := 0; try < 50 && !ok; try++ {
			rep, err := ticketdesk.Verify(ctx, st.verifyDB, st.direct, []ticketdesk.Lookup{fixed}, st.world, r, st.verifyConfig(cfg.Settle))
			if err != nil {
				return res, fmt.Errorf("migrate %s: read %s before the change: %w", cfg.Kind, name, err)
			}
			res.Mismatches = append(res.Mismatches, rep.Mismatches...)
			ok = rep.Lookups[0].Routes[ticketdesk.RouteCache] > 0
		}
		if !ok {
			return res, fmt.Errorf("migrate %s: %s was never served from the cache before the change", cfg.Kind, name)
		}
		goneArgs[name] = args
	}

	m.say("migrate %s: %s", cfg.Kind, mg.what)
	for _, q := range mg.change {
		m.say("migrate %s: %s", cfg.Kind, q)
		if err := st.direct.WithContext(ctx).Exec(q).Error; err != nil {
			return res, fmt.Errorf("migrate %s: %s: %w", cfg.Kind, q, err)
		}
	}
	if mg.gone != nil {
		ld.active.Store(int64(len(ld.lookups) - len(mg.extra)))
	} else {
		ld.active.Store(int64(len(ld.lookups)))
	}
	if mg.use != nil {
		ld.go_(func(ctx context.Context) {
			r := rand.New(rand.NewSource(int64(cfg.Seed) + 13))
			for ctx.Err() == nil {
				if err := mg.use(ctx, st.direct, r); err != nil && ctx.Err() == nil {
					st.log.Warn("migrate: use the new type", "err", err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
	// Gone: the cache must not answer from what it held.
	for _, name := range mg.gone {
		l := lookupNamed(ld.lookups, name)
		res.GoneRoutes[name] = goneCheck(ctx, st, l, goneArgs[name], cfg.Settle, &res.Mismatches)
	}
	// After: the load goes on, the verifier passes again and again.
	m.say("migrate %s: load for %v after the change, verifying", cfg.Kind, cfg.Load)
	deadline = time.Now().Add(cfg.Load)
	for res.After == 0 || time.Now().Before(deadline) {
		rep, err := passInto(ctx, ld, r, cfg.Settle, res, res.WatchAfter)
		if err != nil {
			return res, err
		}
		for _, lr := range rep.Lookups {
			if slices.Contains(mg.watch, lr.Name) {
				if res.RoutesAfter[lr.Name] == nil {
					res.RoutesAfter[lr.Name] = map[string]int{}
				}
				for k, n := range lr.Routes {
					res.RoutesAfter[lr.Name][k] += n
				}
			}
		}
		res.After++
	}
	if err := checkpointInto(ctx, ld, r, res); err != nil {
		return res, err
	}
	return res, nil
}

// checkpointInto runs one exact checkpoint (the writer paused) and adds
// what it found to res.
func checkpointInto(ctx context.Context, ld *demoLoad, r *rand.Rand, res *migrateResult) error {
	rep, err := ld.CheckpointOnce(ctx, r)
	if err != nil {
		return fmt.Errorf("migrate %s: checkpoint: %w", res.Kind, err)
	}
	res.Checkpoints++
	res.Mismatches = append(res.Mismatches, rep.Mismatches...)
	return nil
}

// passInto runs one verifier pass and adds what it found to res; watch
// counts the cached reads served from memory by lookup.
func passInto(ctx context.Context, ld *demoLoad, r *rand.Rand, settle time.Duration, res *migrateResult, watch map[string]int) (ticketdesk.VerifyReport, error) {
	rep, err := ld.VerifyOnce(ctx, r, settle)
	if err != nil {
		return rep, fmt.Errorf("migrate: verify: %w", err)
	}
	res.Mismatches = append(res.Mismatches, rep.Mismatches...)
	for _, lr := range rep.Lookups {
		watch[lr.Name] += lr.Routes[ticketdesk.RouteCache]
	}
	return rep, nil
}

func watched(names []string, served map[string]int) bool {
	for _, n := range names {
		if served[n] == 0 {
			return false
		}
	}
	return true
}

func lookupNamed(ls []ticketdesk.Lookup, name string) ticketdesk.Lookup {
	i := slices.IndexFunc(ls, func(l ticketdesk.Lookup) bool { return l.Name == name })
	return ls[i]
}

// goneCheck reads a lookup whose column or table was dropped, through the
// pool that held it in memory and through PostgreSQL, until both fail
// alike or settle runs out; a cached answer where PostgreSQL fails is a
// mismatch.
func goneCheck(ctx context.Context, st *demoStack, l ticketdesk.Lookup, args []any, settle time.Duration, mms *[]ticketdesk.Mismatch) string {
	deadline := time.Now().Add(settle)
	for {
		c, cerr := l.Run(ctx, st.verifyDB, args)
		_, derr := l.Run(ctx, st.direct, args)
		if derr != nil && cerr != nil && sqlState(cerr) == sqlState(derr) {
			return "failed like PostgreSQL: " + sqlState(derr)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			mm := ticketdesk.Mismatch{Lookup: l.Name, Args: args, Kind: "answer", Cached: c, Direct: errText(derr),
				Detail: fmt.Sprintf("after the change the cache answered %v (error %v) where PostgreSQL failed (%v)", c != nil, cerr, derr)}
			*mms = append(*mms, mm)
			return "answered from memory: " + jsonText(c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func errText(err error) any {
	if err == nil {
		return nil
	}
	return "error: " + err.Error()
}

// sqlState returns the SQLSTATE in an error's text, or its text.
func sqlState(err error) string {
	s := err.Error()
	if i := strings.Index(s, "SQLSTATE "); i >= 0 {
		return strings.TrimRight(s[i+len("SQLSTATE "):], ")")
	}
	return s
}

// demoMigrate implements `freshet demo migrate widen|new-type|drop`.
func (m *Main) demoMigrate(ctx context.Context, cfg *demoConfig) error {
	st, err := m.openStack(ctx, cfg)
	if err != nil {
		return quiet(ctx, err)
	}
	defer st.Close()
	res, err := m.runMigration(ctx, st, cfg)
	if err != nil {
		return quiet(ctx, err)
	}
	fmt.Fprintf(m.Stdout, "migrate %s: %d verifier passes before the change, %d after, %d exact checkpoints; lookups served from memory before %v, after %v\n",
		res.Kind, res.Before, res.After, res.Checkpoints, pick(res.WatchBefore, migrations[res.Kind].watch), pick(res.WatchAfter, migrations[res.Kind].watch))
	for name, routes := range res.RoutesAfter {
		fmt.Fprintf(m.Stdout, "  %s after the change: %s\n", name, routeNames(routes))
	}
	for name, how := range res.GoneRoutes {
		fmt.Fprintf(m.Stdout, "  %s after the drop: %s\n", name, how)
	}
	for _, mm := range res.Mismatches {
		fmt.Fprintln(m.Stdout, formatMismatch(mm))
	}
	if len(res.Mismatches) > 0 {
		return fmt.Errorf("migrate %s: %d mismatches between the cache and PostgreSQL", res.Kind, len(res.Mismatches))
	}
	fmt.Fprintf(m.Stdout, "migrate %s: 0 mismatches\n", res.Kind)
	return nil
}

// pick returns m's entries for names.
func pick(m map[string]int, names []string) map[string]int {
	out := map[string]int{}
	for _, n := range names {
		out[n] = m[n]
	}
	return out
}
