package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ehsink/ehsink/sinks"
)

// errFenceLost means the watermark moved under the writer: another owner
// of the partition committed since it was read.
var errFenceLost = errors.New("watermark moved by another writer")

// transientCode reports whether a SQLSTATE is worth retrying as it is: the
// server is going away or starting, or the transaction lost a race.
func transientCode(code string) bool {
	switch code {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"55P03", // lock_not_available
		"57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now
		"57014", // query_canceled (statement_timeout, pg_cancel_backend)
		// the server ended the session (its transaction rolled back):
		// the batch is written again on another connection. A writer
		// whose path was cut in a transaction meets this after the heal.
		"25P03", // idle_in_transaction_session_timeout
		"25P04", // transaction_timeout (PostgreSQL 17)
		"57P05", // idle_session_timeout
		"53100", // disk_full: waited out like an outage
		"53200", // out_of_memory
		"53300", // too_many_connections
		"53400": // configuration_limit_exceeded
		return true
	}
	return strings.HasPrefix(code, "08") // connection_exception class
}

// isTransient reports whether err is worth retrying: connection failures,
// server shutdowns and lost races. ctx errors of the caller are not.
func isTransient(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientCode(pgErr.Code)
	}
	// A connect that the server did not refuse failed on the way, its own
	// connect timeout included (which wraps context.DeadlineExceeded
	// while the caller's ctx is alive: a half-open path at start).
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr),
		pgconn.SafeToRetry(err), pgconn.Timeout(err),
		errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

// classify marks transient errors with sinks.Transient, and explains a
// refusal the writer could not pin on any row (see reject.go): every row
// passed on its own, so the batch as a whole broke the rule.
func classify(err error) error {
	if isTransient(err) {
		return sinks.Transient(err)
	}
	if pgErr := poisonErr(err); pgErr != nil {
		return fmt.Errorf("%w (the server refused the batch, SQLSTATE %s, but took each of its rows on its own; the batch is not retried)", err, pgErr.Code)
	}
	return err
}
