package cadence

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrUnknownTier is returned by [Registry.Lookup] when no policy is registered under the
// name. An unknown tier is always an error, never a silent default.
var ErrUnknownTier = errors.New("cadence: unknown tier")

// ErrTierTaken is returned by [Registry.Register] when the name is already registered.
var ErrTierTaken = errors.New("cadence: tier name already registered")

// Registry resolves tier names to policies. [NewRegistry] returns one holding the presets
// under "hot", "warm", "cold" and "digest_weekly"; a host adds its own tiers with Register.
// A Registry is safe for concurrent use. There is deliberately no package-level registry:
// each host owns its own, so tests and tenants cannot leak tiers into each other.
type Registry struct {
	mu       sync.RWMutex
	policies map[string]Policy
}

// NewRegistry returns a Registry holding the four presets.
func NewRegistry() *Registry {
	return &Registry{policies: map[string]Policy{
		NameHot:          TierHot,
		NameWarm:         TierWarm,
		NameCold:         TierCold,
		NameDigestWeekly: DigestWeekly,
	}}
}

// validator is implemented by policies that can check themselves, such as [Backoff].
type validator interface{ Validate() error }

// Register adds p under name. It refuses an empty name ([ErrInvalidPolicy]), a nil policy
// ([ErrInvalidPolicy]), a name already taken ([ErrTierTaken]), and a policy whose Validate
// method, when it has one, fails.
func (r *Registry) Register(name string, p Policy) error {
	if name == "" {
		return fmt.Errorf("%w: tier name must not be empty", ErrInvalidPolicy)
	}
	if p == nil {
		return fmt.Errorf("%w: tier %q: policy must not be nil", ErrInvalidPolicy, name)
	}
	if v, ok := p.(validator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("cadence: tier %q: %w", name, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, taken := r.policies[name]; taken {
		return fmt.Errorf("%w: %q", ErrTierTaken, name)
	}
	r.policies[name] = p
	return nil
}

// Lookup returns the policy registered under name, or an error wrapping [ErrUnknownTier]
// that names it.
func (r *Registry) Lookup(name string) (Policy, error) {
	r.mu.RLock()
	p, ok := r.policies[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTier, name)
	}
	return p, nil
}

// Names returns the registered tier names in sorted order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.policies))
	for n := range r.policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
