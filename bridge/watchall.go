package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// watchAllParallel is how many tenants WatchAll resolves tiers for, and schedules, at
// once.
const watchAllParallel = 8

// WatchAll is Watch for the sources of many tenants at once — a service's seeding, an
// import — each entry under the tenant its UserID names, and returns how many due-work
// entries it added. An entry without a tier gets its tenant's from TierFor, asked once per
// tenant. Every entry is checked first, as Watch checks them: any refused entry (an
// invalid UserID among them) refuses the call, naming it, and nothing is written. A
// (UserID, Slug) given twice is written once, the last one winning.
//
// It costs one Watchlist.AddAll for every tenant's entries, then one Index.ScheduleMissing
// per tenant, several tenants at once. Should scheduling fail for some tenants after the
// watchlist write, the error names them: their sources are watched, and the next
// SyncWatchlist or SyncAll schedules them.
func (b *Bridge) WatchAll(ctx context.Context, entries []tenancy.WatchlistEntry, now time.Time) (added int, err error) {
	if err := b.check(false); err != nil {
		return 0, err
	}
	tenants, byTenant := groupWatches(entries)
	tiers, err := b.tiersFor(ctx, tenants, byTenant)
	if err != nil {
		return 0, err
	}
	var list []tenancy.WatchlistEntry
	due := make([][]duework.Entry, len(tenants))
	var errs []error
	for t, tc := range tenants {
		for _, i := range byTenant[t] {
			we, e, err := b.prepareWatch(tc, entries[i], tiers[t], now)
			if err != nil {
				errs = append(errs, fmt.Errorf("bridge: watch all: entries[%d]: %w", i, err))
				continue
			}
			list, due[t] = append(list, we), append(due[t], e)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if err := b.Watchlist.AddAll(ctx, list); err != nil {
		return 0, fmt.Errorf("bridge: watch all: add %d entries of %d tenants: %w", len(list), len(tenants), err)
	}
	var n atomic.Int64
	errs = parallel(len(tenants), func(t int) error {
		k, err := b.Index.ScheduleMissing(ctx, tenants[t], due[t])
		n.Add(int64(k))
		if err != nil {
			return fmt.Errorf("bridge: watch all: user %q: %d entries watched, not scheduled (SyncWatchlist schedules them): %w",
				tenants[t].UserID(), len(due[t]), err)
		}
		return nil
	})
	return int(n.Load()), errors.Join(errs...)
}

// groupWatches returns the tenants entries name, in the order they first appear, and for
// each the indexes of its entries, the last of each slug only. A tenant whose UserID is
// not valid gets the zero Context, which prepareWatch refuses.
func groupWatches(entries []tenancy.WatchlistEntry) ([]tenancy.Context, [][]int) {
	type key struct{ user, slug string }
	last := make(map[key]int, len(entries))
	for i, we := range entries {
		last[key{we.UserID, we.Slug}] = i
	}
	at := map[string]int{}
	var tenants []tenancy.Context
	var byTenant [][]int
	for i, we := range entries {
		if last[key{we.UserID, we.Slug}] != i {
			continue
		}
		t, ok := at[we.UserID]
		if !ok {
			tc, _ := tenancy.NewContext(we.UserID)
			t, at[we.UserID] = len(tenants), len(tenants)
			tenants, byTenant = append(tenants, tc), append(byTenant, nil)
		}
		byTenant[t] = append(byTenant[t], i)
	}
	return tenants, byTenant
}

// tiersFor asks TierFor, several tenants at once, for the tier of each tenant with an
// entry that names none.
func (b *Bridge) tiersFor(ctx context.Context, tenants []tenancy.Context, byTenant [][]int) ([]string, error) {
	tiers := make([]string, len(tenants))
	if b.TierFor == nil {
		return tiers, nil
	}
	errs := parallel(len(tenants), func(t int) error {
		if tenants[t].Check() != nil {
			return nil // prepareWatch names it
		}
		var err error
		tiers[t], err = b.TierFor(ctx, tenants[t])
		if err != nil {
			return fmt.Errorf("bridge: watch all: user %q: tier: %w", tenants[t].UserID(), err)
		}
		return nil
	})
	return tiers, errors.Join(errs...)
}

// prepareWatch returns the watchlist entry and the due work of we under tc, as Watch
// writes them: AddedAt now when zero, tier when it names none, both validated.
func (b *Bridge) prepareWatch(tc tenancy.Context, we tenancy.WatchlistEntry, tier string, now time.Time) (tenancy.WatchlistEntry, duework.Entry, error) {
	if tc.Check() != nil { // WatchAll's tenant of an invalid UserID: say why it is not one
		_, err := tenancy.NewContext(we.UserID)
		return we, duework.Entry{}, err
	}
	if we.AddedAt.IsZero() {
		we.AddedAt = now
	}
	if we.Tier == "" {
		we.Tier = tier
	}
	if err := we.Validate(tc); err != nil {
		return we, duework.Entry{}, err
	}
	e, err := b.newEntry(tc, we, now)
	if err == nil {
		err = e.Validate(tc)
	}
	if err != nil {
		return we, duework.Entry{}, fmt.Errorf("entry %q: %w", we.Slug, err)
	}
	return we, e, nil
}

// parallel calls f(0) … f(n−1), at most watchAllParallel at once, and returns their
// errors, nil ones left out, in order.
func parallel(n int, f func(i int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, watchAllParallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	out := errs[:0]
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
