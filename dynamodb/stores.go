package rotadynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/maintenance"
)

// ErrInvalidConfig is returned by OpenStores for a StoresConfig it refuses, or a table
// name DynamoDB would refuse.
var ErrInvalidConfig = errors.New("rotadynamo: invalid config")

// DefaultLeaseName is the name OpenStores gives the maintenance Lease when
// StoresConfig.LeaseName is "".
const DefaultLeaseName = "heavy"

// MaxBuckets is the most buckets a table may spread each group's queue over.
const MaxBuckets = 256

// StoresConfig is what OpenStores needs besides the client and the table. The zero value is
// ready to use: one bucket, a Lease named DefaultLeaseName with maintenance.DefaultMaxHold.
type StoresConfig struct {
	// Buckets is how many buckets each group's turn queue (and the due-time, paused and
	// tenants lists) is spread over, in [1, MaxBuckets] (0 means 1): one per 250 users a
	// lane serves a second at its peak (the module's README says why). Every process
	// sharing a table must give the same; the first OpenStores records it in the table
	// and later ones refuse another.
	Buckets int
	// LeaseName names the maintenance Lease (DefaultLeaseName when ""), which every
	// daemon of a fleet must name alike. A name that is not a valid name is refused.
	LeaseName string
	// MaxHold is the Lease's maxHold (maintenance.DefaultMaxHold when 0): no grant is
	// renewed once held that long. Give maintenance.Config.MaxHold the same value.
	MaxHold time.Duration
}

func (c *StoresConfig) withDefaults() {
	if c.Buckets == 0 {
		c.Buckets = 1
	}
	if c.LeaseName == "" {
		c.LeaseName = DefaultLeaseName
	}
	if c.MaxHold == 0 {
		c.MaxHold = maintenance.DefaultMaxHold
	}
}

func (c StoresConfig) validate() error {
	var errs []error
	if c.Buckets < 1 || c.Buckets > MaxBuckets {
		errs = append(errs, fmt.Errorf("%w: StoresConfig.Buckets must be in [1, %d], got %d", ErrInvalidConfig, MaxBuckets, c.Buckets))
	}
	if p := vocab.Problem("StoresConfig.LeaseName", c.LeaseName); p != "" {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidConfig, p))
	}
	if c.MaxHold < 0 {
		errs = append(errs, fmt.Errorf("%w: StoresConfig.MaxHold must not be negative, got %v", ErrInvalidConfig, c.MaxHold))
	}
	return errors.Join(errs...)
}

// Stores are the five stores of one table, as OpenStores builds them. A service hands them
// to the core: the Index to dispatch.New and the Bridge, the Watchlist to the Bridge, the
// Entitlements to bridge.PlanLanes and bridge.PlanLimits, the Lease and the StateStore to
// maintenance.Config.
type Stores struct {
	Index        *Index
	Watchlist    *Watchlist
	Entitlements *Entitlements
	Lease        *Lease
	StateStore   *StateStore

	m *meter
}

// Capacity returns the read and write units the five stores have consumed since
// OpenStores, as DynamoDB reported them call by call (every call asks for them). A
// single-item write refused by its condition reports none and is counted at the one write
// unit DynamoDB bills for it; a cancelled transaction reports none and is not counted.
// Against DynamoDB Local, which reports a total without the read and write split, a call's
// units count as reads or writes by the call.
func (s *Stores) Capacity() Capacity { return s.m.total() }

// OpenStores creates table when it does not exist — on-demand capacity, keyed by strings
// (pk, sk), with the two local and four global secondary indexes the stores read, and
// waits until it is active — or checks the one that exists, and builds the five stores
// over it. It refuses, with ErrTableShape, a table whose keys or indexes are not those, or
// that was opened with another Buckets; a cfg it refuses is ErrInvalidConfig, before
// anything is sent. It is what a service calls at start-up, on every replica:
//
//	st, err := rotadynamo.OpenStores(ctx, dynamodb.NewFromConfig(awsCfg), "rota", rotadynamo.StoresConfig{Buckets: 4})
//
// Several processes may open one table at once: one creates it, the others wait for it.
// Opening an existing table costs a DescribeTable, and a write its condition refuses and a
// read of the table's own item.
func OpenStores(ctx context.Context, client *dynamodb.Client, table string, cfg StoresConfig) (*Stores, error) {
	if client == nil {
		return nil, fmt.Errorf("rotadynamo: OpenStores: %w: nil client", ErrInvalidConfig)
	}
	return openStores(ctx, client, table, cfg)
}

// openStores is OpenStores over any api, for tests that put a wrapper between.
func openStores(ctx context.Context, c api, table string, cfg StoresConfig) (*Stores, error) {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("rotadynamo: OpenStores: %w", err)
	}
	if len(table) < 3 || len(table) > 255 {
		return nil, fmt.Errorf("rotadynamo: OpenStores: %w: table name %q must be 3 to 255 bytes", ErrInvalidConfig, table)
	}
	if err := ensureTable(ctx, c, table); err != nil {
		return nil, fmt.Errorf("rotadynamo: OpenStores: %w", err)
	}
	m := &meter{}
	d := &db{c: c, table: table, m: m}
	if err := claimMeta(ctx, d, cfg.Buckets); err != nil {
		return nil, fmt.Errorf("rotadynamo: OpenStores: %w", err)
	}
	return &Stores{
		Index:        &Index{d: d, buckets: cfg.Buckets},
		Watchlist:    &Watchlist{d: d, buckets: cfg.Buckets},
		Entitlements: &Entitlements{d: d},
		Lease:        &Lease{d: d, name: cfg.LeaseName, maxHold: cfg.MaxHold},
		StateStore:   &StateStore{d: d, lease: cfg.LeaseName},
		m:            m,
	}, nil
}
