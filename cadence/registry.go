package cadence

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
)

// ErrUnknownTier is returned by [Registry.Lookup] when no policy is registered under the
// name. An unknown tier is always an error, never a silent default.
var ErrUnknownTier = errors.New("cadence: unknown tier")

// ErrTierTaken is returned by [Registry.Register] when the name is already registered.
var ErrTierTaken = errors.New("cadence: tier name already registered")

// ErrInvalidTierName is returned by [Registry.Register] for a tier name that no watch-list
// entry could carry: one that is not a valid name by the rule of tenancy's IDs (1 to 256
// bytes of valid UTF-8, no control or format character, no white space at either end).
var ErrInvalidTierName = errors.New("cadence: invalid tier name")

// Registry resolves tier names to policies. [NewRegistry] returns one holding the presets
// under "hot", "warm", "cold" and "digest_weekly"; a host adds its own tiers with Register
// and resolves an entry's tier with Lookup, one map read and no lock (Register, rare, copies
// the map), so that the many workers that resolve tiers at once never wait on one another. A
// Registry is safe for concurrent use; the zero Registry is empty and usable.
type Registry struct {
	mu       sync.Mutex                        // serializes Register
	policies atomic.Pointer[map[string]Policy] // never written once stored
}

// NewRegistry returns a Registry holding the four presets.
func NewRegistry() *Registry {
	r := &Registry{}
	r.policies.Store(&map[string]Policy{
		nameHot:          TierHot,
		nameWarm:         TierWarm,
		nameCold:         TierCold,
		nameDigestWeekly: DigestWeekly,
	})
	return r
}

// validator is implemented by policies that can check themselves, such as [Backoff].
type validator interface{ Validate() error }

// Register adds p under name. It refuses a name that is not a valid name
// ([ErrInvalidTierName]); a nil policy, one whose Validate method, when it has one,
// fails, and one whose interval after a hit, NextInterval(0), is shorter than 10 ms — a
// source due again before any cycle could run it ([ErrInvalidPolicy]); and a name already taken
// ([ErrTierTaken]) — the presets' names included: a host that wants other values for "hot"
// registers a tier of its own.
func (r *Registry) Register(name string, p Policy) error {
	if err := checkTierName(name); err != nil {
		return err
	}
	if err := checkPolicy(name, p); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snapshot()
	if _, taken := old[name]; taken {
		return fmt.Errorf("%w: %q", ErrTierTaken, name)
	}
	m := maps.Clone(old)
	if m == nil {
		m = make(map[string]Policy, 1)
	}
	m[name] = p
	r.policies.Store(&m)
	return nil
}

// snapshot returns the policies registered so far; nil for none. The map is never written.
func (r *Registry) snapshot() map[string]Policy {
	if m := r.policies.Load(); m != nil {
		return *m
	}
	return nil
}

// checkPolicy refuses a policy that cannot serve under name, wrapping ErrInvalidPolicy
// once: a Backoff's problems are listed without the sentinel each Validate error repeats.
func checkPolicy(name string, p Policy) error {
	invalid := func(detail string) error {
		return fmt.Errorf("%w: tier %q: %s", ErrInvalidPolicy, name, detail)
	}
	switch v := p.(type) {
	case nil:
		return invalid("policy must not be nil")
	case Backoff:
		if ps := v.problems(); len(ps) > 0 {
			return invalid(strings.Join(ps, "; "))
		}
	case *Backoff:
		if v == nil {
			return invalid("policy must not be nil")
		}
		if ps := v.problems(); len(ps) > 0 {
			return invalid(strings.Join(ps, "; "))
		}
	case validator:
		if err := v.Validate(); err != nil {
			return fmt.Errorf("%w: tier %q: %w", ErrInvalidPolicy, name, err)
		}
	}
	if d := p.NextInterval(0); d < minTierInterval {
		return invalid(fmt.Sprintf("a hit schedules the next run %v later, less than %v: the source would be due again before any cycle could run it", d, minTierInterval))
	}
	return nil
}

// minTierInterval is the shortest interval after a hit that a registered tier may have:
// the floor of a Runner's cycle interval.
const minTierInterval = 10 * time.Millisecond

// Lookup returns the policy registered under name, or an error wrapping [ErrUnknownTier]
// that names it.
func (r *Registry) Lookup(name string) (Policy, error) {
	p, ok := r.snapshot()[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTier, name)
	}
	return p, nil
}

// checkTierName refuses a name that no watch-list entry could carry.
func checkTierName(name string) error { return vocab.Name(ErrInvalidTierName, "tier name", name) }
