package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

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

// SetPlans puts each tenant of plans, by user ID, on its plan, in one statement: SetPlan
// for many tenants, the seeding of a service. It refuses a done ctx, an invalid user ID
// (tenancy.ErrInvalidID) and a plan that is not Valid (tenancy.ErrInvalidPlan), naming the
// tenant, before anything is sent, and then writes all of them or none. Rows are written
// in user ID order, so that concurrent calls lock them in one order.
func (x *Entitlements) SetPlans(ctx context.Context, plans map[string]tenancy.PlanID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	users := slices.Sorted(maps.Keys(plans))
	names := make([]string, len(users))
	for i, u := range users {
		if err := tenancy.ValidateID("user ID", u); err != nil {
			return err
		}
		if err := plans[u].Check(); err != nil {
			return fmt.Errorf("tenant %q: %w", u, err)
		}
		names[i] = string(plans[u])
	}
	if len(users) == 0 {
		return nil
	}
	_, err := x.pool.Exec(ctx, `
		INSERT INTO rota_plans (user_id, plan)
		SELECT k.user_id, k.plan FROM unnest($1::text[], $2::text[]) AS k(user_id, plan) ORDER BY k.user_id
		ON CONFLICT (user_id) DO UPDATE SET plan = EXCLUDED.plan`, users, names)
	return interpretTenancy(ctx, "Entitlements.SetPlans", err)
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
