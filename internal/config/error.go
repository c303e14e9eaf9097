package config

import (
	"errors"
	"strings"

	"github.com/ehsink/ehsink/sinks"
)

// Error is one configuration problem at a path such as
// `connectors[1].source.batch.max_wait` or `columns[2].type`. An empty Path
// means the whole value being decoded.
type Error struct {
	// Path locates the value: keys joined by dots, list indexes in brackets.
	Path string
	// Err says what is wrong with it. It never holds the value of a secret.
	Err error
}

// Error returns "path: problem".
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying problem.
func (e *Error) Unwrap() error { return e.Err }

// JoinPath appends a child path to a parent path: JoinPath("a", "b") is
// "a.b", JoinPath("a", "[2]") is "a[2]", and an empty side gives the other.
func JoinPath(parent, child string) string {
	switch {
	case parent == "":
		return child
	case child == "":
		return parent
	case strings.HasPrefix(child, "["):
		return parent + child
	default:
		return parent + "." + child
	}
}

// Errors flattens err into its problems: errors joined with [errors.Join]
// (or any error with an Unwrap() []error method) are opened recursively,
// also inside a [*Error] (whose path then prefixes the inner paths). A
// [*sinks.FieldError] counts as a *Error with its Field as the path, so
// that sink configs and their [Unmarshaler] types may use either. Every
// other leaf is returned as a *Error with an empty path. Errors(nil) is nil.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(path string, err error)
	walk = func(path string, err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(path, e)
			}
			return
		}
		if fe, ok := err.(*sinks.FieldError); ok {
			walk(path, &Error{Path: fe.Field, Err: fe.Err})
			return
		}
		if e, ok := err.(*Error); ok {
			if _, joined := e.Err.(interface{ Unwrap() []error }); joined {
				walk(JoinPath(path, e.Path), e.Err)
				return
			}
			switch e.Err.(type) {
			case *Error, *sinks.FieldError:
				walk(JoinPath(path, e.Path), e.Err)
				return
			}
			out = append(out, &Error{Path: JoinPath(path, e.Path), Err: e.Err})
			return
		}
		out = append(out, &Error{Path: path, Err: err})
	}
	walk("", err)
	return out
}

// Prefix puts prefix in front of the path of every problem in err (see
// [Errors]) and joins them again. Prefix(p, nil) is nil.
func Prefix(prefix string, err error) error {
	errs := Errors(err)
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = &Error{Path: JoinPath(prefix, e.Path), Err: e.Err}
	}
	return errors.Join(out...)
}
