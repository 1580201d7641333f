package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
)

// ErrInvalidSchema is returned by Open for a schema name it refuses: empty, longer than
// PostgreSQL keeps (63 bytes), not valid UTF-8, holding a control character, or beginning
// with "pg_", which PostgreSQL reserves.
var ErrInvalidSchema = errors.New("postgres: invalid schema name")

// maxIdentifier is the longest identifier PostgreSQL keeps, in bytes; it cuts longer ones
// silently, so that two long names could meet.
const maxIdentifier = 63

// Open returns a pool whose connections work in schema, with rota's tables migrated there:
// it parses url (a postgres:// URL or key=value string, pool settings such as
// pool_max_conns included), sets every connection's search_path to schema alone, connects
// and pings, creates the schema if it does not exist, and runs Migrate. It is what most
// services want at start-up, on every replica:
//
//	pool, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), "rota")
//	if err != nil { ... }
//	defer pool.Close()
//
// schema is a name used exactly as given, quoted, so "Rota" and "rota" are two schemas; a
// search_path in url is replaced. Open costs a few round trips. An error names the step that
// failed, and Open closes what it opened; a bad schema name is ErrInvalidSchema before
// anything is sent. Several processes may Open one schema at once: they create and migrate
// it once, under Migrate's lock.
func Open(ctx context.Context, url, schema string) (*pgxpool.Pool, error) {
	if err := checkSchema(schema); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: Open: parsing the URL: %w", err)
	}
	quoted := pgx.Identifier{schema}.Sanitize()
	cfg.ConnConfig.RuntimeParams["search_path"] = quoted
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, interpret(ctx, "Open: connecting", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, interpret(ctx, "Open: connecting", err)
	}
	if err := createSchema(ctx, pool, schema, quoted); err != nil {
		pool.Close()
		return nil, interpret(ctx, fmt.Sprintf("Open: creating schema %s", quoted), err)
	}
	if err := migrate(ctx, pool, migrations); err != nil {
		pool.Close()
		return nil, interpret(ctx, fmt.Sprintf("Open: migrating schema %s", quoted), err)
	}
	return pool, nil
}

// checkSchema refuses a schema name Open cannot use as it is.
func checkSchema(schema string) error {
	switch {
	case schema == "":
		return fmt.Errorf("%w: it is empty", ErrInvalidSchema)
	case len(schema) > maxIdentifier:
		return fmt.Errorf("%w: %q is %d bytes, longer than PostgreSQL's %d", ErrInvalidSchema, schema, len(schema), maxIdentifier)
	case !utf8.ValidString(schema):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidSchema, schema)
	case strings.HasPrefix(schema, "pg_"):
		return fmt.Errorf("%w: %q begins with pg_, which PostgreSQL reserves for its own schemas", ErrInvalidSchema, schema)
	}
	if i := strings.IndexFunc(schema, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(schema[i:])
		return fmt.Errorf("%w: %q contains control character %U", ErrInvalidSchema, schema, r)
	}
	return nil
}

// createSchema creates the schema unless it exists, under the advisory lock Migrate takes
// for it, so that concurrent Opens do not race in CREATE SCHEMA; a role that may not
// create schemas can still open one that exists.
func createSchema(ctx context.Context, pool *pgxpool.Pool, schema, quoted string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, migrateLockKey, schema); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		_, err := tx.Exec(ctx, "CREATE SCHEMA "+quoted)
		return err
	})
}

// DefaultLeaseName is the name OpenStores gives the maintenance Lease when
// StoresConfig.LeaseName is "".
const DefaultLeaseName = "heavy"

// StoresConfig is what OpenStores needs besides the URL and the schema. The zero value is
// ready to use: a Lease named DefaultLeaseName with maintenance.DefaultMaxHold, which is
// also what a zero maintenance.Config.MaxHold means.
type StoresConfig struct {
	// LeaseName names the maintenance Lease (DefaultLeaseName when ""): one row of
	// rota_leases, which every daemon of a fleet must name alike. A name that is not a
	// valid name (see Names and times in package maintenance) is refused.
	LeaseName string
	// MaxHold is the Lease's maxHold (maintenance.DefaultMaxHold when 0): no grant is
	// renewed once held that long. Give maintenance.Config.MaxHold the same value, on every
	// daemon. A negative MaxHold is refused.
	MaxHold time.Duration
}

// Stores are the PostgreSQL stores of one schema over one pool, as OpenStores builds them.
// A service hands them to the core: the Index to dispatch.New and the Bridge, the
// Watchlist to the Bridge, the Entitlements to bridge.PlanLanes and bridge.PlanLimits, the
// Lease and the StateStore to maintenance.Config.
type Stores struct {
	// Pool is the pool every store uses, in the schema OpenStores was given; the host may
	// use it for its own tables.
	Pool         *pgxpool.Pool
	Index        *Index
	Watchlist    *Watchlist
	Entitlements *Entitlements
	Lease        *Lease
	StateStore   *StateStore
}

// OpenStores is Open followed by the five constructors over its pool: the Index, the
// Watchlist, the Entitlements, the Lease named cfg.LeaseName with cfg.MaxHold, and the
// StateStore. It is what a service calls at start-up, on every replica:
//
//	st, err := postgres.OpenStores(ctx, os.Getenv("DATABASE_URL"), "rota", postgres.StoresConfig{})
//	if err != nil { ... }
//	defer st.Close()
//
// A cfg it refuses is an error wrapping maintenance.ErrInvalid, naming the field, before
// anything is sent; every other error is Open's, and then nothing stays open. It costs what
// Open costs: the constructors send nothing.
func OpenStores(ctx context.Context, url, schema string, cfg StoresConfig) (*Stores, error) {
	if cfg.LeaseName == "" {
		cfg.LeaseName = DefaultLeaseName
	}
	switch {
	case cfg.MaxHold < 0:
		return nil, fmt.Errorf("postgres: OpenStores: %w: StoresConfig.MaxHold %v is negative", maintenance.ErrInvalid, cfg.MaxHold)
	case cfg.MaxHold == 0:
		cfg.MaxHold = maintenance.DefaultMaxHold
	}
	if err := vocab.Name(maintenance.ErrInvalid, "StoresConfig.LeaseName", cfg.LeaseName); err != nil {
		return nil, fmt.Errorf("postgres: OpenStores: %w", err)
	}
	pool, err := Open(ctx, url, schema)
	if err != nil {
		return nil, err
	}
	return &Stores{
		Pool:         pool,
		Index:        NewIndex(pool),
		Watchlist:    NewWatchlist(pool),
		Entitlements: NewEntitlements(pool),
		Lease:        NewLease(pool, cfg.LeaseName, cfg.MaxHold),
		StateStore:   NewStateStore(pool),
	}, nil
}

// Close closes the pool, waiting for the connections in use to be returned; every store's
// calls fail after it. Closing twice is harmless.
func (s *Stores) Close() {
	s.Pool.Close()
}
