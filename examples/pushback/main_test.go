package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/golden"
)

// The program prints exactly the golden output: the simulation is deterministic. After an
// intended change: go test ./examples/pushback -update.
func TestPushbackOutput(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	golden.Check(t, filepath.Join("testdata", "pushback.golden"), out.Bytes())
	var again bytes.Buffer
	if err := run(context.Background(), &again); err != nil || again.String() != out.String() {
		t.Errorf("a second run printed something else: %v", err)
	}
}

// at is the instant m minutes into the simulation.
func at(m int) time.Time { return start.Add(time.Duration(m) * time.Minute) }

// simulated runs the simulation once for a test.
func simulated(t *testing.T) story {
	t.Helper()
	st, err := simulate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// acme spends its 30 calls of the hour by 0:35 (4 sources every 5 minutes), its run that
// gets the 429 pauses it until the hour, for every source: none is polled before then,
// every one is polled at 1:00, and the index lists the pause exactly while it lasts.
func TestPauseHoldsAndEndsOnTime(t *testing.T) {
	st := simulated(t)
	from, until := at(35), at(60)
	statuses := map[bridge.ItemStatus]int{}
	for _, s := range tenants[0].sources {
		key := "acme/" + s
		polledAtEnd := false
		for _, r := range st.runs[key] {
			switch {
			case r.at.Equal(from):
				statuses[r.status]++
			case r.at.After(from) && r.at.Before(until):
				t.Errorf("%s ran at %s while acme was paused", key, clock(r.at))
			case r.at.Equal(until):
				polledAtEnd = r.status == bridge.StatusHit
			}
			if r.status == bridge.StatusPaused && !r.next.DueAt.Equal(until) {
				t.Errorf("%s: the run that paused acme left it due at %s, want the pause's end %s", key, clock(r.next.DueAt), clock(until))
			}
		}
		if !polledAtEnd {
			t.Errorf("%s was not polled at %s, when acme's pause ended", key, clock(until))
		}
	}
	want := map[bridge.ItemStatus]int{bridge.StatusHit: 2, bridge.StatusPaused: 1, bridge.StatusReleased: 1}
	if len(statuses) != len(want) || statuses[bridge.StatusHit] != 2 || statuses[bridge.StatusPaused] != 1 || statuses[bridge.StatusReleased] != 1 {
		t.Errorf("acme's items at %s: %v, want the quota's last 2 calls hits, then 1 pushback and 1 handed back: %v", clock(from), statuses, want)
	}
	for _, p := range st.paused {
		var want []duework.UserPause
		if !p.at.Before(from) && p.at.Before(until) {
			want = []duework.UserPause{{UserID: "acme", Reason: "upstream-429", Until: until}}
		}
		if !pausesEqual(p.users, want) {
			t.Errorf("Index.Paused at %s: %v, want %v", clock(p.at), p.users, want)
		}
	}
	if n := count(st.lines, `msg="rota: tenant paused" user_id=acme`); n != 1 {
		t.Errorf("%d lines say acme was paused, want 1", n)
	}
}

func pausesEqual(a, b []duework.UserPause) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].UserID != b[i].UserID || a[i].Reason != b[i].Reason || !a[i].Until.Equal(b[i].Until) {
			return false
		}
	}
	return true
}

// count counts the lines that contain s.
func count(lines []logLine, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l.text, s) {
			n++
		}
	}
	return n
}

// crm, answered 401 from 0:02 to 0:50, is run when due and waits 1, 2, 4 … minutes after
// each failure, its streak growing by one; the fifth failure names it, once; and its first
// success after the credentials are renewed sets the streak back to 0 and its cadence to
// the tier's 5 minutes.
func TestFailingSourceBacksOff(t *testing.T) {
	st := simulated(t)
	runs := st.runs["beta/crm"]
	var fails []poll
	for i, r := range runs {
		if i > 0 && !r.at.Equal(runs[i-1].next.DueAt) {
			t.Errorf("crm ran at %s, but was due at %s", clock(r.at), clock(runs[i-1].next.DueAt))
		}
		if r.status == bridge.StatusError {
			fails = append(fails, r)
		}
	}
	if len(fails) != 6 {
		t.Fatalf("crm failed %d times, want 6: at 0:05, 0:06, 0:08, 0:12, 0:20 and 0:36", len(fails))
	}
	for i, r := range fails {
		if wait, want := r.next.DueAt.Sub(r.at), time.Minute<<i; r.next.ErrorStreak != i+1 || wait != want {
			t.Errorf("failure %d at %s: streak %d, waits %v; want streak %d, wait %v", i+1, clock(r.at), r.next.ErrorStreak, wait, i+1, want)
		}
	}
	if n := count(st.lines, `msg="rota: source failing" user_id=beta work_key=crm error_streak=5`); n != 1 {
		t.Errorf("%d lines name crm failing at streak 5, want 1:\n%v", n, st.lines)
	}
	last := fails[len(fails)-1]
	after := runs[len(runs)-2:]
	for _, r := range after {
		if r.status != bridge.StatusHit || r.next.ErrorStreak != 0 || r.next.DueAt.Sub(r.at) != 5*time.Minute || !r.at.After(last.at) {
			t.Errorf("crm at %s: %s, streak %d, next %s; want a hit, streak 0, due 5m later", clock(r.at), r.status, r.next.ErrorStreak, clock(r.next.DueAt))
		}
	}
	if n := count(st.lines, `msg="rota: source recovered" user_id=beta work_key=crm`); n != 1 {
		t.Errorf("%d lines say crm recovered, want 1", n)
	}
}

// Every source of a tenant never paused, other than crm, is polled every 5 minutes from
// the first cycle to the last, whatever acme's pause and crm's failures.
func TestOthersUnaffected(t *testing.T) {
	st := simulated(t)
	for _, tn := range tenants[1:] {
		for _, s := range tn.sources {
			key := tn.user + "/" + s
			if key == "beta/crm" {
				continue
			}
			runs := st.runs[key]
			if len(runs) != 16 {
				t.Errorf("%s ran %d times, want 16: every 5 minutes from 0:00 to 1:15", key, len(runs))
			}
			for i, r := range runs {
				if !r.at.Equal(at(5*i)) || r.status != bridge.StatusHit {
					t.Errorf("%s's run %d: %s at %s, want a hit at %s", key, i, r.status, clock(r.at), clock(at(5*i)))
				}
			}
		}
	}
}

// The pipeline pauses the tenant for what the upstream says about the tenant, and fails
// only the source for anything else.
func TestVerdict(t *testing.T) {
	date := start.Format(http.TimeFormat)
	for _, c := range []struct {
		name   string
		code   int
		header http.Header
		after  time.Duration // the Pushback's After; 0: not a Pushback
		fails  bool
	}{
		{"success", 200, nil, 0, false},
		{"429 with seconds", 429, http.Header{"Retry-After": {"120"}}, 2 * time.Minute, true},
		{"429 with a date", 429, http.Header{"Date": {date}, "Retry-After": {start.Add(time.Hour).Format(http.TimeFormat)}}, time.Hour, true},
		{"429 without Retry-After", 429, nil, defaultPause, true},
		{"429 with a past date", 429, http.Header{"Date": {date}, "Retry-After": {start.Add(-time.Hour).Format(http.TimeFormat)}}, defaultPause, true},
		{"503 with seconds", 503, http.Header{"Retry-After": {"30"}}, 30 * time.Second, true},
		{"503 without Retry-After", 503, nil, 0, true},
		{"401", 401, nil, 0, true},
		{"404 with Retry-After", 404, http.Header{"Retry-After": {"30"}}, 0, true},
	} {
		err := verdict("GET /x", &http.Response{StatusCode: c.code, Status: http.StatusText(c.code), Header: c.header})
		var pb *bridge.Pushback
		isPushback := errors.As(err, &pb)
		switch {
		case (err != nil) != c.fails:
			t.Errorf("%s: %v, want an error: %v", c.name, err, c.fails)
		case c.after == 0 && isPushback:
			t.Errorf("%s: %v, want a plain error", c.name, err)
		case c.after != 0 && (!isPushback || pb.After != c.after || pb.Reason != "upstream-"+strconv.Itoa(c.code)):
			t.Errorf("%s: %#v, want a Pushback for %v", c.name, pb, c.after)
		}
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A write that fails is not lost: run returns it.
func TestPushbackReportsWriteErrors(t *testing.T) {
	if err := run(context.Background(), failingWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("run on a failing writer: %v, want the write's error", err)
	}
}
