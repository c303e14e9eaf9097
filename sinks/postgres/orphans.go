package postgres

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/netdial"
	"github.com/ehsink/ehsink/sinks"
)

// A half-open path can leave a sink session in the middle of a COPY: the
// server waits for the rest of the data, holding the watermark row's lock
// (the fence), and neither statement_timeout nor
// idle_in_transaction_session_timeout interrupts a backend waiting for
// its client's data; only the server's TCP keepalive does, two hours by
// default. The partition's next owner would wait behind that lock all the
// while. So a commit whose fence still waits after fenceCheckAfter looks
// at what blocks it, and ends the blockers that are this sink's own
// sessions (same role, same application_name) stuck waiting for their
// client for longer than statement_timeout + 1 s: a client that still talked
// would have had that statement cancelled by now, so the session's client
// is gone. Its transaction rolls back, as its client's did.
const (
	fenceCheckAfter   = time.Second
	fenceCheckTimeout = 2 * time.Second
)

// sqlEndOrphans ends the orphaned sessions that block the backend $1.
const sqlEndOrphans = `SELECT a.pid, (extract(epoch FROM now() - a.query_start) * 1000)::bigint, pg_terminate_backend(a.pid)
FROM pg_stat_activity a
WHERE a.pid = ANY (pg_blocking_pids($1))
  AND a.usename = current_user
  AND a.application_name = current_setting('application_name')
  AND a.state = 'active' AND a.wait_event = 'ClientRead'
  AND current_setting('statement_timeout')::interval > interval '0'
  AND a.query_start < now() - current_setting('statement_timeout')::interval - interval '1 second'`

// watchFence checks, every fenceCheckAfter until stop is called, for
// orphaned sessions that block the backend pid (a commit's fence) and
// ends them. A commit that takes its fence at once pays one timer.
func (s *sink) watchFence(ctx context.Context, pid uint32, partition string) (stop func()) {
	var mu sync.Mutex // orders the re-arming with stop
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(fenceCheckAfter, func() {
		s.endOrphans(ctx, pid, partition)
		mu.Lock()
		defer mu.Unlock()
		if !stopped && ctx.Err() == nil {
			t.Reset(fenceCheckAfter)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// endOrphans runs sqlEndOrphans on a connection of its own (the pool may
// have none to spare) and logs each session it ended. A check that fails
// (the server unreachable too, or the role not allowed to see or end the
// sessions) is only logged at debug level: the commit's own error says
// what the partition waits for.
func (s *sink) endOrphans(ctx context.Context, pid uint32, partition string) {
	ctx, cancel := context.WithTimeout(ctx, fenceCheckTimeout)
	defer cancel()
	// The check's session reports to the commit it serves (its dial
	// takes the commit's sinks.Progress): a server that answers it is
	// alive, and the lock the commit waits for is freed by the server
	// (idle_in_transaction_timeout, this check) or by the other writer's
	// commit, so the commit is not taken for a dead sink's meanwhile. A
	// path that went dead answers neither.
	if err := s.queryOrphans(ctx, pid, func(orphan int32, began time.Duration, ended bool) {
		s.log.Warn("ended a sink session whose client is gone: it held the lock this partition's commit waited for",
			"partition", partition, "pid", orphan, "its_statement_began", began.String()+" ago", "ended", ended)
	}); err != nil {
		s.log.Debug("looking for orphaned sessions that block a commit", "partition", partition, "error", err)
	}
}

func (s *sink) queryOrphans(ctx context.Context, pid uint32, ended func(orphan int32, began time.Duration, ok bool)) error {
	cc := s.pool.Config().ConnConfig.Copy()
	cc.DialFunc = dialAnswers
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, sqlEndOrphans, pid)
	if err != nil {
		return err
	}
	var orphan int32
	var ms int64
	var ok bool
	_, err = pgx.ForEachRow(rows, []any{&orphan, &ms, &ok}, func() error {
		ended(orphan, time.Duration(ms)*time.Millisecond, ok)
		return nil
	})
	return err
}

// dialAnswers dials the check's connection, which reports to the commit
// it serves (sinks.Progress) only what the server sends. A half-open path
// takes a new connection's writes too (a proxy or load balancer that
// accepts the connection, then forwards nothing): counted as progress,
// the startup message of each check, one a second, kept the commit of a
// replica cut off from PostgreSQL "answering" until its call's bound
// (20 s in the chaos matrix) instead of errors.sink_timeout (5 s), and
// its partitions went unread the difference longer.
func dialAnswers(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := netdial.Dialer().DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &answers{Conn: c, progress: sinks.Progress(ctx)}, nil
}

// answers is a connection that reports the reads that returned data.
type answers struct {
	net.Conn
	progress func() // nil: nobody listens
}

func (a *answers) Read(p []byte) (int, error) {
	n, err := a.Conn.Read(p)
	if n > 0 && a.progress != nil {
		a.progress()
	}
	return n, err
}
