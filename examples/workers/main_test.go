package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// natsURL is the server the test uses: ROTA_TEST_NATS_URL, or the local one CI starts.
func natsURL() string {
	if u := os.Getenv("ROTA_TEST_NATS_URL"); u != "" {
		return u
	}
	return nats.DefaultURL
}

// requireNATS connects to the test's NATS server, or skips t without one — except under
// CI (CI=true), where it fails t.
func requireNATS(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(natsURL(), nats.Timeout(3*time.Second))
	var js jetstream.JetStream
	if err == nil {
		t.Cleanup(nc.Close)
		if js, err = jetstream.New(nc); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
		}
	}
	if err == nil {
		return js
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no NATS JetStream server at %s: %v (CI=true: the tests must run)", natsURL(), err)
	}
	t.Skipf("no NATS JetStream server at %s (%v); start nats-server -js there or set ROTA_TEST_NATS_URL", natsURL(), err)
	return nil
}

// proc is one process of the command under test, its stderr kept.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *bytes.Buffer // written by the exec package's copier; read once the process has exited
	done chan error
}

func start(t *testing.T, bin, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), log: &bytes.Buffer{}, done: make(chan error, 1)}
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends SIGTERM and checks that the process exits 0 within 30 s.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("%s exited with %v:\n%s", p.name, err, p.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30 s of SIGTERM", p.name)
	}
}

var runsLine = regexp.MustCompile(`msg="workers: stopped" .*runs=(\d+)`)

// The command as it is deployed: one dispatcher process and three worker processes,
// each its own process of the built binary, over one PostgreSQL schema and the local NATS
// server. Every demo source runs; a worker started with another -claim exits at once with
// an error; the dispatcher, and then, once the queue is empty, each worker stop cleanly on
// SIGTERM, every worker having run items; nothing is left claimed.
func TestDispatcherAndWorkerProcesses(t *testing.T) {
	js := requireNATS(t)
	schema := pgtest.Schema(t, "rota_workers")
	bin := filepath.Join(t.TempDir(), "workers")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(r[:])
	stream := "ROTA_EXAMPLE_" + id
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	const tenants = 9
	common := []string{"-db", pgtest.URL(), "-schema", schema, "-nats", natsURL(), "-stream", stream, "-subject", "rotaexample." + id,
		"-claim", "10s"}
	dispatcher := start(t, bin, "the dispatcher", append([]string{"-role", "dispatcher", "-tenants", strconv.Itoa(tenants)}, common...)...)
	var workers []*proc
	for i := range 3 {
		workers = append(workers, start(t, bin, fmt.Sprintf("worker %d", i), append([]string{"-role", "worker", "-slots", "4"}, common...)...))
	}

	pool := pgtest.PoolIn(t, schema, 2)
	idx := postgres.NewIndex(pool)
	waitFor(t, 30*time.Second, "every demo source to run", func() (bool, error) {
		states, err := demoEntries(idx, tenants)
		if err != nil || len(states) < 3*tenants {
			return false, err // the dispatcher may still be adding them
		}
		for _, st := range states {
			if st.Entry.LastRunAt.IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
	// A worker whose -claim disagrees with the dispatcher's refuses to start, naming both.
	odd := start(t, bin, "a worker with another -claim", append([]string{"-role", "worker"}, append(common, "-claim", "20s")...)...)
	select {
	case err := <-odd.done:
		if err == nil || !strings.Contains(odd.log.String(), "duplicate window of 10s") || !strings.Contains(odd.log.String(), "ClaimFor is 20s") {
			t.Errorf("%s exited with %v, want an error naming 10s and 20s:\n%s", odd.name, err, odd.log)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s still runs after 30 s", odd.name)
	}
	time.Sleep(2 * time.Second) // the dev tier's base: each source runs again
	dispatcher.stop(t)
	waitFor(t, 30*time.Second, "the queue to drain", func() (bool, error) {
		st, err := js.Stream(context.Background(), stream)
		if err != nil {
			return false, err
		}
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs == 0, err
	})
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { w.stop(t) })
	}
	wg.Wait()
	for _, p := range append(workers, dispatcher) {
		if l := p.log.String(); strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("%s logged a warning or an error in a clean run:\n%s", p.name, l)
		}
	}
	for _, w := range workers {
		m := runsLine.FindStringSubmatch(w.log.String())
		if m == nil || m[1] == "0" {
			t.Errorf("%s ran no item:\n%s", w.name, w.log)
		}
	}
	states, err := demoEntries(idx, tenants)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		if !st.ClaimedUntil.IsZero() {
			t.Errorf("%s/%s still claimed until %v after the stop", st.Entry.UserID, st.Entry.WorkKey, st.ClaimedUntil)
		}
	}
}

// demoEntries reads the entries of the demo tenants.
func demoEntries(idx duework.Index, tenants int) ([]duework.EntryState, error) {
	var all []duework.EntryState
	for i := range tenants {
		states, err := idx.Entries(context.Background(), fmt.Sprintf("tenant-%02d", i+1), "", duework.MaxLimit)
		if err != nil {
			return nil, err
		}
		all = append(all, states...)
	}
	return all, nil
}

// waitFor polls cond every 50 ms until it holds, failing t after bound.
func waitFor(t *testing.T, bound time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s (last error: %v)", bound, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A missing or unknown role, or no database, is refused before anything is opened.
func TestRunRefusesABadRole(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, cfg := range []config{{role: ""}, {role: "both", dbURL: "postgres://x"}, {role: "worker"}} {
		if err := run(context.Background(), cfg, quiet); err == nil {
			t.Errorf("run(%+v) = nil, want an error", cfg)
		}
	}
}
