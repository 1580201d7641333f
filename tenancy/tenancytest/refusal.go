package tenancytest

import (
	"context"
	"errors"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/tenancy"
)

// Rules every implementation keeps: refusals that change nothing.

const (
	noTenantRule    = "every call with the zero Context is ErrNoTenant, whatever else is wrong with it, and changes nothing"
	doneContextRule = "every call with a done ctx returns an error wrapping ctx.Err() and changes nothing"
)

// snapshot returns what the tenants hold.
func (s *suite[S]) snapshot(tcs ...tenancy.Context) []string {
	s.t.Helper()
	st, err := s.x.state(bg, tcs...)
	if err != nil {
		s.fatalf("reading what the tenants hold: %v", err)
	}
	return st
}

// unchanged fails unless the tenants hold what before says.
func (s *suite[S]) unchanged(what string, before []string, tcs ...tenancy.Context) {
	s.t.Helper()
	if diff := cmp.Diff(before, s.snapshot(tcs...)); diff != "" {
		s.errorf("%s changed what the tenants hold (-before +after):\n%s", what, diff)
	}
}

// seeded seeds tenant alice and returns her Context and what she holds.
func (s *suite[S]) seeded() (tenancy.Context, []string) {
	s.t.Helper()
	a := tenant(s.t, "alice")
	if err := s.x.seed(bg, a); err != nil {
		s.fatalf("seeding alice: %v", err)
	}
	return a, s.snapshot(a)
}

func noTenant[S subject](s *suite[S]) {
	a, before := s.seeded()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	for _, c := range s.x.calls() {
		for _, id := range []string{"c", "", "bad\x00id", strings.Repeat("x", tenancy.MaxIDLength+1)} {
			for _, ctx := range []context.Context{bg, cancelled} {
				if err := c.do(ctx, tenancy.Context{}, id); !errors.Is(err, tenancy.ErrNoTenant) {
					s.errorf("%s(zero Context, %q, ctx err %v) = %v, want ErrNoTenant", c.name, id, ctx.Err(), err)
				}
			}
		}
	}
	s.unchanged("calls with the zero Context", before, a)
}

func doneContext[S subject](s *suite[S]) {
	a, before := s.seeded()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, t0)
	defer cancel2()
	for _, c := range s.x.calls() {
		for _, ctx := range []context.Context{cancelled, expired} {
			if err := c.do(ctx, a, "c"); !errors.Is(err, ctx.Err()) {
				s.errorf("%s with a done ctx = %v, want an error wrapping %v", c.name, err, ctx.Err())
			}
		}
	}
	s.unchanged("calls with a done ctx", before, a)
}

// badIDsRefused: every call that takes an ID refuses each bad one with ErrInvalidID naming
// the field, and an ID of MaxIDLength bytes is accepted.
func badIDsRefused[S keyed](s *suite[S]) {
	a, before := s.seeded()
	for _, c := range s.x.calls() {
		if c.field == "" {
			continue
		}
		for _, b := range badIDs {
			err := c.do(bg, a, b.id)
			switch {
			case !errors.Is(err, tenancy.ErrInvalidID):
				s.errorf("%s(%s %q) = %v, want ErrInvalidID", c.name, b.reason, b.id, err)
			case !strings.Contains(err.Error(), c.field):
				s.errorf("%s(%s %q) = %q, want the error to name the field %q", c.name, b.reason, b.id, err, c.field)
			}
		}
	}
	s.unchanged("calls with bad IDs", before, a)
	put(s, a, longestID, "longest")
	if v, err := s.x.get(bg, a, longestID); err != nil || v != "longest" {
		s.errorf("Get of an ID of exactly MaxIDLength bytes = %q, %v; want it stored", v, err)
	}
	if err := s.x.del(bg, a, longestID); err != nil {
		s.errorf("removing an ID of exactly MaxIDLength bytes: %v", err)
	}
}
