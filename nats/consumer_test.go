package rotanats_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotanats "github.com/rotaworks/rota/nats"
)

// claimed claims user's entry key in the store until until and returns it as an item of
// lane.
func (s *store) claimed(t *testing.T, lane dispatch.Lane, user, key string, until time.Time) dispatch.Item {
	t.Helper()
	cs, err := s.idx.Claim(context.Background(), []duework.Key{{UserID: user, WorkKey: key}}, time.Now(), until)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim %s/%s: %v, %v", user, key, cs, err)
	}
	return dispatch.Item{Lane: lane, Claim: cs[0]}
}

// claimedUntil reads when user's entry key is claimed until, zero when it is not.
func (s *store) claimedUntil(t *testing.T, user, key string) (time.Time, duework.Entry) {
	t.Helper()
	states, err := s.idx.Entries(context.Background(), user, "", duework.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if st.Entry.WorkKey == key {
			return st.ClaimedUntil, st.Entry
		}
	}
	t.Fatalf("%s/%s is not scheduled", user, key)
	return time.Time{}, duework.Entry{}
}

// A Consumer runs a current item and acknowledges it once its completion is written;
// hands back unrun an item whose claim ends within the margin and drops its message; and
// terminates, with one Error line, a message that does not decode.
func TestConsumerRunsDropsAndTerminates(t *testing.T) {
	s := newStore(t)
	s.watch("ana", "pro", 2)
	cfg := freshQueue(t, rotanats.Config{Lanes: []dispatch.Lane{"pro"}, ClaimFor: time.Minute, ClaimMargin: 5 * time.Second,
		FetchWait: 200 * time.Millisecond, Logger: quiet})
	runs := newRunLog(t)
	w := startWorker(t, s, cfg, 0, runs, nil)
	sink, js := newSink(t, cfg)
	ctx := context.Background()
	now := time.Now()
	good := s.claimed(t, "pro", "ana", "s000", now.Add(time.Minute))
	late := s.claimed(t, "pro", "ana", "s001", now.Add(3*time.Second))
	if err := sink.Send(ctx, "pro", []dispatch.Item{good, late}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, cfg.Subject+".pro", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	waitStreamEmpty(t, js, cfg.Stream)
	w.stop(t)

	got := runs.all()
	if len(got) != 1 || got[0].key.WorkKey != "s000" {
		t.Fatalf("runs %+v, want one of s000", got)
	}
	if until, e := s.claimedUntil(t, "ana", "s000"); !until.IsZero() || e.LastRunAt.IsZero() {
		t.Errorf("s000 after its run: claimed until %v, last run %v; want unclaimed and run", until, e.LastRunAt)
	}
	if until, e := s.claimedUntil(t, "ana", "s001"); !until.IsZero() || !e.LastRunAt.IsZero() {
		t.Errorf("s001, late: claimed until %v, last run %v; want handed back unrun", until, e.LastRunAt)
	}
	logs := w.logs.String()
	if strings.Count(logs, "level=ERROR") != 1 || !strings.Contains(logs, `msg="rota: message terminated"`) {
		t.Errorf("want one Error line for the message that does not decode:\n%s", logs)
	}
}

// waitStreamEmpty waits until stream holds no message, for at most 10 s.
func waitStreamEmpty(t *testing.T, js jetstream.JetStream, stream string) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream still holds %d messages after 10 s", info.State.Msgs)
		}
	}
}

// Run declares each lane's consumer as the Config says: explicit acknowledgement,
// AckWait ClaimFor + AckSlack, MaxAckPending, no delivery limit, the lane's subject.
func TestConsumerDeclaresLanes(t *testing.T) {
	s := newStore(t)
	cfg := freshQueue(t, rotanats.Config{Lanes: []dispatch.Lane{"pro", "free tier"}, ClaimFor: 30 * time.Second, MaxAckPending: 12,
		FetchWait: 100 * time.Millisecond})
	w := startWorker(t, s, cfg, 0, newRunLog(t), nil)
	_, js := connect(t)
	ctx := context.Background()
	for _, lane := range cfg.Lanes {
		var info *jetstream.ConsumerInfo
		for deadline := time.Now().Add(5 * time.Second); info == nil; time.Sleep(20 * time.Millisecond) {
			c, err := js.Consumer(ctx, cfg.Stream, rotanats.LaneToken(lane))
			if err == nil {
				info = c.CachedInfo()
			} else if time.Now().After(deadline) {
				t.Fatalf("lane %q: no consumer after 5 s: %v", lane, err)
			}
		}
		c := info.Config
		if c.AckPolicy != jetstream.AckExplicitPolicy || c.AckWait != cfg.ClaimFor+rotanats.AckSlack || c.MaxAckPending != 12 ||
			c.MaxDeliver != -1 || c.FilterSubject != cfg.Subject+"."+rotanats.LaneToken(lane) {
			t.Errorf("lane %q: consumer config %+v", lane, c)
		}
	}
	w.stop(t)
}
