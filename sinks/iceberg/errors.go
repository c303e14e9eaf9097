package iceberg

import (
	"errors"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
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
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && len(pgErr.Code) == 5 {
		switch pgErr.Code[:2] {
		case "28", "3D", "42":
			return err
		}
	}
	for _, permanent := range []error{rest.ErrBadRequest, rest.ErrForbidden, rest.ErrUnauthorized, rest.ErrOAuthError, catalog.ErrInvalidIdentifier} {
		if errors.Is(err, permanent) {
			return err
		}
	}
	return sinks.Transient(err)
}
