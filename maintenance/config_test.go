package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/internal/clock"
)

// The zero Config takes every default; a nil Logger is slog.Default() as it is when
// NewScheduler runs; the in-memory lease and store it makes are fenced together.
func TestConfigWithDefaults(t *testing.T) {
	custom := slog.New(slog.DiscardHandler)
	was := slog.Default()
	slog.SetDefault(custom)
	c := Config{}.withDefaults()
	slog.SetDefault(was)
	if c.MaxHold != DefaultMaxHold || c.LeaseTTL != defaultLeaseTTL || c.YieldAfter != defaultYieldAfter ||
		c.DegradeAfter != DefaultDegradeAfter || c.AlsoDispatchLimit != defaultAlsoDispatchLimit ||
		c.PollInterval != defaultPollInterval || c.Holder != DefaultHolder {
		t.Errorf("zero knobs take the defaults: %+v", c)
	}
	if c.Logger != custom {
		t.Errorf("a nil Logger is slog.Default() at construction time")
	}
	if c.Clock != clock.Real {
		t.Errorf("a nil Clock is the real clock: %T", c.Clock)
	}
	lease, ok1 := c.Lease.(*MemoryLease)
	store, ok2 := c.StateStore.(*MemoryStateStore)
	if !ok1 || !ok2 || store.lease != lease {
		t.Fatalf("nil Lease and StateStore are a MemoryLease and a MemoryStateStore fenced with it: %T %T", c.Lease, c.StateStore)
	}
	if c := (Config{MaxHold: 2 * time.Minute}).withDefaults(); c.LeaseTTL != 2*time.Minute {
		t.Errorf("LeaseTTL defaults to MaxHold when that is shorter: %v", c.LeaseTTL)
	}
	given := NewMemoryLease(time.Hour)
	if c := (Config{Lease: given, Clock: clock.Real}).withDefaults(); c.Lease != given || c.StateStore.(*MemoryStateStore).lease != given {
		t.Errorf("a given Lease is kept and the default store is fenced with it")
	}
	if err := (Config{}).withDefaults().validate(); err != nil {
		t.Errorf("the zero Config is valid: %v", err)
	}
}

// validate reports every bad field, each as ErrInvalidConfig naming Config.Field.
func TestConfigValidate(t *testing.T) {
	c := Config{LeaseTTL: -1, MaxHold: -1, YieldAfter: -1, DegradeAfter: -1, PollInterval: -1, AlsoDispatchLimit: -1, Holder: "a\tb"}.withDefaults()
	err := c.validate()
	for _, f := range []string{"LeaseTTL", "MaxHold", "YieldAfter", "DegradeAfter", "PollInterval", "AlsoDispatchLimit", "Holder"} {
		if !strings.Contains(err.Error(), "Config."+f+" must") {
			t.Errorf("validate names Config.%s: %v", f, err)
		}
	}
	if !errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrInvalid) {
		t.Errorf("config errors wrap ErrInvalidConfig only: %v", err)
	}
	if got := len(strings.Split(err.Error(), "\n")); got != 7 {
		t.Errorf("one line per violation: %d lines", got)
	}
	if err := (Config{LeaseTTL: time.Hour, MaxHold: time.Minute}).withDefaults().validate(); err == nil || !strings.Contains(err.Error(), "Config.LeaseTTL must not exceed MaxHold 1m0s, got 1h0m0s") {
		t.Errorf("LeaseTTL above MaxHold: %v", err)
	}
}

// finishRun records the run's start as LastRunAt and the outcome its error gives, and
// clears the flag; the states it writes are storable.
func TestFinishRun(t *testing.T) {
	task := Task{Name: "reindex", Class: OffLease, DataSafety: true}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := TaskState{Name: "reindex", Running: true, RunningSince: start, RunningBy: "a", RunningUntil: start.Add(time.Minute), LastError: "old"}
	for _, tt := range []struct {
		err  error
		want Outcome
		msg  string
	}{
		{nil, OutcomeSucceeded, ""},
		{errors.New("disk full"), OutcomeFailed, "disk full"},
		{context.DeadlineExceeded, OutcomeCancelled, "context deadline exceeded"},
		{ErrNotHolder, OutcomeCancelled, ErrNotHolder.Error()},
		{errors.New("bad \xff\x00"), OutcomeFailed, "bad \uFFFD\uFFFD"},
	} {
		outcome, msg := outcomeOf(tt.err)
		r := newRun(task, "a", 0, start, start.Add(time.Minute))
		writes, raise, err := finishRun(r, outcome, msg)(0, []TaskState{running})
		want := TaskState{Name: "reindex", Class: OffLease, Rank: RankDataSafety, LastRunAt: start, LastOutcome: tt.want, LastError: tt.msg}
		if err != nil || raise != 0 || len(writes) != 1 || writes[0] != want {
			t.Errorf("finish(%v) = %+v, %d, %v, want %+v", tt.err, writes, raise, err, want)
			continue
		}
		if err := writes[0].Validate(); err != nil {
			t.Errorf("finish(%v) is storable: %v", tt.err, err)
		}
	}
}
