package ticketdesk

import (
	"context"
	"fmt"
	"sync"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

type sqlSink struct{ sql string }

type sinkKey struct{}

var (
	dryOnce sync.Once
	dryDB   *gorm.DB
	dryErr  error
)

// dry returns a GORM handle in dry-run mode (nothing is sent anywhere)
// whose query and row callbacks record the SQL they built.
func dry() (*gorm.DB, error) {
	dryOnce.Do(func() {
		dryDB, dryErr = gorm.Open(postgres.New(postgres.Config{DSN: "host=/nonexistent"}),
			&gorm.Config{DryRun: true, DisableAutomaticPing: true, Logger: logger.Discard})
		if dryErr != nil {
			return
		}
		record := func(db *gorm.DB) {
			if s, ok := db.Statement.Context.Value(sinkKey{}).(*sqlSink); ok {
				s.sql = db.Statement.SQL.String()
			}
		}
		dryErr = dryDB.Callback().Query().After("gorm:query").Register("ticketdesk:sql", record)
		if dryErr == nil {
			dryErr = dryDB.Callback().Row().After("gorm:row").Register("ticketdesk:sql", record)
		}
	})
	return dryDB, dryErr
}

// SQLOf returns the SQL GORM renders for the lookup with args (with $n
// placeholders, as the read cache and PostgreSQL receive it), without
// running it.
func SQLOf(l Lookup, args []any) (string, error) {
	db, err := dry()
	if err != nil {
		return "", fmt.Errorf("render %s: %w", l.Name, err)
	}
	sink := &sqlSink{}
	if _, err := l.Run(context.WithValue(context.Background(), sinkKey{}, sink), db, args); err != nil {
		return "", fmt.Errorf("render %s: %w", l.Name, err)
	}
	if sink.sql == "" {
		return "", fmt.Errorf("render %s: GORM built no query", l.Name)
	}
	return sink.sql, nil
}
