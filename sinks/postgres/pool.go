package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
)

// connPool is a small pool of connections bounded by a semaphore. (pgxpool
// needs github.com/jackc/puddle/v2, which go.mod does not list; the sink
// needs little: a bounded set of connections, health by IsClosed, and a
// setup hook per connection.) It is safe for concurrent use.
type connPool struct {
	cfg   *pgx.ConnConfig
	setup func(ctx context.Context, conn *pgx.Conn) error // run on every new connection, may be nil
	sem   chan struct{}                                   // one token per connection in use

	mu     sync.Mutex // guards idle and closed
	idle   []*pgx.Conn
	closed bool
}

var errPoolClosed = errors.New("connection pool closed")

func newConnPool(cfg *pgx.ConnConfig, size int, setup func(context.Context, *pgx.Conn) error) *connPool {
	return &connPool{cfg: cfg, setup: setup, sem: make(chan struct{}, size)}
}

// acquire returns a connection for the caller's exclusive use, opening one
// when none is idle. ctx bounds the wait and the dial.
func (p *connPool) acquire(ctx context.Context) (*pgx.Conn, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.sem
		return nil, errPoolClosed
	}
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !c.IsClosed() {
			p.mu.Unlock()
			return c, nil
		}
	}
	p.mu.Unlock()
	c, err := pgx.ConnectConfig(ctx, p.cfg)
	if err == nil && p.setup != nil {
		if err = p.setup(ctx, c); err != nil {
			c.Close(context.WithoutCancel(ctx))
		}
	}
	if err != nil {
		<-p.sem
		return nil, err
	}
	return c, nil
}

// release gives c back. A connection that failed (broken), is closed, or
// is left inside a transaction is closed instead of kept.
func (p *connPool) release(ctx context.Context, c *pgx.Conn, broken bool) {
	defer func() { <-p.sem }()
	if broken || c.IsClosed() || c.PgConn().TxStatus() != 'I' {
		c.Close(context.WithoutCancel(ctx))
		return
	}
	p.mu.Lock()
	if !p.closed {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.Close(context.WithoutCancel(ctx))
	}
}

// close closes the idle connections and refuses new acquisitions;
// connections in use are closed when released.
func (p *connPool) close(ctx context.Context) {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.Close(ctx)
	}
}
