// Package readcache serves a Go backend's SQL reads from Freshet: answers
// held in memory and kept fresh by `freshet serve`, with PostgreSQL as the
// fallback whenever the cache cannot be trusted.
//
// Most programs use it through an adapter, not directly:
//
//   - readcache/stdlib is a database/sql driver wrapping pgx's stdlib
//     driver, so GORM, sqlx, sqlc's database/sql output, bun and ent work
//     unchanged;
//   - readcache/pgxcache wraps a *pgxpool.Pool with the same Query,
//     QueryRow and Exec methods, for code on pgx (sqlc's pgx output).
//
// See the package documentation of readcache/stdlib for the full story.
package readcache
