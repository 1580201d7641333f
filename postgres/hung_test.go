package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// hangProxy forwards TCP connections to the test server until Hang; from then on it
// forwards nothing, in either direction and on new connections too, and resets nothing —
// a network partition without a reset — until Close, which closes every connection.
type hangProxy struct {
	ln     net.Listener
	target string
	hungOn []byte        // when set, the proxy hangs instead of forwarding a client write holding it
	hung   chan struct{} // closed by Hang
	closed chan struct{} // closed by Close

	mu    sync.Mutex
	conns []net.Conn
	once  sync.Once
}

func newHangProxy(t *testing.T, target string, hungOn []byte) *hangProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangProxy{ln: ln, target: target, hungOn: hungOn, hung: make(chan struct{}), closed: make(chan struct{})}
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *hangProxy) addr() *net.TCPAddr { return p.ln.Addr().(*net.TCPAddr) }

// Hang stops all forwarding.
func (p *hangProxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.hung:
	default:
		close(p.hung)
	}
}

// Close closes the listener and every connection, on both sides.
func (p *hangProxy) Close() {
	p.once.Do(func() {
		close(p.closed)
		p.ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
}

func (p *hangProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		c.Close()
		return false
	default:
		p.conns = append(p.conns, c)
		return true
	}
}

func (p *hangProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			return
		}
		go func() {
			if p.isHung() { // a new connection gets no answer
				return
			}
			server, err := net.Dial("tcp", p.target)
			if err != nil || !p.track(server) {
				client.Close()
				return
			}
			go p.pipe(server, client, p.hungOn)
			go p.pipe(client, server, nil)
		}()
	}
}

func (p *hangProxy) isHung() bool {
	select {
	case <-p.hung:
		return true
	default:
		return false
	}
}

// pipe copies src to dst until either fails or the proxy hangs — at Hang, or at a write
// holding marker; once hung, it holds what it read and waits for Close.
func (p *hangProxy) pipe(dst, src net.Conn, marker []byte) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if marker != nil && bytes.Contains(buf[:n], marker) {
				p.Hang()
			}
			if p.isHung() {
				<-p.closed
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

// proxiedPool opens a pool on schema whose connections go through p.
func proxiedPool(t *testing.T, schema string, p *hangProxy) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(p.addr().Port)
	cfg.ConnConfig.Fallbacks = nil
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// poolAndSchema returns a pool on a fresh migrated schema, and the schema's name.
func poolAndSchema(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool := pgtest.Pool(t)
	var schema string
	if err := pool.QueryRow(context.Background(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	return pool, schema
}

// serverAddr is the test server's host:port.
func serverAddr(t *testing.T) string {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
}

// A heavy task never runs past its lease when the holder's connection hangs: with the
// connection to the server partitioned (no reset), the renewals cannot get through, and
// the task's context is cancelled when its grant expires — not at MaxHold, nor when TCP
// gives up — so another holder that acquires at the expiry never runs beside it.
func TestHungConnectionStopsHeavyTaskAtLeaseExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct, schema := poolAndSchema(t)
	proxy := newHangProxy(t, serverAddr(t), nil)
	pool := proxiedPool(t, schema, proxy)

	const ttl, maxHold = time.Second, time.Minute
	started := make(chan context.Context, 1)
	stopped := make(chan time.Time, 1)
	task := maintenance.Task{Name: "reindex", Class: maintenance.Heavy, Cadence: time.Hour, Run: func(ctx context.Context) error {
		started <- ctx
		<-ctx.Done()
		stopped <- time.Now()
		return context.Cause(ctx)
	}}
	s, err := maintenance.NewScheduler([]maintenance.Task{task}, maintenance.Config{
		Lease: postgres.NewLease(pool, "heavy", maxHold), StateStore: postgres.NewStateStore(pool), Holder: "a",
		LeaseTTL: ttl, MaxHold: maxHold, PollInterval: time.Hour, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() {
		proxy.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after the proxy closed")
		}
	}()

	var taskCtx context.Context
	select {
	case taskCtx = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the heavy task did not start")
	}
	proxy.Hang() // before the first renewal, at LeaseTTL/3
	other := postgres.NewLease(direct, "heavy", maxHold)
	g, held, err := other.Current(ctx, time.Now())
	if err != nil || !held || g.Holder != "a" {
		t.Fatalf("the server's grant: %+v, %v, %v", g, held, err)
	}
	select {
	case at := <-stopped:
		if at.Before(g.ExpiresAt) {
			t.Errorf("the task was stopped at %v, before its grant expired at %v", at, g.ExpiresAt)
		}
	case <-time.After(time.Until(g.ExpiresAt) + 2*time.Second):
		t.Fatalf("the task still runs 2s after its grant expired at %v", g.ExpiresAt)
	}
	if cause := context.Cause(taskCtx); !errors.Is(cause, maintenance.ErrNotHolder) {
		t.Errorf("the task's cause wraps ErrNotHolder: %v", cause)
	}
	if g2, err := other.Acquire(ctx, "b", ttl, time.Now()); err != nil || g2.Token <= g.Token {
		t.Fatalf("another holder acquires once the grant expired: %+v, %v", g2, err)
	}
}

// A daemon that hangs in the middle of a Save — the fence and the lease rows locked, its
// connection partitioned without a reset — holds them only until the server ends its idle
// transaction: another daemon then acquires the lease and saves.
func TestHungSaveReleasesTheLeaseAndTheFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct, schema := poolAndSchema(t)
	lease := postgres.NewLease(direct, "heavy", time.Hour)
	g, err := lease.Acquire(ctx, "a", time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy hangs when the Save sends its writes, after it took its locks.
	proxy := newHangProxy(t, serverAddr(t), []byte("INSERT INTO rota_task_state"))
	hungStore := postgres.NewStateStore(proxiedPool(t, schema, proxy))
	saved := make(chan error, 1)
	go func() { saved <- hungStore.Save(ctx, g.Token, maintenance.TaskState{Name: "reindex"}) }()
	defer func() {
		proxy.Close()
		if err := <-saved; err == nil {
			t.Error("the hung Save succeeded")
		}
	}()
	select {
	case <-proxy.hung:
	case <-time.After(10 * time.Second):
		t.Fatal("the Save never reached its writes")
	}

	done := make(chan error, 1)
	go func() {
		if err := lease.Release(ctx, g); err != nil {
			done <- err
			return
		}
		g2, err := lease.Acquire(ctx, "b", time.Minute, t0.Add(time.Second))
		if err == nil {
			err = postgres.NewStateStore(direct).Save(ctx, g2.Token, maintenance.TaskState{Name: "reindex"})
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("another daemon after the hung Save: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the hung Save still holds the lease row and the fence after 20s")
	}
}
