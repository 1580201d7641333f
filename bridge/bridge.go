package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// DefaultRetryDelay is how long after a failed run an entry comes due again when
// [Bridge.RetryDelay] is zero.
const DefaultRetryDelay = time.Minute

// SyncJitterFraction is the share of a tier's base interval over which [Bridge.SyncWatchlist]
// spreads new entries: 1 means a new entry comes due anywhere in [now, now + base), so that
// many sources added at once do not all come due in the same second.
const SyncJitterFraction = 1.0

// presets resolves tiers for a Bridge whose Tiers is nil. It is never registered into.
var presets = cadence.NewRegistry()

// Bridge connects the watchlist, the due-work index and the host's pipeline: it keeps a
// tenant's watchlist scheduled ([Bridge.SyncWatchlist]) and runs one dispatched item
// through the pipeline and back into the index ([Bridge.RunDueItem]). Most hosts hand it
// to [NewRunner] and call only SyncWatchlist themselves. A Bridge is safe for concurrent
// use when its collaborators are; do not change its fields while it is in use.
type Bridge struct {
	// Index holds the due-work entries. Required. An Index that implements
	// duework.MissingScheduler and duework.ClaimGuard gets the stronger guarantees
	// described at SyncWatchlist and RunDueItem.
	Index duework.Index
	// Watchlist holds what each tenant watches. Required.
	Watchlist tenancy.Watchlist
	// Pipeline does the host's work for one source. Required by RunDueItem and NewRunner;
	// SyncWatchlist does not use it.
	Pipeline Pipeline
	// Tiers resolves a watchlist entry's tier to its cadence. Nil means the presets of
	// cadence.NewRegistry.
	Tiers *cadence.Registry
	// RetryDelay is how long after a failed run the entry comes due again. Zero means
	// DefaultRetryDelay; it must not be negative.
	RetryDelay time.Duration
}

// check reports what keeps b from syncing, and from running items too when run is set.
func (b *Bridge) check(run bool) error {
	if b == nil {
		return fmt.Errorf("%w: the Bridge must not be nil", ErrInvalidConfig)
	}
	var errs []error
	if b.Index == nil {
		errs = append(errs, fmt.Errorf("%w: Bridge.Index must not be nil", ErrInvalidConfig))
	}
	if b.Watchlist == nil {
		errs = append(errs, fmt.Errorf("%w: Bridge.Watchlist must not be nil", ErrInvalidConfig))
	}
	if run && b.Pipeline == nil {
		errs = append(errs, fmt.Errorf("%w: Bridge.Pipeline must not be nil", ErrInvalidConfig))
	}
	if b.RetryDelay < 0 {
		errs = append(errs, fmt.Errorf("%w: Bridge.RetryDelay must not be negative, got %v", ErrInvalidConfig, b.RetryDelay))
	}
	return errors.Join(errs...)
}

func (b *Bridge) tiers() *cadence.Registry {
	if b.Tiers == nil {
		return presets
	}
	return b.Tiers
}

func (b *Bridge) retryDelay() time.Duration {
	if b.RetryDelay == 0 {
		return DefaultRetryDelay
	}
	return b.RetryDelay
}

// newEntry is the due-work entry of a newly watched source: due within its tier's base
// interval, spread by a jitter that hashes the user and the slug (separated by a byte no
// valid ID holds, so no two pairs collide).
func (b *Bridge) newEntry(tc tenancy.Context, we tenancy.WatchlistEntry, now time.Time) (duework.Entry, error) {
	p, err := b.tiers().Lookup(we.Tier)
	if err != nil {
		return duework.Entry{}, err
	}
	base := p.NextInterval(0)
	jitter := cadence.Jitter(tc.UserID()+"\x00"+we.Slug, now, base, SyncJitterFraction)
	return duework.Entry{UserID: tc.UserID(), WorkKey: we.Slug, Tier: we.Tier, DueAt: now.Add(jitter)}, nil
}

// SyncWatchlist makes sure every watchlist entry of the tenant has a due-work entry and
// returns how many it added. It never replaces an existing entry — its cadence and any
// claim on it stay as they are — so a host can call it on every watchlist change. A new
// entry comes due within its tier's base interval, spread by cadence.Jitter.
//
// With a duework.MissingScheduler it costs one Index call and is safe against concurrent
// syncs and runs. Otherwise it reads each entry and schedules the missing ones, and an
// entry that appears between the two (a concurrent sync) is replaced, ending its claim.
// An unknown tier or a failed write is returned, joined with the others and naming the
// entry; the rest is still synced, and calling it again retries what failed.
func (b *Bridge) SyncWatchlist(ctx context.Context, tc tenancy.Context, now time.Time) (added int, err error) {
	if err := b.check(false); err != nil {
		return 0, err
	}
	if err := tc.Check(); err != nil {
		return 0, err
	}
	list, err := b.Watchlist.List(ctx, tc)
	if err != nil {
		return 0, fmt.Errorf("bridge: sync user %q: list watchlist: %w", tc.UserID(), err)
	}
	var errs []error
	entries := make([]duework.Entry, 0, len(list))
	for _, we := range list {
		e, err := b.newEntry(tc, we, now)
		if err == nil {
			entries = append(entries, e)
			continue
		}
		// Only a new entry needs its tier now: one already scheduled is left alone.
		_, gerr := b.Index.Get(ctx, tc, we.Slug)
		if !errors.Is(gerr, duework.ErrNotFound) {
			err = gerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("bridge: sync user %q entry %q: %w", tc.UserID(), we.Slug, err))
		}
	}
	added, err = b.scheduleMissing(ctx, tc, entries)
	return added, errors.Join(append(errs, err)...)
}

// scheduleMissing inserts those of entries (all tc's) that tc does not have yet.
func (b *Bridge) scheduleMissing(ctx context.Context, tc tenancy.Context, entries []duework.Entry) (int, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	ms, ok := b.Index.(duework.MissingScheduler)
	if !ok {
		return b.getThenSchedule(ctx, tc, entries)
	}
	added, err := ms.ScheduleMissing(ctx, tc, entries)
	if err == nil {
		return added, nil
	}
	if !errors.Is(err, duework.ErrInvalid) || len(entries) == 1 {
		return 0, fmt.Errorf("bridge: sync user %q: schedule %d entries: %w", tc.UserID(), len(entries), err)
	}
	// One bad entry refuses the whole call: sync the others one by one.
	var errs []error
	added = 0
	for _, e := range entries {
		n, err := ms.ScheduleMissing(ctx, tc, []duework.Entry{e})
		added += n
		if err != nil {
			errs = append(errs, fmt.Errorf("bridge: sync user %q entry %q: %w", tc.UserID(), e.WorkKey, err))
		}
	}
	return added, errors.Join(errs...)
}

// getThenSchedule is scheduleMissing for an Index without MissingScheduler.
func (b *Bridge) getThenSchedule(ctx context.Context, tc tenancy.Context, entries []duework.Entry) (int, error) {
	added := 0
	var errs []error
	for _, e := range entries {
		_, err := b.Index.Get(ctx, tc, e.WorkKey)
		if errors.Is(err, duework.ErrNotFound) {
			err = b.Index.Schedule(ctx, tc, e)
			if err == nil {
				added++
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("bridge: sync user %q entry %q: %w", tc.UserID(), e.WorkKey, err))
		}
	}
	return added, errors.Join(errs...)
}

// SyncTenants calls SyncWatchlist for each tenant, as a host does at start-up, and
// returns how many entries it added in all and every tenant's errors, joined. It stops
// early, with ctx's error, when ctx ends.
func (b *Bridge) SyncTenants(ctx context.Context, tcs []tenancy.Context, now time.Time) (added int, err error) {
	var errs []error
	for _, tc := range tcs {
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("bridge: sync tenants: %w", err))
			break
		}
		n, err := b.SyncWatchlist(ctx, tc, now)
		added += n
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, ErrInvalidConfig) {
				break // the same for every tenant
			}
		}
	}
	return added, errors.Join(errs...)
}
