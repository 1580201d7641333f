package tenancy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/rotaworks/rota/internal/vocab"
)

// PlanID names a tenant's plan. The plans are the host's: any name [ValidateID] accepts is
// a plan, such as "team" or "enterprise", and tenancy does not know what one buys (package
// bridge maps plans to dispatch lanes and limits, from tables the host writes).
type PlanID string

// PlanFree is the plan of a tenant never given one (see [Entitlements]). The other plans
// are the host's to name.
const PlanFree PlanID = "free"

// ErrInvalidPlan is returned by SetPlan, of [MemoryEntitlements] and of other Entitlements
// that can be written, for a PlanID that is not Valid.
var ErrInvalidPlan = errors.New("tenancy: invalid plan")

// Check returns nil for a valid plan name, one that [ValidateID] accepts, and otherwise an error wrapping [ErrInvalidPlan] that
// says what is wrong with it, as ValidateID's does for an ID. Implementations of SetPlan
// call it before they write, so that every one refuses exactly what the in-memory one
// refuses, in the same words.
func (p PlanID) Check() error {
	return vocab.Name(ErrInvalidPlan, "plan", string(p))
}

// Entitlements tells which plan a tenant is on. A tenant never given a plan is on PlanFree:
// Plan returns PlanFree for it, not an error. A host whose plans do not include "free"
// either gives every tenant a plan before it is served, or treats PlanFree as the name of
// its own default plan — by mapping it in its lane and limits tables (bridge.PlanLanes,
// bridge.PlanLimits) like any of its plans.
type Entitlements interface {
	// Plan returns the tenant's plan, or ErrNoTenant for the zero Context.
	Plan(ctx context.Context, tc Context) (PlanID, error)
}

// MemoryEntitlements is the in-memory [Entitlements], safe for concurrent use; the zero
// value is ready to use. A tenant that was never given a plan is on PlanFree.
type MemoryEntitlements struct {
	mu    sync.RWMutex
	plans map[string]PlanID
}

var _ Entitlements = (*MemoryEntitlements)(nil)

// NewMemoryEntitlements returns a MemoryEntitlements with every tenant on PlanFree.
func NewMemoryEntitlements() *MemoryEntitlements {
	return &MemoryEntitlements{plans: make(map[string]PlanID)}
}

// SetPlan puts the tenant on plan p. It refuses the zero Context ([ErrNoTenant]) and a
// plan that is not Valid ([ErrInvalidPlan]), changing nothing.
func (m *MemoryEntitlements) SetPlan(ctx context.Context, tc Context, p PlanID) error {
	if err := checkCall(ctx, tc); err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plans == nil {
		m.plans = make(map[string]PlanID)
	}
	m.plans[tc.userID] = p
	return nil
}

// SetPlans puts each tenant of plans, by user ID, on its plan: SetPlan for many tenants
// in one call, all or nothing. An invalid user ID ([ErrInvalidID]) or plan
// ([ErrInvalidPlan]) refuses the call, naming the tenant, and changes nothing.
func (m *MemoryEntitlements) SetPlans(ctx context.Context, plans map[string]PlanID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkPlans(plans); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plans == nil {
		m.plans = make(map[string]PlanID, len(plans))
	}
	maps.Copy(m.plans, plans)
	return nil
}

// checkPlans checks every tenant and plan of a SetPlans call, in user ID order, and
// returns the first problem, naming the tenant.
func checkPlans(plans map[string]PlanID) error {
	for _, user := range slices.Sorted(maps.Keys(plans)) {
		if err := ValidateID("user ID", user); err != nil {
			return err
		}
		if err := plans[user].Check(); err != nil {
			return fmt.Errorf("tenant %q: %w", user, err)
		}
	}
	return nil
}

// Plan implements [Entitlements].
func (m *MemoryEntitlements) Plan(ctx context.Context, tc Context) (PlanID, error) {
	if err := checkCall(ctx, tc); err != nil {
		return "", err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if p, ok := m.plans[tc.userID]; ok {
		return p, nil
	}
	return PlanFree, nil
}
