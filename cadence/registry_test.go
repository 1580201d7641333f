package cadence

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRegistryResolvesPresets(t *testing.T) {
	r := NewRegistry()
	want := map[string]Backoff{
		"hot":           TierHot,
		"warm":          TierWarm,
		"cold":          TierCold,
		"digest_weekly": DigestWeekly,
	}
	for name, preset := range want {
		p, err := r.Lookup(name)
		if err != nil {
			t.Fatalf("Lookup(%q) = %v", name, err)
		}
		if p != Policy(preset) {
			t.Errorf("Lookup(%q) = %+v, want the preset %+v", name, p, preset)
		}
	}
	if got, wantNames := names(r), []string{"cold", "digest_weekly", "hot", "warm"}; !slices.Equal(got, wantNames) {
		t.Errorf("the registry holds %v, want %v", got, wantNames)
	}
}

// names returns the tier names r holds, sorted.
func names(r *Registry) []string {
	return slices.Sorted(maps.Keys(r.snapshot()))
}

func TestPresetsAreValidAndOrdered(t *testing.T) {
	order := []struct {
		name string
		b    Backoff
	}{{"TierHot", TierHot}, {"TierWarm", TierWarm}, {"TierCold", TierCold}, {"DigestWeekly", DigestWeekly}}
	for i, p := range order {
		if err := p.b.Validate(); err != nil {
			t.Errorf("%s.Validate() = %v", p.name, err)
		}
		if i > 0 && !(order[i-1].b.Base < p.b.Base) {
			t.Errorf("%s.Base = %v is not below %s.Base = %v: presets must be ordered hot < warm < cold < weekly",
				order[i-1].name, order[i-1].b.Base, p.name, p.b.Base)
		}
	}
}

func TestLookupUnknownTier(t *testing.T) {
	r := NewRegistry()
	for _, name := range []string{"", "lukewarm", "Hot", "hot ", "digest-weekly"} {
		p, err := r.Lookup(name)
		if !errors.Is(err, ErrUnknownTier) || p != nil {
			t.Errorf("Lookup(%q) = %v, %v; want nil, ErrUnknownTier (never a default)", name, p, err)
		}
	}
}

func TestRegisterAddsAHostTier(t *testing.T) {
	r := NewRegistry()
	custom := Backoff{Base: 90 * time.Second, Max: 30 * time.Minute, Factor: 1.5}
	if err := r.Register("realtime", custom); err != nil {
		t.Fatalf("Register = %v", err)
	}
	p, err := r.Lookup("realtime")
	if err != nil || p != Policy(custom) {
		t.Fatalf("Lookup(realtime) = %v, %v; want %+v", p, err, custom)
	}
	// A registry is its own: another one does not see the tier.
	if _, err := NewRegistry().Lookup("realtime"); !errors.Is(err, ErrUnknownTier) {
		t.Errorf("a fresh registry resolved a tier registered elsewhere: err = %v", err)
	}
}

// fixed is a Policy without a Validate method: Register takes it as it is.
type fixed time.Duration

func (f fixed) NextInterval(int) time.Duration { return time.Duration(f) }

// checked is a host's Policy with a Validate method of its own.
type checked struct{ fixed }

func (c checked) Validate() error {
	if c.fixed < fixed(time.Second) {
		return errors.New("checked: under a second")
	}
	return nil
}

func TestRegisterRefuses(t *testing.T) {
	tests := []struct {
		name   string
		tier   string
		policy Policy
		want   error
	}{
		{"empty name", "", TierHot, ErrInvalidTierName},
		{"control character", "hot\n", TierHot, ErrInvalidTierName},
		{"invalid UTF-8", "h\xffot", TierHot, ErrInvalidTierName},
		{"white space at an end", "hot ", TierHot, ErrInvalidTierName},
		{"format character", "h\u200bot", TierHot, ErrInvalidTierName},
		{"longer than 256 bytes", strings.Repeat("h", 257), TierHot, ErrInvalidTierName},
		{"nil policy", "mine", nil, ErrInvalidPolicy},
		{"nil *Backoff", "mine", (*Backoff)(nil), ErrInvalidPolicy},
		{"invalid Backoff", "mine", Backoff{Base: time.Hour, Max: time.Minute, Factor: 2}, ErrInvalidPolicy},
		{"invalid *Backoff", "mine", &Backoff{Base: -1, Max: time.Minute, Factor: 0.5}, ErrInvalidPolicy},
		{"invalid host policy", "mine", checked{fixed(time.Millisecond)}, ErrInvalidPolicy},
		{"taken preset name", "hot", Backoff{Base: time.Minute, Max: time.Hour, Factor: 2}, ErrTierTaken},
		{"taken preset name, policy without Validate", "digest_weekly", fixed(time.Hour), ErrTierTaken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			before := names(r)
			err := r.Register(tt.tier, tt.policy)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Register(%q, %v) = %v, want %v", tt.tier, tt.policy, err, tt.want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, tt.want.Error()) || strings.Count(msg, "cadence:") != 1 {
				t.Errorf("Register(%q, %v) = %q, want the sentinel first and the package named once", tt.tier, tt.policy, msg)
			}
			if after := names(r); !slices.Equal(before, after) {
				t.Fatalf("a refused Register changed the names: %v → %v", before, after)
			}
			if p, _ := r.Lookup("hot"); p != Policy(TierHot) {
				t.Fatalf("a refused Register changed the hot tier to %v", p)
			}
		})
	}
	t.Run("taken host name", func(t *testing.T) {
		r := NewRegistry()
		if err := r.Register("mine", fixed(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := r.Register("mine", fixed(time.Hour)); !errors.Is(err, ErrTierTaken) {
			t.Fatalf("second Register(mine) = %v, want ErrTierTaken", err)
		}
		if p, _ := r.Lookup("mine"); p != Policy(fixed(time.Minute)) {
			t.Fatalf("Lookup(mine) = %v, want the first registration", p)
		}
	})
}

func TestZeroRegistry(t *testing.T) {
	var r Registry
	if _, err := r.Lookup("hot"); !errors.Is(err, ErrUnknownTier) {
		t.Fatalf("zero Registry Lookup(hot) = %v, want ErrUnknownTier: it holds no presets", err)
	}
	if err := r.Register("mine", fixed(time.Minute)); err != nil {
		t.Fatalf("zero Registry Register = %v", err)
	}
	if _, err := r.Lookup("mine"); err != nil {
		t.Fatalf("zero Registry Lookup(mine) = %v", err)
	}
}

func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := string(rune('a' + i))
			if err := r.Register(name, fixed(time.Minute)); err != nil {
				t.Errorf("Register(%q) = %v", name, err)
			}
			for range 100 {
				if _, err := r.Lookup("hot"); err != nil {
					t.Errorf("Lookup(hot) = %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := len(names(r)); n != 12 {
		t.Fatalf("the registry holds %d tiers, want 4 presets + 8 registered", n)
	}
}

// TestRegisterRefusesATierDueAgainAtOnce: a tier whose interval after a hit is below
// 10 ms would make a source due again before any cycle could run it.
func TestRegisterRefusesATierDueAgainAtOnce(t *testing.T) {
	r := NewRegistry()
	for _, p := range []Policy{Backoff{Base: 1, Max: time.Hour, Factor: 2}, Backoff{Base: 9 * time.Millisecond, Max: time.Second, Factor: 2}} {
		if err := r.Register("twitchy", p); !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), "due again before any cycle") {
			t.Errorf("Register(%+v) = %v, want ErrInvalidPolicy saying why", p, err)
		}
	}
	if err := r.Register("quick", Backoff{Base: 10 * time.Millisecond, Max: time.Second, Factor: 2}); err != nil {
		t.Errorf("Register of a 10ms tier = %v, want it taken", err)
	}
}
