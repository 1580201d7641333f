package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// DefaultRetry is the retry policy of a Bridge whose Retry is nil: a source whose runs
// keep failing is tried again after 1, 2, 4 … minutes and then every 6 hours — never
// every minute forever, and never dropped.
var DefaultRetry = cadence.Backoff{Base: time.Minute, Max: 6 * time.Hour, Factor: 2}

// syncJitterFraction is the share of a tier's base interval over which new entries are
// spread: 1, so that a new entry comes due anywhere in [now, now + base).
const syncJitterFraction = 1.0

// presets resolves tiers for a Bridge whose Tiers is nil. It is never registered into.
var presets = cadence.NewRegistry()

// Bridge connects the watchlist, the due-work index and the host's pipeline: it keeps a
// tenant's watchlist scheduled ([Bridge.SyncWatchlist]) and runs one dispatched item
// through the pipeline and back into the index ([Bridge.RunDueItem]). Most hosts hand it
// to [NewRunner] and call only SyncWatchlist themselves. A Bridge is safe for concurrent
// use when its collaborators are; do not change its fields while it is in use.
type Bridge struct {
	// Index holds the due-work entries. Required.
	Index duework.Index
	// Watchlist holds what each tenant watches. Required.
	Watchlist tenancy.Watchlist
	// Pipeline does the host's work for one source. Required by RunDueItem and NewRunner;
	// SyncWatchlist does not use it.
	Pipeline Pipeline
	// Tiers resolves a watchlist entry's tier to its cadence. Nil means the presets of
	// cadence.NewRegistry.
	Tiers *cadence.Registry
	// TierFor, when set, gives the entries Watch is handed without a tier their tenant's
	// tier (see PlanTiers). Nil means every entry must name its tier.
	TierFor TierFor
	// Retry is how a failing source backs off: a failed run's entry comes due again
	// Retry.NextInterval(n − 1) after the run ended, n being its ErrorStreak with this
	// failure counted (duework.Fail). Nil means DefaultRetry; a policy with a Validate
	// method must pass it.
	Retry cadence.Policy
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
	if v, ok := b.Retry.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: Bridge.Retry: %w", ErrInvalidConfig, err))
		}
	}
	return errors.Join(errs...)
}

func (b *Bridge) tiers() *cadence.Registry {
	if b.Tiers == nil {
		return presets
	}
	return b.Tiers
}

// retry is the Bridge's retry policy.
func (b *Bridge) retry() cadence.Policy {
	if b.Retry == nil {
		return DefaultRetry
	}
	return b.Retry
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
	jitter := cadence.Jitter(tc.UserID()+"\x00"+we.Slug, now, base, syncJitterFraction)
	return duework.Entry{UserID: tc.UserID(), WorkKey: we.Slug, Tier: we.Tier, DueAt: now.Add(jitter)}, nil
}

// SyncWatchlist makes sure every watchlist entry of the tenant has a due-work entry and
// returns how many it added. It never replaces an existing entry — its cadence and any
// claim on it stay as they are — so a host can call it on every watchlist change. A new
// entry comes due anywhere in [now, now + its tier's base interval), spread by
// cadence.Jitter over the whole interval, so that many sources added at once do not all
// come due in the same second.
//
// It costs one Watchlist.List and one Index.ScheduleMissing, and is safe against
// concurrent syncs and runs: an entry that appears meanwhile is left as it is. An unknown
// tier or a failed write is returned, joined with the others and naming the entry; the
// rest is still synced, and calling it again retries what failed.
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

// tierFor returns tc's tier from TierFor when some of entries name no tier, and "" when
// none needs it or the Bridge has no TierFor.
func (b *Bridge) tierFor(ctx context.Context, tc tenancy.Context, entries []tenancy.WatchlistEntry) (string, error) {
	if b.TierFor == nil || !slices.ContainsFunc(entries, func(we tenancy.WatchlistEntry) bool { return we.Tier == "" }) {
		return "", nil
	}
	tier, err := b.TierFor(ctx, tc)
	if err != nil {
		return "", fmt.Errorf("bridge: watch user %q: tier: %w", tc.UserID(), err)
	}
	return tier, nil
}

// scheduleMissing inserts those of entries (all tc's) that tc does not have yet.
func (b *Bridge) scheduleMissing(ctx context.Context, tc tenancy.Context, entries []duework.Entry) (int, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	added, err := b.Index.ScheduleMissing(ctx, tc, entries)
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
		n, err := b.Index.ScheduleMissing(ctx, tc, []duework.Entry{e})
		added += n
		if err != nil {
			errs = append(errs, fmt.Errorf("bridge: sync user %q entry %q: %w", tc.UserID(), e.WorkKey, err))
		}
	}
	return added, errors.Join(errs...)
}

// syncTenants calls SyncWatchlist for each tenant and returns how many entries it added
// in all and every tenant's errors, joined. It stops early, with ctx's error, when ctx
// ends.
func (b *Bridge) syncTenants(ctx context.Context, tcs []tenancy.Context, now time.Time) (added int, err error) {
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

// syncAllPage is how many tenants SyncAll lists per Watchlist.Tenants call.
const syncAllPage = 1000

// SyncAll calls SyncWatchlist for every tenant with a watchlist entry, listing them with
// Watchlist.Tenants a page at a time, as a host does at start-up, and returns how many
// entries it added in all and every tenant's errors, joined. It costs one Tenants call
// per thousand tenants and one sync per tenant. It stops early, with ctx's error, when
// ctx ends.
func (b *Bridge) SyncAll(ctx context.Context, now time.Time) (added int, err error) {
	if err := b.check(false); err != nil {
		return 0, err
	}
	var errs []error
	for after := ""; ; {
		ids, err := b.Watchlist.Tenants(ctx, after, syncAllPage)
		if err != nil {
			errs = append(errs, fmt.Errorf("bridge: sync all: list tenants after %q: %w", after, err))
			break
		}
		tcs := make([]tenancy.Context, 0, len(ids))
		for _, id := range ids {
			tc, err := tenancy.NewContext(id)
			if err != nil {
				errs = append(errs, fmt.Errorf("bridge: sync all: Watchlist.Tenants listed %q: %w", id, err))
				continue
			}
			tcs = append(tcs, tc)
		}
		n, err := b.syncTenants(ctx, tcs, now)
		added += n
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		if len(ids) < syncAllPage {
			break
		}
		after = ids[len(ids)-1]
	}
	return added, errors.Join(errs...)
}

// Watch adds entries to tc's watchlist and schedules their due work, in one step, and
// returns how many due-work entries it added. An entry without a tier gets its tenant's
// from TierFor, asked once per call. Each entry's tier is checked against the Bridge's
// Tiers first: an unknown tier refuses the call, naming every such entry and
// wrapping cadence.ErrUnknownTier, and nothing is written. So do an entry that
// tenancy.WatchlistEntry.Validate refuses and a now outside the Index's range. A zero AddedAt becomes now; a slug
// given twice is written once, the last one winning. Entries already scheduled keep their
// due work as it is, as with SyncWatchlist; new ones come due within their tier's base
// interval, spread by cadence.Jitter.
//
// It costs one Watchlist.AddMany and one Index.ScheduleMissing. Should the second fail
// after the first, the error says so: the entries are watched, and the next SyncWatchlist
// of the tenant schedules them.
func (b *Bridge) Watch(ctx context.Context, tc tenancy.Context, entries []tenancy.WatchlistEntry, now time.Time) (added int, err error) {
	if err := b.check(false); err != nil {
		return 0, err
	}
	if err := tc.Check(); err != nil {
		return 0, err
	}
	last := make(map[string]int, len(entries))
	for i, we := range entries {
		last[we.Slug] = i
	}
	tier, err := b.tierFor(ctx, tc, entries)
	if err != nil {
		return 0, err
	}
	list := make([]tenancy.WatchlistEntry, 0, len(last))
	due := make([]duework.Entry, 0, len(last))
	var errs []error
	for i, we := range entries {
		if last[we.Slug] != i {
			continue
		}
		we, e, err := b.prepareWatch(tc, we, tier, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("bridge: watch user %q: entries[%d]: %w", tc.UserID(), i, err))
			continue
		}
		list, due = append(list, we), append(due, e)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if err := b.Watchlist.AddMany(ctx, tc, list); err != nil {
		return 0, fmt.Errorf("bridge: watch user %q: add %d entries: %w", tc.UserID(), len(list), err)
	}
	if len(due) == 0 {
		return 0, nil
	}
	added, err = b.Index.ScheduleMissing(ctx, tc, due)
	if err != nil {
		return 0, fmt.Errorf("bridge: watch user %q: %d entries watched, not scheduled (SyncWatchlist schedules them): %w", tc.UserID(), len(due), err)
	}
	return added, nil
}
