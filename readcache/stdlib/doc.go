// Package stdlib is a database/sql driver that serves reads from Freshet's
// read cache (package readcache) and everything else from PostgreSQL
// through pgx's own database/sql driver (github.com/jackc/pgx/v5/stdlib),
// which it wraps. Every library built on database/sql works unchanged.
//
// Open it from code:
//
//	cfg := readcache.DefaultConfig()
//	cfg.URL = "ws://localhost:7070/s2s/v1"
//	db, err := stdlib.Open("postgres://app@localhost/app", cfg)
//
// or from the environment (FRESHET_URL, FRESHET_TOKEN and the settings of
// readcache.ConfigFromEnv), under the driver name "freshet":
//
//	db, err := sql.Open("freshet", "postgres://app@localhost/app")
//
// Without FRESHET_URL every read goes to PostgreSQL, so the same binary
// runs with and without Freshet.
//
// GORM takes the *sql.DB through its postgres driver
// (postgres.New(postgres.Config{Conn: db})), sqlx through
// sqlx.NewDb(db, "pgx"), bun through bun.NewDB(db, pgdialect.New()).
//
// Reads served from the cache are decoded by pgx's codecs from the text
// form into exactly the driver values pgx's driver returns for a live read
// (int64, float64, bool, []byte, string, time.Time in the same location),
// with the same column names and ColumnTypeDatabaseTypeName and
// ColumnTypeScanType. CacheOf(db) returns the cache behind a *sql.DB.
package stdlib
