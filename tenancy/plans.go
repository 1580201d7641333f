package tenancy

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// PlanID names a tenant's paid plan. Tenancy does not know what a plan buys; the bridge
// package maps plans to dispatch lanes.
type PlanID string

// The plans a tenant can be on.
const (
	PlanFree PlanID = "free"
	PlanPlus PlanID = "plus"
	PlanPro  PlanID = "pro"
)

// ErrInvalidPlan is returned by SetPlan, of [MemoryEntitlements] and of other Entitlements
// that can be written, for a PlanID that is not Valid.
var ErrInvalidPlan = errors.New("tenancy: invalid plan")

// Valid reports whether p is one of PlanFree, PlanPlus and PlanPro.
func (p PlanID) Valid() bool {
	switch p {
	case PlanFree, PlanPlus, PlanPro:
		return true
	}
	return false
}

// Entitlements tells which plan a tenant is on. A tenant never given a plan is on PlanFree:
// Plan returns PlanFree for it, not an error.
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
	if !p.Valid() {
		return fmt.Errorf("%w: plan %q is not one of free, plus, pro", ErrInvalidPlan, p)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plans == nil {
		m.plans = make(map[string]PlanID)
	}
	m.plans[tc.userID] = p
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
