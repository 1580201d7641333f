package inspect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/tenancy"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var testLanes = []dispatch.LaneCapacity{{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 10}, {Lane: "free", PerUserLimit: 1, PerCycleLimit: 2}}

// fixedClock always reads one instant.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// New refuses every bad field at once, naming each.
func TestNewRefusesBadConfig(t *testing.T) {
	cfg := Config{
		Lanes:   []dispatch.LaneCapacity{{Lane: "pro"}, {Lane: ""}, {Lane: "pro"}},
		Actions: true,
		History: maxHistory + 1,
	}
	_, err := New(cfg)
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(bad) = %v, want ErrInvalidConfig", err)
	}
	for _, field := range []string{"Config.Index", "Config.Lanes[1].Lane", "Config.Lanes[2].Lane", "Config.Dispatcher", "Config.History"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("New(bad) = %v; it does not name %s", err, field)
		}
	}
	if _, err := New(Config{Index: duework.NewMemory()}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.Lanes") {
		t.Errorf("New with no lanes = %v, want ErrInvalidConfig naming Config.Lanes", err)
	}
	if _, err := New(Config{Index: duework.NewMemory(), Lanes: testLanes, History: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New with History -1 = %v, want ErrInvalidConfig", err)
	}
	i, err := New(Config{Index: duework.NewMemory(), Lanes: testLanes})
	if err != nil || len(i.cycles.buf) != defaultHistory || i.actions || i.log == nil || i.clock == nil || i.alarmErrs != bridge.DefaultAlarmAfterErrors {
		t.Errorf("New with defaults = %+v, %v; want History %d, read-only, a logger and a clock, AlarmAfterErrors %d",
			i, err, defaultHistory, bridge.DefaultAlarmAfterErrors)
	}
}

// The ring keeps the last values pushed, oldest first.
func TestRing(t *testing.T) {
	r := newRing[int](3)
	for v := range 5 {
		r.push(v)
	}
	if got := r.all(); fmt.Sprint(got) != "[2 3 4]" {
		t.Errorf("after pushing 0…4 into a ring of 3: %v, want [2 3 4]", got)
	}
	var empty ring[int]
	empty.push(1)
	if len(empty.all()) != 0 {
		t.Errorf("the zero ring kept %v", empty.all())
	}
}

// A Runner report replaces the dispatch report of its cycle wherever it stands in the ring,
// since cycles overlap; reports of other cycles are kept beside it.
func TestBridgeReportReplacesItsCycle(t *testing.T) {
	i, err := New(Config{Index: duework.NewMemory(), Lanes: testLanes, History: 4})
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		i.ObserveDispatch(dispatch.CycleInfo{Now: t0.Add(time.Duration(k) * time.Second), Batch: dispatch.Batch{Lanes: []dispatch.LaneReport{{Lane: "pro", Dispatched: k}}}})
	}
	i.ObserveCycle(bridge.CycleReport{Now: t0.Add(time.Second), Hits: 7})
	i.ObserveCycle(bridge.CycleReport{Now: t0.Add(time.Hour), Hits: 8})
	cycles, _, _ := i.snapshot()
	var got []string
	for _, c := range cycles {
		got = append(got, fmt.Sprintf("%v/%v/%d", c.now.Sub(t0), c.fromBridge, c.hits))
	}
	if want := "[0s/false/0 1s/true/7 2s/false/0 1h0m0s/true/8]"; fmt.Sprint(got) != want {
		t.Errorf("kept %v, want %v", got, want)
	}
}

// The Observers copy what they keep: a caller that reuses its report's slices changes
// nothing the pages show.
func TestObserversCopy(t *testing.T) {
	i, err := New(Config{Index: duework.NewMemory(), Lanes: testLanes})
	if err != nil {
		t.Fatal(err)
	}
	lanes := []dispatch.LaneReport{{Lane: "free", Overdue: []dispatch.Overdue{{UserID: "a", DueAt: t0}}}}
	crowd := []bridge.UserItems{{UserID: "a", Items: 1}}
	i.ObserveCycle(bridge.CycleReport{Now: t0, Lanes: lanes, Alarms: []bridge.WaitAlarm{{Lane: "free", Crowding: crowd}}})
	waiters := []maintenance.Waiter{{Task: "x"}}
	i.ObservePoll(maintenance.PollReport{Now: t0, Result: maintenance.PollResult{Gauge: maintenance.Gauge{Waiters: waiters}}})
	lanes[0].Overdue[0].UserID, crowd[0].UserID, waiters[0].Task = "changed", "changed", "changed"
	cycles, polls, alarms := i.snapshot()
	if cycles[0].lanes[0].Overdue[0].UserID != "a" || alarms.noisy[0].crowding[0].UserID != "a" || polls[0].gauge.Waiters[0].Task != "x" {
		t.Errorf("a change to the reports' slices reached the records: %+v %+v %+v", cycles[0], alarms, polls[0])
	}
}

// Reports and requests may come from many goroutines at once.
func TestConcurrentUse(t *testing.T) {
	idx := duework.NewMemory()
	tc, _ := tenancy.NewContext("acme")
	if err := idx.Schedule(context.Background(), tc, duework.Entry{UserID: "acme", WorkKey: "feed", DueAt: t0}); err != nil {
		t.Fatal(err)
	}
	i, err := New(Config{Index: idx, Lanes: testLanes, StateStore: maintenance.NewMemoryStateStore(), Clock: fixedClock(t0), History: 5})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range 50 {
				now := t0.Add(time.Duration(g*100+k) * time.Second)
				i.ObserveDispatch(dispatch.CycleInfo{Now: now})
				i.ObserveCycle(bridge.CycleReport{Now: now, Alarms: []bridge.WaitAlarm{{Lane: "free"}}, Recovered: []dispatch.Lane{"pro"},
					Items: []bridge.ItemReport{failed("acme", fmt.Sprint("k", k%7), 4+k%3, now, now.Add(time.Minute))}})
				i.ObservePoll(maintenance.PollReport{Now: now})
			}
		})
		wg.Go(func() {
			for _, path := range []string{"/", "/api/", "/lanes/free", "/tenants/acme", "/api/maintenance", "/paused"} {
				rec := httptest.NewRecorder()
				i.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != http.StatusOK {
					t.Errorf("GET %s = %d: %s", path, rec.Code, rec.Body)
				}
			}
		})
	}
	wg.Wait()
}

// keyBefore(k) is a valid key (or "") below k, and no valid key lies between the two: so
// Entries(after = keyBefore(k)) starts at k.
func TestKeyBeforeIsTheNearestKeyBelow(t *testing.T) {
	runes := []rune{'a', 'b', 'z', '~', ' ', '!', '\u00a0', '\u00a1', '\u0085', 'é', '\u07ff', '\u0800', '\ud7ff', '\ue000',
		'\ufeff', '\uffff', '\U00010000', '\U0010fffe', '\U0010ffff', '\u200b', '\u2028', '\u3000'}
	text := rapid.Custom(func(t *rapid.T) string {
		rs := rapid.SliceOfN(rapid.SampledFrom(runes), 1, 6).Draw(t, "runes")
		s := string(rs)
		if rapid.Bool().Draw(t, "long") {
			s = strings.Repeat("\U0010ffff", rapid.IntRange(0, 63).Draw(t, "pad")) + s
		}
		return s
	})
	rapid.Check(t, func(t *rapid.T) {
		k := text.Draw(t, "key")
		if tenancy.ValidateID("k", k) != nil {
			t.Skip("invalid key")
		}
		b := keyBefore(k)
		if b >= k || (b != "" && tenancy.ValidateID("b", b) != nil) {
			t.Fatalf("keyBefore(%q) = %q: not a valid key below it", k, b)
		}
		// Keys near k: its prefixes with other runes after them.
		n := rapid.IntRange(0, len(k)).Draw(t, "cut")
		for !strings.HasPrefix(k, k[:n]) || !validCut(k, n) {
			n--
		}
		s := k[:n] + text.Draw(t, "tail")
		if len(s) <= tenancy.MaxIDLength && tenancy.ValidateID("s", s) == nil && s < k && s > b {
			t.Fatalf("the valid key %q lies between keyBefore(%q) = %q and it", s, k, b)
		}
	})
}

// validCut reports whether k[:n] ends at a rune boundary.
func validCut(k string, n int) bool { return n == 0 || n == len(k) || (k[n]&0xC0) != 0x80 }

func FuzzKeyBefore(f *testing.F) {
	for _, s := range []string{"a", "a b", "é", "\U0010ffff", "!", "a\u00a0b", "b!", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if tenancy.ValidateID("k", k) != nil {
			return
		}
		if b := keyBefore(k); b >= k || (b != "" && tenancy.ValidateID("b", b) != nil) {
			t.Fatalf("keyBefore(%q) = %q: not a valid key below it", k, b)
		}
	})
}

// entry finds an entry among neighbours that sort close to it, in one Entries call.
func TestEntryFindsItsKey(t *testing.T) {
	ctx := context.Background()
	idx := &countingIndex{Index: duework.NewMemory()}
	tc, _ := tenancy.NewContext("acme")
	keys := []string{"a", "a!", "a\u00a0!", "a!!", "aa", "b", "é", "\U0010ffff", strings.Repeat("\U0010ffff", 64), "~"}
	for _, k := range keys {
		if err := idx.Schedule(ctx, tc, duework.Entry{UserID: "acme", WorkKey: k, DueAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	i, err := New(Config{Index: idx, Lanes: testLanes})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		idx.entries = 0
		es, err := i.entry(ctx, "acme", k)
		if err != nil || es.Entry.WorkKey != k || idx.entries != 1 {
			t.Errorf("entry(%q) = %q, %v after %d Entries calls; want it in one", k, es.Entry.WorkKey, err, idx.entries)
		}
	}
	for _, k := range []string{"0", "a ", "ab", "c", "\U0010fffe"} {
		if _, err := i.entry(ctx, "acme", k); !errors.Is(err, duework.ErrNotFound) {
			t.Errorf("entry(%q) = %v, want ErrNotFound", k, err)
		}
	}
}

// countingIndex counts Entries calls.
type countingIndex struct {
	duework.Index
	entries int
}

func (c *countingIndex) Entries(ctx context.Context, userID, after string, limit int) ([]duework.EntryState, error) {
	c.entries++
	return c.Index.Entries(ctx, userID, after, limit)
}

// The package doc documents every JSON field the views serve.
func TestDocNamesEveryJSONField(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{overviewJSON{}, laneJSON{}, laneCycleJSON{}, alarmJSON{}, alarmEventJSON{}, overdueJSON{}, userItemsJSON{},
		capacityJSON{}, groupWaitJSON{}, unroutedJSON{}, cycleJSON{}, postureJSON{}, laneViewJSON{}, laneUserJSON{}, limitsJSON{},
		tenantJSON{}, entryJSON{}, maintenanceJSON{}, gaugeJSON{}, waiterJSON{}, taskJSON{}, pollJSON{}, deferralJSON{},
		actionJSON{}, errorJSON{}, pausedJSON{}, pausedViewJSON{}, failingJSON{}} {
		rt := reflect.TypeOf(v)
		for k := range rt.NumField() {
			f := rt.Field(k)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !strings.Contains(string(doc), "`"+name+"`") && !strings.Contains(string(doc), `"`+name+`"`) {
				t.Errorf("%s.%s: the package doc does not document the JSON field %q", rt.Name(), f.Name, name)
			}
		}
	}
}

// The chart stays within its box and says each cycle's figures.
func TestChart(t *testing.T) {
	var cycles []laneCycleJSON
	for k := range chartColumns + 10 {
		cycles = append(cycles, laneCycleJSON{At: t0.Add(time.Duration(k) * time.Second), Dispatched: k, LostClaims: k % 3, Shed: k % 7, Limited: k % 2})
	}
	c := chartOf(cycles)
	if len(c.Cols) != chartColumns {
		t.Fatalf("%d columns, want the last %d cycles", len(c.Cols), chartColumns)
	}
	for _, col := range c.Cols {
		for _, r := range col.Rects {
			if r.X < 0 || r.X+r.W > c.W || r.Y < 0 || r.Y+r.H > c.H || r.H < 1 {
				t.Errorf("%+v lies outside the %dx%d chart", r, c.W, c.H)
			}
		}
	}
	last := c.Cols[len(c.Cols)-1]
	if !strings.Contains(last.Title, "129 dispatched") || !strings.Contains(last.Title, "3 users shed") {
		t.Errorf("the last column's title %q does not say its figures", last.Title)
	}
	if empty := chartOf(nil); len(empty.Cols) != 0 || empty.W <= 0 {
		t.Errorf("the chart of no cycles is %+v", empty)
	}
}

// A measured duration is written to a precision that suits its size, and never as 0s
// unless it is zero.
func TestHumanSeconds(t *testing.T) {
	for s, want := range map[float64]string{0: "0s", -3: "0s", 1e-9: "1µs", 0.00035: "350µs", 0.003: "3ms", 0.4: "400ms",
		0.9996: "1s", 1.5: "1.5s", 1.04: "1s", 42: "42s", 59.97: "1m00s", 252: "4m12s", 3600*3 + 300: "3h05m", 86400*2 + 3600*4: "2d04h"} {
		if got := humanSeconds(s); got != want {
			t.Errorf("humanSeconds(%v) = %q, want %q", s, got, want)
		}
	}
}

// A configured duration is written exactly: a rate of one per 200 ms reads so.
func TestLimitsTextKeepsPrecision(t *testing.T) {
	for _, tt := range []struct {
		every time.Duration
		want  string
	}{
		{200 * time.Millisecond, "1 at once, then one per 200ms"},
		{1500 * time.Millisecond, "1 at once, then one per 1.5s"},
		{time.Minute, "1 at once, then one per 1m"},
		{90 * time.Second, "1 at once, then one per 1m30s"},
		{time.Hour, "1 at once, then one per 1h"},
		{time.Hour + time.Second, "1 at once, then one per 1h0m1s"},
		{3 * time.Nanosecond, "1 at once, then one per 3ns"},
	} {
		if got := limitsText(limitsOf(duework.Limits{Every: tt.every})); got != tt.want {
			t.Errorf("limitsText(Every %v) = %q, want %q", tt.every, got, tt.want)
		}
	}
}

// Links work wherever the Inspector is mounted: they are relative to the page.
func TestLinksAreRelative(t *testing.T) {
	for path, want := range map[string]string{"/": "./", "/maintenance": "./", "/lanes/free": "../", "/tenants/a%2Fb": "../", "/tenants/": "../"} {
		if got := rootOf(httptest.NewRequest(http.MethodGet, path, nil)); got != want {
			t.Errorf("rootOf(%s) = %q, want %q", path, got, want)
		}
	}
	for id, want := range map[string]string{"a/b": "../tenants/a%2Fb", "..": "../tenants/?id=..", ".": "../tenants/?id=.", "%": "../tenants/%25"} {
		if got := tenantHref("../", id); got != want {
			t.Errorf("tenantHref(%q) = %q, want %q", id, got, want)
		}
	}
	idx := duework.NewMemory()
	i, err := New(Config{Index: idx, Lanes: testLanes, Clock: fixedClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/rota/", http.StripPrefix("/ops/rota", i))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/ops/rota/lanes/free")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET under a prefix: %d", resp.StatusCode)
	}
}

// The alarm log keeps the last alarmLogSize events, and the raised alarms at most
// maxLateTracked tenants, forgetting the one whose latest event is oldest.
func TestAlarmBounds(t *testing.T) {
	i, err := New(Config{Index: duework.NewMemory(), Lanes: testLanes, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := maxLateTracked + 5
	for k := range n {
		i.ObserveCycle(bridge.CycleReport{Now: t0.Add(time.Duration(k) * time.Second),
			LateAlarms: []bridge.LateAlarm{{Lane: "free", UserID: fmt.Sprintf("u%05d", k), Late: time.Hour}}})
	}
	_, _, alarms := i.snapshot()
	if len(alarms.log) != alarmLogSize || !alarms.log[0].at.Equal(t0.Add(time.Duration(n-1)*time.Second)) {
		t.Errorf("the log keeps %d events, newest at %v; want %d, the newest last told", len(alarms.log), alarms.log[0].at, alarmLogSize)
	}
	if len(alarms.late) != maxLateTracked || alarms.late[0].userID != "u00005" {
		t.Errorf("%d late alarms raised, the oldest %q; want %d, from u00005 on", len(alarms.late), alarms.late[0].userID, maxLateTracked)
	}
}

// An alarm event of an earlier cycle, told after a later one, changes nothing; one of the
// same cycle or later applies.
func TestEpisodesOutOfOrder(t *testing.T) {
	e := newEpisodes[string, int](10)
	e.raise("a", t0.Add(time.Second), 1)
	if _, ok := e.end("a", t0); ok || len(e.on) != 1 {
		t.Errorf("an earlier recovery ended the alarm: %v", e.on)
	}
	if v, ok := e.end("a", t0.Add(time.Second)); !ok || v != 1 || len(e.on) != 0 {
		t.Errorf("a recovery of the same cycle = %v, %v; want the alarm ended", v, ok)
	}
	e.raise("a", t0, 2)
	if len(e.on) != 0 {
		t.Errorf("a raise of an earlier cycle, told after the recovery, raised it again: %v", e.on)
	}
}

// Only reasons in rota's own words are shown.
func TestShownReason(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("dispatch: LaneFor(%q): %w %q", "u", dispatch.ErrUnknownLane, "gold"): true,
		fmt.Errorf("%w: no lane for plan %q", bridge.ErrUnmappedPlan, "gold"):            true,
		fmt.Errorf("limits: %w: Weight", duework.ErrInvalid):                             true,
		errors.New("dial tcp 10.0.0.7:5432: connection refused"):                         false,
		fmt.Errorf("dispatch: LaneFor(%q): panicked: %v", "u", "boom"):                   false,
	} {
		if got := shownReason(err); got != want {
			t.Errorf("shownReason(%v) = %v, want %v", err, got, want)
		}
	}
}

// failed is a written failed run of user's key whose ErrorStreak went from prev to
// prev+1, ending at end and due again at next.
func failed(user, key string, prev int, end, next time.Time) bridge.ItemReport {
	e := duework.Entry{UserID: user, WorkKey: key, Tier: "hot", DueAt: end, ErrorStreak: prev}
	n := e
	n.ErrorStreak, n.LastRunAt, n.DueAt = prev+1, end, next
	return bridge.ItemReport{Item: dispatch.Item{Lane: "free", Claim: duework.Claim{Entry: e}}, Status: bridge.StatusError,
		Written: true, Next: n, Err: errors.New("boom")}
}

// A failing source no report tells of again is forgotten, not only hidden, once a later
// report's now passes its forgetAt; a report before that forgets nothing.
func TestFailingForgotten(t *testing.T) {
	i, err := New(Config{Index: duework.NewMemory(), Lanes: testLanes})
	if err != nil {
		t.Fatal(err)
	}
	i.ObserveCycle(bridge.CycleReport{Now: t0, Items: []bridge.ItemReport{
		failed("a", "k", 4, t0, t0.Add(10*time.Minute)), // forgotten after t0+20m
		failed("b", "k", 9, t0, t0.Add(time.Hour)),      // after t0+2h
		failed("c", "k", 3, t0, t0.Add(time.Minute)),    // below the threshold: never listed
	}})
	if len(i.failing.on) != 2 || !i.failExpiry.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("failing %v, expiry %v; want a and b, expiry t0+20m", i.failing.on, i.failExpiry)
	}
	i.ObserveCycle(bridge.CycleReport{Now: t0.Add(20 * time.Minute)})
	if len(i.failing.on) != 2 {
		t.Errorf("a report at a's forgetAt forgot %v", i.failing.on)
	}
	i.ObserveCycle(bridge.CycleReport{Now: t0.Add(21 * time.Minute)})
	if _, ok := i.failing.on[sourceKey{"a", "k"}]; ok || len(i.failing.on) != 1 || !i.failExpiry.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("after a's forgetAt: failing %v, expiry %v; want b alone, expiry t0+2h", i.failing.on, i.failExpiry)
	}
	i.ObserveCycle(bridge.CycleReport{Now: t0.Add(3 * time.Hour)})
	if len(i.failing.on) != 0 || !i.failExpiry.IsZero() {
		t.Errorf("after b's forgetAt: failing %v, expiry %v; want none", i.failing.on, i.failExpiry)
	}
}

// Config.AlarmAfterErrors sets the streak that makes a source failing; a negative one turns
// failing sources off.
func TestFailingThreshold(t *testing.T) {
	for _, tc := range []struct {
		alarm, prev int
		want        bool
	}{{2, 1, true}, {2, 0, false}, {0, 3, false}, {0, 4, true}, {-1, 50, false}} {
		i, err := New(Config{Index: duework.NewMemory(), Lanes: testLanes, AlarmAfterErrors: tc.alarm})
		if err != nil {
			t.Fatal(err)
		}
		i.ObserveCycle(bridge.CycleReport{Now: t0, Items: []bridge.ItemReport{failed("a", "k", tc.prev, t0, t0.Add(time.Hour))}})
		v := i.overview(context.Background(), t0)
		if got := len(v.FailingSources) == 1; got != tc.want {
			t.Errorf("AlarmAfterErrors %d, streak %d: failing %v, want %v", tc.alarm, tc.prev+1, got, tc.want)
		}
		if e := i.entryOf(duework.EntryState{Entry: duework.Entry{ErrorStreak: tc.prev + 1}}, t0); e.Failing != tc.want {
			t.Errorf("AlarmAfterErrors %d: an entry at streak %d is failing %v, want %v", tc.alarm, tc.prev+1, e.Failing, tc.want)
		}
	}
}

// The pause action's duration: a Go duration or seconds, from 1s to 30 days.
func TestParsePauseFor(t *testing.T) {
	for s, want := range map[string]time.Duration{"1s": time.Second, "90m": 90 * time.Minute, "1h30m": 90 * time.Minute, " 2h ": 2 * time.Hour,
		"5400": 90 * time.Minute, "1.5": 1500 * time.Millisecond, "720h": maxPause, "2592000": maxPause} {
		if got, err := parsePauseFor(s); err != nil || got != want {
			t.Errorf("parsePauseFor(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "-1h", "999ms", "0.9", "720h1s", "2592000.5", "x", "NaN", "+Inf", "-Inf", "1e400", "1 h", "9999999999h"} {
		if d, err := parsePauseFor(s); err == nil {
			t.Errorf("parsePauseFor(%q) = %v, want an error", s, d)
		}
	}
}

func FuzzParsePauseFor(f *testing.F) {
	for _, s := range []string{"1h", "90m", "3600", "1.5", "-1", "NaN", "1e308", "720h0m0.000000001s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parsePauseFor(s)
		if err == nil && (d < minPause || d > maxPause) {
			t.Errorf("parsePauseFor(%q) = %v, outside [%v, %v]", s, d, minPause, maxPause)
		}
		if err != nil && d != 0 {
			t.Errorf("parsePauseFor(%q) = %v with error %v", s, d, err)
		}
	})
}
