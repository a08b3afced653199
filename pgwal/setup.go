package pgwal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/freshetdb/freshet/change"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file checks the server before streaming and creates the publication
// and slot when asked. Every refusal says what to change.

// setupResult is what set-up learned and made.
type setupResult struct {
	ConfirmedFlush change.LSN // the slot's confirmed_flush_lsn (or consistent point when just made)
	CreatedSlot    bool
	CreatedPub     bool
}

// connectNormal opens an ordinary (non-replication) connection with the
// session settings Freshet relies on.
func connectNormal(ctx context.Context, dsn string, params map[string]string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse DSN: %w", err)
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = appName(cfg.RuntimeParams["application_name"])
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Database, err)
	}
	return conn, nil
}

// setup runs the checks and creates what Create asks for. On failure it
// removes whatever it created, so nothing is left half made.
func setup(ctx context.Context, conn *pgx.Conn, cfg *Config, log *slog.Logger) (res setupResult, err error) {
	if err := checkServer(ctx, conn); err != nil {
		return res, err
	}
	defer func() {
		if err != nil {
			undoSetup(conn, cfg, res, log)
			res = setupResult{}
		}
	}()

	// The publication comes first: pgoutput looks it up with the catalog as
	// of each decoded change, so one made after the slot would fail for
	// changes between the two.
	var pubExists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, cfg.Publication).Scan(&pubExists); err != nil {
		return res, fmt.Errorf("look up publication %q: %w", cfg.Publication, err)
	}
	if !pubExists {
		if !cfg.Create {
			return res, fmt.Errorf("publication %q does not exist: pass Create (freshet --create) to make it, or run CREATE PUBLICATION %s FOR ALL TABLES", cfg.Publication, change.QuoteIdent(cfg.Publication))
		}
		if err := createPublication(ctx, conn, cfg); err != nil {
			return res, err
		}
		res.CreatedPub = true
		log.Info("created publication", "publication", cfg.Publication, "tables", tablesOrAll(cfg.Tables))
	}

	slot, found, err := lookupSlot(ctx, conn, cfg.Slot)
	if err != nil {
		return res, err
	}
	if found {
		if err := slot.usable(cfg.Slot, conn.Config().Database); err != nil {
			return res, err
		}
		res.ConfirmedFlush = slot.ConfirmedFlush
	} else {
		if !cfg.Create {
			return res, fmt.Errorf("replication slot %q does not exist: pass Create (freshet --create) to make it", cfg.Slot)
		}
		if err := checkFreeSlot(ctx, conn); err != nil {
			return res, err
		}
		var lsn string
		err := conn.QueryRow(ctx, `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`, cfg.Slot).Scan(&lsn)
		if err != nil {
			return res, explainSlotCreateError(cfg.Slot, err)
		}
		res.CreatedSlot = true
		res.ConfirmedFlush, _ = change.ParseLSN(lsn)
		log.Info("created replication slot", "consistent_point", lsn)
	}
	warnKeyless(ctx, conn, cfg.Publication, log)
	return res, nil
}

func tablesOrAll(t []string) string {
	if len(t) == 0 {
		return "ALL TABLES"
	}
	return strings.Join(t, ", ")
}

// undoSetup drops what a failed set-up created.
func undoSetup(conn *pgx.Conn, cfg *Config, res setupResult, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if res.CreatedSlot {
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, cfg.Slot); err != nil {
			log.Error("could not drop the replication slot made by a failed set-up; drop it by hand", "err", err)
		}
	}
	if res.CreatedPub {
		if _, err := conn.Exec(ctx, `DROP PUBLICATION IF EXISTS `+change.QuoteIdent(cfg.Publication)); err != nil {
			log.Error("could not drop the publication made by a failed set-up; drop it by hand", "publication", cfg.Publication, "err", err)
		}
	}
}

// checkServer checks wal_level and the role's REPLICATION attribute.
func checkServer(ctx context.Context, conn *pgx.Conn) error {
	var walLevel string
	if err := conn.QueryRow(ctx, `SELECT current_setting('wal_level')`).Scan(&walLevel); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if walLevel != "logical" {
		return fmt.Errorf("wal_level is %q, and logical replication needs wal_level = logical: run ALTER SYSTEM SET wal_level = logical and restart PostgreSQL", walLevel)
	}
	var role string
	var repl, super bool
	if err := conn.QueryRow(ctx, `SELECT rolname, rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&role, &repl, &super); err != nil {
		return fmt.Errorf("read role attributes: %w", err)
	}
	if !repl && !super {
		return fmt.Errorf("role %q lacks the REPLICATION attribute: run ALTER ROLE %s REPLICATION as a superuser", role, quoteIdentIfNeeded(role))
	}
	var senders, maxSenders int
	err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'), current_setting('max_wal_senders')::int`).Scan(&senders, &maxSenders)
	if err != nil {
		return fmt.Errorf("count WAL senders: %w", err)
	}
	if senders >= maxSenders {
		return fmt.Errorf("all %d WAL senders (max_wal_senders) are in use: stop an idle replication client or raise max_wal_senders in postgresql.conf and restart PostgreSQL", maxSenders)
	}
	return nil
}

// checkFreeSlot fails when no replication slot is free.
func checkFreeSlot(ctx context.Context, conn *pgx.Conn) error {
	var used, max int
	err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots), current_setting('max_replication_slots')::int`).Scan(&used, &max)
	if err != nil {
		return fmt.Errorf("count replication slots: %w", err)
	}
	if used >= max {
		return errSlotsFull(max)
	}
	return nil
}

func errSlotsFull(max int) error {
	return fmt.Errorf("all %d replication slots (max_replication_slots) are in use: drop an unused one with SELECT pg_drop_replication_slot('name') (see pg_replication_slots), or raise max_replication_slots in postgresql.conf and restart PostgreSQL", max)
}

func explainSlotCreateError(slot string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "53400": // configuration_limit_exceeded
			return fmt.Errorf("create replication slot %q: %w", slot, errSlotsFull(0))
		case "42710": // duplicate_object: made by someone else meanwhile
			return fmt.Errorf("create replication slot %q: it was created by another client meanwhile; start again to reuse it: %w", slot, err)
		}
	}
	return fmt.Errorf("create replication slot %q: %w", slot, err)
}

// createPublication makes the publication: FOR ALL TABLES, or for the
// listed tables.
func createPublication(ctx context.Context, conn *pgx.Conn, cfg *Config) error {
	sql := "CREATE PUBLICATION " + change.QuoteIdent(cfg.Publication)
	if len(cfg.Tables) == 0 {
		sql += " FOR ALL TABLES"
	} else {
		names := make([]string, len(cfg.Tables))
		for i, t := range cfg.Tables {
			names[i] = quoteTableName(t)
		}
		sql += " FOR TABLE " + strings.Join(names, ", ")
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			if strings.Contains(pgErr.Message, "FOR ALL TABLES") {
				return fmt.Errorf("create publication %q: only a superuser can publish ALL TABLES: list the tables (Tables, freshet --table), or have a superuser run %s: %w", cfg.Publication, sql, err)
			}
			return fmt.Errorf("create publication %q: the role does not own the tables (%s): have the tables' owner run %s, or make this role their owner with ALTER TABLE ... OWNER TO: %w", cfg.Publication, pgErr.Message, sql, err)
		}
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			return fmt.Errorf("create publication %q: %s: check Tables: %w", cfg.Publication, pgErr.Message, err)
		}
		return fmt.Errorf("create publication %q: %w", cfg.Publication, err)
	}
	return nil
}

// quoteTableName quotes "schema.table" or "table" for SQL. A name already
// holding quotes is passed through as written.
func quoteTableName(t string) string {
	if strings.Contains(t, `"`) {
		return t
	}
	if s, n, ok := strings.Cut(t, "."); ok {
		return change.QuoteIdent(s) + "." + change.QuoteIdent(n)
	}
	return change.QuoteIdent(t)
}

// slotInfo is a row of pg_replication_slots.
type slotInfo struct {
	Plugin         string
	SlotType       string
	Database       string
	WALStatus      string
	ConfirmedFlush change.LSN
}

func lookupSlot(ctx context.Context, conn *pgx.Conn, name string) (slotInfo, bool, error) {
	var s slotInfo
	var plugin, db, walStatus, flush *string
	err := conn.QueryRow(ctx, `SELECT plugin, slot_type, database, wal_status, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, name).
		Scan(&plugin, &s.SlotType, &db, &walStatus, &flush)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("look up replication slot %q: %w", name, err)
	}
	s.Plugin, s.Database, s.WALStatus = deref(plugin), deref(db), deref(walStatus)
	if flush != nil {
		s.ConfirmedFlush, _ = change.ParseLSN(*flush)
	}
	return s, true, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// usable reports why an existing slot cannot be followed.
func (s slotInfo) usable(name, database string) error {
	switch {
	case s.SlotType != "logical":
		return fmt.Errorf("replication slot %q is a %s slot, not a logical one: choose another slot name", name, s.SlotType)
	case s.Plugin != "pgoutput":
		return fmt.Errorf("replication slot %q uses output plugin %q, not pgoutput: choose another slot name, or drop it with SELECT pg_drop_replication_slot('%s')", name, s.Plugin, name)
	case s.Database != database:
		return fmt.Errorf("replication slot %q belongs to database %q, not %q: choose another slot name", name, s.Database, database)
	case s.WALStatus == "lost":
		return fmt.Errorf("replication slot %q: %w", name, ErrSlotInvalidated)
	}
	return nil
}

// warnKeyless logs a warning for each published table that has no replica
// identity. PostgreSQL 15 refuses UPDATE and DELETE on such a table once it
// is in a publication that publishes them ("cannot update table ... because
// it does not have a replica identity and publishes updates"), so those
// statements fail on the primary rather than stream without a key.
func warnKeyless(ctx context.Context, conn *pgx.Conn, pub string, log *slog.Logger) {
	rows, err := conn.Query(ctx, `
SELECT format('%I.%I', n.nspname, c.relname), c.relreplident::text
FROM pg_publication_tables pt
JOIN pg_namespace n ON n.nspname = pt.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
WHERE pt.pubname = $1 AND (
  c.relreplident = 'n'
  OR (c.relreplident = 'd' AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))
  OR (c.relreplident = 'i' AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident)))
ORDER BY 1`, pub)
	if err != nil {
		log.Warn("could not check published tables for a replica identity", "publication", pub, "err", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var table, ident string
		if err := rows.Scan(&table, &ident); err != nil {
			return
		}
		why := "has no primary key or replica identity index"
		if ident == "n" {
			why = "has REPLICA IDENTITY NOTHING"
		}
		log.Warn("published table "+table+" "+why+": PostgreSQL will refuse UPDATE and DELETE on it while it is published (they carry no key to identify the row); add a primary key, or run ALTER TABLE "+table+" REPLICA IDENTITY FULL (or USING INDEX a unique index)",
			"table", table, "publication", pub)
	}
}
