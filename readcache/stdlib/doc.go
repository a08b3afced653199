// Package stdlib is a database/sql driver that serves reads from Freshet's
// read cache (package readcache) and everything else from PostgreSQL
// through pgx's own database/sql driver.
package stdlib
