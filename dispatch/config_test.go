package dispatch

import (
	"context"
	"errors"
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
		{"no lanes", func(c *Config) { c.Lanes = nil }, []string{"Config.Lanes must hold at least one lane"}},
		{"empty lane name", func(c *Config) { c.Lanes[1].Lane = "" }, []string{"Config.Lanes[1].Lane must not be empty"}},
		{"duplicate lane", func(c *Config) { c.Lanes[1].Lane = "pro" }, []string{`Config.Lanes[1].Lane "pro" duplicates Config.Lanes[0]`}},
		{"PerUserLimit 0", func(c *Config) { c.Lanes[1].PerUserLimit = 0 }, []string{"Config.Lanes[1].PerUserLimit must be ≥ 1, got 0"}},
		{"PerCycleLimit -1", func(c *Config) { c.Lanes[0].PerCycleLimit = -1 }, []string{"Config.Lanes[0].PerCycleLimit must be ≥ 1, got -1"}},
		{"MinShare < 0", func(c *Config) { c.Lanes[0].MinShare = -2 }, []string{"Config.Lanes[0].MinShare must be ≥ 0, got -2"}},
		{"MinShare > global", func(c *Config) { c.Lanes[1].MinShare = 61 }, []string{"Config.Lanes[1].MinShare 61 exceeds Config.GlobalBatchLimit 60"}},
		{"MinShares > global", func(c *Config) { c.Lanes[0].MinShare = 56 }, []string{"MinShares add up to 61, more than Config.GlobalBatchLimit 60"}},
		{"GlobalBatchLimit 0", func(c *Config) { c.GlobalBatchLimit = 0; c.Lanes[1].MinShare = 0 }, []string{"Config.GlobalBatchLimit must be ≥ 1, got 0"}},
		{"nil LaneFor", func(c *Config) { c.LaneFor = nil }, []string{"Config.LaneFor must not be nil"}},
		{"ClaimFor 0", func(c *Config) { c.ClaimFor = 0 }, []string{"Config.ClaimFor must be > 0, got 0s"}},
		{"ClaimFor negative", func(c *Config) { c.ClaimFor = -time.Second }, []string{"Config.ClaimFor must be > 0, got -1s"}},
		{"everything at once", func(c *Config) {
			c.Lanes[0].PerUserLimit = 0
			c.Lanes[1].PerCycleLimit = 0
			c.LaneFor = nil
			c.ClaimFor = 0
		}, []string{"Lanes[0].PerUserLimit", "Lanes[1].PerCycleLimit", "Config.LaneFor", "Config.ClaimFor"}},
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
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "idx must not be nil") {
		t.Fatalf("New(nil, …) = %v", err)
	}
}

func TestNewAcceptsValidConfigAndCopiesLanes(t *testing.T) {
	cfg := validConfig()
	d, err := New(stubIndex{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Lanes[0].Lane = "changed"
	if d.lanes[0].Lane != "pro" || d.perUser != 3 {
		t.Errorf("dispatcher lanes %+v perUser %d", d.lanes, d.perUser)
	}
	// MinShares may add up to exactly the global limit.
	cfg = validConfig()
	cfg.Lanes[0].MinShare = 55
	if _, err := New(stubIndex{}, cfg); err != nil {
		t.Errorf("MinShares summing to GlobalBatchLimit refused: %v", err)
	}
}

// FuzzConfigValidate checks that Validate accepts exactly the configs the rules allow, never
// panics, and names a Config field in every error.
func FuzzConfigValidate(f *testing.F) {
	f.Add(uint8(2), 3, 50, 0, 1, 20, 5, 60, int64(time.Minute), true, false)
	f.Add(uint8(0), 1, 1, 0, 1, 1, 0, 1, int64(1), true, false)
	f.Add(uint8(2), 0, -1, -5, 1, 1, 99, 10, int64(0), false, true)
	f.Add(uint8(4), 1, 1, 3, 1, 1, 3, 5, int64(-1), true, true)
	f.Fuzz(func(t *testing.T, n uint8, pu0, pc0, ms0, pu1, pc1, ms1, global int, claimFor int64, laneFor, dupNames bool) {
		n %= 5
		cfg := Config{GlobalBatchLimit: global, ClaimFor: time.Duration(claimFor)}
		if laneFor {
			cfg.LaneFor = everyoneFree
		}
		want := n > 0 && global >= 1 && laneFor && claimFor > 0
		shares := 0
		for i := range int(n) {
			lc := LaneCapacity{Lane: laneNames[i], PerUserLimit: pu0, PerCycleLimit: pc0, MinShare: ms0}
			if i%2 == 1 {
				lc = LaneCapacity{Lane: laneNames[i], PerUserLimit: pu1, PerCycleLimit: pc1, MinShare: ms1}
			}
			if dupNames && i == 1 {
				lc.Lane = laneNames[0]
				want = false
			}
			if lc.PerUserLimit < 1 || lc.PerCycleLimit < 1 || lc.MinShare < 0 || lc.MinShare > global {
				want = false
			} else {
				shares += lc.MinShare
			}
			cfg.Lanes = append(cfg.Lanes, lc)
		}
		if shares > global {
			want = false
		}
		err := cfg.Validate()
		if (err == nil) != want {
			t.Fatalf("Validate(%+v) = %v, want valid %v", cfg, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.Contains(line, "Config.") {
					t.Fatalf("error line %q names no field", line)
				}
			}
		}
	})
}
