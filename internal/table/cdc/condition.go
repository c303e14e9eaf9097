package cdc

import (
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/sinks"
)

// condition is a compiled delete condition.
type condition func(ev *sinks.Event) (bool, error)

// compileCondition compiles a delete condition in the expression language
// of package expr.
func compileCondition(src string) (condition, error) {
	e, err := expr.Compile(src)
	if err != nil {
		return nil, err
	}
	return e.Eval, nil
}
