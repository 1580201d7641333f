package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// ErrUnmappedPlan is returned by the LaneFor that [PlanLanes] builds, and the LimitsFor
// that [PlanLimits] builds, when a tenant's plan is not in their table; the wrapping error
// names the plan and the tenant. The dispatcher then lists the tenant as unrouted: its
// work stays due and every other tenant is dispatched as usual.
var ErrUnmappedPlan = errors.New("bridge: plan not in the table")

// PlanLanes returns the dispatch.LaneFor that routes each tenant by its plan: it asks ent
// for the tenant's plan and looks it up in table. An invalid user ID, a failing
// Entitlements and a plan missing from the table ([ErrUnmappedPlan]) are errors, which
// the dispatcher reports as unrouted. Pass the lanes of the dispatch.Config the LaneFor is
// for: PlanLanes refuses a table that maps a plan to a lane they lack, as well as a nil
// ent and an empty table, wrapping [ErrInvalidConfig]. The table is copied.
//
//	cfg.LaneFor, err = bridge.PlanLanes(ent, table, cfg.Lanes)
func PlanLanes(ent tenancy.Entitlements, table map[tenancy.PlanID]dispatch.Lane, lanes []dispatch.LaneCapacity) (dispatch.LaneFor, error) {
	var errs []error
	if ent == nil {
		errs = append(errs, fmt.Errorf("%w: PlanLanes: the Entitlements must not be nil", ErrInvalidConfig))
	}
	if len(table) == 0 {
		errs = append(errs, fmt.Errorf("%w: PlanLanes: the plan table must not be empty", ErrInvalidConfig))
	}
	configured := make(map[dispatch.Lane]bool, len(lanes))
	names := make([]dispatch.Lane, len(lanes))
	for i, lc := range lanes {
		configured[lc.Lane], names[i] = true, lc.Lane
	}
	for _, plan := range slices.Sorted(maps.Keys(table)) {
		if lane := table[plan]; !configured[lane] {
			errs = append(errs, fmt.Errorf("%w: PlanLanes: plan %q maps to lane %q, which is not one of the configured lanes %q",
				ErrInvalidConfig, plan, lane, names))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	table = maps.Clone(table)
	return func(ctx context.Context, userID string) (dispatch.Lane, error) {
		tc, err := tenancy.NewContext(userID)
		if err != nil {
			return "", fmt.Errorf("bridge: lane for user %q: %w", userID, err)
		}
		plan, err := ent.Plan(ctx, tc)
		if err != nil {
			return "", fmt.Errorf("bridge: lane for user %q: plan: %w", userID, err)
		}
		lane, ok := table[plan]
		if !ok {
			return "", fmt.Errorf("%w: no lane for plan %q of user %q", ErrUnmappedPlan, plan, userID)
		}
		return lane, nil
	}, nil
}

// PlanLimits returns the dispatch.LimitsFor that gives each tenant the flow-control limits
// of its plan: it asks plans for the tenant's plan and looks it up in table. An invalid
// user ID, a failing Entitlements and a plan missing from the table ([ErrUnmappedPlan])
// are errors, which the dispatcher reports as unrouted. It refuses a nil plans, an empty
// table and limits that fail duework.Limits.Validate, wrapping [ErrInvalidConfig] and
// naming the plan. The table is copied. Set it beside PlanLanes:
//
//	cfg.LimitsFor, err = bridge.PlanLimits(entitlements, limits)
func PlanLimits(plans tenancy.Entitlements, table map[tenancy.PlanID]duework.Limits) (dispatch.LimitsFor, error) {
	var errs []error
	if plans == nil {
		errs = append(errs, fmt.Errorf("%w: PlanLimits: the Entitlements must not be nil", ErrInvalidConfig))
	}
	if len(table) == 0 {
		errs = append(errs, fmt.Errorf("%w: PlanLimits: the plan table must not be empty", ErrInvalidConfig))
	}
	for _, plan := range slices.Sorted(maps.Keys(table)) {
		if err := table[plan].Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: PlanLimits: plan %q: %w", ErrInvalidConfig, plan, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	table = maps.Clone(table)
	return func(ctx context.Context, userID string) (duework.Limits, error) {
		tc, err := tenancy.NewContext(userID)
		if err != nil {
			return duework.Limits{}, fmt.Errorf("bridge: limits for user %q: %w", userID, err)
		}
		plan, err := plans.Plan(ctx, tc)
		if err != nil {
			return duework.Limits{}, fmt.Errorf("bridge: limits for user %q: plan: %w", userID, err)
		}
		l, ok := table[plan]
		if !ok {
			return duework.Limits{}, fmt.Errorf("%w: no limits for plan %q of user %q", ErrUnmappedPlan, plan, userID)
		}
		return l, nil
	}, nil
}
