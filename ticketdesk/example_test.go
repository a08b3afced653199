package ticketdesk_test

import (
	"context"
	"database/sql"
	"log"
	"log/slog"
	"math/rand"
	"net/http"
	"time"

	"github.com/freshetdb/freshet/readcache"
	"github.com/freshetdb/freshet/readcache/stdlib"
	"github.com/freshetdb/freshet/ticketdesk"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// The desk as the demo runs it: a direct pool for the seed and the
// writer, a cached pool for the handlers, a cached pool of its own for
// the verifier (its routes are observed by its counters, its refusal
// codes by a RefusalLog). `freshet serve --row-limit 2000` follows the
// database at ws://localhost:7070.
func Example() {
	ctx := context.Background()
	dsn := "postgres://postgres@localhost/desk"
	direct, err := sql.Open("pgx", dsn)
	if err != nil {
		log.Fatal(err)
	}
	if err := ticketdesk.CreateSchema(ctx, direct); err != nil {
		log.Fatal(err)
	}
	if err := ticketdesk.Seed(ctx, direct, 1); err != nil {
		log.Fatal(err)
	}
	world, err := ticketdesk.LoadWorld(ctx, direct)
	if err != nil {
		log.Fatal(err)
	}

	open := func(logger *slog.Logger) *gorm.DB {
		cfg := readcache.DefaultConfig()
		cfg.URL, cfg.Logger = "ws://localhost:7070", logger
		db, err := stdlib.Open(dsn, cfg)
		if err != nil {
			log.Fatal(err)
		}
		g, err := gorm.Open(postgres.New(postgres.Config{Conn: db}), &gorm.Config{})
		if err != nil {
			log.Fatal(err)
		}
		return g
	}
	go http.ListenAndServe(":8080", ticketdesk.NewHandler(open(slog.Default())))

	writer := ticketdesk.NewWriter(direct, world, ticketdesk.WriterConfig{Rate: 100, Workers: 2})
	go writer.Run(ctx)

	refusals := ticketdesk.NewRefusalLog(slog.Default().Handler())
	verifier := open(slog.New(refusals))
	r := rand.New(rand.NewSource(1))
	for range time.Tick(time.Second) {
		rep, err := ticketdesk.Verify(ctx, verifier, nil, ticketdesk.Lookups(), world, r,
			ticketdesk.VerifyConfig{RefusalCode: refusals.Code})
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("compared %d, mismatches %d, writer %+v", rep.Compared, len(rep.Mismatches), writer.Stats())
	}
}
