package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/inspect/inspecttest"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// The inspector reads and acts on PostgreSQL as it does in memory: every view and action of
// inspecttest, each on a fresh schema. The test needs a server (see pgtest); under CI=true
// it fails without one.
func TestInspectorOnPostgres(t *testing.T) {
	inspecttest.Run(t, func(t *testing.T) inspecttest.Stores {
		pool := pgtest.Pool(t)
		return inspecttest.Stores{Index: postgres.NewIndex(pool), StateStore: postgres.NewStateStore(pool)}
	})
}

// With -http the daemon serves the inspector over its own stores: its pages read the
// daemon's lanes, tenants and maintenance tasks, it is read-only without -actions, and it
// stops with the daemon.
func TestDaemonServesInspector(t *testing.T) {
	cfg := testConfig()
	served := make(chan string, 1)
	cfg.httpAddr, cfg.served = "127.0.0.1:0", served
	st, err := openStores(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, st, slog.New(slog.NewTextHandler(&log, nil))) }()
	var url string
	select {
	case url = <-served:
	case err := <-done:
		t.Fatalf("the daemon stopped before it served: %v\n%s", err, log.String())
	}
	get := func(path string, v any) int {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if v != nil {
			if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
		return resp.StatusCode
	}
	var overview struct {
		Lanes []struct {
			Lane string `json:"lane"`
		} `json:"lanes"`
		Actions bool `json:"actions"`
	}
	if code := get("api/", &overview); code != 200 || len(overview.Lanes) != len(lanes) || overview.Actions {
		t.Errorf("GET api/ = %d, %+v; want the daemon's %d lanes, read-only", code, overview, len(lanes))
	}
	var tenant struct {
		UserID  string            `json:"user_id"`
		Entries []json.RawMessage `json:"entries"`
	}
	if code := get("api/tenants/tenant-01", &tenant); code != 200 || tenant.UserID != "tenant-01" || len(tenant.Entries) != 3 {
		t.Errorf("GET api/tenants/tenant-01 = %d, %+v; want its three sources", code, tenant)
	}
	// The Scheduler polls at once and runs its never-run task: the maintenance page, read
	// from the StateStore, shows it once its outcome is written.
	var maint struct {
		Source string `json:"source"`
		Tasks  []struct {
			Name        string `json:"name"`
			LastOutcome string `json:"last_outcome"`
		} `json:"tasks"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		maint.Tasks = nil
		if code := get("api/maintenance", &maint); code != 200 {
			t.Fatalf("GET api/maintenance = %d", code)
		}
		if maint.Source != "state_store" {
			t.Fatalf("GET api/maintenance = %+v; want it read from the StateStore", maint)
		}
		if len(maint.Tasks) == 1 && maint.Tasks[0].Name == pruneTask.Name && maint.Tasks[0].LastOutcome == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET api/maintenance = %+v; want the task %q, succeeded\n%s", maint, pruneTask.Name, log.String())
		}
	}
	if code := get("", nil); code != 200 {
		t.Errorf("GET / = %d", code)
	}
	resp, err := http.Post(url+"api/tenants/tenant-01/reroute", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST reroute without -actions = %d, want 403", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v\n%s", err, log.String())
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("the inspector still answers after the daemon stopped")
	}
	if !strings.Contains(log.String(), "daemon: inspector") {
		t.Errorf("the daemon did not log the inspector's address:\n%s", log.String())
	}
}
