package duework_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/duework/indextest"
	"github.com/rotaworks/rota/tenancy"
)

// TestMemoryConformance runs the whole Index contract over Memory.
func TestMemoryConformance(t *testing.T) {
	indextest.Run(t, func(*testing.T) duework.Index { return duework.NewMemory() })
}

// TestMemoryInvariants runs the contract again, the state machine against the reference
// model included, over a Memory whose every tree's order, heap priorities and augmentation,
// and every user's place in its trees, are checked after each call.
func TestMemoryInvariants(t *testing.T) {
	indextest.Run(t, func(*testing.T) duework.Index { return checked{duework.NewMemory()} })
}

// checked is a Memory that panics (which fails the rule, and which rapid shrinks) as soon
// as a call leaves an internal invariant broken.
type checked struct{ m *duework.Memory }

var _ duework.Index = checked{}

func (c checked) after(call string) {
	if err := duework.CheckInvariants(c.m); err != nil {
		panic(fmt.Sprintf("after %s: %v", call, err))
	}
}

func (c checked) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	defer c.after("Schedule")
	return c.m.Schedule(ctx, tc, e)
}

func (c checked) ScheduleMissing(ctx context.Context, tc tenancy.Context, es []duework.Entry) (int, error) {
	defer c.after("ScheduleMissing")
	return c.m.ScheduleMissing(ctx, tc, es)
}

func (c checked) Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error {
	defer c.after("Unschedule")
	return c.m.Unschedule(ctx, tc, workKey)
}

func (c checked) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	defer c.after("Get")
	return c.m.Get(ctx, tc, workKey)
}

func (c checked) Complete(ctx context.Context, tc tenancy.Context, cl duework.Claim, next duework.Entry) error {
	defer c.after("Complete")
	return c.m.Complete(ctx, tc, cl, next)
}

func (c checked) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	defer c.after("CompleteMany")
	return c.m.CompleteMany(ctx, done)
}

func (c checked) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, cl duework.Claim) error {
	defer c.after("UnscheduleClaimed")
	return c.m.UnscheduleClaimed(ctx, tc, cl)
}

func (c checked) Unclaim(ctx context.Context, cs []duework.Unclaim) ([]error, error) {
	defer c.after("Unclaim")
	return c.m.Unclaim(ctx, cs)
}

func (c checked) User(ctx context.Context, userID string, now time.Time) (duework.UserState, error) {
	defer c.after("User")
	return c.m.User(ctx, userID, now)
}

func (c checked) Entries(ctx context.Context, userID, after string, limit int) ([]duework.EntryState, error) {
	defer c.after("Entries")
	return c.m.Entries(ctx, userID, after, limit)
}

func (c checked) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	defer c.after("DueBefore")
	return c.m.DueBefore(ctx, now, limit)
}

func (c checked) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	defer c.after("Ready")
	return c.m.Ready(ctx, q)
}

func (c checked) Route(ctx context.Context, routes []duework.Route) error {
	defer c.after("Route")
	return c.m.Route(ctx, routes)
}

func (c checked) Groups(ctx context.Context, now time.Time) ([]string, error) {
	defer c.after("Groups")
	return c.m.Groups(ctx, now)
}

func (c checked) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	defer c.after("Release")
	return c.m.Release(ctx, userIDs, heldUntil)
}

func (c checked) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	defer c.after("Claim")
	return c.m.Claim(ctx, keys, now, until)
}

func (c checked) StartClaims(ctx context.Context, cs []duework.Unclaim) ([]error, error) {
	defer c.after("StartClaims")
	return c.m.StartClaims(ctx, cs)
}

func (c checked) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	defer c.after("Pause")
	return c.m.Pause(ctx, tc, until, reason)
}

func (c checked) Resume(ctx context.Context, tc tenancy.Context) error {
	defer c.after("Resume")
	return c.m.Resume(ctx, tc)
}

func (c checked) Paused(ctx context.Context, now time.Time, after string, limit int) ([]duework.UserPause, error) {
	defer c.after("Paused")
	return c.m.Paused(ctx, now, after, limit)
}
