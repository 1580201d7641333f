package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/tenancy"
)

// ErrUnmappedPlan is returned by the LaneFor that [PlanLanes] builds when a tenant's plan
// has no lane in its table. The dispatcher then lists the tenant as unrouted: its work stays
// due and every other tenant is dispatched as usual.
var ErrUnmappedPlan = errors.New("bridge: plan has no lane")

// ErrInvalidLanes is returned by [PlanLanes] for a nil Entitlements, an empty table or a
// plan mapped to an empty lane.
var ErrInvalidLanes = errors.New("bridge: invalid plan lanes")

// PlanLanes returns the dispatch.LaneFor that routes each tenant by its plan: it validates
// the user ID (tenancy.NewContext), asks ent for the tenant's plan and looks the plan up in
// lanes. An invalid user ID, a failing Entitlements and a plan missing from the table
// ([ErrUnmappedPlan], naming the plan and the user) are errors, which the dispatcher reports
// as unrouted.
//
// The table is copied: changing lanes afterwards does not change the routing. PlanLanes
// refuses a nil ent, an empty table and an empty lane, wrapping [ErrInvalidLanes]; that
// every lane of the table is one of the dispatcher's is checked by the dispatcher, which
// reports a tenant routed to an unknown lane as unrouted.
func PlanLanes(ent tenancy.Entitlements, lanes map[tenancy.PlanID]dispatch.Lane) (dispatch.LaneFor, error) {
	var errs []error
	if ent == nil {
		errs = append(errs, fmt.Errorf("%w: Entitlements is nil", ErrInvalidLanes))
	}
	if len(lanes) == 0 {
		errs = append(errs, fmt.Errorf("%w: the plan→lane table is empty", ErrInvalidLanes))
	}
	for _, plan := range slices.Sorted(maps.Keys(lanes)) {
		if lanes[plan] == "" {
			errs = append(errs, fmt.Errorf("%w: plan %q maps to an empty lane", ErrInvalidLanes, plan))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	table := maps.Clone(lanes)
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
			return "", fmt.Errorf("%w: plan %q of user %q", ErrUnmappedPlan, plan, userID)
		}
		return lane, nil
	}, nil
}
