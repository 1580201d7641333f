package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/duework"
)

func everyoneFree(context.Context, string) (Lane, error) { return "free", nil }

func validConfig() Config {
	return Config{
		Lanes: []LaneCapacity{
			{Lane: "pro", PerUserLimit: 3, PerCycleLimit: 50, MinShare: 0},
			{Lane: "free", PerUserLimit: 1, PerCycleLimit: 20, MinShare: 5},
		},
		GlobalBatchLimit: 60,
		LaneFor:          everyoneFree,
		ClaimFor:         time.Minute,
	}
}

// stubIndex is an Index that New can hold; New never calls it.
type stubIndex struct{ duework.Index }

func TestNewRefusesBadConfig(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Config)
		want   []string // every one must appear in the error
	}{
		{"no lanes", func(c *Config) { c.Lanes = nil }, []string{"Config.Lanes must hold at least one lane, got none"}},
		{"empty lane name", func(c *Config) { c.Lanes[1].Lane = "" }, []string{`Config.Lanes[1].Lane must not be empty, got ""`}},
		{"lane name no index can hold", func(c *Config) { c.Lanes[1].Lane = " free" }, []string{`Config.Lanes[1].Lane must be a valid group name (`, `got " free"`}},
		{"duplicate lane", func(c *Config) { c.Lanes[1].Lane = "pro" }, []string{`Config.Lanes[1].Lane must differ from Lanes[0].Lane, got "pro"`}},
		{"PerUserLimit 0", func(c *Config) { c.Lanes[1].PerUserLimit = 0 }, []string{"Config.Lanes[1].PerUserLimit must be in [1, 1048576], got 0"}},
		{"PerUserLimit beyond what an Index serves", func(c *Config) { c.Lanes[0].PerUserLimit = math.MaxInt },
			[]string{fmt.Sprintf("Config.Lanes[0].PerUserLimit must be in [1, 1048576], got %d", math.MaxInt)}},
		{"PerCycleLimit -1", func(c *Config) { c.Lanes[0].PerCycleLimit = -1 }, []string{"Config.Lanes[0].PerCycleLimit must be in [1, 1048576], got -1"}},
		{"PerCycleLimit beyond what an Index serves", func(c *Config) { c.Lanes[0].PerCycleLimit = duework.MaxLimit + 1 },
			[]string{"Config.Lanes[0].PerCycleLimit must be in [1, 1048576], got 1048577"}},
		{"MinShare < 0", func(c *Config) { c.Lanes[0].MinShare = -2 }, []string{"Config.Lanes[0].MinShare must be in [0, GlobalBatchLimit 60], got -2"}},
		{"MinShare > global", func(c *Config) { c.Lanes[1].MinShare = 61 }, []string{"Config.Lanes[1].MinShare must be in [0, GlobalBatchLimit 60], got 61"}},
		{"MinShares > global", func(c *Config) { c.Lanes[0].MinShare = 56 }, []string{"Config.Lanes must have MinShares that add up to at most GlobalBatchLimit 60, got 61"}},
		{"GlobalBatchLimit 0", func(c *Config) { c.GlobalBatchLimit = 0; c.Lanes[1].MinShare = 0 }, []string{"Config.GlobalBatchLimit must be in [1, 1048576], got 0"}},
		{"GlobalBatchLimit beyond what an Index serves", func(c *Config) { c.GlobalBatchLimit = math.MaxInt },
			[]string{fmt.Sprintf("Config.GlobalBatchLimit must be in [1, 1048576], got %d", math.MaxInt)}},
		{"nil LaneFor", func(c *Config) { c.LaneFor = nil }, []string{"Config.LaneFor must not be nil, got nil"}},
		{"ClaimFor 0", func(c *Config) { c.ClaimFor = 0 }, []string{"Config.ClaimFor must be at least 1s, got 0s"}},
		{"ClaimFor negative", func(c *Config) { c.ClaimFor = -time.Second }, []string{"Config.ClaimFor must be at least 1s, got -1s"}},
		{"ClaimFor 1ns", func(c *Config) { c.ClaimFor = time.Nanosecond }, []string{"Config.ClaimFor must be at least 1s, got 1ns"}},
		{"ClaimFor below the floor", func(c *Config) { c.ClaimFor = minClaimFor - 1 }, []string{"Config.ClaimFor must be at least 1s, got 999.999999ms"}},
		{"ClaimFor not longer than the default MaxClockSkew", func(c *Config) { c.ClaimFor = DefaultMaxClockSkew },
			[]string{"Config.ClaimFor must be longer than MaxClockSkew 1s, got 1s"}},
		{"ClaimFor not longer than MaxClockSkew", func(c *Config) {
			c.ClaimFor, c.MaxClockSkew, c.HoldFor = 30*time.Second, 30*time.Second, 40*time.Second
		},
			[]string{"Config.ClaimFor must be longer than MaxClockSkew 30s, got 30s"}},
		{"HoldFor negative", func(c *Config) { c.HoldFor = -time.Second }, []string{"Config.HoldFor must be ≥ 0, got -1s"}},
		{"HoldFor not longer than the default MaxClockSkew", func(c *Config) { c.HoldFor = time.Second },
			[]string{"Config.HoldFor must be longer than MaxClockSkew 1s, got 1s"}},
		{"the default HoldFor not longer than MaxClockSkew", func(c *Config) { c.MaxClockSkew = DefaultHoldFor },
			[]string{"Config.HoldFor must be longer than MaxClockSkew 10s, got 10s"}},
		{"MaxClockSkew negative", func(c *Config) { c.MaxClockSkew = -time.Millisecond }, []string{"Config.MaxClockSkew must be ≥ 0, got -1ms"}},
		{"PerUserBurst below PerUserLimit", func(c *Config) { c.Lanes[0].PerUserBurst = 2 },
			[]string{"Config.Lanes[0].PerUserBurst must be 0 (no burst) or in [PerUserLimit 3, 1048576], got 2"}},
		{"PerUserBurst negative", func(c *Config) { c.Lanes[1].PerUserBurst = -1 },
			[]string{"Config.Lanes[1].PerUserBurst must be 0 (no burst) or in [PerUserLimit 1, 1048576], got -1"}},
		{"PerUserBurst beyond what an Index serves", func(c *Config) { c.Lanes[1].PerUserBurst = duework.MaxLimit + 1 },
			[]string{"Config.Lanes[1].PerUserBurst must be 0 (no burst) or in [PerUserLimit 1, 1048576], got 1048577"}},
		{"RetryAfter equal to HoldFor", func(c *Config) { c.HoldFor, c.RetryAfter = time.Minute, time.Minute },
			[]string{"Config.RetryAfter must be longer than HoldFor 1m0s, got 1m0s"}},
		{"RetryAfter shorter than the default HoldFor", func(c *Config) { c.RetryAfter = time.Second },
			[]string{"Config.RetryAfter must be longer than HoldFor 10s, got 1s"}},
		{"the default RetryAfter not longer than HoldFor", func(c *Config) { c.HoldFor = 2 * time.Minute },
			[]string{"Config.RetryAfter must be longer than HoldFor 2m0s, got 1m0s"}},
		{"RouteLimit negative", func(c *Config) { c.RouteLimit = -1 }, []string{"Config.RouteLimit must be in [0, 1048576] (0: GlobalBatchLimit), got -1"}},
		{"RouteLimit beyond what an Index serves", func(c *Config) { c.RouteLimit = math.MaxInt },
			[]string{fmt.Sprintf("Config.RouteLimit must be in [0, 1048576] (0: GlobalBatchLimit), got %d", math.MaxInt)}},
		{"everything at once", func(c *Config) {
			c.Lanes[0].PerUserLimit = 0
			c.Lanes[1].PerCycleLimit = 0
			c.LaneFor = nil
			c.ClaimFor = 0
			c.RouteLimit = -3
		}, []string{"Lanes[0].PerUserLimit", "Lanes[1].PerCycleLimit", "Config.LaneFor", "Config.ClaimFor", "Config.RouteLimit"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := validConfig()
			c.change(&cfg)
			d, err := New(stubIndex{}, cfg)
			if d != nil || err == nil {
				t.Fatalf("New accepted %+v", cfg)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestNewRefusesNilIndex(t *testing.T) {
	_, err := New(nil, validConfig())
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "New's idx must not be nil, got nil") {
		t.Fatalf("New(nil, …) = %v", err)
	}
}

func TestNewAppliesDefaultsAndCopiesLanes(t *testing.T) {
	cfg := validConfig()
	d, err := New(stubIndex{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Lanes[0].Lane = "changed"
	if d.lanes[0].Lane != "pro" {
		t.Errorf("dispatcher lanes %+v changed with the Config's", d.lanes)
	}
	if d.holdFor != DefaultHoldFor || d.retryAfter != defaultRetryAfter || d.routeLimit != cfg.GlobalBatchLimit {
		t.Errorf("zero HoldFor, RetryAfter, RouteLimit became %v, %v, %d; want %v, %v, %d",
			d.holdFor, d.retryAfter, d.routeLimit, DefaultHoldFor, defaultRetryAfter, cfg.GlobalBatchLimit)
	}
	if got := d.Config().MaxClockSkew; got != DefaultMaxClockSkew {
		t.Errorf("zero MaxClockSkew became %v, want %v", got, DefaultMaxClockSkew)
	}
	cfg = validConfig()
	cfg.HoldFor, cfg.RetryAfter, cfg.RouteLimit, cfg.MaxClockSkew = time.Second, 2*time.Second, 7, time.Second/2
	if d, err = New(stubIndex{}, cfg); err != nil || d.holdFor != time.Second || d.retryAfter != 2*time.Second || d.routeLimit != 7 ||
		d.Config().MaxClockSkew != time.Second/2 {
		t.Errorf("New(%+v) = %+v, %v: set fields must be kept", cfg, d, err)
	}
	// The floors themselves are accepted: ClaimFor minClaimFor under a shorter skew, a
	// burst equal to PerUserLimit.
	cfg = validConfig()
	cfg.ClaimFor, cfg.MaxClockSkew, cfg.Lanes[0].PerUserBurst = minClaimFor, minClaimFor/2, cfg.Lanes[0].PerUserLimit
	if _, err := New(stubIndex{}, cfg); err != nil {
		t.Errorf("a config at the floors refused: %v", err)
	}
	// MinShares may add up to exactly the global limit; limits may reach MaxLimit.
	cfg = validConfig()
	cfg.Lanes[0].MinShare = 55
	cfg.Lanes[1].PerUserLimit = duework.MaxLimit
	cfg.RouteLimit = duework.MaxLimit
	if _, err := New(stubIndex{}, cfg); err != nil {
		t.Errorf("a valid config refused: %v", err)
	}
}

// FuzzNewConfig checks that New accepts exactly the configs the rules allow, never panics,
// and names a Config field in every line of its error.
func FuzzNewConfig(f *testing.F) {
	f.Add(uint8(2), 3, 50, 0, 0, 1, 20, 5, 0, 60, int64(time.Minute), int64(0), int64(0), int64(0), 0, true, false)
	f.Add(uint8(0), 1, 1, 0, 0, 1, 1, 0, 0, 1, int64(1), int64(1), int64(2), int64(0), 1, true, false)
	f.Add(uint8(2), 0, -1, -5, 0, 1, 1, 99, 0, 10, int64(0), int64(-1), int64(5), int64(0), -1, false, true)
	f.Add(uint8(4), 1, 1, 3, 0, 1, 1, 3, 0, 5, int64(-1), int64(3), int64(3), int64(0), 1<<21, true, true)
	f.Add(uint8(1), math.MaxInt, 1, 0, 0, 1, 1, 0, 0, 5, int64(1), int64(0), int64(0), int64(0), 0, true, false)
	f.Add(uint8(2), 2, 10, 0, 4, 1, 10, 0, 1, 20, int64(minClaimFor), int64(time.Second), int64(0), int64(time.Second/2), 0, true, false)
	f.Add(uint8(2), 3, 10, 0, 2, 1, 10, 0, -1, 20, int64(time.Minute), int64(0), int64(0), int64(-1), 0, true, false)
	f.Fuzz(func(t *testing.T, n uint8, pu0, pc0, ms0, pb0, pu1, pc1, ms1, pb1, global int, claimFor, holdFor, retryAfter, skew int64, routeLimit int, laneFor, dupNames bool) {
		n %= 5
		cfg := Config{GlobalBatchLimit: global, ClaimFor: time.Duration(claimFor), HoldFor: time.Duration(holdFor),
			RetryAfter: time.Duration(retryAfter), MaxClockSkew: time.Duration(skew), RouteLimit: routeLimit}
		if laneFor {
			cfg.LaneFor = everyoneFree
		}
		inLimit := func(n int) bool { return n >= 1 && n <= duework.MaxLimit }
		hold, retry, maxSkew := cfg.HoldFor, cfg.RetryAfter, cfg.MaxClockSkew
		if hold == 0 {
			hold = DefaultHoldFor
		}
		if retry == 0 {
			retry = defaultRetryAfter
		}
		if maxSkew == 0 {
			maxSkew = DefaultMaxClockSkew
		}
		want := n > 0 && inLimit(global) && laneFor && cfg.ClaimFor >= minClaimFor && maxSkew >= 0 &&
			cfg.ClaimFor > maxSkew && hold > maxSkew && retry > hold && routeLimit >= 0 && routeLimit <= duework.MaxLimit
		shares := 0
		for i := range int(n) {
			lc := LaneCapacity{Lane: laneNames[i], PerUserLimit: pu0, PerCycleLimit: pc0, MinShare: ms0, PerUserBurst: pb0}
			if i%2 == 1 {
				lc = LaneCapacity{Lane: laneNames[i], PerUserLimit: pu1, PerCycleLimit: pc1, MinShare: ms1, PerUserBurst: pb1}
			}
			if dupNames && i == 1 {
				lc.Lane = laneNames[0]
				want = false
			}
			if lc.PerUserBurst != 0 && (!inLimit(lc.PerUserBurst) || lc.PerUserBurst < lc.PerUserLimit) {
				want = false
			}
			if !inLimit(lc.PerUserLimit) || !inLimit(lc.PerCycleLimit) || lc.MinShare < 0 || lc.MinShare > global {
				want = false
			} else {
				shares += lc.MinShare
			}
			cfg.Lanes = append(cfg.Lanes, lc)
		}
		if shares > global {
			want = false
		}
		_, err := New(stubIndex{}, cfg)
		if (err == nil) != want {
			t.Fatalf("New(%+v) = %v, want valid %v", cfg, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.Contains(line, "Config.") || !strings.Contains(line, ", got ") {
					t.Fatalf("error line %q names no field or no value", line)
				}
			}
		}
	})
}
