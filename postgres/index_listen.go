package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqlDueChannel is the schema's notification channel: rota_due.<schema>, or, for a schema
// name too long for a channel (63 bytes), rota_due.<md5 of the name>. Index.Schedule and
// ScheduleMissing notify it; ListenDue listens to it.
const sqlDueChannel = `CASE WHEN octet_length('rota_due.' || current_schema()) <= 63 THEN 'rota_due.' || current_schema()
	ELSE 'rota_due.' || md5(current_schema()) END`

// sqlNotifyIfDue notifies the schema's channel when $1 is due by the server's now. The
// notification goes out when the transaction commits, and the server delivers one per
// transaction however many statements send it.
const sqlNotifyIfDue = `SELECT pg_notify(` + sqlDueChannel + `, '') WHERE $1::timestamptz <= now()`

const (
	// listenKeepAlive is how long ListenDue waits for a notification before it checks the
	// connection with a ping, so that a connection the network dropped silently is found.
	listenKeepAlive = 30 * time.Second
	// listenPingTimeout bounds that ping.
	listenPingTimeout = 10 * time.Second
	// listenRetryMin and listenRetryMax bound the wait before ListenDue reconnects: it
	// starts at the first and doubles after each failure up to the second.
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 10 * time.Second
)

// ListenDue calls wake whenever an entry is scheduled due now, by Schedule or
// ScheduleMissing on any Index over the same schema — another replica's included — so that
// a host can start a dispatch cycle at once instead of at its next interval: pass
// bridge's Runner.Wake. It returns nil when ctx ends.
//
// It holds one connection of the pool for itself (taken out of the pool, which may open
// another) and LISTENs on the schema's channel. Notifications that arrive while wake is
// running are coalesced into one more call, so wake need not be quick and is never called
// concurrently with itself. When the connection drops, ListenDue reconnects, waiting
// 100 ms and then twice as long after each failure, up to 10 s, and calls wake once it
// listens again, since notifications sent meanwhile are lost; it checks an idle connection
// with a ping every 30 s. If it cannot listen at all when it starts (no connection, or
// LISTEN refused), it returns that error at once.
//
// Notifications are a hint that saves the wait for the next cycle, never the only way work
// is found: a cycle still finds every due entry without them.
func (x *Index) ListenDue(ctx context.Context, wake func()) error {
	return x.listenDue(ctx, wake, nil)
}

// listenDue is ListenDue, calling listening (when not nil) with the backend's pid each
// time it starts to listen.
func (x *Index) listenDue(ctx context.Context, wake func(), listening func(pid uint32)) error {
	if wake == nil {
		panic("postgres: Index.ListenDue: nil wake")
	}
	w := newWaker()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(wctx, wake)
	}()
	defer func() { stop(); <-done }()

	listened := false
	retry := listenRetryMin
	for {
		err := x.listen(ctx, func(pid uint32) {
			if listened {
				w.signal() // the notifications sent while it was away are lost
			}
			listened = true
			retry = listenRetryMin
			if listening != nil {
				listening(pid)
			}
		}, w.signal)
		if ctx.Err() != nil {
			return nil
		}
		if !listened {
			return interpret(ctx, "Index.ListenDue", err)
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		retry = min(2*retry, listenRetryMax)
	}
}

// listen takes a connection out of the pool, LISTENs on the schema's channel, calls
// listening with the backend's pid once it does and then signal for each notification,
// until the connection fails or ctx ends. It returns why it stopped and always closes the
// connection.
func (x *Index) listen(ctx context.Context, listening func(pid uint32), signal func()) error {
	pc, err := x.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer func() {
		// A short context of its own: ctx may have ended.
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	var channel string
	if err := conn.QueryRow(ctx, `SELECT `+sqlDueChannel).Scan(&channel); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	listening(conn.PgConn().PID())
	for {
		wctx, cancel := context.WithTimeout(ctx, listenKeepAlive)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			signal()
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// waker turns signals into calls of a wake function, one at a time: signals that come
// while a call runs make one more call, however many they are.
type waker struct {
	c chan struct{}
}

func newWaker() *waker { return &waker{c: make(chan struct{}, 1)} }

// signal asks for a call; it never blocks.
func (w *waker) signal() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// run calls wake once for each signal it takes, until ctx ends.
func (w *waker) run(ctx context.Context, wake func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.c:
			wake()
		}
	}
}
