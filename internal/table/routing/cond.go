package routing

import "github.com/ehsink/ehsink/internal/table/expr"

// CompileCondition compiles a route's `when:` condition (package expr's
// language).
func CompileCondition(s string) (Cond, error) {
	e, err := expr.Compile(s)
	if err != nil {
		return nil, err
	}
	return e.Eval, nil
}
