package iceberg

import (
	"errors"
	"net"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ehsink/ehsink/sinks"
)

// unreachable marks a failure to reach the catalog or the warehouse as
// transient, so that the runner waits it out (holding no partition at
// start, or behind its circuit breaker) instead of failing the connector:
// a catalog database restarting or cut off, a Blob endpoint down. A
// refusal that retrying cannot change stays permanent: the catalog's
// PostgreSQL refusing the login, the database or a privilege (SQLSTATE
// classes 28, 3D, 42), a REST catalog refusing the request or the
// credentials, an identifier the catalog does not take.
func unreachable(err error) error {
	if err == nil {
		return nil
	}
	// A connection that failed or timed out is out of reach, whatever the
	// request (iceberg-go reports a token endpoint it could not dial as an
	// OAuth error). (Not any net.Error: the *url.Error of every failed HTTP
	// request is one, a refused credential's too.)
	var opErr *net.OpError
	var netErr net.Error
	if errors.As(err, &opErr) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return sinks.Transient(err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && len(pgErr.Code) == 5 {
		switch pgErr.Code[:2] {
		case "28", "3D", "42":
			return err
		}
	}
	if oauthRefused(err) {
		return err
	}
	for _, permanent := range []error{rest.ErrBadRequest, rest.ErrForbidden, rest.ErrUnauthorized, catalog.ErrInvalidIdentifier} {
		if errors.Is(err, permanent) {
			return err
		}
	}
	return sinks.Transient(err)
}

// oauthRefused reports an OAuth2 token request that the token endpoint
// refused (a wrong credential or scope). iceberg-go gives a request that
// never reached the endpoint the same sentinel, rest.ErrOAuthError, with
// the transport's error in its text only ("...oauth error: Post ...:
// dial tcp ..."); a refusal wraps the sentinel in an error of its own.
func oauthRefused(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Unwrap(e) == rest.ErrOAuthError {
			return !strings.HasPrefix(e.Error(), rest.ErrOAuthError.Error()+": ")
		}
	}
	return false
}

// lostRace reports a commit the catalog refused because the table moved
// since the metadata it was built on (another writer, or another replica's
// maintenance, committed first): nothing of it was applied, and it may be
// made again on the table's fresh metadata. Every commit path (the
// writer's, expiry) asks this one question. A REST catalog reports the
// conflict as table.ErrCommitFailed (its 409), and so does the SQL catalog
// for a metadata location that moved during its own commit; but the SQL
// catalog of iceberg-go v0.7.0 reports a requirement it checks first
// ("requirement failed: branch \"main\" has changed: expected id ...")
// as a plain error from table.Requirement.Validate, with no sentinel or
// type to match, so its text is the only mark. The requirements of a
// schema update (evolve) spell it "Requirement failed: current schema id
// has changed", capitalized.
func lostRace(err error) bool {
	return err != nil && (errors.Is(err, table.ErrCommitFailed) || strings.Contains(strings.ToLower(err.Error()), "requirement failed: "))
}
