package rotadynamo

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/tenancy"
)

// Entitlements is a tenancy.Entitlements on the table: a tenant's plan is one item in its
// partition, set with SetPlan; a tenant without one is on tenancy.PlanFree. OpenStores
// builds it; it is safe for concurrent use. Plan is one strongly consistent read, SetPlan
// one write.
type Entitlements struct {
	d *db
}

var _ tenancy.Entitlements = (*Entitlements)(nil)

const attrPlan = "plan"

// SetPlan puts the tenant on plan p. It refuses the zero Context (tenancy.ErrNoTenant), a
// done ctx and a plan that is not Valid (tenancy.ErrInvalidPlan) before anything is sent.
func (x *Entitlements) SetPlan(ctx context.Context, tc tenancy.Context, p tenancy.PlanID) error {
	if err := checkTenant(ctx, tc); err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return err
	}
	m := key(userPK(tc.UserID()), skPlan)
	m[attrPlan] = sv(string(p))
	return interpret(ctx, "Entitlements.SetPlan", x.d.put(ctx, &dynamodb.PutItemInput{Item: m}))
}

// SetPlans puts each tenant of plans, by user ID, on its plan. Every user ID and plan is
// checked first — one refused refuses the call, naming the tenant, and nothing is written
// — then they go in batches of 25 writes, so a call that fails midway (ctx, connection)
// may have written some of them.
func (x *Entitlements) SetPlans(ctx context.Context, plans map[string]tenancy.PlanID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	users := slices.Sorted(maps.Keys(plans))
	reqs := make([]types.WriteRequest, 0, len(users))
	for _, user := range users {
		if err := tenancy.ValidateID("user ID", user); err != nil {
			return err
		}
		if err := plans[user].Check(); err != nil {
			return fmt.Errorf("tenant %q: %w", user, err)
		}
		m := key(userPK(user), skPlan)
		m[attrPlan] = sv(string(plans[user]))
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: m}})
	}
	return interpret(ctx, "Entitlements.SetPlans", x.d.batchWrite(ctx, reqs))
}

// Plan returns the plan SetPlan last set for the tenant, or tenancy.PlanFree if it never
// was.
func (x *Entitlements) Plan(ctx context.Context, tc tenancy.Context) (tenancy.PlanID, error) {
	if err := checkTenant(ctx, tc); err != nil {
		return "", err
	}
	m, err := x.d.get(ctx, key(userPK(tc.UserID()), skPlan), true)
	if err != nil {
		return "", interpret(ctx, "Entitlements.Plan", err)
	}
	if m == nil {
		return tenancy.PlanFree, nil
	}
	return tenancy.PlanID((&item{m: m}).str(attrPlan)), nil
}
