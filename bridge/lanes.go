package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// ErrUnmappedPlan is returned by the LaneFor that [PlanLanes] builds, the LimitsFor that
// [PlanLimits] builds and the TierFor that [PlanTiers] builds when a tenant's plan is not
// in their table; the wrapping error
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
	lookup := planLookup("lane", ent, table)
	return func(ctx context.Context, userID string) (dispatch.Lane, error) { return lookup(ctx, userID) }, nil
}

// PlanLimits returns the dispatch.LimitsFor that gives each tenant the flow-control limits
// of its plan: it asks plans for the tenant's plan and looks it up in table. An invalid
// user ID, a failing Entitlements and a plan missing from the table ([ErrUnmappedPlan])
// are errors, which the dispatcher reports as unrouted. It refuses a nil plans, an empty
// table, limits that fail duework.Limits.Validate and a Burst without a rate (Every 0),
// which would do nothing, wrapping [ErrInvalidConfig] and naming the plan. The table is copied. Set it beside PlanLanes:
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
		l := table[plan]
		if err := l.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: PlanLimits: plan %q: %w", ErrInvalidConfig, plan, err))
		} else if l.Burst > 0 && l.Every == 0 {
			errs = append(errs, fmt.Errorf("%w: PlanLimits: plan %q: Limits.Burst %d without a rate (Every is 0) does nothing: "+
				"set Every, or leave Burst 0", ErrInvalidConfig, plan, l.Burst))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	lookup := planLookup("limits", plans, table)
	return func(ctx context.Context, userID string) (duework.Limits, error) { return lookup(ctx, userID) }, nil
}

// TierFor resolves the cadence tier of a tenant's new sources: [Bridge.Watch] gives an
// entry that names no tier the tier TierFor returns for its tenant.
type TierFor func(ctx context.Context, tc tenancy.Context) (string, error)

// PlanTiers returns the TierFor that gives each tenant's new sources the tier of its plan:
// it asks plans for the tenant's plan and looks it up in table. A failing Entitlements
// and a plan missing from the table ([ErrUnmappedPlan]) are errors, which Watch returns.
// It refuses a nil plans, an empty table and a tier that tiers does not know (nil tiers:
// the presets of cadence.NewRegistry), wrapping [ErrInvalidConfig] and naming the plan.
// The table is copied. Set it on the Bridge beside PlanLanes and PlanLimits:
//
//	b.TierFor, err = bridge.PlanTiers(entitlements, map[tenancy.PlanID]string{"pro": "hot", "free": "cold"}, b.Tiers)
//
// A source keeps the tier it was watched with: a tenant whose plan changes gets the new
// plan's tier for the sources it watches from then on, and for the others once they are
// watched again (Watch replaces an entry and keeps its due work and streaks).
func PlanTiers(plans tenancy.Entitlements, table map[tenancy.PlanID]string, tiers *cadence.Registry) (TierFor, error) {
	var errs []error
	if plans == nil {
		errs = append(errs, fmt.Errorf("%w: PlanTiers: the Entitlements must not be nil", ErrInvalidConfig))
	}
	if len(table) == 0 {
		errs = append(errs, fmt.Errorf("%w: PlanTiers: the plan table must not be empty", ErrInvalidConfig))
	}
	if tiers == nil {
		tiers = presets
	}
	for _, plan := range slices.Sorted(maps.Keys(table)) {
		if _, err := tiers.Lookup(table[plan]); err != nil {
			errs = append(errs, fmt.Errorf("%w: PlanTiers: plan %q: %w", ErrInvalidConfig, plan, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	lookup := planLookup("tier", plans, table)
	return func(ctx context.Context, tc tenancy.Context) (string, error) { return lookup(ctx, tc.UserID()) }, nil
}

// planLookup returns the function that looks up a tenant's plan in table, what naming the
// table's values in errors. The table is copied.
func planLookup[T any](what string, plans tenancy.Entitlements, table map[tenancy.PlanID]T) func(ctx context.Context, userID string) (T, error) {
	table = maps.Clone(table)
	return func(ctx context.Context, userID string) (T, error) {
		var zero T
		tc, err := tenancy.NewContext(userID)
		if err != nil {
			return zero, fmt.Errorf("bridge: %s for user %q: %w", what, userID, err)
		}
		plan, err := plans.Plan(ctx, tc)
		if err != nil {
			return zero, fmt.Errorf("bridge: %s for user %q: plan: %w", what, userID, err)
		}
		v, ok := table[plan]
		if !ok {
			return zero, fmt.Errorf("%w: no %s for plan %q of user %q", ErrUnmappedPlan, what, plan, userID)
		}
		return v, nil
	}
}
