package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/tenancy"
)

// Entitlements is a tenancy.Entitlements on PostgreSQL: every replica reads the plans from
// one table, rota_plans, one row per tenant set with SetPlan. A plan is any name
// tenancy.PlanID.Valid accepts — the host's own plans, stored byte for byte. A tenant
// without a row is on tenancy.PlanFree, exactly as with tenancy.MemoryEntitlements, so a
// host only writes the tenants that pay. Plan and SetPlan are one round trip each and touch
// only the Context's row.
type Entitlements struct {
	pool *pgxpool.Pool
}

var _ tenancy.Entitlements = (*Entitlements)(nil)

// NewEntitlements returns the Entitlements over pool's schema, which Migrate must have
// created.
func NewEntitlements(pool *pgxpool.Pool) *Entitlements {
	return &Entitlements{pool: pool}
}

// SetPlan puts the tenant on plan p. It refuses the zero Context (tenancy.ErrNoTenant), a
// done ctx and a plan that is not Valid (tenancy.ErrInvalidPlan, with the error of
// tenancy.PlanID.Check) before anything is sent.
// Setting tenancy.PlanFree stores it like any plan; Plan answers the same either way.
func (x *Entitlements) SetPlan(ctx context.Context, tc tenancy.Context, p tenancy.PlanID) error {
	if err := checkTenant(ctx, tc); err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return err
	}
	_, err := x.pool.Exec(ctx, `
		INSERT INTO rota_plans (user_id, plan) VALUES ($1, $2)
		ON CONFLICT (user_id) DO UPDATE SET plan = EXCLUDED.plan`, tc.UserID(), string(p))
	return interpretTenancy(ctx, "Entitlements.SetPlan", err)
}

// Plan implements [tenancy.Entitlements]: the plan SetPlan last set for the tenant, or
// tenancy.PlanFree if it never was.
func (x *Entitlements) Plan(ctx context.Context, tc tenancy.Context) (tenancy.PlanID, error) {
	if err := checkTenant(ctx, tc); err != nil {
		return "", err
	}
	var p string
	err := x.pool.QueryRow(ctx, `SELECT plan FROM rota_plans WHERE user_id = $1`, tc.UserID()).Scan(&p)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return tenancy.PlanFree, nil
	case err != nil:
		return "", interpretTenancy(ctx, "Entitlements.Plan", err)
	}
	return tenancy.PlanID(p), nil
}
