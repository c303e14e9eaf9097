package routing

import "errors"

// CompileCondition compiles a route's `when:` condition.
func CompileCondition(s string) (Cond, error) {
	return nil, errors.New("TODO: expr")
}
