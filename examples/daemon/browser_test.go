package main

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fakeclock"
	"github.com/rotaworks/rota/tenancy"
)

var updateScreenshots = flag.Bool("update-screenshots", false,
	"write the browser test's screenshots of the inspector to docs/inspect-overview.png and docs/inspect-tenant.png")

// chromium returns the path of a Chromium the test can drive: Debian's package, or one on
// PATH. Without one the test skips, except under CI=true, where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium (CI=true: the browser test must run; apt-get install chromium)")
	}
	t.Skip("no Chromium: apt-get install chromium to run the browser test")
	return ""
}

// browserDaemon is a daemon in memory on a fake clock, serving the inspector with its
// actions, and the cycles it reports.
type browserDaemon struct {
	t      *testing.T
	st     stores
	clock  *fakeclock.Clock
	cycles chan bridge.CycleReport
	url    string
	log    *syncBuffer
}

// syncBuffer is a buffer the daemon's logger may write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startBrowserDaemon starts a daemon of 30 tenants (10 on each plan) with a 10 s interval
// on a fake clock and waits for its first cycle. Free tenants watch two sources, within
// the free lane's two a cycle and their plan's two in flight, so every cycle serves every
// ready tenant: cycles come only with the clock's ticks, and between two of them the
// pages stand still.
func startBrowserDaemon(t *testing.T) *browserDaemon {
	t.Helper()
	d := &browserDaemon{t: t, clock: fakeclock.New(time.Now().UTC().Truncate(time.Second)),
		cycles: make(chan bridge.CycleReport, 256), log: &syncBuffer{}}
	cfg := testConfig()
	served := make(chan string, 1)
	cfg.tenants, cfg.interval, cfg.workers = 30, 10*time.Second, 16
	cfg.httpAddr, cfg.actions, cfg.clock, cfg.served = "127.0.0.1:0", true, d.clock, served
	cfg.observer = cycleObserver(func(rep bridge.CycleReport) { d.cycles <- rep })
	var err error
	if d.st, err = openStores(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, d.st, slog.New(slog.NewTextHandler(d.log, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the daemon's run: %v\n%s", err, d.log)
		}
	})
	select {
	case d.url = <-served:
	case err := <-done:
		t.Fatalf("the daemon stopped before it served: %v\n%s", err, d.log)
	}
	d.waitCycle(d.clock.Now())
	for _, tc := range demoTenants(t, cfg) {
		if plan, err := d.st.plans.Plan(ctx, tc); err != nil || plan != tenancy.PlanFree {
			continue
		}
		if err := d.st.watchlist.Remove(ctx, tc, "blog"); err != nil {
			t.Fatal(err)
		}
		if err := d.st.index.Unschedule(ctx, tc, "blog"); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// watch adds a source to a tenant's watch list, with its due-work entry due at due.
func (d *browserDaemon) watch(e duework.Entry) {
	d.t.Helper()
	ctx := context.Background()
	tc, err := tenancy.NewContext(e.UserID)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := d.st.watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: e.UserID, Slug: e.WorkKey, Tier: e.Tier, AddedAt: d.clock.Now()}); err != nil {
		d.t.Fatal(err)
	}
	if err := d.st.index.Schedule(ctx, tc, e); err != nil {
		d.t.Fatal(err)
	}
}

// waitCycle waits for the report of the cycle at now, passing over reports of others.
func (d *browserDaemon) waitCycle(now time.Time) bridge.CycleReport {
	d.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case rep := <-d.cycles:
			if rep.Now.Equal(now) {
				return rep
			}
		case <-timeout:
			d.t.Fatalf("no cycle at %v reported within 30 s\n%s", now, d.log)
			return bridge.CycleReport{}
		}
	}
}

// step advances the clock by d, which must reach the next tick, and waits for that cycle.
func (d *browserDaemon) step(by time.Duration) bridge.CycleReport {
	d.t.Helper()
	d.clock.Advance(by)
	return d.waitCycle(d.clock.Now())
}

// newBrowser starts a headless Chromium with the flags this machine needs and a fresh
// profile, closed when the test ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// text is the visible text of the page's body.
func text(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// screenshot writes the page to docs/name with -update-screenshots.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !*updateScreenshots {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// A real browser drives the daemon's inspector: the overview puts the free lane, where a
// tenant waits longest, first; its link leads to the lane, whose first tenant link leads to
// that tenant; with the actions on, a pro tenant's entry due in a week is made due now from
// its page, and the next cycle dispatches it.
func TestBrowser(t *testing.T) {
	d := startBrowserDaemon(t)
	ctx := newBrowser(t) // closed before the daemon stops, which then waits for no connection
	for range 6 {
		d.step(10 * time.Second)
	}
	// What the last cycle served is due again 2 s later at the soonest; a probe of
	// tenant-03's, due 1 s after it, makes tenant-03 the longest waiting tenant, in the
	// free lane. And a source of tenant-01's is due in a week.
	last := d.clock.Now()
	d.watch(duework.Entry{UserID: "tenant-03", WorkKey: "probe", Tier: "dev", DueAt: last.Add(time.Second)})
	archive := duework.Entry{UserID: "tenant-01", WorkKey: "archive", Tier: "digest_weekly", DueAt: last.Add(7 * 24 * time.Hour)}
	d.watch(archive)
	d.clock.Advance(5 * time.Second) // between two cycles: what came due since the last one waits

	// The overview: the free lane first.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.url), chromedp.WaitVisible(chromedp.CSS("table tbody tr"))); err != nil {
		t.Fatalf("opening the overview: %v\n%s", err, d.log)
	}
	lanes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("main table:first-of-type tbody tr td:first-child strong")].map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(lanes) != 3 || lanes[0] != "free" {
		t.Errorf("the overview lists the lanes %q; want three, free (where tenant-03 waits longest) first", lanes)
	}
	if page := text(t, ctx); !strings.Contains(page, "Waiting longest: lane free — tenant-03 has waited 4s") {
		t.Errorf("the overview's headline does not name tenant-03 in the free lane:\n%s", page)
	}
	screenshot(t, ctx, "inspect-overview.png")

	// Follow the lane, then its first tenant.
	if err := chromedp.Do(ctx, chromedp.Click(`//a[strong[text()="free"]]`, chromedp.NodeVisible),
		chromedp.WaitVisible(`//h1[text()="Lane free"]`)); err != nil {
		t.Fatalf("following the free lane: %v", err)
	}
	first, err := chromedp.Run(ctx, chromedp.Text(`//h2[text()="Next in turn"]/following-sibling::table[1]//tbody/tr[1]/td[2]/a`, chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("the lane page lists no tenant: %v\n%s", err, text(t, ctx))
	}
	if err := chromedp.Do(ctx, chromedp.Click(`//h2[text()="Next in turn"]/following-sibling::table[1]//tbody/tr[1]/td[2]/a`, chromedp.NodeVisible),
		chromedp.WaitVisible(`//h1[text()="Tenant `+first+`"]`)); err != nil {
		t.Fatalf("following the lane's first tenant %q: %v", first, err)
	}
	if first != "tenant-03" {
		t.Errorf("the free lane's first tenant is %q, want tenant-03", first)
	}
	if page := text(t, ctx); !strings.Contains(page, "ready, waiting 4s") || !strings.Contains(page, "probe") {
		t.Errorf("the page of %s does not say it waits, with its probe due:\n%s", first, page)
	}
	screenshot(t, ctx, "inspect-tenant.png")

	// Find tenant-01, make its archive due now.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`header input[name="id"]`), "tenant-01"),
		chromedp.Submit(chromedp.CSS(`header input[name="id"]`)), chromedp.WaitVisible(`//h1[text()="Tenant tenant-01"]`)); err != nil {
		t.Fatalf("finding tenant-01: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`//tr[td[text()="archive"]]//button`, chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS("p.flash"))); err != nil {
		t.Fatalf("making archive due now: %v\n%s", err, text(t, ctx))
	}
	flash, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("p.flash")))
	if err != nil || !strings.Contains(flash, `"archive" is due now`) {
		t.Errorf("after the due-now form the page says %q, %v", flash, err)
	}
	row := func() string {
		s, err := chromedp.Run(ctx, chromedp.Text(`//tr[td[text()="archive"]]`, chromedp.NodeVisible))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if r := row(); !strings.Contains(r, "due") {
		t.Errorf("after due-now the archive row reads %q, want due", r)
	}

	// The next cycle dispatches it, and the page shows its run.
	rep := d.step(5 * time.Second)
	ran := false
	for _, it := range rep.Items {
		ran = ran || it.Item.Claim.Entry.Key() == archive.Key()
	}
	if !ran {
		t.Errorf("the cycle after due-now did not dispatch tenant-01's archive (%d items)", len(rep.Items))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(d.url+"tenants/tenant-01"), chromedp.WaitVisible(`//tr[td[text()="archive"]]`)); err != nil {
		t.Fatal(err)
	}
	if r, last := row(), rep.Now.UTC().Format("2006-01-02 15:04:05Z"); !strings.Contains(r, last) || !strings.Contains(r, "scheduled") {
		t.Errorf("after the cycle at %s the archive row reads %q; want it last run then and scheduled again", last, r)
	}
	if log := d.log.String(); !strings.Contains(log, "inspect: action") || !strings.Contains(log, "outcome=scheduled") {
		t.Errorf("the action is not in the daemon's log:\n%s", log)
	}
}
